/**
 * @file run_options.cpp
 * @brief Checks and text form of a run's options, its initial conditions, times and step counts.
 */
#include "core/simulation/run_options.hpp"

#include "core/error.hpp"
#include "core/gravity/precision.hpp"
#include "core/numbers.hpp"
#include "core/parallel/input.hpp"
#include "core/tree/opening.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>

namespace banyan {

std::string option_name(std::string_view key, OptionStyle style)
{
    std::string name(key);
    if (style == OptionStyle::python) return name == "steps" ? "time_steps" : name; // steps: Simulation.steps counts
    for (char& c : name)
        if (c == '_') c = '-';
    if (name == "snapshot-format") name = "format";
    return (name == "n" ? "-" : "--") + name;
}

void RunOptions::check(OptionStyle style) const
{
    // "run: --theta must be ..." for the CLI, "theta must be ..." for Python.
    const std::string prefix = style == OptionStyle::cli ? "run: " : "";
    auto name = [&](std::string_view key) { return option_name(key, style); };
    auto bad = [&](std::string_view key, const std::string& text) {
        return UsageError(fmt::format("{}{} {}", prefix, name(key), text));
    };
    const bool file = ic == "file";
    if (!(file || ic == "plummer" || ic == "hernquist" || ic == "disc" || ic == "uniform" || ic == "uniform-cold" ||
          ic == "merger" || galaxy_ic(ic)))
        throw bad("ic", fmt::format("must be plummer, hernquist, disc, uniform, uniform-cold, merger, galaxy or "
                                    "galaxy-merger, got '{}'",
                                    ic));
    if (file && in.empty()) throw UsageError(prefix + "initial conditions from a file need --in FILE");
    if (!file) {
        if (n < 1) throw bad("n", "must be at least 1");
        if (ic == "merger" && n < 4)
            throw UsageError(fmt::format("{}a merger needs {} 4 or more, got {}", prefix, name("n"), n));
    }
    if (!opening_angle_ok(theta)) throw bad("theta", fmt::format("must be in {}, got {}", opening_angle_range, theta));
    if (!is_opening_name(opening))
        throw bad("opening", fmt::format("must be {}, got '{}'", opening_names("'"), opening));
    // Each refusal names the range allowed: a huge finite value is no "not finite".
    if (!(alpha >= 0.0 && alpha < 1e30)) throw bad("alpha", fmt::format("must be in [0, 1e30), got {}", alpha));
    if (!(eps >= 0.0 && eps < 1e30)) throw bad("eps", fmt::format("must be in [0, 1e30), got {}", eps));
    if (!(dt > 0.0 && dt < 1e30)) throw bad("dt", fmt::format("must be in (0, 1e30), got {}", dt));
    if (static_cast<float>(dt) == 0.0f || static_cast<float>(0.5 * dt) == 0.0f)
        throw UsageError(fmt::format("{}{} {} is too small for single precision", prefix, name("dt"), dt));
    if (steps != "shared" && steps != "block")
        throw bad("steps", fmt::format("must be 'shared' or 'block', got '{}'", steps));
    if (!(eta > 0.0 && eta < 1e30)) throw bad("eta", fmt::format("must be in (0, 1e30), got {}", eta));
    if (rung_rule != "gadget" && rung_rule != "symmetric")
        throw bad("rung_rule", fmt::format("must be 'gadget' or 'symmetric', got '{}'", rung_rule));
    if (max_rung > BANYAN_MAX_RUNG)
        throw bad("max_rung", fmt::format("must be at most {}, got {}", BANYAN_MAX_RUNG, max_rung));
    if (steps == "block" && !(eps > 0.0))
        throw UsageError(fmt::format("{}block time steps ({} block) need {} > 0: the step criterion is "
                                     "sqrt(2 eta eps / |a|)",
                                     prefix, name("steps"), name("eps")));
    if (steps == "block" && static_cast<float>(std::ldexp(0.5 * dt, -static_cast<int>(max_rung))) == 0.0f)
        throw UsageError(fmt::format("{}{} {} at {} {} is too small for single precision", prefix, name("dt"), dt,
                                     name("max_rung"), max_rung));
    if (!std::isfinite(t_end)) throw bad("t_end", fmt::format("must be finite, got {}", t_end));
    if (log_every < 1) throw bad("log_every", "must be at least 1 step");
    if (!(snapshot_every >= 0.0))
        throw bad("snapshot_every",
                  fmt::format("must be >= 0 (0: start and end only) or never, got {}", snapshot_every));
    if (!(checkpoint_every >= 0.0))
        throw bad("checkpoint_every",
                  fmt::format("must be >= 0 (0: start, end and stops only) or never, got {}", checkpoint_every));
    // A grid finer than the step would only repeat the same step's output.
    if (snapshot_every > 0 && snapshot_every < dt)
        throw UsageError(fmt::format("{}{} {} is shorter than the time step {} (0: start and end only)", prefix,
                                     name("snapshot_every"), snapshot_every, dt));
    for (std::size_t k = 0; k < snapshot_times.size(); ++k)
        if (!std::isfinite(snapshot_times[k]) || (k && !(snapshot_times[k] > snapshot_times[k - 1])))
            throw bad("snapshot_times", fmt::format("must be finite and increasing, got {} after {}", snapshot_times[k],
                                                    k ? snapshot_times[k - 1] : 0.0));
    if (!snapshot_times.empty() && snapshot_every != 0)
        throw UsageError(
            fmt::format("{}give either {} or {}, not both", prefix, name("snapshot_every"), name("snapshot_times")));
    if (checkpoint_every > 0 && checkpoint_every < dt)
        throw UsageError(fmt::format("{}{} {} is shorter than the time step {}", prefix, name("checkpoint_every"),
                                     checkpoint_every, dt));
    if (std::fabs(t_end) / dt > 1e15)
        throw UsageError(
            fmt::format("{}{} {} at {} {} is more than 10^15 steps", prefix, name("t_end"), t_end, name("dt"), dt));
    if (ic == "merger") check_merger_options(merger);
    parse_units(units, prefix + name("units"));
    if (galaxy_ic(ic)) {
        // What the model can make, in the front end's spelling, before its tables; then the tables and enough
        // particles for each component.
        check_galaxy_parameters(galaxy_setup(*this), prefix + ic, name);
        (void)GalaxyGenerator(galaxy_setup(*this), name);
    }
    if (out.empty()) throw bad("out", "must name a folder");
}

std::string RunOptions::to_text() const
{
    std::string s;
    auto line = [&](const char* k, const auto& v) { s += fmt::format("{}={}\n", k, v); };
    line("ic", ic), line("in", in), line("n", n), line("seed", seed), line("theta", theta), line("opening", opening),
        line("alpha", alpha);
    line("eps", eps);
    line("dt", dt), line("steps", steps), line("eta", eta), line("max_rung", max_rung);
    line("rung_rule", rung_rule);
    auto every = [](double v) { return v == never ? std::string("never") : fmt::format("{}", v); };
    line("t_end", t_end), line("log_every", log_every), line("snapshot_every", every(snapshot_every));
    line("checkpoint_every", every(checkpoint_every)), line("pericentre", merger.pericentre);
    line("separation", merger.separation), line("eccentricity", merger.eccentricity);
    line("bh_fraction", merger.bh_fraction), line("direct", direct ? 1 : 0);
    line("snapshot_format", to_string(format)), line("units", units);
    if (!snapshot_times.empty()) { // doubles in shortest round-trip form, comma separated
        s += "snapshot_times=";
        for (std::size_t k = 0; k < snapshot_times.size(); ++k)
            s += fmt::format("{}{}", k ? "," : "", snapshot_times[k]);
        s += "\n";
    }
    // The galaxy options as "galaxy_<name>" (the model's and the orbit's), for every run: a checkpoint is one shape.
    for (const auto* names : {&galaxy_model_option_names(), &galaxy_orbit_option_names()})
        for (const std::string_view k : *names)
            s += fmt::format("galaxy_{}={}\n", k, galaxy_option_text(galaxy, orbit, k));
    return s;
}

RunOptions RunOptions::from_text(const KeyValues& kv)
{
    RunOptions o;
    auto d = [&](const char* k) { return double_of(kv, k, "checkpoint"); };
    auto u = [&](const char* k) { return u64_of(kv, k, "checkpoint"); };
    o.ic = value_of(kv, "ic", "checkpoint");
    o.in = value_of(kv, "in", "checkpoint");
    o.n = u("n"), o.seed = u("seed"), o.theta = d("theta"), o.eps = d("eps"), o.dt = d("dt"), o.t_end = d("t_end");
    // "never", or -1 in checkpoints written before it was spelt out.
    auto every = [&](const char* k) {
        const std::string v = value_of(kv, k, "checkpoint");
        return v == "never" || v == "-1" ? never : d(k);
    };
    o.log_every = u("log_every"), o.snapshot_every = every("snapshot_every");
    o.checkpoint_every = every("checkpoint_every");
    o.merger.pericentre = d("pericentre"), o.merger.separation = d("separation");
    o.merger.eccentricity = d("eccentricity"), o.merger.bh_fraction = d("bh_fraction");
    o.direct = u("direct") != 0;
    // Checkpoints written before the criterion could be chosen: the paper's.
    o.opening = kv.count("opening") ? value_of(kv, "opening", "checkpoint") : std::string("paper");
    o.alpha = kv.count("alpha") ? d("alpha") : 0.0;
    // Checkpoints written before block time steps: a shared step.
    o.steps = kv.count("steps") ? value_of(kv, "steps", "checkpoint") : std::string("shared");
    o.eta = kv.count("eta") ? d("eta") : 0.025;
    // Checkpoints written before the rule could be chosen: GADGET's.
    o.rung_rule = kv.count("rung_rule") ? value_of(kv, "rung_rule", "checkpoint") : std::string("gadget");
    if (o.rung_rule != "gadget" && o.rung_rule != "symmetric")
        throw UsageError(fmt::format("checkpoint: rung_rule '{}' is neither gadget nor symmetric", o.rung_rule));
    if (kv.count("max_rung")) {
        o.max_rung = u("max_rung");
        if (o.max_rung > BANYAN_MAX_RUNG)
            throw UsageError(fmt::format("checkpoint: max_rung {} is beyond {}", o.max_rung, BANYAN_MAX_RUNG));
    }
    // Checkpoints written before snapshots had a format or units: tipsy, N-body units.
    o.format = kv.count("snapshot_format")
                   ? parse_snapshot_format(value_of(kv, "snapshot_format", "checkpoint"), "checkpoint: snapshot_format")
                   : SnapshotFormat::tipsy;
    o.units = kv.count("units") ? value_of(kv, "units", "checkpoint") : std::string();
    if (kv.count("snapshot_times"))
        o.snapshot_times = parse_time_list(value_of(kv, "snapshot_times", "checkpoint"), "checkpoint: snapshot_times");
    // Checkpoints written before galaxy models: the defaults (they are of other initial conditions).
    for (const auto* names : {&galaxy_model_option_names(), &galaxy_orbit_option_names()})
        for (const std::string_view k : *names) {
            const std::string key = fmt::format("galaxy_{}", k);
            if (kv.count(key))
                set_galaxy_option(o.galaxy, o.orbit, k, value_of(kv, key.c_str(), "checkpoint"), "checkpoint: " + key);
        }
    return o;
}

SimulationOptions RunOptions::simulation() const
{
    SimulationOptions s;
    s.opening = OpeningCriterion(static_cast<float>(theta), static_cast<float>(alpha),
                                 parse_opening(opening, "run: --opening"));
    s.eps = static_cast<float>(eps);
    s.dt = dt;
    s.direct = direct;
    s.block = steps == "block";
    s.eta = eta;
    s.rung_rule = rung_rule == "symmetric" ? RungRule::symmetric : RungRule::gadget;
    if (max_rung > BANYAN_MAX_RUNG) throw std::logic_error("RunOptions::simulation() of options check() refuses");
    s.max_rung = static_cast<unsigned>(max_rung);
    return s;
}

double parse_time(const std::string& text, const std::string& option)
{
    auto number = [&](const std::string& s) {
        const auto v = parse_decimal(s);
        if (!v)
            throw UsageError(
                fmt::format("run: {} expects a decimal number or a fraction such as 1/64, got '{}'", option, text));
        return *v;
    };
    const auto slash = text.find('/');
    if (slash == std::string::npos) return number(text);
    const double a = number(text.substr(0, slash)), b = number(text.substr(slash + 1));
    if (b == 0.0) throw UsageError(fmt::format("run: {} divides by zero: '{}'", option, text));
    return a / b;
}

void check_start_time(double t, double dt, const std::string& what)
{
    if (!std::isfinite(t) || std::fabs(t) > 1e12 * dt)
        throw UsageError(fmt::format("{}: the start time {} is not finite or more than 10^12 time steps ({}) from 0; "
                                     "times that large leave no room for steps of {} in double precision",
                                     what, t, 1e12 * dt, dt));
}

std::uint64_t steps_between(double t_begin, double t_end, double dt)
{
    // Beyond this the step count leaves the 64-bit integers and a run of it would never end: refused, never a
    // count that silently wraps to nothing.
    if (!std::isfinite(t_end) || std::fabs(t_end - t_begin) / dt > 1e15)
        throw UsageError(fmt::format("t_end {} cannot be reached: it must be finite and at most 10^15 steps of dt = "
                                     "{} from the start t = {} (at most t = {})",
                                     t_end, dt, t_begin, t_begin + 1e15 * dt));
    if (!(t_end > t_begin)) return 0;
    const double q = (t_end - t_begin) / dt;
    const double r = std::round(q);
    if (std::fabs(q - r) <= 1e-9 * std::max(1.0, q)) return static_cast<std::uint64_t>(r);
    return static_cast<std::uint64_t>(std::ceil(q));
}

double time_tolerance(double t_begin, double t, double dt)
{
    return 1e-9 * dt * std::max(1.0, std::fabs(t - t_begin) / dt);
}

GridPlace grid_place(double t_begin, double t, double dt)
{
    if (!(t > t_begin)) return {0, true};
    // Beyond any step count a run reaches (a snapshot time far past the end): inside a step never reached.
    if (!((t - t_begin) / dt <= 1e15)) return {std::numeric_limits<std::uint64_t>::max(), false};
    const std::uint64_t k = steps_between(t_begin, t, dt);
    return {k, std::fabs(t_begin + static_cast<double>(k) * dt - t) <= time_tolerance(t_begin, t, dt)};
}

std::vector<double> parse_time_list(const std::string& text, const std::string& option)
{
    std::vector<std::string> items;
    std::error_code ec;
    const bool is_file = text.find(',') == std::string::npos && std::filesystem::is_regular_file(text, ec);
    if (is_file) {
        std::ifstream f(text);
        if (!f) throw UsageError(fmt::format("run: {}: cannot read {}", option, text));
        std::string line;
        while (std::getline(f, line)) {
            std::istringstream words(line);
            std::string first;
            if ((words >> first) && first[0] != '#') items.push_back(first);
        }
    } else {
        std::size_t from = 0;
        while (from <= text.size()) {
            const std::size_t comma = std::min(text.find(',', from), text.size());
            items.push_back(text.substr(from, comma - from));
            from = comma + 1;
        }
    }
    if (items.empty() || (!is_file && text.empty()))
        throw UsageError(fmt::format("run: {} needs at least one time{}", option, is_file ? " in " + text : ""));
    std::vector<double> times;
    for (const std::string& item : items) {
        try {
            times.push_back(parse_time(item, option));
        } catch (const UsageError& e) {
            if (is_file || items.size() > 1) throw;
            throw UsageError(
                fmt::format("{} (or the name of a file of times, one per line: no file {} exists)", e.what(), text));
        }
    }
    std::sort(times.begin(), times.end());
    for (std::size_t k = 0; k < times.size(); ++k) {
        if (!std::isfinite(times[k]))
            throw UsageError(fmt::format("run: {} holds a time that is not finite ({})", option, times[k]));
        if (k && times[k] == times[k - 1])
            throw UsageError(fmt::format("run: {} holds the time {} twice", option, times[k]));
    }
    return times;
}

void adopt_units(RunOptions& o, const Snapshot& ic)
{
    if (!ic.units.physical()) return;
    if (o.units.empty()) {
        o.units = ic.units.text();
        return;
    }
    const Units given = parse_units(o.units, "run: --units");
    if (!same_units(given, ic.units))
        throw UsageError(fmt::format("run: --units {} disagrees with the units of {} ({}); banyan does not convert "
                                     "units: leave --units out to run in the file's",
                                     o.units, o.in, ic.units.describe()));
}

void adopt_model_units(RunOptions& o)
{
    if (galaxy_ic(o.ic) && o.units.empty()) o.units = galaxy_model_units;
}

bool galaxy_ic(const std::string& ic)
{
    return ic == "galaxy" || ic == "galaxy-merger";
}

GalaxySetup galaxy_setup(const RunOptions& o)
{
    GalaxySetup g;
    g.model = o.galaxy;
    g.merger = o.ic == "galaxy-merger";
    g.orbit = o.orbit;
    g.n = o.n;
    g.seed = o.seed;
    if (const Units u = parse_units(o.units); u.physical()) {
        g.length_unit_kpc = u.length_cm / cgs::kpc;
        g.mass_unit_msun = u.mass_g / cgs::msun;
    }
    return g;
}

std::optional<std::array<std::uint64_t, 2>> tracked_pair(const RunOptions& o)
{
    if (o.ic == "merger") return std::array<std::uint64_t, 2>{0, o.n - o.n / 2};
    // The black holes come last, the first galaxy's first (galaxy.hpp).
    if (o.ic == "galaxy-merger" && o.galaxy.bh_mass > 0) return std::array<std::uint64_t, 2>{o.n - 2, o.n - 1};
    return std::nullopt;
}

namespace {
/// The generated particles @p p as a snapshot of dark particles of softening @p eps.
Snapshot snapshot_of(const Particles& p, double eps)
{
    Snapshot s = Snapshot::dark(p.size());
    for (std::size_t i = 0; i < p.size(); ++i) {
        s.mass[i] = p.pos[i].w;
        s.pos[3 * i] = p.pos[i].x, s.pos[3 * i + 1] = p.pos[i].y, s.pos[3 * i + 2] = p.pos[i].z;
        s.vel[3 * i] = p.vel[i].x, s.vel[3 * i + 1] = p.vel[i].y, s.vel[3 * i + 2] = p.vel[i].z;
        s.eps[i] = static_cast<float>(eps);
    }
    return s;
}
} // namespace

Snapshot initial_conditions(const RunOptions& o, SnapshotMeta* meta)
{
    if (meta) *meta = SnapshotMeta{};
    if (o.ic == "file") {
        Snapshot s = read_snapshot(o.in, meta);
        check_particles(s, o.in);
        check_count(s.size(), o.in, 1); // one process holds them all
        return s;
    }
    Snapshot s = snapshot_of(generated_share(o, {}), o.eps);
    if (galaxy_ic(o.ic)) {
        // Halo, disc, bulge and black holes as GADGET types 1, 2, 3, 5 (the snapshot keeps them in that order).
        const auto t = GalaxyGenerator(galaxy_setup(o)).type_counts();
        s.n_type2 = t[1], s.n_type3 = t[2], s.n_type5 = t[3];
    }
    return s;
}

Particles generated_share(const RunOptions& o, Share share)
{
    if (o.ic == "plummer" || o.ic == "hernquist" || o.ic == "disc") return make_model(o.ic, o.n, o.seed, share);
    if (o.ic == "uniform") return uniform_sphere(o.n, o.seed, true, share);
    if (o.ic == "uniform-cold") return uniform_sphere(o.n, o.seed, false, share);
    if (o.ic == "merger") return galaxy_merger(o.n, o.seed, o.merger, share).particles;
    if (galaxy_ic(o.ic)) {
        const GalaxyGenerator gen(galaxy_setup(o));
        const std::size_t first = std::min<std::size_t>(share.first, gen.size());
        return gen.make(first, share.size(gen.size()));
    }
    throw UsageError(fmt::format("run: unknown initial conditions '{}'", o.ic));
}

} // namespace banyan
