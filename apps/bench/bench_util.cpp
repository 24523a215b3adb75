/**
 * @file bench_util.cpp
 * @brief Device-event timing, table printing and JSON text for the benchmarks.
 */
#include "apps/bench/bench_util.hpp"
#include "apps/cli/cli.hpp"

#include "core/gravity/forces.hpp"

#include "core/error.hpp"
#include "core/files/atomic_file.hpp"
#include "core/files/snapshot_file.hpp"
#include "core/gravity/precision.hpp"
#include "core/numbers.hpp"
#include "core/tree/octree.hpp"
#include "core/version.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <new>
#include <utility>

namespace banyan::bench {

double median(std::vector<double> v)
{
    if (v.empty()) return 0;
    const std::size_t mid = v.size() / 2;
    std::nth_element(v.begin(), v.begin() + static_cast<long>(mid), v.end());
    const double hi = v[mid];
    if (v.size() % 2) return hi;
    const double lo = *std::max_element(v.begin(), v.begin() + static_cast<long>(mid));
    return 0.5 * (lo + hi);
}

Timing time_on_device(Backend& be, int warmup, int reps, const std::function<void()>& run,
                      const std::function<void()>& before_each)
{
    if (warmup < 1 || reps < 1) throw UsageError("time_on_device: needs at least one warm-up run and one repetition");
    for (int i = 0; i < warmup; ++i) {
        if (before_each) before_each();
        run();
    }
    be.synchronize();

    std::vector<std::pair<Event, Event>> marks;
    marks.reserve(static_cast<std::size_t>(reps));
    for (int i = 0; i < reps; ++i) {
        if (before_each) before_each();
        Event start = be.record();
        run();
        marks.emplace_back(std::move(start), be.record());
    }
    std::vector<double> ms;
    ms.reserve(marks.size());
    for (const auto& [a, b] : marks)
        ms.push_back(be.elapsed_ms(a, b));

    Timing t;
    t.reps = reps;
    t.min_ms = *std::min_element(ms.begin(), ms.end());
    t.max_ms = *std::max_element(ms.begin(), ms.end());
    t.median_ms = median(std::move(ms));
    return t;
}

double mega_per_s(std::size_t n, double ms)
{
    return ms > 0 ? double(n) / (ms * 1e3) : 0.0;
}

std::string row_error(const std::exception& e, std::size_t n)
{
    if (dynamic_cast<const std::bad_alloc*>(&e)) return fmt::format("out of host memory for {} particles", n);
    std::string text = e.what();
    if (auto nl = text.find('\n'); nl != std::string::npos) text.resize(nl);
    return text;
}

std::string fit_error(const Backend& be, std::size_t n, bool velocities)
{
    const std::size_t need = estimate_device_bytes(be, n, velocities);
    if (need <= be.info().memory_bytes) return {};
    return fmt::format("does not fit: needs about {:.1f} GiB ({:.0f} bytes per particle), the device has {:.1f} GiB",
                       double(need) / (1 << 30), double(need) / double(n), double(be.info().memory_bytes) / (1 << 30));
}

std::string figure(double v)
{
    if (v == 0 || !std::isfinite(v)) return fmt::format("{}", v);
    const int decimals = std::clamp(2 - static_cast<int>(std::floor(std::log10(std::fabs(v)))), 0, 9);
    return fmt::format("{:.{}f}", v, decimals);
}

// ---- Table ----------------------------------------------------------------------------------------------

void Table::print_header() const
{
    std::vector<std::string> titles;
    int total = 0;
    for (const auto& c : columns_) {
        titles.push_back(c.title);
        total += c.width + 2;
    }
    print_row(titles);
    fmt::print(out_, "{}\n", std::string(static_cast<std::size_t>(std::max(total - 2, 0)), '-'));
}

void Table::print_note(std::vector<std::string> first, const std::string& note) const
{
    first.resize(columns_.size() - 1);
    first.push_back(note);
    print_row(first);
}

void Table::print_row(const std::vector<std::string>& cells) const
{
    std::string line;
    for (std::size_t i = 0; i < columns_.size(); ++i) {
        const auto& c = columns_[i];
        const std::string cell = i < cells.size() ? cells[i] : std::string();
        const bool last = i + 1 == columns_.size();
        if (i) line += "  ";
        if (c.right)
            line += fmt::format("{:>{}}", cell, c.width);
        else if (last)
            line += cell;
        else
            line += fmt::format("{:<{}}", cell, c.width);
    }
    while (!line.empty() && line.back() == ' ')
        line.pop_back();
    fmt::print(out_, "{}\n", line);
    std::fflush(out_);
}

// ---- JSON -----------------------------------------------------------------------------------------------

void JsonWriter::before_value()
{
    if (after_key_) {
        after_key_ = false;
        return;
    }
    if (has_items_.empty()) return; // the top-level value
    if (has_items_.back()) out_ += ',';
    has_items_.back() = true;
    out_ += '\n';
    out_.append(2 * has_items_.size(), ' ');
}

JsonWriter& JsonWriter::open(char c)
{
    before_value();
    out_ += c;
    has_items_.push_back(false);
    closers_ += c == '{' ? '}' : ']';
    return *this;
}

JsonWriter& JsonWriter::close(char c)
{
    const bool had = has_items_.back();
    has_items_.pop_back();
    closers_.pop_back();
    if (had) {
        out_ += '\n';
        out_.append(2 * has_items_.size(), ' ');
    }
    out_ += c;
    if (has_items_.empty()) out_ += '\n';
    return *this;
}

namespace {

std::string quoted(std::string_view s)
{
    std::string q = "\"";
    for (const char ch : s) {
        const auto u = static_cast<unsigned char>(ch);
        switch (ch) {
        case '"':
            q += "\\\"";
            break;
        case '\\':
            q += "\\\\";
            break;
        case '\n':
            q += "\\n";
            break;
        case '\r':
            q += "\\r";
            break;
        case '\t':
            q += "\\t";
            break;
        default:
            if (u < 0x20)
                q += fmt::format("\\u{:04x}", u);
            else
                q += ch; // UTF-8 passes through unchanged
        }
    }
    return q + '"';
}

} // namespace

JsonWriter& JsonWriter::key(std::string_view k)
{
    before_value();
    out_ += quoted(k);
    out_ += ": ";
    after_key_ = true;
    return *this;
}

JsonWriter& JsonWriter::string(std::string_view s)
{
    before_value();
    out_ += quoted(s);
    return *this;
}

JsonWriter& JsonWriter::number(double v)
{
    if (!std::isfinite(v)) return null();
    before_value();
    out_ += fmt::format("{}", v);
    return *this;
}

JsonWriter& JsonWriter::integer(long long v)
{
    before_value();
    out_ += fmt::format("{}", v);
    return *this;
}

JsonWriter& JsonWriter::boolean(bool v)
{
    before_value();
    out_ += v ? "true" : "false";
    return *this;
}

JsonWriter& JsonWriter::null()
{
    before_value();
    out_ += "null";
    return *this;
}

const std::string& JsonWriter::finish()
{
    while (!closers_.empty())
        close(closers_.back());
    return out_;
}

JsonWriter begin_report(std::string_view name)
{
    JsonWriter j;
    j.begin_object();
    j.key("benchmark").string(name);
    j.key("banyan_version").string(version);
    return j;
}

void add_json_option(cli::Options& opt)
{
    opt.value("json", "FILE", "also write the results as JSON to FILE (temporary name, then renamed)");
}

void write_report(const std::string& path, const std::string& text)
{
    write_file_atomically(path, [&](std::ostream& f) { f << text; });
    fmt::print("wrote {}\n", path);
}

std::string sanity(const TreeForces& f, std::size_t n)
{
    if (f.totals().pp + f.totals().pc == 0 && n > 1) return "no interactions";
    const std::size_t step = std::max<std::size_t>(1, n / 1000);
    for (std::size_t i = 0; i < n; i += step) {
        const bn_f4 a = f.acc().at(i);
        if (!(std::isfinite(a.x) && std::isfinite(a.y) && std::isfinite(a.z) && std::isfinite(a.w) && a.w < 0))
            return fmt::format("particle {} has the acceleration ({}, {}, {}) and the potential {}: every one must be "
                               "finite and the potential negative",
                               i, a.x, a.y, a.z, a.w);
    }
    return {};
}

Buffer<bn_f4> previous_accelerations(Backend& be, const std::vector<bn_f4>& pos, Opening opening, float eps)
{
    Octree tree(be);
    tree.set_opening(opening);
    tree.set_particles(pos);
    tree.build();
    TreeForces forces(be);
    forces.compute(tree, 0.5f, eps);
    std::vector<bn_f4> a = forces.acc().download(pos.size());
    for (auto& v : a)
        v.w = std::sqrt(v.x * v.x + v.y * v.y + v.z * v.z); // the walk reads |a| from .w
    return be.upload<bn_f4>(a, "bench.acc_old");
}

std::vector<Opening> opening_list(const std::string& s, std::string_view what)
{
    std::vector<Opening> out;
    for (const std::string& item : comma_items(s))
        out.push_back(parse_opening(item, what));
    return out;
}

ForceRow time_forces(Backend& be, const std::vector<bn_f4>& pos, double theta, Opening opening, float eps, int warmup,
                     int reps, unsigned groups_per_unit)
{
    return time_forces(be, pos, theta, opening, 0.0f, nullptr, eps, warmup, reps, groups_per_unit);
}

ForceRow time_forces(Backend& be, const std::vector<bn_f4>& pos, double theta, Opening opening, float alpha,
                     const Buffer<bn_f4>* acc_old, float eps, int warmup, int reps, unsigned groups_per_unit)
{
    ForceRow r;
    r.n = pos.size();
    r.theta = theta;
    measure_row(r, [&] {
        // A fresh tree and walk per row, so that the row's peak is all that one force evaluation needs.
        bench::PeakMemory peak(be);
        Octree tree(be);
        tree.set_opening(opening);
        TreeForces forces(be);
        forces.set_previous_accelerations(acc_old);
        if (groups_per_unit) forces.set_groups_per_unit(groups_per_unit);
        std::vector<double> tree_ms, mult_ms, walk_ms, total_ms;
        for (int i = 0; i < warmup + reps; ++i) {
            tree.set_particles(pos);
            be.synchronize();
            TreeTimings t;
            tree.build(&t);
            double w = 0;
            forces.compute(tree, {static_cast<float>(theta), alpha, opening}, eps, &w);
            if (i >= warmup) {
                tree_ms.push_back(t.total - t.multipoles);
                mult_ms.push_back(t.multipoles);
                walk_ms.push_back(w);
                total_ms.push_back(t.total + w);
            }
            if (i == 0 || i == warmup + reps - 1)
                if (std::string bad = sanity(forces, r.n); !bad.empty())
                    throw NumericalError("the timed force evaluation is not valid: " + bad);
        }
        r.tree_ms = bench::median(tree_ms);
        r.multipoles_ms = bench::median(mult_ms);
        r.walk_ms = bench::median(walk_ms);
        r.total_ms = bench::median(total_ms);
        r.pp = double(forces.totals().pp) / double(r.n);
        r.pc = double(forces.totals().pc) / double(r.n);
        r.groups = tree.groups();
        r.bytes = peak.bytes();
        r.retries = forces.retries();
    });
    return r;
}

std::vector<bn_f4> file_particles(const std::string& path, double& eps)
{
    const Snapshot s = read_snapshot(path, nullptr, false); // forces need no velocities
    check_particles(s, path);
    std::vector<bn_f4> pos(s.size());
    for (std::size_t i = 0; i < pos.size(); ++i)
        pos[i] = {s.pos[3 * i], s.pos[3 * i + 1], s.pos[3 * i + 2], s.mass[i]};
    check_precision_range(pos, eps, path);
    const InternalUnits units = InternalUnits::for_system(pos, eps);
    units.to_internal(pos);
    eps = units.length_to_internal(eps);
    return pos;
}

} // namespace banyan::bench
