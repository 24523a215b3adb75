/**
 * @file cmd_galaxy.cpp
 * @brief `banyan bench galaxy`: an isolated galaxy (`--ic galaxy`) run for a number of disc rotations at the scale
 *        length, and what stays put in equilibrium: the half-mass radii of halo, disc and bulge, the disc's
 *        thickness, the circular speed from the forces against the model's (1 to 4 R_d) and the Toomre Q, at the
 *        start and the end, against the targets of docs/benchmarks.md ("Galaxies in equilibrium").
 */
#include "apps/bench/bench_util.hpp"
#include "apps/cli/cli.hpp"
#include "apps/cli/progress.hpp"
#include "core/error.hpp"
#include "core/simulation/run.hpp"

#include <fmt/format.h>

#include <chrono>
#include <cmath>
#include <numbers>

namespace banyan::cli {

int run_bench_galaxy(const std::vector<std::string>& args)
{
    Options opt("bench galaxy",
                "An isolated galaxy in equilibrium (--ic galaxy; README, \"Galaxies\") run for --rotations disc\n"
                "rotation periods at the scale length R_d, shared steps of --dt. Prints the half-mass radii of halo,\n"
                "disc and bulge, the disc's thickness (median |z| at 1 to 3 R_d), the worst circular speed from the\n"
                "forces over the model's (bins of R_d / 2 from 1 to 4 R_d) and the Toomre Q at the radius it was\n"
                "set, at the start and the end; and whether the targets hold (radii 3%, thickness 15%, circular\n"
                "speed 2%, Q 10%). Model units: kpc, 1e10 Msun, G = 1.\n\n"
                "examples:\n"
                "  banyan bench galaxy\n"
                "  banyan bench galaxy --galaxy m31 --n 1048576 --rotations 3");
    opt.device_options();
    // Defaults sized to the device: the GPU's run for hours on a CPU.
    opt.value("n", "N", "particles (default: 262144 on a GPU; 16384 on a CPU, a short run too few for the targets)");
    add_galaxy_model_options(opt);
    opt.value("rotations", "K", "disc rotation periods at R_d to run (default: 5 on a GPU, 0.5 on a CPU)");
    opt.value("dt", "DT", "time step", "1/64");
    opt.value("eps", "E", "softening (kpc)", "0.05");
    opt.value("theta", "T", "opening angle", "0.75");
    opt.value("seed", "S", "seed", "1");
    if (!opt.parse(args)) return 0;

    RunOptions o;
    o.ic = "galaxy";
    // Judged before the device is opened; the defaults, which depend on it, after.
    const long long n_given = opt.has("n") ? opt.integer_in("n", 16, 0x7FFFFFFF) : 0;
    o.seed = static_cast<std::uint64_t>(opt.integer("seed"));
    o.galaxy = galaxy_model_option_values(opt, "bench galaxy");
    o.dt = parse_time(opt.str("dt"), "--dt");
    o.eps = opt.number("eps");
    o.theta = opt.number("theta");
    o.log_every = 1u << 30;
    const double rotations_given = opt.has("rotations") ? opt.number("rotations") : 1;
    if (!(rotations_given > 0 && rotations_given < 1e4))
        throw UsageError("bench galaxy: --rotations must be in (0, 10^4)");

    auto be = open_device(opt.device_request());
    const DeviceInfo& i = be->info();
    o.n = static_cast<std::uint64_t>(opt.has("n") ? n_given : i.gpu ? 262144 : 16384);
    const double rotations = opt.has("rotations") ? rotations_given : i.gpu ? 5 : 0.5;
    const GalaxyGenerator gen(galaxy_setup(o));
    const GalaxyProfile& model = gen.profile(0);
    const double rd = model.scale_length();
    const double period = 2 * std::numbers::pi * rd / model.circular_speed(rd);
    o.t_end = rotations * period;
    RunRequest request(o);
    request.outputs = RunOutputs::none();
    fmt::print("device: {} #{}  {}  ({})\n", i.backend, i.index, i.name, i.version);
    fmt::print("galaxy {}: N {}, types 1/2/3/5 {}/{}/{}/{}, R_d {} kpc, rotation period at R_d {:.4g} (x {} = t "
               "{:.4g}), dt {}, eps {}, theta {}\n",
               opt.str("galaxy"), o.n, gen.type_counts()[0], gen.type_counts()[1], gen.type_counts()[2],
               gen.type_counts()[3], rd, period, rotations, o.t_end, o.dt, o.eps, o.theta);

    std::fflush(stdout);
    // A line at least every 10 s while it runs (a live line on a terminal): a slow device is never silent for minutes.
    Progress progress(false);
    RunHooks hooks;
    progress.attach(hooks);
    Run run(*be, plan_run(std::move(request)), hooks);
    auto measure = [&]() {
        std::vector<bn_f4> pos, vel, acc;
        run.simulation().input_order(pos, vel, acc);
        return measure_galaxy(gen, pos, vel, acc);
    };
    const GalaxyMeasures a = measure();
    const auto t0 = std::chrono::steady_clock::now();
    progress.follow(run);
    run.run();
    progress.finish();
    const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const GalaxyMeasures b = measure();

    bench::Table table({bench::left("quantity", 26), bench::right("model", 9), bench::right("start", 9),
                        bench::right("end", 9), bench::right("change", 8), bench::right("target", 8),
                        bench::left("holds", 5)});
    table.print_header();
    int failed = 0;
    bool unmeasured = false;
    auto row = [&](const char* name, double model_value, double start, double end, double change, double limit) {
        if (!std::isfinite(start) || !std::isfinite(end)) { // too few particles to measure it (GalaxyMeasures)
            unmeasured = true;
            table.print_row({name, model_value > 0 ? fmt::format("{:.4g}", model_value) : "-", "n/a", "n/a", "n/a",
                             fmt::format("{:.0f}%", 100 * limit), "n/a"});
            return;
        }
        const bool ok = std::fabs(change) <= limit;
        failed += ok ? 0 : 1;
        table.print_row({name, model_value > 0 ? fmt::format("{:.4g}", model_value) : "-", fmt::format("{:.4g}", start),
                         fmt::format("{:.4g}", end), fmt::format("{:+.2f}%", 100 * change),
                         fmt::format("{:.0f}%", 100 * limit), ok ? "yes" : "NO"});
    };
    auto rel = [](double x, double y) { return y / x - 1; };
    row("halo half-mass radius", model.half_mass_radius(GalaxyProfile::halo), a.halo_half_mass, b.halo_half_mass,
        rel(a.halo_half_mass, b.halo_half_mass), 0.03);
    row("disc half-mass radius", model.disc_half_mass_radius(), a.disc_half_mass, b.disc_half_mass,
        rel(a.disc_half_mass, b.disc_half_mass), 0.03);
    if (gen.type_counts()[2])
        row("bulge half-mass radius", model.half_mass_radius(GalaxyProfile::bulge), a.bulge_half_mass,
            b.bulge_half_mass, rel(a.bulge_half_mass, b.bulge_half_mass), 0.03);
    row("disc thickness", 0, a.thickness, b.thickness, rel(a.thickness, b.thickness), 0.15);
    row("worst v_c / model, start", 1, a.vc_worst, a.vc_worst, a.vc_worst - 1, 0.02);
    row("worst v_c / model, end", 1, b.vc_worst, b.vc_worst, b.vc_worst - 1, 0.02);
    const double q = model.toomre_q(model.q_radius());
    row("Toomre Q at R_q, start", q, a.toomre_q, a.toomre_q, rel(q, a.toomre_q), 0.10);
    row("Toomre Q at R_q, end", q, b.toomre_q, b.toomre_q, rel(q, b.toomre_q), 0.10);
    const RunRecord& last = run.record();
    fmt::print("wall {:.2f} s for {} steps ({:.3f} ms a step); energy: |dE/E| at the end {:.2e}, largest {:.2e}\n",
               wall, run.session_steps(), 1e3 * wall / static_cast<double>(run.session_steps()), std::fabs(last.de),
               last.max_de);
    if (unmeasured)
        fmt::print(
            "n/a: too few disc particles to measure it (fewer than {} in a radial bin near the midplane or in the "
            "annulus of Q); more particles (--n) measure it\n",
            GalaxyMeasures::measured_bin);
    fmt::print("{} of the targets {}{}\n", failed ? "some" : "all", failed ? "missed" : "hold",
               unmeasured ? " that could be measured" : "");
    return 0;
}

} // namespace banyan::cli
