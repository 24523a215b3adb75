/**
 * @file galaxy.hpp
 * @brief Disc galaxies in equilibrium (`banyan run --ic galaxy`) and mergers of two (`--ic galaxy-merger`): a dark
 *        halo (NFW smoothly truncated, or Hernquist), an exponential disc with a sech^2 vertical profile, a
 *        Hernquist bulge and a central black hole.
 *
 * Method (README, "Galaxies"):
 * - The disc's potential off the midplane: Kuijken & Dubinski's (1995, MNRAS 277, 1341) split, 4 pi G Sigma(r) H(z)
 *   (r spherical, H'' the vertical profile) plus the Legendre expansion (legendre_potential.hpp) of the smooth
 *   density that term leaves.
 * - The halo and the bulge have isotropic distribution functions f(E), found by Eddington's inversion (Binney &
 *   Tremaine 2008, eq. 4.46b) in the total potential averaged over spheres (the disc's monopole included), as
 *   Kazantzidis, Magorrian & Moore (2004, ApJ 601, 37) do; their NFW truncation is ours. They are drawn from that
 *   f(E) in the true, flattened potential, as GalactICS does (Kuijken & Dubinski 1995; Widrow, Pym & Dubinski 2008,
 *   ApJ 679, 1239): a steady state by Jeans' theorem, in which the spheroids are denser near the disc's plane than
 *   their spherical profiles (without GalactICS's iteration of the spheroids' own flattened potential: their
 *   particles pull up to 1% harder in the midplane than the model's circular speed says).
 * - The disc's velocities follow from the Jeans equations in the epicyclic approximation (Hernquist 1993, ApJS 86,
 *   389; Springel, Di Matteo & Hernquist 2005, MNRAS 361, 776): sigma_z^2 from the vertical Jeans equation in the
 *   disc's own potential plus the spherical components' vertical pull; sigma_R^2 proportional to the surface density,
 *   normalised to the Toomre Q asked for at one radius; sigma_phi^2 = sigma_R^2 kappa^2 / (4 Omega^2); the mean
 *   rotation from the asymmetric drift, with the radial pull at the particle's height. The disc's own midplane force
 *   (circular speed, kappa, Omega) is that of the thick (sech^2) disc by its Hankel transform (Binney & Tremaine
 *   2008, section 2.6), not the thin-disc (Freeman 1970) one; the split above agrees with it within 0.2%.
 * - Particles come in mirrored pairs (particle 2k + 1 is particle 2k reflected through the centre, position and
 *   velocity), so each component's centre of mass and momentum are zero without a sum over the sample, and the
 *   lopsided (odd) modes of the sample's noise vanish. Each pair draws from its own random stream, keyed by the
 *   seed, the galaxy, the component and the pair: any share [first, first + count) of the particles is made alone,
 *   the same bits whatever the number of ranks or the backend.
 * Model units: G = 1, lengths in kpc, masses in 10^10 Msun (velocity 207.4 km/s, time 4.715 Myr). The options take
 * kpc and Msun; the particles come in the units asked for (GalaxySetup).
 * Particle order (GADGET types, as HDF5 snapshots store them): every halo particle (type 1), every disc particle
 * (2), every bulge particle (3), the black holes (5); within each, the first galaxy's before the second's.
 */
#pragma once

