/**
 * @file cmd_forces.cpp
 * @brief `banyan forces`: one force evaluation of the particles of a snapshot file (HDF5 or tipsy), by the tree
 *        walk or by direct summation, written as a float32 .npy array (N, 4) = (ax, ay, az, potential) in the file's
 * particle order; under mpirun over all ranks (each takes a slice of the particles, the tree walk's ranks read only
 * their rows of the input, the file is written by all together).
 */
#include "apps/cli/cli.hpp"
#include "core/error.hpp"

#include "core/gravity/direct.hpp"
#include "core/gravity/forces.hpp"
#include "core/gravity/precision.hpp"
#include "core/files/snapshot_file.hpp"
#include "core/parallel/comm.hpp"
#include "core/parallel/input.hpp"
#include "core/parallel/parallel_files.hpp"
#include "core/parallel/parallel_forces.hpp"
#include "core/parallel/rank_device.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <numeric>

namespace banyan::cli {

int run_forces(const std::vector<std::string>& args)
{
    Options opt("forces",
                "One force evaluation of the particles in a snapshot file, HDF5 (GADGET-2/4, SWIFT layout; positions\n"
                "and masses, velocities not needed) or tipsy (either byte order), detected from its first bytes (all\n"
                "particle types alike): accelerations and potentials by the tree walk (paper sections\n"
                "2.2, 3.2, 3.3; monopole + quadrupole cells, opening test d > l / theta + delta) or, with --direct,\n"
                "by direct summation in single precision. Writes a float32 .npy array of shape (N, 4): ax, ay, az,\n"
                "potential, in the order of the particles in the file (G = 1, Plummer softening eps; for HDF5 the\n"
                "types in the order 0, 1, 2, 3, 5, 4). Under mpirun the ranks share the particles and write the file\n"
                "together.\n\n"
                "examples:\n"
                "  banyan forces --in snap.hdf5 --theta 0.5 --eps 0.01 --out acc.npy\n"
                "  banyan forces --in snap.tipsy --direct --out acc-direct.npy\n"
                "  mpirun -n 4 banyan forces --in big.hdf5 --out acc.npy");
    opt.device_options();
    opt.value("in", "FILE",
              fmt::format("snapshot file to read: {} (detected)",
                          snapshot_format_list([](const SnapshotFormatInfo& f) { return f.title; })));
    opt.value("out", "OUT.npy", "where to write the (N, 4) float32 array (temporary name, then renamed)");
    opt.value("theta", "T", "opening angle, 0 <= T <= 1 (0 opens every cell)", "0.75");
    opt.value("eps", "E",
              "Plummer softening length, >= 0 (default: the softening the file's dark and star "
              "particles carry, when they all carry the same one)");
    opt.flag("direct", "direct O(N^2) summation instead of the tree");
    if (!opt.parse(args)) return 0;

    if (!opt.has("in")) throw UsageError("forces: --in FILE is required");
    if (!opt.has("out")) throw UsageError("forces: --out OUT.npy is required");
    const double theta = opt.number("theta");
    if (!opening_angle_ok(theta))
        throw UsageError(fmt::format("forces: --theta must be in {}, got {}", opening_angle_range, theta));
    const bool direct = opt.has("direct");

    // Under mpirun each rank takes its slice of the particles [r N / P, (r + 1) N / P); the tree walk moves them
    // between ranks (ParallelForces). The tree walk's ranks read only their rows of the file; the direct sum takes
    // all particles as sources, so its ranks read the whole. One rank is the same code with one slice.
    const Comm& comm = Comm::world();
    const bool root = comm.rank() == 0;
    const std::string in = opt.str("in");
    const std::size_t P = static_cast<std::size_t>(comm.size()), r = static_cast<std::size_t>(comm.rank());
    const bool rows = comm.parallel() && !direct;
    // Positions and masses are enough: no velocities needed.
    InputFile f = read_input_file(
        in, {.command = "forces", .velocities = false, .by_rows = rows, .eps_from_file = !opt.has("eps")}, comm);
    const std::size_t n = f.whole.size();
    const std::size_t first = rows ? f.first_row : r * n / P, count = rows ? f.rows.size() : (r + 1) * n / P - first;
    const double eps = f.softening ? *f.softening : opt.number("eps");
    if (f.softening && root) fmt::print("softening eps = {} (the particles' own, from {})\n", eps, in);
    if (!(eps >= 0.0)) throw UsageError(fmt::format("forces: --eps must be >= 0, got {}", eps));
    std::vector<bn_f4> pos = std::move(f.particles.pos);
    check_initial_particles(&f.rows, pos, f.first_row, n, eps, in, rows, comm);
    f = InputFile();
    // In internal units (precision.hpp), the same on every rank: they come from all particles.
    const InternalUnits units = rows ? system_units(pos, eps, comm) : InternalUnits::for_system(pos, eps);
    units.to_internal(pos);
    const float eps_internal = static_cast<float>(units.length_to_internal(eps));
    // Over ranks the tree walk's ranks hold rows only: they look after the decomposition, below.
    if (unsoftened(eps_internal) && !rows) check_coincident(pos, {}, in);

    auto be = open_device(rank_device(opt.device_request(), comm));
    comm.barrier();
    const auto t0 = std::chrono::steady_clock::now();
    std::vector<bn_f4> acc;         // this rank's particles, ids[i] for acc[i]
    std::vector<std::uint64_t> ids; // input indices: over ranks beyond 2^32 (Octree::keep_high_ids)
    InteractionTotals totals;
    if (direct) {
        auto p = be->upload<bn_f4>(pos, "forces.pos");
        auto a = be->alloc<bn_f4>(std::max<std::size_t>(count, 1), "forces.acc");
        direct_forces(*be, p, n, first, count, eps_internal, a);
        acc = a.download(count);
        ids.resize(count);
        std::iota(ids.begin(), ids.end(), std::uint64_t{first});
    } else {
        std::vector<std::uint64_t> slice_ids(count);
        std::iota(slice_ids.begin(), slice_ids.end(), std::uint64_t{first});
        Octree tree(*be);
        tree.keep_high_ids(n > 0xFFFFFFFFull);
        tree.set_particles(rows ? std::span<const bn_f4>(pos) : std::span<const bn_f4>(pos).subspan(first, count), {},
                           slice_ids);
        ParallelForces pf(*be, comm);
        pf.compute(tree, static_cast<float>(theta), eps_internal);
        if (auto warning = check_tree_depth(tree, units, in)) notice("warning: " + *warning);
        if (unsoftened(eps_internal) && rows)
            check_coincident(tree.pos().download(tree.size()), tree.download_ids(), in);
        acc = pf.forces().acc().download(tree.size());
        ids = tree.download_ids();
        totals = pf.forces().totals();
    }
    comm.barrier();
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::uint64_t sums[2] = {totals.pp, totals.pc};
    comm.sum(std::span<std::uint64_t>(sums, 2));

    // Results that left float's range are never written: a file of NaN would pass for results downstream. The rank
    // that holds them says so and stops all; the others wait for that at the barrier.
    std::string bad;
    if (const std::size_t out_of_range = units.forces_from_internal(acc))
        bad = fmt::format(
            "forces: {} accelerations or potentials lie beyond float's range (1.2e-38 .. 3.4e38) in the units of {}; "
            "nothing was written to {}. Give the particles in units where G M / r^2 and G M / r fit a float",
            out_of_range, in, opt.str("out"));
    else if (const std::size_t i = first_non_finite(acc); i < acc.size()) {
        const auto how_many = std::count_if(acc.begin(), acc.end(), [](const bn_f4& a) {
            return first_non_finite({&a, 1}) == 0;
        });
        bad = fmt::format(
            "forces: {} of {} particles{} got non-finite results (particle {}: {}, {}, {}, potential {}); nothing was "
            "written to {}. Nearly coincident particles with --eps 0? (README, \"Limits\")",
            how_many, acc.size(), comm.parallel() ? " of this rank" : "", ids[i], acc[i].x, acc[i].y, acc[i].z,
            acc[i].w, opt.str("out"));
    }
    if (comm.any(!bad.empty())) {
        if (!bad.empty()) throw NumericalError(bad);
        comm.barrier(); // the failing rank stops every rank (MPI_Abort) before this returns
        throw std::runtime_error("forces: another rank failed");
    }
    write_npy_parallel(comm, opt.str("out"), n, ids, acc);
    if (!root) return 0;

    const DeviceInfo& d = be->info();
    const std::string where = comm.parallel()
                                  ? fmt::format("{} ranks (rank 0: {} #{}, {})", P, d.backend, d.index, d.name)
                                  : fmt::format("{} #{} ({})", d.backend, d.index, d.name);
    if (direct)
        fmt::print("{} particles, direct summation, eps {}: {:.3f} s on {}\n", n, float(eps), seconds, where);
    else
        fmt::print("{} particles, tree, theta {}, eps {}: {:.3f} s on {}; per particle {:.1f} particle-particle and "
                   "{:.1f} particle-cell interactions\n",
                   n, theta, float(eps), seconds, where, double(sums[0]) / double(n), double(sums[1]) / double(n));
    fmt::print("wrote {} ({} x 4 float32: ax, ay, az, potential)\n", opt.str("out"), n);
    return 0;
}

} // namespace banyan::cli
