/**
 * @file cmd_accuracy.cpp
 * @brief `banyan accuracy`: tree forces against double-precision direct summation on Plummer spheres or a user's
 *        snapshot, for a list of opening angles (the paper's Figs. AccAccel and AccAccel2, section 4.2.1), with the
 *        time of each evaluation beside its errors: the error-against-time report a user picks a setting from.
 *
 * For each N one Plummer sphere and one tree; the reference is direct summation in double precision on the device
 * for a random sample of K targets (all particles when N <= K); for each theta one walk. Printed per (N, theta):
 * median, 90th, 99th percentile and maximum of |a_tree - a_direct| / |a_direct| over the sample, the mean numbers
 * of particle-particle and particle-cell interactions over all particles, and the time of one force evaluation from
 * unsorted particles as `bench forces` measures it (bench::time_forces).
 */
#include "apps/bench/bench_util.hpp"
#include "apps/cli/cli.hpp"
#include "core/error.hpp"

#include "core/gravity/forces.hpp"
#include "core/gravity/precision.hpp"
#include "core/models/initial_conditions.hpp"
#include "core/models/plummer.hpp"
#include "core/numbers.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <numeric>
#include <random>
#include <sstream>

namespace banyan::cli {

namespace {

/// Value at fraction @p q (0..1) of the sorted @p v (nearest rank).
double at_fraction(const std::vector<double>& v, double q)
{
    if (v.empty()) return 0;
    const auto i = static_cast<std::size_t>(std::llround(q * static_cast<double>(v.size() - 1)));
    return v[std::min(i, v.size() - 1)];
}

/// The defaults of --n and --sample for a device of one kind: on a CPU the GPU's take minutes for one row.
struct AccuracyDefaults {
    std::vector<std::size_t> sizes;
    long long sample;
    std::string sizes_text() const { return fmt::format("{}", fmt::join(sizes, ",")); }
};
const AccuracyDefaults gpu_defaults{{32768, 131072, 1048576}, 16384};
const AccuracyDefaults cpu_defaults{{16384, 65536}, 2048};

} // namespace

int run_accuracy(const std::vector<std::string>& args)
{
    Options opt("accuracy",
                "Tree forces against direct summation in double precision on a model (N-body units, G = 1),\n"
                "as in the paper's accuracy figures: for each N and theta, the median, 90th and 99th percentile and\n"
                "the maximum of the relative acceleration error |a_tree - a_direct| / |a_direct| over K random\n"
                "targets (all particles when N <= K), and the mean particle-particle (pp) and particle-cell (pc)\n"
                "interactions per particle, and the time of one force evaluation (ms: build + multipoles + walk\n"
                "from unsorted particles, median of --reps, as `bench forces` measures it): the error-against-time\n"
                "report, one row per setting (opening criterion and theta). The paper uses eps = 0. The particles:\n"
                "a model (--model plummer, hernquist or disc, of each --n) or a snapshot of yours (--in FILE: HDF5 or\n"
                "tipsy).\n\n"
                "examples:\n"
                "  banyan accuracy --n 32768,131072 --theta 0.5,0.75\n"
                "  banyan accuracy --in snap.hdf5 --theta 0.3,0.5,0.75 --csv et.csv\n"
                "  banyan accuracy --model hernquist --opening paper,bmax --theta 1 --alpha 0.001,0.008");
    opt.device_options();
    opt.value("n", "N1,N2,..",
              fmt::format("particle numbers (default: {} on a GPU, {} on a CPU)", gpu_defaults.sizes_text(),
                          cpu_defaults.sizes_text()));
    opt.value("theta", "T1,T2,..", "opening angles in [0, 1]", "0.2,0.3,0.4,0.5,0.6,0.7,0.8");
    opt.value("opening", "C1,C2", "opening criteria: paper (d > l / theta + delta), bmax (d > bmax / theta)", "paper");
    opt.value("alpha", "A1,A2,..",
              "also the relative criterion on top of each (criterion, theta): accept a cell when "
              "M l^3 / d^5 <= alpha |a|, |a| from an untimed walk at theta 0.5 first (as a "
              "simulation has it from its last step); one row per alpha");
    opt.value("eps", "E", "Plummer softening, >= 0", "0");
    opt.value("sample", "K",
              fmt::format("targets of the direct reference per N (random, without repeats; default: {} on a GPU, {} "
                          "on a CPU)",
                          gpu_defaults.sample, cpu_defaults.sample));
    opt.value("seed", "S", "seed of the Plummer spheres and of the sample", "1");
    opt.value("model", "M", "the particles: plummer, hernquist (cuspy) or disc (flattened), N-body units", "plummer");
    opt.value("in", "FILE", "the particles of a snapshot (HDF5 or tipsy) instead of a model (then no --n)");
    opt.value("reps", "R",
              "timed evaluations per row (build + multipoles + walk from unsorted particles, median of "
              "device times; 0: no timing)",
              "3");
    opt.value("csv", "FILE", "also write the table as CSV (temporary name, then renamed)");
    if (!opt.parse(args)) return 0;

    if (opt.has("in") && opt.has("n")) throw UsageError("accuracy: give either --n or --in, not both");
    if (opt.has("in") && opt.has("model")) throw UsageError("accuracy: give either --model or --in, not both");
    const std::string model = opt.str("model");
    make_model(model, 1, 1); // refuses an unknown name before any work
    auto size_list = [](const std::vector<long long>& given) {
        std::vector<std::size_t> sizes;
        for (long long v : given) {
            if (v < 2 || v > (1ll << 28))
                throw UsageError(fmt::format("accuracy: --n values must be in [2, 2^28], got {}", v));
            sizes.push_back(static_cast<std::size_t>(v));
        }
        return sizes;
    };
    std::vector<std::size_t> sizes = opt.has("n") ? size_list(opt.integer_list("n")) : std::vector<std::size_t>{};
    const std::vector<double> thetas = opt.number_list("theta");
    for (double t : thetas)
        if (!opening_angle_ok(t))
            throw UsageError(fmt::format("accuracy: --theta values must be in {}, got {}", opening_angle_range, t));
    const std::vector<Opening> openings = bench::opening_list(opt.str("opening"), "accuracy: --opening");
    std::vector<double> alphas{0.0};
    if (opt.has("alpha")) {
        alphas = opt.number_list("alpha");
        for (double a : alphas)
            if (!(a > 0)) throw UsageError(fmt::format("accuracy: --alpha values must be > 0, got {}", a));
    }
    const double eps = opt.number("eps");
    // The range `banyan run` allows; the softening against the particles' extent is judged with them below.
    if (!(eps >= 0 && eps < 1e30)) throw UsageError(fmt::format("accuracy: --eps must be in [0, 1e30), got {}", eps));
    const long long k_given = opt.has("sample") ? opt.integer("sample") : 1;
    if (k_given < 1) throw UsageError(fmt::format("accuracy: --sample must be at least 1, got {}", k_given));
    const long long seed_given = opt.integer("seed");
    if (seed_given < 0) throw UsageError(fmt::format("accuracy: --seed must be 0 or more, got {}", seed_given));
    const auto seed = static_cast<std::uint64_t>(seed_given);
    const int reps = opt.integer_in("reps", 0, 1000);
    // --in: one particle set, in internal units (eps with them); relative errors and times do not depend on units.
    double eps_walk = eps;
    const std::vector<bn_f4> file =
        opt.has("in") ? bench::file_particles(opt.str("in"), eps_walk) : std::vector<bn_f4>{};
    if (opt.has("in")) sizes = {file.size()};

    auto be = open_device(opt.device_request());
    const DeviceInfo& d = be->info();
    // Defaults sized to the device: a GPU's take minutes for one row on a CPU.
    const AccuracyDefaults& fit = d.gpu ? gpu_defaults : cpu_defaults;
    if (!opt.has("in") && !opt.has("n")) sizes = fit.sizes;
    const long long k_opt = opt.has("sample") ? k_given : fit.sample;
    fmt::print("device: {} #{}  {}  ({}); {}, eps {}, N_leaf {}, N_crit {}, reference: double-precision direct "
               "summation\n\n",
               d.backend, d.index, d.name, d.gpu ? "GPU" : "CPU", opt.has("in") ? opt.str("in") : model, eps,
               BANYAN_N_LEAF, BANYAN_N_CRIT);
    bench::Table table({bench::right("N", 8), bench::right("opening", 7), bench::right("theta", 6),
                        bench::right("alpha", 8), bench::right("sample", 7), bench::right("ms", 9),
                        bench::right("median", 10), bench::right("90%", 10), bench::right("99%", 10),
                        bench::right("max", 10), bench::right("pp", 8), bench::left("pc", 0)});
    table.print_header();
    std::ostringstream csv;
    csv << "n,opening,theta,alpha,eps,sample,ms,median,p90,p99,max,pp_mean,pc_mean\n";

    Octree tree(*be);
    TreeForces forces(*be);
    for (std::size_t n : sizes) {
        std::vector<bn_f4> p = opt.has("in") ? file : make_model(model, n, seed).pos;
        if (!opt.has("in")) {
            // As a file's particles (bench::file_particles) and a run's: a softening single precision can serve
            // against their extent, and internal units that bring the larger of the two near 1 (a power of two:
            // relative errors and interaction counts are those of the particles as they are).
            check_precision_range(p, eps, "accuracy: --eps");
            const InternalUnits units = InternalUnits::for_system(p, eps);
            units.to_internal(p);
            eps_walk = units.length_to_internal(eps);
        }
        // The sample: K distinct random particles (all when N <= K), in increasing order.
        std::vector<bn_u32> targets(n);
        std::iota(targets.begin(), targets.end(), 0u);
        const std::size_t k = std::min<std::size_t>(n, static_cast<std::size_t>(k_opt));
        if (k < n) {
            std::mt19937_64 g(seed * 7919 + n);
            for (std::size_t i = 0; i < k; ++i)
                std::swap(targets[i], targets[i + g() % (n - i)]);
            targets.resize(k);
            std::sort(targets.begin(), targets.end());
        }
        auto pos = be->upload<bn_f4>(p, "accuracy.pos");
        auto tdev = be->upload<bn_u32>(targets, "accuracy.targets");
        auto ref_dev = be->alloc<double>(4 * k, "accuracy.ref");
        // Said before it starts: on a slow device the reference of a large N takes minutes.
        fmt::print("  (N = {}: the direct reference on {} targets ...", n, k);
        std::fflush(stdout);
        const auto t0 = std::chrono::steady_clock::now();
        direct_forces_f64_targets(*be, pos, n, tdev, k, eps_walk, ref_dev);
        const std::vector<double> ref = ref_dev.download(4 * k);
        const double direct_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        fmt::print(" {:.2f} s)\n", direct_s);

        auto acc_dev = be->alloc<bn_f4>(n, "accuracy.acc");
        for (const Opening opening : openings) {
            tree.set_opening(opening);
            tree.set_particles(p);
            tree.build();
            const Buffer<bn_f4> acc_old =
                alphas.back() > 0 ? bench::previous_accelerations(*be, p, opening, static_cast<float>(eps_walk))
                                  : Buffer<bn_f4>{};
            for (double theta : thetas)
                for (double alpha : alphas) {
                    forces.set_previous_accelerations(alpha > 0 ? &acc_old : nullptr);
                    forces.compute(tree, {static_cast<float>(theta), static_cast<float>(alpha), opening},
                                   static_cast<float>(eps_walk));
                    forces.to_input_order(tree, acc_dev);
                    const std::vector<bn_f4> acc = acc_dev.download(n);
                    std::vector<double> err(k);
                    for (std::size_t s = 0; s < k; ++s) {
                        const bn_f4 a = acc[targets[s]];
                        const double* r = &ref[4 * s];
                        const double dx = a.x - r[0], dy = a.y - r[1], dz = a.z - r[2];
                        err[s] =
                            std::sqrt(dx * dx + dy * dy + dz * dz) / std::sqrt(r[0] * r[0] + r[1] * r[1] + r[2] * r[2]);
                    }
                    std::sort(err.begin(), err.end());
                    const double med = at_fraction(err, 0.5), p90 = at_fraction(err, 0.9);
                    const double p99 = at_fraction(err, 0.99), mx = err.back();
                    const double pp = double(forces.totals().pp) / double(n);
                    const double pc = double(forces.totals().pc) / double(n);
                    double ms = 0; // one evaluation, as bench forces times it (a tree and walk of its own)
                    if (reps > 0) {
                        const bench::ForceRow r =
                            bench::time_forces(*be, p, theta, opening, static_cast<float>(alpha),
                                               alpha > 0 ? &acc_old : nullptr, static_cast<float>(eps_walk), 1, reps);
                        if (!r.error.empty())
                            throw NumericalError(fmt::format("accuracy: at theta {}: {}", theta, r.error));
                        ms = r.total_ms;
                    }
                    auto e = [](double v) { return fmt::format("{:.3e}", v); };
                    table.print_row({fmt::format("{}", n), to_string(opening), fmt::format("{:.2f}", theta),
                                     alpha > 0 ? fmt::format("{:.2g}", alpha) : "-", fmt::format("{}", k),
                                     reps > 0 ? fmt::format("{:.3f}", ms) : "-", e(med), e(p90), e(p99), e(mx),
                                     fmt::format("{:.1f}", pp), fmt::format("{:.1f}", pc)});
                    csv << fmt::format("{},{},{},{},{},{},{},{:.6e},{:.6e},{:.6e},{:.6e},{:.3f},{:.3f}\n", n,
                                       to_string(opening), theta, alpha, eps, k,
                                       reps > 0 ? fmt::format("{:.4f}", ms) : "", med, p90, p99, mx, pp, pc);
                }
        }
    }
    if (opt.has("csv")) {
        fmt::print("\n");
        bench::write_report(opt.str("csv"), csv.str());
    }
    return 0;
}

} // namespace banyan::cli