#include "core/files/particles.hpp"

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace banyan {

/// A disc galaxy's mass model, in kpc and Msun.
struct GalaxyModel {
    std::string halo = "nfw";         ///< nfw | hernquist
    double halo_mass = 1.30e12;       ///< Msun: NFW M200 (inside r200 = c r_s); Hernquist: the whole mass
    double halo_scale = 19.6;         ///< kpc: NFW r_s, Hernquist a
    double halo_concentration = 11.5; ///< NFW: c = r200 / r_s (truncated beyond r200 over 0.1 r200)
    double disc_mass = 4.57e10;       ///< Msun
    double disc_scale_length = 2.5;   ///< kpc: R_d of Sigma ~ exp(-R / R_d)
    double disc_scale_height = 0.6;   ///< kpc: z0 of rho ~ sech^2(z / z0) (z0 = 2 h for an exponential scale h)
    double toomre_q = 1.5;            ///< Toomre Q at q_radius
    double q_radius = 0;              ///< kpc: where Q is set; 0: 2.5 R_d
    double bulge_mass = 8.9e9;        ///< Msun; 0: no bulge
    double bulge_scale = 0.6;         ///< kpc: Hernquist a
    double bh_mass = 4.152e6;         ///< Msun; 0: no black hole
    /// The fraction of the particles (the black hole aside) that are stars, disc and bulge; 0: as many as give star
    /// and halo particles the same mass (no mass segregation: heavier halo particles heat a bulge and a disc).
    double star_fraction = 0;
};

/// The Milky Way ("mw", McMillan 2017; GRAVITY 2019) or M31 ("m31", Geehan et al. 2006; Bender et al. 2005), README.
GalaxyModel galaxy_preset(std::string_view name);
/// "mw", "m31".
const std::vector<std::string_view>& galaxy_preset_names();

/// The orbit and orientations of a merger of two galaxies: the second is the first scaled to mass_ratio of its mass
/// (every mass times q, every length times q^(1/3): the same density, hence the same dynamical times).
struct GalaxyOrbit {
    double mass_ratio = 1.0 / 3; ///< second / first galaxy, in [1e-4, 1] (GalaxyLimits)
    /// kpc: of the Kepler orbit of the centres as two point masses, each the mass its galaxy holds within the
    /// starting separation (the mass that pulls at that distance: the halos overlap there)
    double pericentre = 10;
    double eccentricity = 1; ///< >= 0: 1 parabolic (the usual choice for mergers)
    double separation = 100; ///< kpc: starting distance of the centres (at or beyond the pericentre)
    /// Degrees: each disc's spin axis as (inclination to the orbit's axis, azimuth in the orbital plane), first the
    /// first galaxy's, then the second's.
    std::array<double, 4> orientation = {30, 0, 60, 90};
};

/// The options of a galaxy model and a merger's orbit by name, as the checkpoint text, the Python module (keywords)
/// and `banyan run` (--halo-mass ...) spell them: halo, halo_mass, halo_scale, halo_concentration, disc_mass,
/// disc_scale_length, disc_scale_height, toomre_q, q_radius, bulge_mass, bulge_scale, bh_mass (the model) and
/// star_fraction (the model) and mass_ratio, pericentre, eccentricity, separation, orientation (the orbit;
/// orientation "i1,w1,i2,w2").
const std::vector<std::string_view>& galaxy_model_option_names();
const std::vector<std::string_view>& galaxy_orbit_option_names();
/// Sets the option @p key from its text @p value; throws UsageError naming @p shown (the option as the user spelt
/// it) for an unknown key or a value that is not a number.
void set_galaxy_option(GalaxyModel& model, GalaxyOrbit& orbit, std::string_view key, const std::string& value,
                       const std::string& shown);
/// The value of option @p key as text that set_galaxy_option reads back to the same bits.
std::string galaxy_option_text(const GalaxyModel& model, const GalaxyOrbit& orbit, std::string_view key);

/// Spells a galaxy option, from its key ("halo_mass", "units", "n"), as the front end that took it does:
/// "--halo-mass" for `banyan run` (galaxy_cli_option), "halo_mass" for Python.
using OptionSpelling = std::function<std::string(std::string_view key)>;
std::string galaxy_cli_option(std::string_view key);

/// Particles of each component of one galaxy made of @p n particles: one black hole when it has mass, the model's
/// star_fraction of the rest stars (0: the fraction that gives stars the mass of halo particles, the halo carrying
/// @p halo_particle_mass in Msun), split between disc and bulge by mass, the others halo. Throws UsageError when a
/// component would have fewer than two particles, naming the options that raise the counts as @p name spells them.
struct GalaxyCounts {
    std::uint64_t halo = 0, disc = 0, bulge = 0, bh = 0;
    std::uint64_t total() const noexcept { return halo + disc + bulge + bh; }
};
GalaxyCounts galaxy_counts(const GalaxyModel& model, std::uint64_t n, double halo_particle_mass,
                           const OptionSpelling& name = galaxy_cli_option);

/// The model units (G = 1, kpc, 10^10 Msun) as `--units` spells them: a galaxy's files state them when no other units
/// are given (GalaxySetup's defaults, the same particles bit for bit).
inline constexpr const char* galaxy_model_units = "kpc,1e10Msun";

/// What to make: one galaxy (merger false) or two (n split, the first taking the odd particle), in which units.
struct GalaxySetup {
    GalaxyModel model;
    bool merger = false;
    GalaxyOrbit orbit;
    std::uint64_t n = 65536;
    std::uint64_t seed = 1;
    double length_unit_kpc = 1;   ///< the particles' unit of length in kpc
    double mass_unit_msun = 1e10; ///< the particles' unit of mass in Msun
};

/// What the galaxy model can make; check_galaxy_parameters refuses the rest (README, "Limits").
struct GalaxyLimits {
    /// The disc's mass (Msun) and scale length (kpc), to which the other masses and lengths are relative: within
    /// [1e-30, 1e30], so that the model's tables (in double, in kpc and 10^10 Msun: densities ~ M / r^3, the
    /// distribution functions, the disc's Hankel transform) stay far inside double's range.
    static constexpr double min_reference = 1e-30, max_reference = 1e30;
    /// The halo's and the bulge's masses within this factor of the disc's; every length (halo and bulge scales, the
    /// disc's scale height, a merger's pericentre and separation) within it of the disc's scale length; a merger's
    /// mass ratio at least its inverse. So a galaxy's scales span at most 1e8 (its extent over its smallest scale:
    /// 2.5 x 10^10 with an NFW halo), inside the 1e15 that single precision serves at once in one tree, and its
    /// particles' masses at least 1e-22 of the total (the run's floor: 1e-30). A model's tables resolve every
    /// component over that span: the radius grid reaches from 1e-4 of the smallest scale to 10^3 of the largest.
    static constexpr double ratio = 1e4;
    /// A black hole (when there is one) of these fractions of its galaxy's mass (halo, disc and bulge). The lower:
    /// where the 1/r cusps hold its mass, M (r / a)^2, must lie on the model's radius grid, which starts at
    /// 1e-4 of the smallest scale (grid_start).
    static constexpr double grid_start = 1e-4;
    static constexpr double min_bh_fraction = grid_start * grid_start, max_bh_fraction = 0.1;
    /// Where Toomre's Q is set (--q-radius, other than 0): on the disc's midplane tables, which start at 1e-3 R_d,
    /// and within the disc, drawn to 10 R_d.
    static constexpr double min_q_radius = 1e-3, max_q_radius = 10;
    /// The particles' masses, lengths, speeds, potentials and accelerations in the setup's units (the galaxy's scales:
    /// its lightest particle to its total mass, its smallest scale to its extent, G M / r and G M / r^2 between them)
    /// within [1e-30, 1e30]: 10^8 inside float's normal range, for the particles' spread about those scales. Outside
    /// it, masses or results would round to 0 or overflow float (`--units cm,g`: masses of 10^41).
    static constexpr double min_float = 1e-30, max_float = 1e30;
};

/// Refuses, before any table is made or particle drawn, a galaxy or merger (@p setup) the model cannot make: each
/// option outside its range (GalaxyLimits; relative to the disc where that is what matters) or units in which the
/// particles would leave float's range. Throws UsageError "<what>: <option> ..." spelling options by @p name.
void check_galaxy_parameters(const GalaxySetup& setup, const std::string& what,
                             const OptionSpelling& name = galaxy_cli_option);

class GalaxyProfile;
class LegendrePotential;

/// Makes the particles of a GalaxySetup (check_galaxy_parameters first, then the counts; UsageError otherwise, naming
/// the options as @p name spells them).
class GalaxyGenerator {
public:
    explicit GalaxyGenerator(const GalaxySetup& setup, const OptionSpelling& name = galaxy_cli_option);
    ~GalaxyGenerator();
    GalaxyGenerator(const GalaxyGenerator&) = delete;
    GalaxyGenerator& operator=(const GalaxyGenerator&) = delete;

    std::uint64_t size() const noexcept { return n_; }
    /// Particles of GADGET types 1 (halo), 2 (disc), 3 (bulge), 5 (black holes), both galaxies together.
    std::array<std::uint64_t, 4> type_counts() const noexcept { return types_; }
    /// Indices of the black holes (the first galaxy's first); empty without black holes.
    std::vector<std::uint64_t> black_holes() const;
    /// Particles [first, first + count) in the order above, in the setup's units.
    Particles make(std::uint64_t first, std::uint64_t count) const;
    Particles make_all() const { return make(0, n_); }
    /// Particles of each component of galaxy @p g.
    const GalaxyCounts& counts(int g) const { return counts_[g]; }
    /// Galaxy @p g's model quantities in model units (tests, diagnostics).
    const GalaxyProfile& profile(int g) const { return *profiles_[g]; }
    int galaxies() const noexcept { return static_cast<int>(profiles_.size()); }

private:
    struct Placement; // where galaxy g sits and how its disc is turned
    std::vector<std::unique_ptr<GalaxyProfile>> profiles_;
    std::vector<Placement> places_;
    std::vector<GalaxyCounts> counts_;
    std::array<std::uint64_t, 4> types_{};
    std::uint64_t n_ = 0, seed_ = 0;
    double length_factor_ = 1, mass_factor_ = 1, velocity_factor_ = 1; // model units to the setup's
};

/// One galaxy's model in model units (G = 1, kpc, 10^10 Msun): densities, the potential, the distribution functions
/// and the disc's kinematics, tabulated once; what GalaxyGenerator draws from and what tests compare against. Made
/// by GalaxyGenerator, from a model check_galaxy_parameters has passed (or that model scaled for a merger).
class GalaxyProfile {
public:
    explicit GalaxyProfile(const GalaxyModel& model_in_msun);
    ~GalaxyProfile();
    enum Component { halo = 0, bulge = 1 };
    /// Spherical radius holding half the mass that component @p c's particles carry (halo, bulge).
    double half_mass_radius(Component c) const;
    /// Cylindrical radius holding half the disc's particles' mass.
    double disc_half_mass_radius() const;
    /// The circular speed in the disc's midplane, sqrt(R dPhi/dR), the disc's own thick-disc force included.
    double circular_speed(double R) const;
    /// The epicyclic frequency kappa and the angular frequency Omega at R in the midplane.
    double kappa(double R) const;
    double omega(double R) const;
    double surface_density(double R) const;
    double sigma_r(double R) const;
    /// Toomre's Q = sigma_R kappa / (3.36 G Sigma) of the model at R.
    double toomre_q(double R) const { return sigma_r(R) * kappa(R) / (3.36 * surface_density(R)); }
    /// The radius where Q is set.
    double q_radius() const noexcept { return q_radius_; }
    /// Mass within the sphere of radius r, every component (the disc by its cylindrical enclosed mass).
    double enclosed_mass(double r) const;
    /// Mass the particles of component c carry (halo, bulge: within their sampling radius).
    double particle_mass_total(Component c) const;
    double disc_mass() const noexcept { return md_; }
    double bh_mass() const noexcept { return mbh_; }
    double scale_length() const noexcept { return rd_; }
    double scale_height() const noexcept { return z0_; }
    /// Whether to draw a bulge (mass > 0).
    bool has_bulge() const noexcept { return mb_ > 0; }

    /// Draws, from the 64-bit stream state @p rng, one particle of the halo or the bulge (position, velocity).
    void draw_spherical(Component c, std::uint64_t& rng, double x[3], double v[3]) const;
    /// Draws one disc particle (rotating about +z).
    void draw_disc(std::uint64_t& rng, double x[3], double v[3]) const;

private:
    double interp_log_r(const std::vector<double>& table, double r) const; // on the radius grid
    double disc_table(const std::vector<double>& table, double R) const;   // on the disc's radius grid
    double sigma_z2(double R, double z) const;
    double enclosed_spherical(double r) const;              // halo + bulge + black hole
    double vertical_h(double z) const;                      // H(z) of the disc's Phi_ext (Kuijken & Dubinski 1995)
    double disc_rest_density(double r, double mu) const;    // what Phi_ext leaves of the disc's density
    double disc_monopole(double r) const;                   // the disc's potential averaged over the sphere of radius r
    double spheroid_density(Component c, double psi) const; // rho_c where the reference potential is psi

public:
    /// The disc's potential and acceleration at (R, z) (its true, thick-disc field).
    double disc_potential(double R, double z) const;
    void disc_acceleration(double R, double z, double& a_R, double& a_z) const;
    /// -Phi of every component at (R, z).
    double psi_at(double R, double z) const;
    /// -Phi averaged over the sphere of radius r: the potential of the halo's and the bulge's f(E) (Eddington).
    double reference_psi(double r) const;

private:
    std::string halo_kind_;
    double mh_ = 0, ah_ = 0, c_ = 0, rvir_ = 0, rdecay_ = 0, rho_s_ = 0, eps_ = 0;
    double md_ = 0, rd_ = 0, z0_ = 0, mb_ = 0, ab_ = 0, mbh_ = 0, q_radius_ = 0, sigma_r0_ = 0;
    double lnr0_ = 0, dlnr_ = 0;                   // the radius grid: r_i = exp(lnr0 + i dlnr)
    std::vector<double> r_, psi_;                  // radius, potential (positive: -Phi)
    std::vector<double> mass_[2];                  // enclosed mass of halo, bulge
    std::vector<double> f_[2];                     // distribution functions at E = psi_[i]
    std::vector<double> bound_[2];                 // bounds of v^2 f(psi - v^2/2) for rejection
    std::vector<double> rho_[2];                   // the spherical profiles of halo, bulge
    double accept_bound_[2] = {1, 1};              // bounds of rho_c(psi(x)) / rho_c(r) for rejection
    double sigma0_ = 0;                            // the disc's central surface density
    std::unique_ptr<LegendrePotential> disc_rest_; // the potential of disc_rest_density
    std::vector<double> hbar_;                     // H(r mu) averaged over mu, on the radius grid
    double r_cap_[2] = {0, 0};                     // sampling radius of halo, bulge
    double lnR0_ = 0, dlnR_ = 0;                   // the disc's radius grid
    std::vector<double> vc2_, kappa2_, omega2_;    // midplane, on the disc's grid
};

/// What the equilibrium checks measure of one galaxy made by GalaxyGenerator (types in its order), about the centre
/// of mass and mean velocity of its disc and bulge, in model units.
struct GalaxyMeasures {
    double halo_half_mass = 0, bulge_half_mass = 0; ///< spherical radii holding half the particles
    double disc_half_mass = 0;                      ///< cylindrical radius holding half the disc's particles
    double thickness = 0;                           ///< median |z| of the disc particles at R_d <= R <= 3 R_d
    /// Circular speed from the accelerations, sqrt(-R a_R) over the disc particles within z0 / 4 of the midplane,
    /// over the model's, in the bins
    /// R / R_d in [1, 1.5), [1.5, 2) ... [3.5, 4]: the largest departure from 1, over the bins that hold at least
    /// measured_bin such particles; NaN when none does (a model of too few particles: not measured).
    double vc_worst = 0;
    double vc_worst_radius = 0; ///< the middle of that bin (kpc)
    /// Toomre Q at the model's q_radius from the particles: sigma_R and Sigma in R_q +- R_d / 4, kappa from the
    /// measured circular speeds at R_q and R_q +- R_d / 2; NaN when the annulus or a bin holds fewer than
    /// measured_bin particles.
    double toomre_q = 0;
    /// The particles a bin of the circular speed or the annulus of Q needs to be measured at all.
    static constexpr std::size_t measured_bin = 32;
};

/// Measures @p pos (x, y, z, mass), @p vel, @p acc of galaxy 0 of a one-galaxy GalaxyGenerator @p gen (in model
/// units: its setup without other units).
GalaxyMeasures measure_galaxy(const GalaxyGenerator& gen, std::span<const bn_f4> pos, std::span<const bn_f4> vel,
                              std::span<const bn_f4> acc);

} // namespace banyan
