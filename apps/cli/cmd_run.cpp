/**
 * @file cmd_run.cpp
 * @brief `banyan run`: a whole simulation on the device (paper sections 3.1 and 4.2), with snapshots, an energy
 *        log, checkpoints and restarts (core/simulation/run.hpp), a live progress line on a terminal and a summary
 *        at the end.
 *
 * Every option is checked, the input file read and the output folder made writable before the device is opened;
 * the device memory a run needs is estimated before the particles are uploaded. SIGINT and SIGTERM set a flag that
 * the step loop reads between steps, and between the substeps of a block step: it writes a checkpoint and stops
 * (a second signal ends the program at once).
 */
#include "apps/cli/cli.hpp"
#include "apps/cli/progress.hpp"
#include "core/device/devices.hpp"
#include "core/error.hpp"
#include "core/files/png_image.hpp"
#include "core/render/render.hpp"
#include "core/files/snapshot_file.hpp"
#include "core/files/units.hpp"
#include "core/parallel/comm.hpp"
#include "core/parallel/rank_device.hpp"

#include "core/simulation/run.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <unistd.h>

namespace banyan::cli {

namespace {

volatile std::sig_atomic_t g_stop = 0;

extern "C" void on_stop_signal(int sig)
{
    if (g_stop) std::_Exit(128 + sig); // a second signal: no more waiting for the step to end
    g_stop = sig;
}

/// What a restart takes besides --restart: the end time, where it runs, and what it prints and draws. Every other
/// option of `banyan run` defines the run, which its checkpoint holds: a restart refuses it (Options::on_restart),
/// so that a new option is the run's unless it is named here.
const char* const restart_takes[] = {"t-end", "render", "quiet", "backend", "device"};

/// The options @p names as a list: "--a, --b and --c".
std::string option_list(const std::vector<std::string>& names)
{
    std::string s;
    for (std::size_t i = 0; i < names.size(); ++i)
        s += (i == 0 ? "" : i + 1 == names.size() ? " and " : ", ") + ("--" + names[i]);
    return s;
}

/// The option of the galaxy option @p key ("halo_mass": "halo-mass").
std::string cli_name(std::string_view key)
{
    std::string s(key);
    std::replace(s.begin(), s.end(), '_', '-');
    return s;
}

} // namespace

void add_galaxy_model_options(Options& opt)
{
    const GalaxyModel mw = galaxy_preset("mw");
    opt.value("galaxy", "NAME",
              "galaxy: the preset the options below start from: mw (Milky Way, McMillan 2017) or m31 (Geehan et "
              "al. 2006)",
              "mw");
    opt.value("halo", "KIND", "galaxy: nfw (truncated smoothly beyond r200) or hernquist", mw.halo);
    opt.value("halo-mass", "M", "galaxy: halo mass in Msun (NFW: M200; Hernquist: all)",
              fmt::format("{}", mw.halo_mass));
    opt.value("halo-scale", "R", "galaxy: halo scale radius in kpc (NFW r_s, Hernquist a)",
              fmt::format("{}", mw.halo_scale));
    opt.value("halo-concentration", "C", "galaxy: NFW concentration r200 / r_s",
              fmt::format("{}", mw.halo_concentration));
    opt.value("disc-mass", "M", "galaxy: disc mass in Msun", fmt::format("{}", mw.disc_mass));
    opt.value("disc-scale-length", "R", "galaxy: exponential scale length R_d in kpc",
              fmt::format("{}", mw.disc_scale_length));
    opt.value("disc-scale-height", "Z", "galaxy: z0 of the sech^2(z / z0) profile in kpc",
              fmt::format("{}", mw.disc_scale_height));
    opt.value("toomre-q", "Q", "galaxy: Toomre Q of the disc at --q-radius", fmt::format("{}", mw.toomre_q));
    opt.value("q-radius", "R", "galaxy: where Q is set, in kpc (0: 2.5 R_d)", "0");
    opt.value("bulge-mass", "M", "galaxy: Hernquist bulge mass in Msun (0: none)", fmt::format("{}", mw.bulge_mass));
    opt.value("bulge-scale", "R", "galaxy: bulge scale radius a in kpc", fmt::format("{}", mw.bulge_scale));
    opt.value("bh-mass", "M", "galaxy: central black hole in Msun (0: none; galaxy-merger default 1e8)",
              fmt::format("{}", mw.bh_mass));
    opt.value("star-fraction", "F",
              "galaxy: fraction of the particles that are stars (disc and bulge); 0: halo and star particles of "
              "equal mass (galaxy-merger default 1/6, the paper's 2 x 10^4 stars to 10^5 halo particles)",
              "0");
}

GalaxyModel galaxy_model_option_values(const Options& opt, const std::string& command)
{
    GalaxyModel model = galaxy_preset(opt.str("galaxy"));
    GalaxyOrbit unused;
    for (const std::string_view k : galaxy_model_option_names())
        if (const std::string name = cli_name(k); opt.has(name))
            set_galaxy_option(model, unused, k,
                              k == "star_fraction" ? fmt::format("{}", parse_time(opt.str(name), "--" + name))
                                                   : opt.str(name),
                              command + ": --" + name);
    return model;
}

namespace {

/// The options of `banyan run` and their help.
Options run_options()
{
    static const RunOptions defaults;
    Options opt(
        "run",
        "A whole N-body simulation on the device (paper sections 3.1, 4.2): leapfrog (kick-drift-kick, Hut\n"
        "et al. 1995) with one shared step or block steps (--steps block), the octree rebuilt and walked\n"
        "every (sub)step, energies and momenta summed on the device.\n"
        "Input: generated initial conditions (--ic plummer, hernquist, disc, uniform, uniform-cold or merger,\n"
        "in N-body units; galaxy or galaxy-merger, in kpc and 1e10 Msun) or a snapshot (--in FILE: HDF5 in\n"
        "the GADGET-2/4 or SWIFT layout, or tipsy). G = 1: N-body units, or the physical units --units names\n"
        "(an HDF5 input's own units by default). Writes to --out: snapshot_NNNNN.hdf5 (GADGET-4 HDF5 layout,\n"
        "which pynbody and yt open, with the units; or .tipsy with --format tipsy; particle i of the input is\n"
        "particle i of every snapshot), energy.csv (one line per --log-every steps: energies, dE = (E0 - E) /\n"
        "E0 and its largest magnitude so far, momentum, angular momentum; a merger adds the distance of the\n"
        "two central particles) and checkpoint.bin. Ctrl-C writes a checkpoint and stops; `banyan run\n"
        "--restart DIR` continues bit for bit on the same device. Under mpirun the particles are shared\n"
        "among the ranks (one GPU each).\n\n"
        "examples:\n"
        "  banyan run -n 1048576 --t-end 10 --out plummer-1M\n"
        "  banyan run --ic merger -n 200000 --eps 0.1 --t-end 50 --out merger\n"
        "  banyan run --ic galaxy-merger --out paper     the paper's merger: -n 240002, --eps 0.1, --t-end 1000\n"
        "  banyan run --in galaxy.hdf5 --t-end 100 --out galaxy      an HDF5 or tipsy file; its units kept\n"
        "  banyan run --ic hernquist --steps block --eps 0.01 --out cusp    block time steps\n"
        "  banyan run --units pc,Msun --out cluster       a Plummer sphere in pc and Msun (snapshots say so)\n"
        "  banyan run --restart plummer-1M --t-end 20     continue, and run on to t = 20\n"
        "  mpirun -n 4 banyan run -n 268435456 --t-end 1 --out plummer-256M    4 ranks, one GPU each");
    opt.value("ic", "KIND",
              "initial conditions: plummer, hernquist (cuspy sphere), disc (thin exponential disc), uniform "
              "(virialised uniform sphere), uniform-cold (cold collapse), merger (two Plummer spheres 1:3 with "
              "central massive particles), galaxy (halo, disc, bulge and black hole in equilibrium; lengths in kpc, "
              "masses in 1e10 Msun unless --units says otherwise; README, \"Galaxies\"), galaxy-merger (two "
              "galaxies, the paper's merger by default: -n 240002, --eps 0.1, --t-end 1000)",
              "plummer");
    opt.value("in", "FILE",
              fmt::format("start from a snapshot file instead: {}, detected from its first bytes",
                          snapshot_format_list(
                              [](const SnapshotFormatInfo& f) { return fmt::format("{} ({})", f.title, f.reads); })));
    opt.value("n", "N", "number of particles (also -n)", "65536");
    opt.value("seed", "S", "random seed of the initial conditions", "1");
    opt.value("theta", "T", "opening angle, 0 < T <= 1", "0.75");
    opt.value("opening", "C",
              "opening criterion: paper (d > l / theta + delta) or bmax (d > bmax / theta; faster at "
              "errors above about 1e-3, docs/benchmarks.md)",
              "paper");
    opt.value("alpha", "A",
              "the relative criterion on top: accept a cell when M l^3 / d^5 <= A |a|, |a| the "
              "particle's acceleration of the step before (GADGET-4's test; faster at equal error, "
              "docs/benchmarks.md); 0: off",
              "0");
    opt.value("eps", "E",
              "Plummer softening length, >= 0 (galaxy models: 0.05 kpc, galaxy-merger 0.1 kpc, in the run's "
              "length unit; with --in, default: the softening the file's dark and star particles carry)",
              "0.05");
    opt.value("dt", "DT", "time step, > 0; a fraction such as 1/64 is fine; with --steps block the largest step",
              "1/64");
    opt.value("steps", "S",
              "time steps: shared (every particle moves with --dt) or block (each with --dt / 2^k, k its rung, "
              "from dt_i = sqrt(2 eta eps / |a_i|) rounded down to a power of two; Quinn et al. 1997, GADGET-4; "
              "needs --eps > 0); README, \"Time steps\"",
              "shared");
    opt.value("eta", "ETA", "block steps: accuracy parameter of the step criterion", "0.025");
    opt.value("rung-rule", "R",
              "block steps: how a rung is chosen: symmetric (the criterion at the step's start and at its predicted "
              "end, summed again: far less energy drift, one more walk a substep of the active particles near their "
              "step's limit) or gadget (at its start alone, GADGET-4's rule); README, \"Time steps\"",
              "symmetric");
    opt.value("max-rung", "K",
              "block steps: the deepest rung allowed (steps down to --dt / 2^K, K <= 30); a particle that asks for "
              "a shorter step stops the run with an error naming it",
              "16");
    opt.value("t-end", "T",
              "end time (absolute; with --restart, extends or shortens the run); the run ends exactly there: a step "
              "of --dt that would pass it is cut short to end on it",
              "10");
    opt.value("log-every", "STEPS", "steps between lines of the energy log", "16");
    opt.value("snapshot-every", "T",
              "time between snapshots (0: at the start and the end only; never: none); each is written at its "
              "time exactly: a step that would pass it is cut short there, the next goes on to the step's end",
              "1");
    opt.value("snapshot-times", "T1,T2,..",
              "snapshots at these times instead (as GADGET's output list), besides the start and the end: a list "
              "such as 0.5,1,2.5, or a file of times, one per line (what follows a time on its line, and lines "
              "starting with #, are ignored)");
    opt.value("checkpoint-every", "T", "time between checkpoints (0: start, end and Ctrl-C only; never: none)", "1");
    opt.value("out", "DIR", "output folder (created; must not hold a run already)", "banyan-run");
    opt.value("format", "F", "snapshot format: " + snapshot_format_list([](const SnapshotFormatInfo& f) {
                                 return fmt::format("{} ({})", f.name, f.writes);
                             }),
              to_string(defaults.format));
    opt.value("units", "L,M",
              "physical units of the numbers, written into HDF5 snapshots: a length and a mass unit "
              "(kpc,1e10Msun  pc,Msun  au,Msun  Mpc,1e10Msun); velocity and time units follow from "
              "G = 1 (kpc,1e10Msun: 207.4 km/s, 4.715 Myr). Default: N-body units, or those an HDF5 "
              "--in file states");
    opt.value("restart", "DIR",
              fmt::format("continue the run whose checkpoint is in DIR (with {} only)",
                          option_list({std::begin(restart_takes), std::end(restart_takes)})));
    opt.value("pericentre", "R",
              "merger: pericentre of the Kepler orbit of the two centres (galaxy-merger: in kpc, default 10)", "1");
    opt.value("separation", "R", "merger: starting distance of the two centres (galaxy-merger: kpc, default 100)",
              "10");
    opt.value("eccentricity", "E",
              "merger: eccentricity of the orbit, 0 <= E < 1 (bound; galaxy-merger: E >= 0, default 1, parabolic)",
              "0.9");
    opt.value("bh-fraction", "F", "merger: mass of each central particle as a fraction of its galaxy's", "0.01");
    add_galaxy_model_options(opt);
    opt.value("mass-ratio", "Q", "galaxy-merger: mass of the second galaxy over the first's, in [1e-4, 1]", "1/3");
    opt.value("orientation", "I1,W1,I2,W2",
              "galaxy-merger: each disc's spin axis, inclination to the orbit's axis and azimuth, in degrees",
              "30,0,60,90");
    opt.flag("direct", "direct O(N^2) summation instead of the tree (small N)");
    opt.flag("render", "beside each snapshot, its projected surface density as snapshot_NNNNN.png (as `banyan "
                       "render SNAPSHOT` draws it: along z, field and colour scale chosen for each snapshot)");
    opt.flag("quiet", "print nothing but errors");
    opt.device_options();
    opt.on_restart("restart");
    for (const char* name : restart_takes)
        opt.on_restart(name);
    return opt;
}

/// The count option @p name, at least @p min.
std::uint64_t count_option(const Options& opt, const char* name, long long min)
{
    const long long v = opt.integer(name);
    if (v < min)
        throw UsageError(
            fmt::format("run: {}{} must be at least {}, got {}", std::string(name) == "n" ? "-" : "--", name, min, v));
    return static_cast<std::uint64_t>(v);
}

/// A new run as the command line asks for it. The CLI only parses, and refuses combinations of options that no
/// file could hold; the run engine (core/simulation/run.hpp: plan_run) checks the values and the input, once.
RunRequest parse_new_run(const Options& opt, std::optional<double> t_end)
{
    RunRequest wanted;
    RunOptions& ro = wanted.options;
    if (opt.has("in") && opt.has("ic"))
        throw UsageError("run: give either --ic or --in, not both (--in FILE takes the initial conditions from a "
                         "file)");
    if (opt.has("in") && opt.has("n"))
        throw UsageError("run: -n cannot be given with --in (the file sets the number of particles)");
    ro.ic = opt.has("in") ? "file" : opt.str("ic");
    const bool galaxy = galaxy_ic(ro.ic), galaxy_merger = ro.ic == "galaxy-merger";
    if (ro.ic != "merger" && !galaxy_merger)
        for (const char* name : {"pericentre", "separation", "eccentricity"})
            if (opt.has(name))
                throw UsageError(fmt::format("run: --{} is for --ic merger and galaxy-merger only", name));
    if (ro.ic != "merger" && opt.has("bh-fraction"))
        throw UsageError("run: --bh-fraction is for --ic merger only (galaxies take --bh-mass)");
    if (!galaxy) {
        if (opt.has("galaxy")) throw UsageError("run: --galaxy is for --ic galaxy and galaxy-merger only");
        for (const std::string_view k : galaxy_model_option_names())
            if (opt.has(cli_name(k)))
                throw UsageError(fmt::format("run: --{} is for --ic galaxy and galaxy-merger only", cli_name(k)));
    }
    if (!galaxy_merger)
        for (const char* name : {"mass-ratio", "orientation"})
            if (opt.has(name)) throw UsageError(fmt::format("run: --{} is for --ic galaxy-merger only", name));
    if (galaxy) {
        // The preset, then the options given over it; a merger's defaults are the paper's (section 4.2): 240,002
        // bodies, eps 0.1, T = 1000, and black holes of 10^8 Msun, well above a halo particle's mass.
        ro.galaxy = galaxy_model_option_values(opt, "run");
        if (galaxy_merger && !opt.has("bh-mass")) ro.galaxy.bh_mass = 1e8;
        if (galaxy_merger && !opt.has("star-fraction")) ro.galaxy.star_fraction = 1.0 / 6;
        for (const std::string_view k : galaxy_orbit_option_names()) {
            const std::string name = cli_name(k);
            if (!opt.has(name)) continue;
            const std::string v =
                k == "mass_ratio" ? fmt::format("{}", parse_time(opt.str(name), "--mass-ratio")) : opt.str(name);
            set_galaxy_option(ro.galaxy, ro.orbit, k, v, "run: --" + name);
        }
    }
    ro.in = opt.str("in");
    ro.n = galaxy_merger && !opt.has("n") ? 240002 : count_option(opt, "n", 1);
    const long long seed = opt.integer("seed");
    if (seed < 0) throw UsageError(fmt::format("run: --seed must be 0 or more, got {}", seed));
    ro.seed = static_cast<std::uint64_t>(seed);
    ro.theta = opt.number("theta");
    ro.opening = opt.str("opening");
    ro.alpha = opt.number("alpha");
    ro.eps = galaxy_merger && !opt.has("eps") ? 0.1 : opt.number("eps");
    ro.dt = parse_time(opt.str("dt"), "--dt");
    ro.steps = opt.str("steps");
    ro.eta = opt.number("eta");
    ro.rung_rule = opt.str("rung-rule");
    ro.max_rung = count_option(opt, "max-rung", 0); // the value given: RunOptions::check names it when out of range
    ro.t_end = t_end ? *t_end : galaxy_merger && !opt.has("t-end") ? 1000.0 : parse_time(opt.str("t-end"), "--t-end");
    ro.log_every = count_option(opt, "log-every", 1);
    auto every = [&](const char* name) {
        const std::string v = opt.str(name);
        return v == "never" ? RunOptions::never : parse_time(v, fmt::format("--{}", name).c_str());
    };
    if (opt.has("snapshot-times") && opt.has("snapshot-every"))
        throw UsageError("run: give either --snapshot-every or --snapshot-times, not both");
    ro.snapshot_every = opt.has("snapshot-times") ? 0.0 : every("snapshot-every");
    if (opt.has("snapshot-times")) ro.snapshot_times = parse_time_list(opt.str("snapshot-times"), "--snapshot-times");
    ro.checkpoint_every = every("checkpoint-every");
    if (!galaxy_merger) {
        ro.merger.pericentre = opt.number("pericentre");
        ro.merger.separation = opt.number("separation");
        ro.merger.eccentricity = opt.number("eccentricity");
    }
    ro.merger.bh_fraction = opt.number("bh-fraction");
    ro.direct = opt.has("direct");
    ro.out = opt.str("out");
    ro.format = parse_snapshot_format(opt.str("format"), "run: --format");
    ro.units = opt.str("units");
    // A galaxy's default softening is a length of the model, 0.05 kpc (the merger's 0.1 kpc): in the units the
    // galaxy is made in (--units pc,Msun: 50 pc, not 0.05 pc). N-body models are made in the units given as they
    // stand, so their 0.05 stays 0.05 of the length unit.
    if (galaxy && !opt.has("eps"))
        if (const Units u = parse_units(ro.units, "run: --units"); u.physical())
            ro.eps = ro.eps * cgs::kpc / u.length_cm;
    if (ro.ic != "file" && !(ro.t_end > 0.0))
        throw UsageError(fmt::format("run: --t-end must be after the start time 0, got {}", ro.t_end));
    wanted.eps_from_file = ro.ic == "file" && !opt.has("eps");
    return wanted;
}

/// Refuses the options that a restart takes from its checkpoint: every one not marked on_restart.
void refuse_run_only(const Options& opt, std::optional<double> t_end)
{
    if (const std::vector<std::string> given = opt.given_not_on_restart(); !given.empty()) {
        std::vector<std::string> may = opt.on_restart_names();
        may.erase(std::remove(may.begin(), may.end(), "restart"), may.end());
        throw UsageError(fmt::format("run: {}{} cannot be given with --restart (the checkpoint holds the run's "
                                     "options; only {} may be)",
                                     given[0] == "n" ? "-" : "--", given[0], option_list(may)));
    }
    if (t_end && !std::isfinite(*t_end)) throw UsageError("run: --t-end must be finite");
}

/// What the run's session measured before it stepped, for the summary's per-step figures.
struct SessionStart {
    PhaseTimes times;
    double output_seconds = 0;
};

/// Block time steps: the rungs, the force evaluations against a shared step at the smallest step, and the
/// substeps' device time by level (the fixed cost of a substep shows in the levels with few active particles).
void print_block_summary(const Simulation& sim, const RunOptions& o)
{
    const BlockStats& b = sim.block_stats();
    const double n = static_cast<double>(sim.total_size());
    const double per_time = b.span > 0 ? double(b.active_updates) / (n * b.span * o.dt) : 0.0;
    fmt::print("block steps: {} substeps in {} steps; {}; deepest rung so far {} (dt / {}); {:.4g} force "
               "evaluations per particle per unit time, a shared step of dt / {} needs {:.4g}: {:.3g}x fewer\n",
               b.substeps, b.steps, rung_text(b), b.deepest, 1u << b.deepest, per_time, 1u << b.deepest,
               std::ldexp(1.0, static_cast<int>(b.deepest)) / o.dt, shared_step_ratio(b));
    for (unsigned k = 0; k < b.levels.size(); ++k) {
        const auto& l = b.levels[k];
        if (!l.substeps) continue;
        const double m = 1.0 / double(l.substeps);
        const std::string how = l.direct == 0            ? ""
                                : l.direct == l.substeps ? ", direct"
                                                         : fmt::format(", {} direct", l.direct);
        fmt::print("  substeps of level {:2}: {:8}, {:10.0f} active particles each; per substep (device time) build "
                   "{:.3f} ms, forces {:.3f} ms{}, integrate {:.3f} ms\n",
                   k, l.substeps, double(l.active) * m, l.build * m, l.forces * m, how, l.integrate * m);
    }
}

/// Over ranks: each phase of the force evaluations per step (@p p: sums over steps; @p per: 1 / steps), slowest
/// rank and mean, named as the original code's timers (ParallelPhases), after @p what.
void print_phases(const std::string& what, const ParallelPhases& p, double per)
{
    auto both = [per](const PhaseSpread& s) { return fmt::format("{:.2f} / {:.2f}", s.max * per, s.mean * per); };
    fmt::print("{}, ms per step, slowest rank / mean: domain {}, build {}, LET making {}, communication {}, gravity {} "
               "(GPU {}), waiting {}, total {}\n",
               what, both(p.domain), both(p.build), both(p.let_make), both(p.comm), both(p.gravity),
               both(p.gravity_device), both(p.wait), both(p.total));
    std::fflush(stdout);
}

/// The summary at the end: how it ended, the rate, device time per phase, memory, energy (@p now: of the state now,
/// where it was measured) and files.
void print_summary(const Run& run, Run::Outcome outcome, const SessionStart& before, const Backend& be,
                   const Comm& comm, const ParallelPhases& phases, const std::optional<RunRecord>& now)
{
    const Simulation& sim = run.simulation();
    const std::uint64_t steps = run.session_steps();
    const double wall = run.session_seconds();
    const double per = steps ? 1.0 / static_cast<double>(steps) : 0.0;
    const PhaseTimes& t = sim.times();
    const double output_ms = (run.output_seconds() - before.output_seconds) * 1e3;
    // Between the substeps of a block step: where in the step it paused.
    const std::string where =
        sim.tick()       ? fmt::format("in step {} (t = {} to {}), after {} of its {} ticks of its length / 2^{}",
                                       run.step_count() + 1, sim.time(), sim.step_end(), sim.tick(), sim.ticks_per_step(),
                                       run.options().max_rung)
        : sim.off_grid() ? fmt::format("at t = {} (in step {}, cut short there)", sim.time(), run.log_step())
                         : fmt::format("at step {} (t = {})", run.step_count(), sim.time());
    if (outcome == Run::Outcome::stopped && run.options().checkpoint_every == RunOptions::never)
        fmt::print("stopped by {} {}; no checkpoint (--checkpoint-every never)\n",
                   g_stop == SIGTERM ? "SIGTERM" : "SIGINT", where);
    else if (outcome == Run::Outcome::stopped)
        fmt::print("stopped by {} {}: checkpoint written; continue with\n  banyan run --restart {}\n",
                   g_stop == SIGTERM ? "SIGTERM" : "SIGINT", where, run.options().out);
    else if (steps == 0)
        fmt::print("nothing to do: the run is at t = {} already (extend it with --t-end)\n", sim.time());
    if (steps) {
        fmt::print("{} steps in {:.2f} s: {:.2f} ms per step, {:.3g} particles per second\n", steps, wall,
                   wall * 1e3 * per, double(sim.total_size()) * double(steps) / std::max(wall, 1e-9));
        if (comm.parallel()) print_phases(fmt::format("{} ranks ({})", comm.size(), Comm::library()), phases, per);
        fmt::print("per step (device time; output on the host): build {:.2f} ms, forces {:.2f} ms, integrate "
                   "{:.3f} ms, energies {:.3f} ms, output {:.2f} ms\n",
                   (t.build - before.times.build) * per, (t.forces - before.times.forces) * per,
                   (t.integrate - before.times.integrate) * per, (t.energies - before.times.energies) * per,
                   output_ms * per);
        if (run.options().steps == "block") print_block_summary(sim, run.options());
    }
    const double peak = double(be.memory().peak);
    fmt::print("device memory{}: peak {}, {:.1f} bytes per particle (everything held at once, scratch included)\n",
               comm.parallel() ? " of rank 0" : "", bytes_text(peak),
               peak / double(std::max<std::size_t>(sim.size(), 1)));
    // The state the run ended or stopped in (measured now when it stopped between steps); mid-step, the last line
    // of the log, said so.
    const RunRecord& e = now ? *now : run.last_record();
    fmt::print("energy: dE/E {:+.3e} at t = {}{}, worst |dE/E| {:.3e}", e.de, e.time,
               now || e.time == sim.time() ? "" : " (the last line of the log; the step in progress is mid-way)",
               e.max_de);
    if (e.centre_distance >= 0) fmt::print("; central particles {:.4g} apart", e.centre_distance);
    fmt::print("\nfiles: {0}/snapshot_*.{2}, {0}/energy.csv, {0}/checkpoint.bin{1}\n", run.options().out,
               comm.parallel() ? " (and checkpoint.bin.rankR.a or .b of each other rank)" : "",
               to_string(run.options().format));
}

/// Refuses, before any particle is uploaded, a run whose estimated device memory exceeds the device's; prints the
/// estimate.
void check_device_memory(const RunPlan& plan, const Backend& be, const std::string& dev_text, const Comm& comm,
                         bool quiet)
{
    const DeviceInfo& dev = be.info();
    const std::size_t n = plan.size();
    // Over P ranks each holds about N / P particles; a sixteenth more for an uneven share of the work.
    const std::size_t P = static_cast<std::size_t>(comm.size());
    const std::size_t each = P > 1 ? (n + P - 1) / P + n / P / 16 : n;
    const std::size_t need =
        estimate_device_bytes(be, each, true, plan.options().steps == "block", plan.options().rung_rule == "symmetric");
    if (!quiet)
        fmt::print("device memory: about {} needed{} ({:.0f} bytes per particle), {} on the device\n",
                   bytes_text(double(need)), P > 1 ? fmt::format(" per rank ({} ranks)", P) : "",
                   double(need) / double(std::max<std::size_t>(each, 1)), bytes_text(double(dev.memory_bytes)));
    if (need > dev.memory_bytes)
        throw UsageError(fmt::format("run: {} particles need about {:.1f} GiB of device memory ({:.0f} bytes per "
                                     "particle), more than the {:.1f} GiB of {}; use fewer particles or a larger "
                                     "device",
                                     n, double(need) / (1 << 30), double(need) / double(n),
                                     double(dev.memory_bytes) / (1 << 30), dev_text));
}

/// The lines that say what a new run will do.
/// The softening as the run took it: a file's as the float it is in the file (its double form would show float's
/// rounding, "0.05000000074505806"), a value given as given.
std::string eps_text(double eps, bool from_file)
{
    return from_file ? fmt::format("{}", static_cast<float>(eps)) : fmt::format("{}", eps);
}

/// The lines that say what a new run will do.
void print_start(const RunPlan& plan, const std::string& dev_text, bool eps_from_file)
{
    const RunOptions& ro = plan.options();
    const double t_start = plan.input() ? plan.input()->time : 0.0;
    const GridPlace end = grid_place(t_start, ro.t_end, ro.dt);
    // An end off the grid of dt: the last step is cut short to end there.
    const std::string last =
        end.on_grid ? std::string()
                    : fmt::format(", the last cut to {:.6g} to end at t = {}",
                                  ro.t_end - (t_start + static_cast<double>(end.step - 1) * ro.dt), ro.t_end);
    fmt::print("banyan run: {} particles ({}{}), theta {} ({}{}), eps {}, dt {}, t = {} to {} ({} steps{}) on {}\n",
               plan.size(), ro.ic == "file" ? ro.in : ro.ic, ro.ic == "file" ? "" : fmt::format(", seed {}", ro.seed),
               ro.theta, ro.opening, ro.alpha > 0 ? fmt::format(" + relative alpha {}", ro.alpha) : "",
               eps_text(ro.eps, eps_from_file), ro.dt, t_start, ro.t_end, end.step, last, dev_text);
    auto every = [](double v) { return v == RunOptions::never ? std::string("never") : fmt::format("every {}", v); };
    std::string snapshots = every(ro.snapshot_every);
    if (!ro.snapshot_times.empty()) {
        const std::size_t shown = std::min<std::size_t>(ro.snapshot_times.size(), 6);
        snapshots = "at t = ";
        for (std::size_t k = 0; k < shown; ++k)
            snapshots += fmt::format("{}{}", k ? ", " : "", ro.snapshot_times[k]);
        if (shown < ro.snapshot_times.size()) snapshots += fmt::format(", ... ({} times)", ro.snapshot_times.size());
    }
    if (ro.snapshot_every > 0 && ro.snapshot_every != RunOptions::never &&
        !grid_place(0.0, ro.snapshot_every, ro.dt).on_grid)
        snapshots += " (steps cut short to reach each)";
    fmt::print("output: {}/ (energy.csv every {} steps, snapshot_NNNNN.{} {}, checkpoint.bin {})\n", ro.out,
               ro.log_every, to_string(ro.format), snapshots, every(ro.checkpoint_every));
    fmt::print("units: {}\n", parse_units(ro.units).describe());
    std::fflush(stdout);
}

/// Whether @p e is the device running out of memory (an allocation or the fill of a new buffer failed).
bool out_of_device_memory(const DeviceError& e)
{
    const std::string call = e.call();
    return call.find("alloc") != std::string::npos || call.find("Malloc") != std::string::npos ||
           call.find("CreateBuffer") != std::string::npos || call.find("FillBuffer") != std::string::npos;
}

} // namespace

int run_run(const std::vector<std::string>& raw_args)
{
    Options opt = run_options();
    // The parser takes --long options only: -n is --n.
    std::vector<std::string> args = raw_args;
    for (auto& a : args)
        if (a == "-n")
            a = "--n";
        else if (a.rfind("-n=", 0) == 0)
            a = "--n=" + a.substr(3);
    if (!opt.parse(args)) return 0;

    // Over several ranks (mpirun) rank 0 speaks for all; the others print only errors.
    const Comm& comm = Comm::world();
    const bool quiet = opt.has("quiet") || comm.rank() != 0;
    if (opt.has("quiet")) set_notice_handler(nullptr);
    const bool restart = opt.has("restart");
    std::optional<double> t_end;
    if (opt.has("t-end")) t_end = parse_time(opt.str("t-end"), "--t-end");

    // Everything that can be judged without the device first: the options, the input file, the output folder.
    std::optional<RunPlan> plan;
    bool eps_from_file = false;
    if (restart) {
        refuse_run_only(opt, t_end);
        prepare_output_dir(opt.str("restart"), false);
    } else {
        RunRequest wanted = parse_new_run(opt, t_end);
        eps_from_file = wanted.eps_from_file;
        plan = plan_run(std::move(wanted), comm);
        if (eps_from_file && !quiet)
            fmt::print("softening eps = {} (the particles' own, from {})\n", eps_text(plan->options().eps, true),
                       plan->options().in);
    }
    // An output folder this command created and left empty goes again when the run cannot start.
    const std::string new_out = plan ? plan->options().out : std::string();
    auto discard_empty_out = [&] {
        std::error_code ec;
        if (!new_out.empty() && std::filesystem::is_empty(new_out, ec) && !ec) std::filesystem::remove(new_out, ec);
    };

    // A restart continues on the device its checkpoint was written on (where it is bit for bit the same as an
    // uninterrupted run) unless --backend, --device or the environment choose another.
    DeviceRequest request = resolve_request(opt.device_request());
    std::string written_on;
    if (restart && !comm.parallel()) {
        written_on = checkpoint_device(opt.str("restart"));
        if (request.backend == "auto" && request.device < 0)
            if (auto same = find_device(written_on)) request = *same;
    }
    auto be = open_device(rank_device(request, comm));
    const DeviceInfo& dev = be->info();
    const std::string dev_text = fmt::format("{} #{} ({})", dev.backend, dev.index, dev.name);

    Progress progress(quiet);
    RunHooks hooks;
    progress.attach(hooks);
    // Over ranks, each line of the energy log is followed by the phases since the line before (every rank forms the
    // log, so every rank takes part in the reduction; rank 0 prints).
    std::unique_ptr<Run> run;
    ParallelTimings phases_logged;
    std::uint64_t steps_logged = 0;
    if (comm.parallel())
        hooks.on_log = [&, progress_line = hooks.on_log](const RunRecord& r) {
            if (progress_line) progress_line(r);
            if (!run || r.step <= steps_logged) return; // the first line, made while the run starts
            const ParallelTimings& now = run->simulation().times().parallel;
            const ParallelPhases p = phases_over_ranks(comm, now.since(phases_logged));
            if (!quiet)
                print_phases(fmt::format("  steps {} to {}", steps_logged + 1, r.step), p,
                             1.0 / static_cast<double>(r.step - steps_logged));
            phases_logged = now, steps_logged = r.step;
        };
    // --render: an image of each snapshot once it is on disk (rank 0, after every rank has written its part).
    const bool render = opt.has("render");
    hooks.on_file = [&](const std::string& path) {
        namespace fs = std::filesystem;
        const fs::path p(path);
        if (!render || p.filename().string().rfind("snapshot_", 0) != 0) return;
        if (comm.parallel()) comm.barrier();
        if (comm.rank() != 0) return;
        fs::path png = p;
        png.replace_extension(".png");
        write_png(png.string(), render_surface_density(read_snapshot(path, nullptr, false), RenderOptions{}));
    };

    std::size_t n = 0;
    try {
        if (restart) {
            const std::string dir = opt.str("restart");
            run = Run::resume(*be, dir, t_end, hooks, RunOutputs::files(dir), comm);
            n = run->simulation().total_size();
            if (!quiet) {
                const Simulation& sim = run->simulation();
                fmt::print(
                    "banyan run: continuing {} ({} particles) from step {} (t = {}{}) to step {} (t = {}) on {}\n", dir,
                    n, run->step_count(), sim.time(),
                    sim.tick() ? fmt::format("; {} of the next step's {} ticks done", sim.tick(), sim.ticks_per_step())
                               : "",
                    run->end_step(), run->options().t_end, dev_text);
                if (!comm.parallel() && written_on != device_label(dev))
                    fmt::print("note: the checkpoint was written on {}; a continuation is bit for bit the same as an "
                               "uninterrupted run only on the same device and backend\n",
                               written_on);
            }
        } else {
            n = plan->size();
            try {
                check_device_memory(*plan, *be, dev_text, comm, quiet);
            } catch (const UsageError&) {
                discard_empty_out();
                throw;
            }
            if (!quiet) print_start(*plan, dev_text, eps_from_file);
            run = std::make_unique<Run>(*be, std::move(*plan), hooks, comm);
        }
        if (!quiet && comm.parallel())
            fmt::print("ranks: {} ({}); {}\n", comm.size(), Comm::library(), run->simulation().transport());
    } catch (const DeviceError& e) {
        if (!out_of_device_memory(e)) throw;
        discard_empty_out();
        throw UsageError(fmt::format("run: {} particles do not fit in the {:.1f} GiB of {} ({}); use fewer particles",
                                     n, double(dev.memory_bytes) / (1 << 30), dev_text, e.what()));
    }
    const SessionStart before{run->simulation().times(), run->output_seconds()};
    progress.follow(*run);

    g_stop = 0;
    std::signal(SIGINT, on_stop_signal);
    std::signal(SIGTERM, on_stop_signal);
    const Run::Outcome outcome = run->run(&g_stop);
    std::signal(SIGINT, SIG_DFL);
    std::signal(SIGTERM, SIG_DFL);
    progress.finish();

    // Every rank takes part in the phases' reduction; rank 0 prints them. A run stopped between steps: its
    // energy now (collective, so on every rank), not the last line of the log.
    const ParallelPhases phases =
        phases_over_ranks(comm, run->simulation().times().parallel.since(before.times.parallel));
    std::optional<RunRecord> now;
    if (outcome == Run::Outcome::stopped && !run->simulation().tick()) now = run->measure();
    if (!quiet) print_summary(*run, outcome, before, *be, comm, phases, now);
    if (outcome == Run::Outcome::stopped) return g_stop == SIGTERM ? 143 : 130;
    return 0;
}

} // namespace banyan::cli
