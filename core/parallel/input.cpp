/**
 * @file input.cpp
 * @brief A run's input as the ranks hold it (input.hpp).
 */
#include "core/parallel/input.hpp"

#include "core/error.hpp"
#include "core/files/snapshot_file.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace banyan {

void check_count(std::uint64_t n, const std::string& what, int ranks)
{
    if (n == 0) throw UsageError(fmt::format("{}: no particles (N = 0); at least one is needed", what));
    constexpr std::uint64_t per_rank = 0x7FFFFFFF; // one tree's 32-bit counts (Octree)
    const std::uint64_t P = static_cast<std::uint64_t>(std::max(ranks, 1));
    const std::uint64_t most = n / P + (n % P ? 1 : 0); // the largest of the ranks' [r n / P, (r + 1) n / P)
    if (most <= per_rank) return;
    const std::uint64_t need = n / per_rank + (n % per_rank ? 1 : 0);
    throw UsageError(fmt::format("{}: {} particles {}is more than the 2^31 - 1 one rank holds (a tree's counts are "
                                 "32-bit); run over {} or more ranks (mpiexec -n {})",
                                 what, n, P > 1 ? fmt::format("over {} ranks puts {} on one, which ", P, most) : "",
                                 need, need));
}

InputFile read_input_file(const std::string& path, const InputFileOptions& how, const Comm& comm)
{
    InputFile f;
    SnapshotMeta meta;
    if (comm.parallel() && how.by_rows) {
        read_snapshot(path, nullptr, how.velocities, nullptr, Rows{0, 0}, &f.whole);
        const std::size_t n = f.whole.size();
        check_count(n, path, comm.size()); // before any rows are read
        const std::size_t P = static_cast<std::size_t>(comm.size()), r = static_cast<std::size_t>(comm.rank());
        f.first_row = r * n / P;
        f.by_rows = true;
        f.rows = read_snapshot(path, &meta, how.velocities, nullptr, Rows{r * n / P, (r + 1) * n / P - r * n / P});
        // A rank whose rows hold no collisionless type says yes.
        meta.has_softening = !comm.any(!meta.has_softening);
    } else {
        f.rows = read_snapshot(path, &meta, how.velocities);
        const Snapshot& s = f.rows;
        f.whole = FileCounts{s.n_gas, s.n_dark, s.n_star, s.n_type2, s.n_type3, s.n_type5};
        check_count(f.whole.size(), path, 1); // every rank holds all of them
    }
    if (how.eps_from_file) {
        check_softenings(f.rows, path, f.first_row);
        f.softening = softening_from_file(meta, path, how.command, common_softening(f.rows, comm));
    }
    f.particles = to_particles(f.rows);
    return f;
}

void check_initial_particles(const Snapshot* values, std::span<const bn_f4> pos_mass, std::size_t first,
                             std::size_t total, double eps, const std::string& what, bool over_ranks, const Comm& comm)
{
    if (values) check_particle_values(*values, what, first);
    if (over_ranks)
        check_precision_range(pos_mass, first, total, eps, what, comm);
    else
        check_precision_range(pos_mass, eps, what);
}

std::optional<float> common_softening(const Snapshot& mine, const Comm& comm)
{
    if (!comm.parallel()) return common_softening(mine);
    double bounds[2] = {-INFINITY, -INFINITY}; // -min and max
    for (std::size_t i = mine.n_gas; i < mine.size(); ++i)
        bounds[0] = std::max<double>(bounds[0], -mine.eps[i]), bounds[1] = std::max<double>(bounds[1], mine.eps[i]);
    comm.max(std::span<double>(bounds, 2));
    if (!(-bounds[0] == bounds[1])) return std::nullopt; // none at all (min > max), or not all the same
    return static_cast<float>(bounds[1]);
}

InternalUnits system_units(std::span<const bn_f4> mine, double eps, const Comm& comm)
{
    float lo[3] = {INFINITY, INFINITY, INFINITY}, hi[3] = {-INFINITY, -INFINITY, -INFINITY};
    double mass = 0;
    for (const bn_f4& p : mine) {
        const float c[3] = {p.x, p.y, p.z};
        for (int k = 0; k < 3; ++k)
            lo[k] = std::min(lo[k], c[k]), hi[k] = std::max(hi[k], c[k]);
        mass += p.w;
    }
    comm.min(std::span<float>(lo, 3));
    comm.max(std::span<float>(hi, 3));
    comm.sum(std::span<double>(&mass, 1));
    double extent = 0;
    for (int k = 0; k < 3; ++k)
        extent = std::max(extent, static_cast<double>(hi[k]) - lo[k]);
    return InternalUnits::for_extent_and_mass(extent, mass, eps);
}

void check_precision_range(std::span<const bn_f4> pos_mass, std::size_t first, std::size_t total, double eps,
                           const std::string& what, const Comm& comm)
{
    // Minima as maxima of the negated values: -x_min, -y_min, -z_min, x_max, y_max, z_max, -(smallest mass).
    double m[7] = {-INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY}, total_mass = 0;
    std::size_t lightest = 0;
    for (std::size_t i = 0; i < pos_mass.size(); ++i) {
        const bn_f4& p = pos_mass[i];
        const double x[3] = {p.x, p.y, p.z};
        for (int a = 0; a < 3; ++a)
            m[a] = std::max(m[a], -x[a]), m[3 + a] = std::max(m[3 + a], x[a]);
        total_mass += p.w;
        if (-double(p.w) > m[6]) m[6] = -double(p.w), lightest = first + i;
    }
    const double mine_least = m[6];
    comm.max(std::span<double>(m, 7));
    comm.sum(std::span<double>(&total_mass, 1));
    // The lightest particle's index: the first rank's that holds the smallest mass.
    double who = mine_least == m[6] ? -static_cast<double>(lightest) : -INFINITY;
    comm.max(std::span<double>(&who, 1));
    const double extent = std::max({m[3] + m[0], m[4] + m[1], m[5] + m[2], 0.0});
    check_precision_range(extent, total_mass, -m[6], static_cast<std::size_t>(-who), total, eps, what);
}

} // namespace banyan
