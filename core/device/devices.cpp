/**
 * @file devices.cpp
 * @brief Discovery across the backends of this build (backend_registry.hpp), and `auto` / explicit device selection.
 */
#include "core/device/devices.hpp"

#include "core/device/backend_registry.hpp"
#include "core/error.hpp"
#include "core/numbers.hpp"

#include <fmt/format.h>

#include <cstdlib>

namespace banyan {

std::vector<BackendDevices> discover_devices()
{
    // Every backend has an entry; one that is not compiled in says so (and has no devices).
    std::vector<BackendDevices> all;
    for (const BackendEntry& b : backend_registry().entries())
        all.push_back(b.built() ? b.discover() : BackendDevices{b.name, {}, b.absent_reason});
    return all;
}

namespace {

/// "a, b or c" (@p words in order; "a" alone, "a or b" for two).
std::string one_of(const std::vector<std::string>& words)
{
    std::string s;
    for (std::size_t i = 0; i < words.size(); ++i)
        s += (i == 0 ? "" : i + 1 == words.size() ? " or " : ", ") + words[i];
    return s;
}

} // namespace

DeviceRequest resolve_request(DeviceRequest req)
{
    if (req.backend.empty()) {
        const char* env = std::getenv("BANYAN_BACKEND");
        req.backend = env && *env ? env : "auto";
    }
    if (req.device < 0) {
        if (const char* env = std::getenv("BANYAN_DEVICE"); env && *env) {
            const auto v = parse_whole(env);
            if (!v || *v < 0 || *v > 1'000'000)
                throw UsageError(fmt::format("BANYAN_DEVICE='{}' is not a device index", env));
            req.device = static_cast<int>(*v);
        }
    }
    const BackendRegistry& registry = backend_registry();
    if (req.backend != "auto" && !registry.find(req.backend)) {
        std::vector<std::string> names{"auto"};
        for (const auto& name : registry.names())
            names.push_back(name);
        throw UsageError(fmt::format("unknown backend '{}': expected {}", req.backend, one_of(names)));
    }
    return req;
}

namespace {

std::string describe_present(const std::vector<BackendDevices>& all)
{
    std::string s;
    for (const auto& b : all) {
        s += fmt::format("\n  {}: ", b.backend);
        if (b.devices.empty()) s += "no devices (" + b.unavailable_reason + ")";
        for (const auto& d : b.devices)
            s += fmt::format("[{}] {}{}  ", d.index, d.name, d.gpu ? " (GPU)" : "");
    }
    return s;
}

std::unique_ptr<Backend> open_on(const std::string& backend, int index)
{
    const BackendEntry* b = backend_registry().find(backend);
    if (!b || !b->built()) throw UsageError(fmt::format("backend {} is not compiled in", backend));
    return b->open(index);
}

} // namespace

std::unique_ptr<Backend> open_device(const DeviceRequest& request)
{
    const DeviceRequest req = resolve_request(request);
    const auto all = discover_devices();
    if (req.backend == "auto" && req.device < 0) {
        // The first GPU of the backends in order of preference, else the first device of any (a CPU through PoCL).
        for (const auto& b : all)
            for (const auto& d : b.devices)
                if (d.gpu) return open_on(b.backend, d.index);
        for (const auto& b : all)
            if (!b.devices.empty()) return open_on(b.backend, b.devices.front().index);
        throw UsageError("no device found on any backend:" + describe_present(all));
    }
    if (req.backend == "auto") {
        std::vector<std::string> options;
        for (const auto& name : backend_registry().names())
            options.push_back("--backend " + name);
        throw UsageError(fmt::format("--device needs {} (device indices are per backend)", one_of(options)));
    }
    for (const auto& b : all) {
        if (b.backend != req.backend) continue;
        if (b.devices.empty())
            throw UsageError(fmt::format("backend {} has no devices ({}). Present:{}", req.backend,
                                         b.unavailable_reason, describe_present(all)));
        const int index = req.device < 0 ? 0 : req.device;
        if (index >= static_cast<int>(b.devices.size()))
            throw UsageError(
                fmt::format("backend {} has no device {}. Present:{}", req.backend, index, describe_present(all)));
        return open_on(b.backend, index);
    }
    throw UsageError(
        fmt::format("backend {} is unknown to this build. Present:{}", req.backend, describe_present(all)));
}

std::string device_label(const DeviceInfo& d)
{
    return fmt::format("{} #{} {}", d.backend, d.index, d.name);
}

std::optional<DeviceRequest> find_device(std::string_view label)
{
    for (const auto& b : discover_devices())
        for (const auto& d : b.devices)
            if (device_label(d) == label) return DeviceRequest{b.backend, d.index};
    return std::nullopt;
}

std::vector<std::unique_ptr<Backend>> open_all_devices()
{
    std::vector<std::unique_ptr<Backend>> out;
    for (const auto& b : discover_devices())
        for (const auto& d : b.devices)
            out.push_back(open_on(b.backend, d.index));
    return out;
}

} // namespace banyan
