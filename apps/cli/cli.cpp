/**
 * @file cli.cpp
 * @brief Option parsing and help text shared by every subcommand.
 */
#include "apps/cli/cli.hpp"

#include "core/error.hpp"
#include "core/numbers.hpp"

#include <fmt/format.h>

#include <cmath>
#include <cstdlib>
#include <limits>
#include <stdexcept>

namespace banyan::cli {

Options& Options::value(const std::string& name, const std::string& meta, const std::string& help,
                        std::optional<std::string> fallback)
{
    order_.push_back(name);
    specs_[name] = {meta, help, std::move(fallback), true};
    return *this;
}

Options& Options::flag(const std::string& name, const std::string& help)
{
    order_.push_back(name);
    specs_[name] = {"", help, std::nullopt, false};
    return *this;
}

Options& Options::device_options()
{
    value("backend", "auto|cuda|opencl",
          "backend to run on (env BANYAN_BACKEND); auto picks a CUDA GPU, else an OpenCL GPU, else an OpenCL CPU");
    value("device", "N", "device index within the backend, as `banyan devices` lists it (env BANYAN_DEVICE)");
    return *this;
}

Options& Options::on_restart(const std::string& name)
{
    const auto it = specs_.find(name);
    if (it == specs_.end()) throw std::logic_error(fmt::format("on_restart: no option --{}", name));
    it->second.on_restart = true;
    return *this;
}

bool Options::parse(const std::vector<std::string>& args)
{
    for (std::size_t i = 0; i < args.size(); ++i) {
        const std::string& a = args[i];
        if (a == "--help" || a == "-h") {
            fmt::print("{}", help());
            return false;
        }
        if (a.rfind("--", 0) != 0)
            throw UsageError(fmt::format("{}: unexpected argument '{}' (see banyan {} --help)", command_, a, command_));
        std::string name = a.substr(2), val;
        bool inline_value = false;
        if (auto eq = name.find('='); eq != std::string::npos) {
            val = name.substr(eq + 1);
            name = name.substr(0, eq);
            inline_value = true;
        }
        auto it = specs_.find(name);
        if (it == specs_.end())
            throw UsageError(fmt::format("{}: unknown option --{} (see banyan {} --help)", command_, name, command_));
        if (it->second.takes_value && !inline_value) {
            if (i + 1 >= args.size()) throw UsageError(fmt::format("{}: --{} needs a value", command_, name));
            val = args[++i];
        } else if (!it->second.takes_value && inline_value) {
            throw UsageError(fmt::format("{}: --{} takes no value", command_, name));
        }
        given_[name] = val;
    }
    return true;
}

bool Options::has(const std::string& name) const
{
    return given_.count(name) != 0;
}

std::vector<std::string> Options::given_not_on_restart() const
{
    std::vector<std::string> out;
    for (const std::string& name : order_)
        if (has(name) && !specs_.at(name).on_restart) out.push_back(name);
    return out;
}

std::vector<std::string> Options::on_restart_names() const
{
    std::vector<std::string> out;
    for (const std::string& name : order_)
        if (specs_.at(name).on_restart) out.push_back(name);
    return out;
}

std::string Options::str(const std::string& name) const
{
    if (auto it = given_.find(name); it != given_.end()) return it->second;
    auto s = specs_.find(name);
    if (s != specs_.end() && s->second.fallback) return *s->second.fallback;
    return {};
}

long long Options::integer(const std::string& name) const
{
    const std::string s = str(name);
    const auto v = parse_whole(s);
    if (!v) throw UsageError(fmt::format("{}: --{} expects a whole number, got '{}'", command_, name, s));
    return *v;
}

int Options::integer_in(const std::string& name, long long lo, long long hi) const
{
    const long long v = integer(name);
    if (v < lo || v > hi)
        throw UsageError(fmt::format("{}: --{} must be in [{}, {}], got {}", command_, name, lo, hi, v));
    return static_cast<int>(v);
}

double Options::number(const std::string& name) const
{
    const std::string s = str(name);
    const auto v = parse_decimal(s);
    if (!v) throw UsageError(fmt::format("{}: --{} expects a finite decimal number, got '{}'", command_, name, s));
    return *v;
}

std::vector<long long> Options::integer_list(const std::string& name) const
{
    std::vector<long long> out;
    const std::string s = str(name);
    std::size_t pos = 0;
    while (pos <= s.size()) {
        const std::size_t comma = s.find(',', pos);
        const std::string item = s.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
        const auto v = parse_whole(item);
        if (!v)
            throw UsageError(
                fmt::format("{}: --{} expects comma-separated whole numbers, got '{}'", command_, name, s));
        out.push_back(*v);
        if (comma == std::string::npos) break;
        pos = comma + 1;
    }
    return out;
}

DeviceRequest Options::device_request() const
{
    DeviceRequest r;
    r.backend = str("backend");
    if (has("device")) r.device = integer_in("device", 0, std::numeric_limits<int>::max()); // never wrapped
    return r;
}

std::string Options::help() const
{
    std::string s = fmt::format("usage: banyan {} [options]\n\n{}\n\noptions:\n", command_, summary_);
    for (const auto& name : order_) {
        const Spec& sp = specs_.at(name);
        std::string left = "--" + name + (sp.takes_value ? " " + sp.meta : "");
        s += fmt::format("  {:<28} {}", left, sp.help);
        if (sp.fallback) s += fmt::format(" (default: {})", *sp.fallback);
        s += "\n";
    }
    s += fmt::format("  {:<28} {}\n", "--help", "show this text");
    return s;
}

} // namespace banyan::cli
