/**
 * @file plummer.hpp
 * @brief Plummer spheres in N-body units (G = 1, total mass 1, energy -1/4), positions and velocities in virial
 *        equilibrium, by the recipe of Aarseth, Henon & Wielen (1974), seeded and reproducible on every platform.
 */
#pragma once

#include "core/device_shared.h"
#include "core/files/particles.hpp"

#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <algorithm>
#include <random>
#include <vector>

namespace banyan {

/// The particles [first, first + count) of a model's N, the share one caller keeps (a rank's, under MPI). Models
/// draw their particles in one sequence and centre them with sums over all, so a share costs the time of the whole
/// model but holds only its own particles, and is the same bits as those particles of the whole.
struct Share {
    std::size_t first = 0;
    std::size_t count = std::numeric_limits<std::size_t>::max();
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
 * last bit of the C library's pow, sin and cos): random numbers come from std::mt19937_64 turned into doubles by
 * our own bit arithmetic, not by a standard distribution, whose results differ between standard libraries.
 */
Particles plummer(std::size_t n, std::uint64_t seed, const PlummerOptions& options = {}, Share share = {});

/// Every particle of plummer(n, seed, options), in order, to @p emit(i, pos, vel): two passes over the draws (the
/// centre of mass first), holding none of them.
void plummer_each(std::size_t n, std::uint64_t seed, const PlummerOptions& options,
                  const std::function<void(std::size_t, const bn_f4&, const bn_f4&)>& emit);

/// The random draws every particle model uses (plummer.cpp, initial_conditions.cpp), the same on every platform.
namespace draw {
/// A double uniform in the open interval (0, 1), from the top 53 bits (the same on every standard library).
double uniform(std::mt19937_64& rng);
/// A random point on the sphere of radius @p r.
void isotropic(std::mt19937_64& rng, double r, double out[3]);
} // namespace draw

} // namespace banyan
