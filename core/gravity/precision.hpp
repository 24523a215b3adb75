/**
 * @file precision.hpp
 * @brief What single precision can serve: internal units that bring any system near 1, the checks that remain,
 *        and the warning for particles closer together than the tree resolves.
 *
 * The walk forms r^2, m / r^3 and, for a cell's quadrupole, r.Q.r / r^5 in float (normal range 1.2e-38 ..
 * 3.4e38). In a system of extent S and mass M those reach M S^4 and (S / 2^21)^-5 at the tree's depths, beyond
 * float's range unless S and M are within a few decades of 1. So the forces are computed in internal units that
 * differ from the input's by powers of two, chosen to bring S and M near 1: scaling by a power of two is exact in
 * binary floating point, so nothing is lost on the way in or out, and any absolute scale works. What no scaling
 * changes is checked instead (check_precision_range), and results that do not fit a float on the way out are
 * reported by the callers (first_non_finite).
 */
#pragma once

#include "core/device_shared.h"
#include "core/tree/octree.hpp"

#include <cmath>
#include <optional>
#include <span>
#include <string>

namespace banyan {

/// Units of length 2^k and mass 2^j (in those of the input), with G = 1 in both: time 2^((3k - j) / 2), so 3k - j
/// is kept even. The identity (k = j = 0) for systems already near 1, so their results stay bit for bit the same.
struct InternalUnits {
    int k = 0; ///< length exponent
    int j = 0; ///< mass exponent

    /// The units for particles (x, y, z, mass) under the softening @p eps: the identity when the larger of their
    /// extent and @p eps lies in [1/16, 1024] and their total mass in [2^-20, 2^20], else that length and the mass
    /// scaled to within a factor of 2 of 1. A softening far beyond the extent sets the length: 1 / eps^3 and the
    /// accelerations, of order M extent / eps^3, then stay in float's range instead of vanishing.
    static InternalUnits for_system(std::span<const bn_f4> pos_mass, double eps);
    /// The same from the system's extent (the largest side of its bounding box), total mass and softening.
    static InternalUnits for_extent_and_mass(double extent, double mass, double eps);

    bool identity() const noexcept { return k == 0 && j == 0; }
    int time_exp() const noexcept { return (3 * k - j) / 2; }
    int velocity_exp() const noexcept { return k - time_exp(); }
    int acceleration_exp() const noexcept { return j - 2 * k; }
    int potential_exp() const noexcept { return j - k; }
    int energy_exp() const noexcept { return 2 * j - k; }
    int momentum_exp() const noexcept { return j + velocity_exp(); }
    int angular_momentum_exp() const noexcept { return j + k + velocity_exp(); }

    /// Positions and masses (x, y, z, m) into internal units, in place; and back.
    void to_internal(std::span<bn_f4> pos_mass) const;
    void from_internal(std::span<bn_f4> pos_mass) const;
    /// Velocities (vx, vy, vz, unused) into internal units, in place; and back.
    void velocities_to_internal(std::span<bn_f4> vel) const;
    void velocities_from_internal(std::span<bn_f4> vel) const;
    /// Accelerations and potentials (ax, ay, az, phi) from internal units, in place. Returns how many values left
    /// float's normal range on the way (became infinite, or a nonzero value became zero or denormal): the input's
    /// units cannot hold them, and callers refuse to pass them on.
    std::size_t forces_from_internal(std::span<bn_f4> acc_pot) const;
    /// A length (the softening) or a time (the step) into internal units.
    double length_to_internal(double x) const { return std::ldexp(x, -k); }
    double time_to_internal(double t) const { return std::ldexp(t, -time_exp()); }
};

struct PrecisionLimits {
    static constexpr double min_mass_ratio = 1e-30;   ///< each mass over the total (smaller ones: denormal floats)
    static constexpr double max_eps_ratio = 1e15;     ///< the softening over the system's extent
    static constexpr double min_spread_ratio = 1e-15; ///< the spread of an overfull deep leaf over the extent (r^2
                                                      ///< of its particles stays far from float's smallest values)
};

/// Refuses (UsageError naming @p what, the value and the limit) what internal units cannot bring into range: a
/// mass below PrecisionLimits::min_mass_ratio of the total, a softening above max_eps_ratio times the extent.
/// Positions and masses must be finite and masses positive (tipsy's check_particles says so first).
void check_precision_range(std::span<const bn_f4> pos_mass, double eps, const std::string& what);
/// The same from the particles' extent (the largest side of their box), total mass, smallest mass (of particle
/// @p lightest) and number @p n: for particles that are not at hand as (x, y, z, m) (the Python module's arrays).
void check_precision_range(double extent, double total, double min_mass, std::size_t lightest, std::size_t n,
                           double eps, const std::string& what);

/// Refuses particles at exactly one point when there is no softening (eps^2 = 0 in float), a UsageError naming
/// @p what and the two particles by @p ids (empty: their index in @p pos): their pull on each other is infinite,
/// and the interaction (bn_interact_pp) can only leave it out, as it leaves out a particle's own, which would give
/// them no force and a finite potential. Nearly coincident ones give infinite results, which the callers refuse.
/// Over ranks, the particles of one rank after a decomposition, which puts equal positions (equal keys) on one rank.
void check_coincident(std::span<const bn_f4> pos, std::span<const std::uint64_t> ids, const std::string& what);

/// Whether softening @p eps (in the units of the positions) is none at all in the interaction's float arithmetic.
inline bool unsoftened(float eps) noexcept
{
    return eps * eps == 0.0f;
}

/// After a build of @p tree: when it reached its deepest level with more than a leaf's worth of particles in one
/// cell there (particles closer together than 1/2^21 of the system's extent, typically beside far outliers), a
/// warning that says so: their forces are summed directly, correct but slow. When those particles lie within
/// PrecisionLimits::min_spread_ratio of the extent of each other, no units serve both scales: UsageError naming
/// @p what. Nothing otherwise. Downloads a few counts (and, when crowded, that leaf's particles).
/// @p units: those of the tree's particles, to name lengths in the input's.
std::optional<std::string> check_tree_depth(Octree& tree, const InternalUnits& units, const std::string& what);

} // namespace banyan
