/**
 * @file plummer.hpp
 * @brief Plummer spheres in N-body units (G = 1, total mass 1, energy -1/4), positions and velocities in virial
 *        equilibrium, by the recipe of Aarseth, Henon & Wielen (1974), seeded and reproducible on every platform.
 */
#pragma once

#include "core/device_shared.h"
#include "core/files/particles.hpp"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <numbers>
#include <random>
#include <span>
#include <vector>

namespace banyan {

/// The particles [first, first + count) of a model's N, the share one caller keeps (a rank's, under MPI). Particle
/// i's draws come from its own counter-based stream (seed, i) (counter_rng.hpp), and the sums that centre the
/// model are exact (centring.hpp), so a share is the same bits as those particles of the whole. With
/// sum_over_ranks (a collective sum of integers over the ranks, each rank giving its share) a model draws only its
/// share; without it, it draws all N for those sums and keeps the share.
struct Share {
    std::size_t first = 0;
    std::size_t count = std::numeric_limits<std::size_t>::max();
    std::function<void(std::span<std::uint64_t>)> sum_over_ranks;
    /// Threads that draw the particles (0: one per hardware thread; under MPI the ranks of a node share them).
    unsigned threads = 0;
    bool holds(std::size_t i) const noexcept { return i >= first && i - first < count; }
    /// How many of @p n particles it holds.
    std::size_t size(std::size_t n) const noexcept { return first >= n ? 0 : std::min(count, n - first); }
};

struct PlummerOptions {
    /// Radius cut-off in Plummer scale radii (before scaling to N-body units): radii beyond it are drawn again.
    /// 22.8042468 holds 99.9% of the mass of the untruncated sphere (13.43 N-body length units).
    double cutoff = 22.8042468;
};

/**
 * @brief N equal-mass (1/N) particles of a Plummer sphere.
 *
 * Radii from the inverted cumulative mass, isotropic directions, speeds by von Neumann rejection from
 * g(q) = q^2 (1 - q^2)^(7/2) times the local escape speed; then scaled to N-body units (lengths by 3 pi / 16,
 * speeds by sqrt(16 / (3 pi))) and moved so that centre of mass and total momentum are zero (in double precision,
 * before the values are rounded to float). The same (n, seed) gives the same particles on every platform (up to the
 * last bit of the C library's pow, sin and cos): particle i's random numbers come from its own Philox stream
 * (seed, i) turned into doubles by our own bit arithmetic, not by a standard distribution, whose results differ
 * between standard libraries.
 */
Particles plummer(std::size_t n, std::uint64_t seed, const PlummerOptions& options = {}, Share share = {});

/// Plummer particle @p i of a sphere drawn with @p seed, before centring, in N-body units (what plummer() draws).
void plummer_particle(std::uint64_t seed, std::size_t i, const PlummerOptions& options, double x[3], double v[3]);

/// The random draws every particle model uses (plummer.cpp, initial_conditions.cpp), the same on every platform.
namespace draw {
/// A double uniform in the open interval (0, 1), from the top 53 bits of @p rng's next 64 (the same on every
/// standard library; std::mt19937_64 or CounterRng).
template <class Rng> double uniform(Rng& rng)
{
    return (static_cast<double>(rng() >> 11) + 0.5) * 0x1.0p-53;
}
/// A random point on the sphere of radius @p r.
template <class Rng> void isotropic(Rng& rng, double r, double out[3])
{
    const double z = (1.0 - 2.0 * uniform(rng)) * r;
    const double phi = 2.0 * std::numbers::pi * uniform(rng);
    const double rxy = std::sqrt(std::max(r * r - z * z, 0.0));
    out[0] = rxy * std::cos(phi);
    out[1] = rxy * std::sin(phi);
    out[2] = z;
}
} // namespace draw

} // namespace banyan
