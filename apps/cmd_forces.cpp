/**
 * @file cmd_forces.cpp
 * @brief `banyan forces`: one force evaluation of the particles of a tipsy file, by the tree walk or by direct
 *        summation, written as a float32 .npy array (N, 4) = (ax, ay, az, potential) in the file's particle order.
 */
#include "apps/cli.hpp"
#include "core/parallel/comm.hpp"
#include "core/error.hpp"

#include "core/gravity/direct.hpp"
#include "core/gravity/forces.hpp"
#include "core/gravity/precision.hpp"
#include "core/files/npy.hpp"
#include "core/files/tipsy.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>

namespace banyan::cli {

int run_forces(const std::vector<std::string>& args)
{
    Options opt("forces",
                "One force evaluation of the particles in a tipsy file (standard big-endian or native little-endian;\n"
                "gas, dark and star particles alike): accelerations and potentials by the tree walk (paper sections\n"
                "2.2, 3.2, 3.3; monopole + quadrupole cells, opening test d > l / theta + delta) or, with --direct,\n"
                "by direct summation in single precision. Writes a float32 .npy array of shape (N, 4): ax, ay, az,\n"
                "potential, in the order of the particles in the file (G = 1, Plummer softening eps).");
    opt.device_options();
    opt.value("in", "FILE", "tipsy file to read");
    opt.value("out", "OUT.npy", "where to write the (N, 4) float32 array (temporary name, then renamed)");
    opt.value("theta", "T", "opening angle, 0 <= T <= 1 (0 opens every cell)", "0.75");
    opt.value("eps", "E", "Plummer softening length, >= 0 (default: the softening the file's dark and star "
                          "particles carry, when they all carry the same one)");
    opt.flag("direct", "direct O(N^2) summation instead of the tree");
    if (!opt.parse(args)) return 0;

    if (!opt.has("in")) throw UsageError("forces: --in FILE is required");
    if (!opt.has("out")) throw UsageError("forces: --out OUT.npy is required");
    const double theta = opt.number("theta");
    if (!(theta >= 0.0 && theta <= 1.0))
        throw UsageError(fmt::format("forces: --theta must be in [0, 1], got {}", theta));
    const bool direct = opt.has("direct");

    const std::string in = opt.str("in");
    const Snapshot s = read_tipsy(in);
    check_particles(s, in);
    const double eps = opt.has("eps") ? opt.number("eps") : file_softening(s, in, "forces", true);
    if (!(eps >= 0.0)) throw UsageError(fmt::format("forces: --eps must be >= 0, got {}", eps));
    const std::size_t n = s.size();
    std::vector<bn_f4> pos(n);
    for (std::size_t i = 0; i < n; ++i) pos[i] = {s.pos[3 * i], s.pos[3 * i + 1], s.pos[3 * i + 2], s.mass[i]};
    check_precision_range(pos, eps, in);

    if (Comm::world().parallel())
        throw UsageError("forces: runs on one rank for now (each rank would write the whole output); start it "
                         "without mpirun or with mpirun -n 1. `banyan run` and `banyan bench forces` run on many");
    auto be = open_device(opt.device_request());
    const auto t0 = std::chrono::steady_clock::now();
    std::vector<bn_f4> acc;
    InteractionTotals totals;
    std::size_t out_of_range = 0;
    if (direct) {
        const InternalUnits units = InternalUnits::for_system(pos); // as tree_forces does
        std::vector<bn_f4> internal = pos;
        units.to_internal(internal);
        auto p = be->upload<bn_f4>(internal, "forces.pos");
        auto a = be->alloc<bn_f4>(n, "forces.acc");
        direct_forces(*be, p, n, static_cast<float>(units.length_to_internal(eps)), a);
        acc = a.download(n);
        out_of_range = units.forces_from_internal(acc);
    } else {
        ForceResult r = tree_forces(*be, pos, static_cast<float>(theta), static_cast<float>(eps));
        acc = std::move(r.acc);
        totals = r.totals;
        out_of_range = r.out_of_range;
    }
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

    // Results that left float's range are never written: a file of NaN would pass for results downstream.
    if (out_of_range)
        throw NumericalError(fmt::format(
            "forces: {} accelerations or potentials lie beyond float's range (1.2e-38 .. 3.4e38) in the units of {}; "
            "nothing was written to {}. Give the particles in units where G M / r^2 and G M / r fit a float",
            out_of_range, in, opt.str("out")));
    if (const std::size_t first = first_non_finite(acc); first < n) {
        const auto bad =
            std::count_if(acc.begin(), acc.end(), [](const bn_f4& a) { return first_non_finite({&a, 1}) == 0; });
        throw NumericalError(fmt::format(
            "forces: {} of {} particles got non-finite results (the first, particle {}: {}, {}, {}, potential {}); "
            "nothing was written to {}. Nearly coincident particles with --eps 0? (README, \"Limits\")",
            bad, n, first, acc[first].x, acc[first].y, acc[first].z, acc[first].w, opt.str("out")));
    }
    std::vector<float> out(4 * n);
    for (std::size_t i = 0; i < n; ++i)
        out[4 * i] = acc[i].x, out[4 * i + 1] = acc[i].y, out[4 * i + 2] = acc[i].z, out[4 * i + 3] = acc[i].w;
    write_npy(opt.str("out"), out, n, 4);

    const DeviceInfo& d = be->info();
    if (direct)
        fmt::print("{} particles, direct summation, eps {}: {:.3f} s on {} #{} ({})\n", n, float(eps), seconds,
                   to_string(d.backend), d.index, d.name);
    else
        fmt::print("{} particles, tree, theta {}, eps {}: {:.3f} s on {} #{} ({}); per particle {:.1f} "
                   "particle-particle and {:.1f} particle-cell interactions\n",
                   n, theta, float(eps), seconds, to_string(d.backend), d.index, d.name,
                   double(totals.pp) / double(n), double(totals.pc) / double(n));
    fmt::print("wrote {} ({} x 4 float32: ax, ay, az, potential)\n", opt.str("out"), n);
    return 0;
}

} // namespace banyan::cli
