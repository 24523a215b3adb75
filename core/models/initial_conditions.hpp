/**
 * @file initial_conditions.hpp
 * @brief Initial conditions besides the Plummer sphere (core/models/plummer.hpp): uniform spheres, cold or
 * virialised, a galaxy merger after the paper's test (section 4.2): two Plummer spheres of mass ratio 1:3 on a bound
 *        orbit, each with a central massive particle standing for a black hole; and two more models for force-accuracy
 *        benchmarks and simulations, a cuspy Hernquist sphere and a flattened exponential disc, with make_model() to
 *        pick a model by name. N-body units (G = 1, total mass 1), seeded and reproducible on every platform.
 */
#pragma once

#include "core/models/plummer.hpp"

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

namespace banyan {

/**
 * @brief N equal-mass particles uniform in a sphere, centre of mass and momentum zero.
 *
 * Cold (@p virialised false): at rest, radius 12/5, so that the energy W = -3/(5R) of the continuous sphere is
 * -1/4 (the classic cold collapse). Virialised: radius 6/5 and isotropic Gaussian velocities of dispersion
 * 1/(5R) per component, so that 2T = -W and E = W/2 = -1/4 for the continuous sphere (in virial equilibrium as a
 * whole, though not a steady state: the sphere relaxes towards a centrally concentrated one).
 */
Particles uniform_sphere(std::size_t n, std::uint64_t seed, bool virialised, Share share = {});

struct MergerOptions {
    double pericentre = 1.0;   ///< pericentre of the two centres' Kepler orbit, > 0
    double separation = 10.0;  ///< starting distance of the centres, between pericentre and apocentre
    double eccentricity = 0.9; ///< of the Kepler orbit, in [0, 1): bound
    double bh_fraction = 0.01; ///< mass of each central particle as a fraction of its galaxy's mass, in (0, 1)
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
Merger galaxy_merger(std::size_t n, std::uint64_t seed, const MergerOptions& options = {}, Share share = {});

/// The merger's pericentre and separation: within 10^4 of the galaxies' radii (0.6 and 0.9).
inline constexpr double merger_min_length = 1e-4, merger_max_length = 1e4;

/// Checks @p options; throws UsageError naming the bad option (as the --pericentre ... options of banyan run).
void check_merger_options(const MergerOptions& options);

/// The Hernquist sphere's parameters (G = M = 1). Its potential energy is W = -G M^2 / (6 a) and, in virial
/// equilibrium, E = W / 2 = -G M^2 / (12 a): a = 1/3 gives E = -1/4 (virial radius 1), the convention of our Plummer
/// sphere. Radii are drawn below the one holding 0.999 of the mass, r = a sqrt(X) / (1 - sqrt(X)) with X = 0.999,
/// i.e. 1998.5 a = 666.2 (the tail of rho ~ r^-4 reaches far).
inline constexpr double hernquist_scale_radius = 1.0 / 3.0;
inline constexpr double hernquist_mass_fraction = 0.999;

/**
 * @brief N equal-mass (1/N) particles of a Hernquist (1990, ApJ 356, 359) sphere, rho(r) = M a / (2 pi r (r + a)^3),
 *        isotropic and in equilibrium: a cusp (rho ~ 1/r) at the centre, for force tests that a Plummer core spares.
 *
 * Radii from the inverted cumulative mass M(<r) = M r^2 / (r + a)^2, drawn uniformly in (0, 0.999) of the mass
 * (hernquist_mass_fraction), so that no particle lies beyond the radius holding 0.999 of it; the N particles carry
 * all of the mass 1. Speeds by rejection from v^2 f(Psi(r) - v^2 / 2), f the isotropic distribution function of the
 * untruncated sphere (Hernquist 1990, eq. 17), Psi = G M / (r + a) (the truncation shifts the enclosed mass by 0.1%,
 * which is left uncorrected). Isotropic directions; then moved so that centre of mass and total momentum are zero.
 * Note: the rare far particles make the sample's centre of mass wander (tail rho ~ r^-4: some 0.2 a for N = 10^5,
 * about a for N = 4000, typically), so after that shift the cusp lies near, not at, the origin.
 * @throws UsageError for n = 0.
 */
Particles hernquist_sphere(std::size_t n, std::uint64_t seed, Share share = {});

/// The exponential disc's parameters. A razor-thin exponential disc has W = -3 pi G M^2 / (32 Rd), so Rd = 3 pi / 16
/// gives W = -1/2 as our Plummer and Hernquist spheres have (virial radius 1; thickness and truncation make |W|
/// a few per cent smaller). z0 = Rd / 10, a thin disc like the Milky Way's (scale height over length about 0.1).
/// Truncated at R = 10 Rd (0.9995 of the mass of the untruncated disc) and |z| = 5 z0 (tanh 5 = 0.99991 of it).
inline constexpr double disc_scale_length = 0.58904862254808624; // 3 pi / 16
inline constexpr double disc_scale_height = 0.1 * disc_scale_length;
inline constexpr double disc_max_radius = 10.0 * disc_scale_length;
inline constexpr double disc_max_height = 5.0 * disc_scale_height;

/**
 * @brief N equal-mass (1/N) particles of an exponential disc rotating about +z: a flattened, strongly non-spherical
 *        mass distribution for force-accuracy tests and short runs. Not in exact equilibrium.
 *
 * Density proportional to exp(-R / Rd) sech^2(z / z0) with the parameters above, truncated at R <= disc_max_radius
 * and |z| <= disc_max_height: R / Rd from the Gamma(2) distribution (-ln(u1 u2), drawn again beyond the
 * truncation), z = z0 atanh(u tanh(5)) with u uniform in (-1, 1). Velocities: rotation in the spherical
 * approximation, with the mass M(<r) of the sampled particles closer to the centre (spherical radius r, from their
 * sorted radii, so the truncation is included): the rotation speed is the one that balances the cylindrical part
 * of G M(<r) / r^2, v_phi = sqrt(G M(<r) R^2 / r^3), equal to the circular speed v_c(r) = sqrt(G M(<r) / r) in the
 * mid-plane; plus an isotropic Gaussian dispersion of 0.1 v_c(r) per component. A flat disc's true circular speed
 * differs from that spherical estimate (for a thin exponential disc from 13% below it at R = Rd / 2 to 16% above it
 * at R = 3 Rd), hence not in equilibrium. Then moved so that centre of mass and total momentum are zero.
 * @throws UsageError for n = 0.
 */
Particles exponential_disc(std::size_t n, std::uint64_t seed);

/// The names make_model() accepts: "plummer", "hernquist", "disc".
const std::vector<std::string_view>& model_names();

/**
 * @brief The particles of the model named @p name: "plummer" (plummer() with its default options), "hernquist"
 *        (hernquist_sphere()) or "disc" (exponential_disc()), N = @p n, seeded by @p seed.
 * @throws UsageError naming @p name and the accepted names for an unknown model, and for n = 0.
 */
Particles make_model(std::string_view name, std::size_t n, std::uint64_t seed, Share share = {});

} // namespace banyan
