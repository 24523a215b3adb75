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

#include "core/files/atomic_file.hpp"
#include "core/gravity/forces.hpp"
#include "core/gravity/precision.hpp"
#include "core/models/initial_conditions.hpp"
#include "core/models/plummer.hpp"
#include "core/numbers.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <numeric>
#include <random>
#include <sstream>

namespace banyan::cli {

namespace {

/// Comma-separated numbers, e.g. "0.2,0.3,0.5".
std::vector<double> number_list(const std::string& s, const std::string& what)
{
    std::vector<double> out;
    std::size_t pos = 0;
    while (pos <= s.size()) {
        const std::size_t comma = s.find(',', pos);
        const std::string item = s.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
        const auto v = parse_decimal(item);
        if (!v) throw UsageError(fmt::format("accuracy: --{} expects comma-separated numbers, got '{}'", what, s));
        out.push_back(*v);
        if (comma == std::string::npos) break;
        pos = comma + 1;
    }
    return out;
}

/// Value at fraction @p q (0..1) of the sorted @p v (nearest rank).
double at_fraction(const std::vector<double>& v, double q)
{
    if (v.empty()) return 0;
    const auto i = static_cast<std::size_t>(std::llround(q * static_cast<double>(v.size() - 1)));
    return v[std::min(i, v.size() - 1)];
}

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
    opt.value("n", "N1,N2,..", "particle numbers", "32768,131072,1048576");
    opt.value("theta", "T1,T2,..", "opening angles in [0, 1]", "0.2,0.3,0.4,0.5,0.6,0.7,0.8");
    opt.value("opening", "C1,C2", "opening criteria: paper (d > l / theta + delta), bmax (d > bmax / theta)", "paper");
    opt.value("alpha", "A1,A2,..",
              "also the relative criterion on top of each (criterion, theta): accept a cell when "
              "M l^3 / d^5 <= alpha |a|, |a| from an untimed walk at theta 0.5 first (as a "
              "simulation has it from its last step); one row per alpha");
    opt.value("eps", "E", "Plummer softening, >= 0", "0");
    opt.value("sample", "K", "targets of the direct reference per N (random, without repeats)", "16384");
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
    std::vector<std::size_t> sizes;
    for (long long v : opt.integer_list("n")) {
        if (v < 2 || v > (1ll << 28))
            throw UsageError(fmt::format("accuracy: --n values must be in [2, 2^28], got {}", v));
        sizes.push_back(static_cast<std::size_t>(v));
    }
    const std::vector<double> thetas = number_list(opt.str("theta"), "theta");
    for (double t : thetas)
        if (!opening_angle_ok(t))
            throw UsageError(fmt::format("accuracy: --theta values must be in {}, got {}", opening_angle_range, t));
    const std::vector<Opening> openings = bench::opening_list(opt.str("opening"), "accuracy: --opening");
    std::vector<double> alphas{0.0};
    if (opt.has("alpha")) {
        alphas = number_list(opt.str("alpha"), "alpha");
        for (double a : alphas)
            if (!(a > 0)) throw UsageError(fmt::format("accuracy: --alpha values must be > 0, got {}", a));
    }
    const double eps = opt.number("eps");
    // The range `banyan run` allows; the softening against the particles' extent is judged with them below.
    if (!(eps >= 0 && eps < 1e30)) throw UsageError(fmt::format("accuracy: --eps must be in [0, 1e30), got {}", eps));
    const long long k_opt = opt.integer("sample");
    if (k_opt < 1) throw UsageError(fmt::format("accuracy: --sample must be at least 1, got {}", k_opt));
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
    fmt::print("device: {} #{}  {}  ({}); {}, eps {}, N_leaf {}, N_crit {}, reference: double-precision direct "
               "summation\n\n",
               d.backend, d.index, d.name, d.gpu ? "GPU" : "CPU", opt.has("in") ? opt.str("in") : model, eps,
               BANYAN_N_LEAF, BANYAN_N_CRIT);
    bench::Table table({{"N", 8, true},
                        {"opening", 7, true},
                        {"theta", 6, true},
                        {"alpha", 8, true},
                        {"sample", 7, true},
                        {"ms", 9, true},
                        {"median", 10, true},
                        {"90%", 10, true},
                        {"99%", 10, true},
                        {"max", 10, true},
                        {"pp", 8, true},
                        {"pc", 0}});
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
        const auto t0 = std::chrono::steady_clock::now();
        direct_forces_f64_targets(*be, pos, n, tdev, k, eps_walk, ref_dev);
        const std::vector<double> ref = ref_dev.download(4 * k);
        const double direct_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

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
        fmt::print("  (N = {}: direct reference on {} targets took {:.2f} s)\n", n, k, direct_s);
    }
    if (opt.has("csv")) {
        const std::string text = csv.str();
        write_file_atomically(opt.str("csv"), [&](std::ostream& f) { f << text; });
        fmt::print("\nwrote {}\n", opt.str("csv"));
    }
    return 0;
}

} // namespace banyan::cli
