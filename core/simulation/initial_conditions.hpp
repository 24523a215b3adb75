/**
 * @file initial_conditions.hpp
 * @brief Initial conditions besides the Plummer sphere (core/simulation/plummer.hpp): uniform spheres, cold or virialised,
 *        and a galaxy merger after the paper's test (section 4.2): two Plummer spheres of mass ratio 1:3 on a bound
 *        orbit, each with a central massive particle standing for a black hole. N-body units (G = 1, total mass 1),
 *        seeded and reproducible on every platform.
 */
#pragma once

#include "core/simulation/plummer.hpp"

#include <cstddef>
#include <cstdint>

namespace banyan {

/**
 * @brief N equal-mass particles uniform in a sphere, centre of mass and momentum zero.
 *
 * Cold (@p virialised false): at rest, radius 12/5, so that the energy W = -3/(5R) of the continuous sphere is
 * -1/4 (the classic cold collapse). Virialised: radius 6/5 and isotropic Gaussian velocities of dispersion
 * 1/(5R) per component, so that 2T = -W and E = W/2 = -1/4 for the continuous sphere (in virial equilibrium as a
 * whole, though not a steady state: the sphere relaxes towards a centrally concentrated one).
 */
Particles uniform_sphere(std::size_t n, std::uint64_t seed, bool virialised);

struct MergerOptions {
    double pericentre = 1.0;    ///< pericentre of the two centres' Kepler orbit, > 0
    double separation = 10.0;   ///< starting distance of the centres, between pericentre and apocentre
    double eccentricity = 0.9;  ///< of the Kepler orbit, in [0, 1): bound
    double bh_fraction = 0.01;  ///< mass of each central particle as a fraction of its galaxy's mass, in (0, 1)
};

struct Merger {
    Particles particles;
    std::uint32_t centre_a = 0; ///< index of the central particle of the larger galaxy
    std::uint32_t centre_b = 0; ///< index of the central particle of the smaller galaxy
};

/**
 * @brief Two Plummer spheres of masses 3/4 and 1/4 (ratio 1:3), each of n/2 particles (the larger gets the odd
 *        one), one of which is a central particle at rest at its centre holding bh_fraction of the galaxy's mass.
 *
 * Each galaxy is a Plummer sphere in N-body units scaled to its mass M and to radius M^(1/3) (equal mean
 * densities), velocities by sqrt(M / R). The Plummer particles carry the mass not in the central particle, with
 * the velocities of a Plummer sphere of the whole mass M: right far out, where the enclosed mass is M, so only
 * the region the central particle dominates starts slightly out of equilibrium. The centres start @p separation
 * apart in the x-y plane on the incoming branch of the Kepler orbit of two point masses with the given pericentre
 * and eccentricity (G M = 1), centre of mass and momentum zero. The galaxies are extended and exchange energy
 * with each other (dynamical friction), so the orbit departs from the Kepler one once they overlap, and decays.
 * Particles [0, n - n/2) are the larger galaxy (its centre first), [n - n/2, n) the smaller (its centre first).
 * @throws UsageError for n < 4 or options out of range.
 */
Merger galaxy_merger(std::size_t n, std::uint64_t seed, const MergerOptions& options = {});

/// Checks @p options; throws UsageError naming the bad option (as the --pericentre ... options of banyan run).
void check_merger_options(const MergerOptions& options);

} // namespace banyan
