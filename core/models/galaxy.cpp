/**
 * @file galaxy.cpp
 * @brief Disc galaxies in equilibrium and their mergers (see galaxy.hpp for the method and its papers).
 */
#include "core/models/galaxy.hpp"

#include "core/error.hpp"
#include "core/models/legendre_potential.hpp"
#include "core/numbers.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <stdexcept>
#include <cmath>
#include <limits>
#include <numbers>

namespace banyan {

namespace {

constexpr double pi = std::numbers::pi;
constexpr double model_mass_msun = 1e10; // model units: kpc, 10^10 Msun, G = 1

// ---- Random streams: one per mirrored pair, keyed by (seed, galaxy, component, pair) --------------------------

/// SplitMix64's output function (Steele, Lea & Flood 2014): a bijective 64-bit mix.
std::uint64_t mix(std::uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

std::uint64_t stream(std::uint64_t seed, int galaxy, int component, std::uint64_t pair)
{
    return mix(mix(mix(seed + 0x9E3779B97F4A7C15ull) ^ static_cast<std::uint64_t>(4 * galaxy + component)) ^ pair);
}

/// A double uniform in the open interval (0, 1): SplitMix64 (its sequence passes BigCrush).
double uniform(std::uint64_t& s)
{
    s += 0x9E3779B97F4A7C15ull;
    return (static_cast<double>(mix(s) >> 11) + 0.5) * 0x1p-53;
}

/// A standard normal deviate by Box-Muller.
double normal(std::uint64_t& s)
{
    const double u = uniform(s), v = uniform(s);
    return std::sqrt(-2.0 * std::log(u)) * std::cos(2.0 * pi * v);
}

void isotropic(std::uint64_t& s, double r, double out[3])
{
    const double z = 1.0 - 2.0 * uniform(s);
    const double phi = 2.0 * pi * uniform(s);
    const double rho = std::sqrt(std::max(0.0, 1.0 - z * z));
    out[0] = r * rho * std::cos(phi);
    out[1] = r * rho * std::sin(phi);
    out[2] = r * z;
}

// ---- Special functions ----------------------------------------------------------------------------------------

/// The Bessel function J1 (rational and asymptotic approximations of Press et al., Numerical Recipes, section 6.5;
/// absolute error below 1e-8). Our own, as std::cyl_bessel_j is missing from some standard libraries.
double bessel_j1(double x)
{
    const double ax = std::fabs(x);
    if (ax < 8.0) {
        const double y = x * x;
        const double a =
            x * (72362614232.0 +
                 y * (-7895059235.0 + y * (242396853.1 + y * (-2972611.439 + y * (15704.48260 + y * (-30.16036606))))));
        const double b =
            144725228442.0 + y * (2300535178.0 + y * (18583304.74 + y * (99447.43394 + y * (376.9991397 + y))));
        return a / b;
    }
    const double z = 8.0 / ax, y = z * z, xx = ax - 2.356194491;
    const double a = 1.0 + y * (0.183105e-2 + y * (-0.3516396496e-4 + y * (0.2457520174e-5 + y * (-0.240337019e-6))));
    const double b =
        0.04687499995 + y * (-0.2002690873e-3 + y * (0.8449199096e-5 + y * (-0.88228987e-6 + y * 0.105787412e-6)));
    const double j = std::sqrt(0.636619772 / ax) * (std::cos(xx) * a - z * std::sin(xx) * b);
    return x < 0 ? -j : j;
}

/// The digamma function psi(x), x > 0: recurrence up to x >= 6, then its asymptotic series.
double digamma(double x)
{
    double r = 0;
    while (x < 6.0) {
        r -= 1.0 / x;
        x += 1.0;
    }
    const double f = 1.0 / (x * x);
    return r + std::log(x) - 0.5 / x - f * (1.0 / 12 - f * (1.0 / 120 - f * (1.0 / 252 - f * (1.0 / 240))));
}

/// Z(k) = the integral of rho_z(z) exp(-k |z|) dz for rho_z = sech^2(z / z0) / (2 z0), a = k z0: a times the Laplace
/// transform of tanh, 1 - (a / 2) [psi(a / 4 + 1) - psi(a / 4 + 1 / 2)] (from tanh u = 1 - 2 sum (-1)^(n-1) e^-2nu).
double sech2_transform(double a)
{
    return 1.0 - 0.5 * a * (digamma(0.25 * a + 1.0) - digamma(0.25 * a + 0.5));
}

/// 8-point Gauss-Legendre nodes and weights on [-1, 1].
constexpr double gl_x[8] = {-0.9602898564975363, -0.7966664774136267, -0.5255324099163290, -0.1834346424956498,
                            0.1834346424956498,  0.5255324099163290,  0.7966664774136267,  0.9602898564975363};
constexpr double gl_w[8] = {0.1012285362903763, 0.2223810344533745, 0.3137066458778873, 0.3626837833783620,
                            0.3626837833783620, 0.3137066458778873, 0.2223810344533745, 0.1012285362903763};

// ---- Densities ------------------------------------------------------------------------------------------------

double hernquist_density(double m, double a, double r)
{
    return m * a / (2.0 * pi * r * std::pow(r + a, 3));
}

constexpr int grid_points = 4000;        // radius grid of the spherical tables
constexpr int disc_grid_points = 400;    // radius grid of the disc's midplane tables
constexpr double disc_max_r = 10.0;      // disc drawn to R <= 10 R_d
constexpr double disc_max_z = 5.0;       // and |z| <= 5 z0
constexpr double hernquist_cap = 100;    // Hernquist halo and bulge drawn to r <= 100 a (0.98 of the mass)
constexpr double nfw_decay = 0.1;        // NFW truncation length in units of r200
constexpr double disc_grid_start = 1e-3; // the disc's midplane tables from 1e-3 R_d (to 12 R_d)
static_assert(GalaxyLimits::min_q_radius >= disc_grid_start && GalaxyLimits::max_q_radius <= disc_max_r,
              "Q is set on the disc's tables, within the disc");

} // namespace

// ---- Models ---------------------------------------------------------------------------------------------------

GalaxyModel galaxy_preset(std::string_view name)
{
    GalaxyModel m; // the defaults are the Milky Way's
    if (name == "mw") return m;
    if (name == "m31") {
        m.halo = "nfw";
        m.halo_mass = 7.1e11, m.halo_concentration = 22, m.halo_scale = 8.18;
        m.disc_mass = 7.2e10, m.disc_scale_length = 5.4, m.disc_scale_height = 0.6;
        m.bulge_mass = 3.2e10, m.bulge_scale = 0.61;
        m.bh_mass = 1.4e8;
        return m;
    }
    throw UsageError(fmt::format("run: unknown --galaxy '{}': the presets are 'mw' (Milky Way) and 'm31'", name));
}

const std::vector<std::string_view>& galaxy_preset_names()
{
    static const std::vector<std::string_view> names{"mw", "m31"};
    return names;
}

std::string galaxy_cli_option(std::string_view key)
{
    std::string s(key);
    std::replace(s.begin(), s.end(), '_', '-');
    return (key == "n" ? "-" : "--") + s;
}

namespace {

using Limits = GalaxyLimits;

/// The sampling radius of the halo: NFW to r200 + 15 decay lengths, Hernquist to hernquist_cap scale radii.
double halo_cap(const GalaxyModel& m)
{
    const double rvir = m.halo_concentration * m.halo_scale;
    return m.halo == "nfw" ? rvir + 15.0 * (nfw_decay * rvir) : hernquist_cap * m.halo_scale;
}

/// The checks of one setup, each refusal "<what>: <option> ..." with the options spelt by name.
struct GalaxyChecks {
    const std::string& what;
    const OptionSpelling& name;

    [[noreturn]] void fail(const std::string& text) const { throw UsageError(fmt::format("{}: {}", what, text)); }

    /// v in [lo, hi] (both inclusive), or the refusal "<key> must be <range>, got v".
    void in(std::string_view key, double v, double lo, double hi, const std::string& range) const
    {
        if (!(v >= lo && v <= hi)) fail(fmt::format("{} must be {}, got {}", name(key), range, v));
    }
    /// Whether v lies in [lo, hi], with a little slack so that an edge written in decimal passes after rounding.
    static bool within(double v, double lo, double hi) { return v >= lo * (1 - 1e-12) && v <= hi * (1 + 1e-12); }
    /// v within [lo, hi] times the option @p ref_key's value @p ref, naming both and the range in @p unit.
    void relative(std::string_view key, double v, std::string_view ref_key, double ref, double lo, double hi,
                  const char* unit, const char* zero = "") const
    {
        if (!within(v, lo * ref, hi * ref))
            fail(fmt::format("{} {:.6g} {} must be {}{:g} to {:g} times {} ({:.6g} {}): in [{:.6g}, {:.6g}] {} "
                             "(README, \"Limits\")",
                             name(key), v, unit, zero, lo, hi, name(ref_key), ref, unit, lo * ref, hi * ref, unit));
    }

    void model(const GalaxyModel& m) const
    {
        if (m.halo != "nfw" && m.halo != "hernquist")
            fail(fmt::format("{} must be 'nfw' or 'hernquist', got '{}'", name("halo"), m.halo));
        // The disc is the reference: its mass and scale length absolute, the others relative to them.
        const std::string reference = fmt::format("in [{:g}, {:g}]", Limits::min_reference, Limits::max_reference);
        in("disc_mass", m.disc_mass, Limits::min_reference, Limits::max_reference, reference + " Msun");
        in("disc_scale_length", m.disc_scale_length, Limits::min_reference, Limits::max_reference, reference + " kpc");
        const double r = Limits::ratio, md = m.disc_mass, rd = m.disc_scale_length;
        relative("halo_mass", m.halo_mass, "disc_mass", md, 1 / r, r, "Msun");
        relative("halo_scale", m.halo_scale, "disc_scale_length", rd, 1 / r, r, "kpc");
        if (m.halo == "nfw") in("halo_concentration", m.halo_concentration, 1.0, 100.0, "in [1, 100]");
        relative("disc_scale_height", m.disc_scale_height, "disc_scale_length", rd, 1 / r, 1, "kpc");
        in("toomre_q", m.toomre_q, 0.1, 10.0, "in [0.1, 10]");
        if (m.q_radius != 0)
            relative("q_radius", m.q_radius, "disc_scale_length", rd, Limits::min_q_radius, Limits::max_q_radius, "kpc",
                     "0 (2.5 times the scale length) or ");
        if (m.bulge_mass != 0) {
            relative("bulge_mass", m.bulge_mass, "disc_mass", md, 1 / r, r, "Msun", "0 (none) or ");
            relative("bulge_scale", m.bulge_scale, "disc_scale_length", rd, 1 / r, r, "kpc");
        }
        if (m.bh_mass != 0) {
            const double galaxy = m.halo_mass + m.disc_mass + m.bulge_mass;
            if (!within(m.bh_mass, Limits::min_bh_fraction * galaxy, Limits::max_bh_fraction * galaxy))
                fail(fmt::format("{} {:.6g} Msun must be 0 (none) or {:g} to {:g} of the galaxy's mass ({}, {} and {}: "
                                 "{:.6g} Msun): in [{:.6g}, {:.6g}] Msun (README, \"Limits\")",
                                 name("bh_mass"), m.bh_mass, Limits::min_bh_fraction, Limits::max_bh_fraction,
                                 name("halo_mass"), name("disc_mass"), name("bulge_mass"), galaxy,
                                 Limits::min_bh_fraction * galaxy, Limits::max_bh_fraction * galaxy));
        }
        in("star_fraction", m.star_fraction, 0.0, std::nextafter(1.0, 0.0), "in [0, 1) (0: equal particle masses)");
    }

    void orbit(const GalaxyOrbit& o, const GalaxyModel& m) const
    {
        const double r = Limits::ratio, rd = m.disc_scale_length;
        in("mass_ratio", o.mass_ratio, 1 / r, 1.0, fmt::format("in [{:g}, 1] (second / first)", 1 / r));
        relative("pericentre", o.pericentre, "disc_scale_length", rd, 1 / r, r, "kpc");
        relative("separation", o.separation, "disc_scale_length", rd, 1 / r, r, "kpc");
        in("eccentricity", o.eccentricity, 0.0, 1e3, "in [0, 1000] (1: parabolic)");
        const double apo = o.eccentricity < 1 ? o.pericentre * (1 + o.eccentricity) / (1 - o.eccentricity) : INFINITY;
        if (!(o.separation >= o.pericentre * (1 - 1e-12) && o.separation <= apo * (1 + 1e-12)))
            fail(fmt::format("{} {} must lie between the pericentre {} and the apocentre {} of the orbit ({})",
                             name("separation"), o.separation, o.pericentre, apo, name("eccentricity")));
        for (double a : o.orientation)
            if (!std::isfinite(a)) fail(fmt::format("{} angles must be finite", name("orientation")));
    }

    /// The galaxy's scales in the setup's units: each within [min_float, max_float].
    void units(const GalaxySetup& s) const
    {
        if (!(s.length_unit_kpc > 0 && std::isfinite(s.length_unit_kpc) && s.mass_unit_msun > 0 &&
              std::isfinite(s.mass_unit_msun)))
            fail(fmt::format("{}: the units must be positive and finite", name("units")));
        const GalaxyModel& m = s.model;
        const double q = s.merger ? s.orbit.mass_ratio : 0.0, shrink = s.merger ? std::cbrt(q) : 1.0;
        const double inf = std::numeric_limits<double>::infinity();
        // Masses (Msun): no component has more than n particles, so none is lighter than its mass over n.
        const double total = (m.halo_mass + m.disc_mass + m.bulge_mass + m.bh_mass) * (1 + q);
        double lightest = std::min({m.halo_mass, m.disc_mass, m.bulge_mass > 0 ? m.bulge_mass : inf}) /
                          static_cast<double>(std::max<std::uint64_t>(s.n, 1));
        if (m.bh_mass > 0) lightest = std::min(lightest, m.bh_mass);
        if (s.merger) lightest *= q;
        // Lengths (kpc): the smallest scale (the second galaxy's, shrunk), and the extent.
        const bool bulge = m.bulge_mass > 0;
        const double shortest =
            std::min({m.halo_scale, m.disc_scale_length, m.disc_scale_height, bulge ? m.bulge_scale : inf}) * shrink;
        double extent =
            std::max({halo_cap(m), disc_max_r * m.disc_scale_length, bulge ? hernquist_cap * m.bulge_scale : 0.0});
        if (s.merger) extent += s.orbit.separation;
        const double mu = 1 / s.mass_unit_msun, lu = 1 / s.length_unit_kpc;
        const double M = total * mu, lo = shortest * lu, hi = extent * lu; // G = 1 in the setup's units too
        const std::string masses = fmt::format("{}, {}, {}, {} and {}", name("halo_mass"), name("disc_mass"),
                                               name("bulge_mass"), name("bh_mass"), name("n"));
        const std::string lengths = "masses and lengths";
        const std::pair<double, double> ranges[] = {{lightest * mu, M},
                                                    {lo, hi},
                                                    {std::sqrt(M / hi), std::sqrt(M / lo)},
                                                    {M / hi, M / lo},
                                                    {M / (hi * hi), M / (lo * lo)}};
        const char* quantity[] = {"masses (lightest particle to total)", "lengths (smallest scale to extent)",
                                  "speeds (sqrt(G M / r))", "potentials (G M / r)", "accelerations (G M / r^2)"};
        for (int k = 0; k < 5; ++k) {
            const auto [a, b] = ranges[k];
            if (a >= Limits::min_float && b <= Limits::max_float) continue;
            fail(fmt::format("in the particles' units ({}: length {:.4g} kpc, mass {:.4g} Msun), the galaxy's {} "
                             "would span {:.3g} to {:.3g}, beyond [{:g}, {:g}], where single precision holds them "
                             "with room for the particles' spread (README, \"Limits\"): choose other {} or other {}",
                             name("units"), s.length_unit_kpc, s.mass_unit_msun, quantity[k], a, b, Limits::min_float,
                             Limits::max_float, name("units"), k == 0 ? masses : lengths));
        }
    }
};

} // namespace

void check_galaxy_parameters(const GalaxySetup& setup, const std::string& what, const OptionSpelling& name)
{
    const GalaxyChecks check{what, name};
    check.model(setup.model);
    if (setup.merger) check.orbit(setup.orbit, setup.model);
    check.units(setup);
}

const std::vector<std::string_view>& galaxy_model_option_names()
{
    static const std::vector<std::string_view> names{
        "halo",         "halo_mass",         "halo_scale",        "halo_concentration",
        "disc_mass",    "disc_scale_length", "disc_scale_height", "toomre_q",
        "q_radius",     "bulge_mass",        "bulge_scale",       "bh_mass",
        "star_fraction"};
    return names;
}

const std::vector<std::string_view>& galaxy_orbit_option_names()
{
    static const std::vector<std::string_view> names{"mass_ratio", "pericentre", "eccentricity", "separation",
                                                     "orientation"};
    return names;
}

namespace {
/// The number option @p key of a model or an orbit (nullptr: not one).
double* galaxy_number(GalaxyModel& m, GalaxyOrbit& o, std::string_view key)
{
    const std::pair<std::string_view, double*> fields[] = {{"halo_mass", &m.halo_mass},
                                                           {"halo_scale", &m.halo_scale},
                                                           {"halo_concentration", &m.halo_concentration},
                                                           {"disc_mass", &m.disc_mass},
                                                           {"disc_scale_length", &m.disc_scale_length},
                                                           {"disc_scale_height", &m.disc_scale_height},
                                                           {"toomre_q", &m.toomre_q},
                                                           {"q_radius", &m.q_radius},
                                                           {"bulge_mass", &m.bulge_mass},
                                                           {"bulge_scale", &m.bulge_scale},
                                                           {"bh_mass", &m.bh_mass},
                                                           {"star_fraction", &m.star_fraction},
                                                           {"mass_ratio", &o.mass_ratio},
                                                           {"pericentre", &o.pericentre},
                                                           {"eccentricity", &o.eccentricity},
                                                           {"separation", &o.separation}};
    for (const auto& [name, field] : fields)
        if (name == key) return field;
    return nullptr;
}

double number_of(const std::string& text, const std::string& shown)
{
    const auto v = parse_decimal(text);
    if (!v) throw UsageError(fmt::format("{} expects a finite decimal number, got '{}'", shown, text));
    return *v;
}
} // namespace

void set_galaxy_option(GalaxyModel& m, GalaxyOrbit& o, std::string_view key, const std::string& value,
                       const std::string& shown)
{
    if (key == "halo") {
        m.halo = value;
        return;
    }
    if (key == "orientation") {
        std::array<double, 4> a{};
        std::size_t at = 0;
        for (int k = 0; k < 4; ++k) {
            const std::size_t comma = value.find(',', at);
            if ((k < 3) != (comma != std::string::npos))
                throw UsageError(fmt::format("{} expects four angles in degrees, i1,w1,i2,w2 (each disc's "
                                             "inclination and azimuth), got '{}'",
                                             shown, value));
            a[k] = number_of(value.substr(at, comma == std::string::npos ? std::string::npos : comma - at), shown);
            at = comma + 1;
        }
        o.orientation = a;
        return;
    }
    double* field = galaxy_number(m, o, key);
    if (!field) throw UsageError(fmt::format("{}: no such galaxy option", shown));
    *field = number_of(value, shown);
}

std::string galaxy_option_text(const GalaxyModel& m, const GalaxyOrbit& o, std::string_view key)
{
    if (key == "halo") return m.halo;
    if (key == "orientation")
        return fmt::format("{},{},{},{}", o.orientation[0], o.orientation[1], o.orientation[2], o.orientation[3]);
    GalaxyModel mm = m;
    GalaxyOrbit oo = o;
    const double* field = galaxy_number(mm, oo, key);
    if (!field) throw std::invalid_argument(fmt::format("galaxy_option_text: no option '{}'", key));
    return fmt::format("{}", *field);
}

GalaxyCounts galaxy_counts(const GalaxyModel& m, std::uint64_t n, double halo_particle_mass, const OptionSpelling& name)
{
    GalaxyCounts c;
    c.bh = m.bh_mass > 0 ? 1 : 0;
    const std::uint64_t rest = n - std::min(n, c.bh);
    const double stars_mass = m.disc_mass + m.bulge_mass;
    const double fraction = m.star_fraction > 0 ? m.star_fraction : stars_mass / (stars_mass + halo_particle_mass);
    const std::uint64_t stars =
        std::min<std::uint64_t>(rest, static_cast<std::uint64_t>(std::llround(fraction * static_cast<double>(rest))));
    c.halo = rest - stars;
    c.disc = m.bulge_mass > 0
                 ? static_cast<std::uint64_t>(std::llround(static_cast<double>(stars) * m.disc_mass / stars_mass))
                 : stars;
    c.bulge = stars - c.disc;
    if (c.halo < 2 || c.disc < 2 || (m.bulge_mass > 0 && c.bulge < 2))
        throw UsageError(fmt::format("galaxy: {} particles are too few for a halo, a disc{} of two particles or more "
                                     "(halo {}, disc {}, bulge {}{}): raise {} or {}",
                                     n, m.bulge_mass > 0 ? " and a bulge" : "", c.halo, c.disc, c.bulge,
                                     m.star_fraction > 0 ? "" : "; equal-mass particles", name("n"),
                                     name("star_fraction")));
    return c;
}

// ---- One galaxy's tables --------------------------------------------------------------------------------------

GalaxyProfile::GalaxyProfile(const GalaxyModel& in)
{
    halo_kind_ = in.halo;
    mh_ = in.halo_mass / model_mass_msun, ah_ = in.halo_scale, c_ = in.halo_concentration;
    md_ = in.disc_mass / model_mass_msun, rd_ = in.disc_scale_length, z0_ = in.disc_scale_height;
    mb_ = in.bulge_mass / model_mass_msun, ab_ = in.bulge_scale, mbh_ = in.bh_mass / model_mass_msun;
    q_radius_ = in.q_radius > 0 ? in.q_radius : 2.5 * rd_;
    const bool nfw = halo_kind_ == "nfw";
    double r_hi;
    if (nfw) {
        rvir_ = c_ * ah_, rdecay_ = nfw_decay * rvir_;
        rho_s_ = mh_ / (4.0 * pi * ah_ * ah_ * ah_ * (std::log(1.0 + c_) - c_ / (1.0 + c_)));
        // Kazantzidis et al. (2004), eq. 2: continuous density and logarithmic slope at r200.
        eps_ = -(1.0 + 3.0 * c_) / (1.0 + c_) + rvir_ / rdecay_;
        r_hi = 1000.0 * rvir_;
    } else {
        r_hi = 1000.0 * ah_;
    }
    r_cap_[halo] = halo_cap(in);
    r_cap_[bulge] = hernquist_cap * ab_;
    double r_lo = std::min({ah_, rd_, z0_});
    if (mb_ > 0) r_lo = std::min(r_lo, ab_);
    r_lo *= GalaxyLimits::grid_start;
    r_hi = std::max({r_hi, 1000.0 * rd_, mb_ > 0 ? 1000.0 * ab_ : 0.0});

    const int N = grid_points;
    lnr0_ = std::log(r_lo);
    dlnr_ = (std::log(r_hi) - lnr0_) / (N - 1);
    r_.resize(N), psi_.resize(N);
    auto& rho = rho_;
    rho[halo].resize(N), rho[bulge].resize(N);
    for (int i = 0; i < N; ++i) {
        const double r = std::exp(lnr0_ + i * dlnr_);
        r_[i] = r;
        if (nfw) {
            const double x = std::min(r, rvir_) / ah_;
            const double inner = rho_s_ / (x * (1.0 + x) * (1.0 + x));
            rho[halo][i] = r <= rvir_ ? inner : inner * std::pow(r / rvir_, eps_) * std::exp(-(r - rvir_) / rdecay_);
        } else {
            rho[halo][i] = hernquist_density(mh_, ah_, r);
        }
        rho[bulge][i] = mb_ > 0 ? hernquist_density(mb_, ab_, r) : 0.0;
    }
    // Enclosed masses: both profiles are cusps rho ~ 1/r inside r_lo (M = 2 pi rho r^3 there), then the trapezoid
    // rule in ln r.
    for (int c = 0; c < 2; ++c) {
        auto& m = mass_[c];
        m.resize(N);
        m[0] = 2.0 * pi * rho[c][0] * r_[0] * r_[0] * r_[0];
        for (int i = 1; i < N; ++i)
            m[i] =
                m[i - 1] + 2.0 * pi * dlnr_ * (rho[c][i - 1] * std::pow(r_[i - 1], 3) + rho[c][i] * std::pow(r_[i], 3));
    }
    // The disc's potential, split as Kuijken & Dubinski (1995) split it: Phi_ext = 4 pi G Sigma(r) H(z), with r the
    // spherical radius and H'' the vertical profile, carries the thin layer exactly; what it leaves,
    // rho_d - lap(Phi_ext) / (4 pi G), is smooth and goes to a Legendre expansion (l <= 24).
    sigma0_ = md_ / (2.0 * pi * rd_ * rd_);
    disc_rest_ = std::make_unique<LegendrePotential>([this](double r, double mu) { return disc_rest_density(r, mu); },
                                                     1e-3 * rd_, 60.0 * rd_, 320, 24, 32);
    std::vector<double> gx, gw;
    gauss_legendre_half(64, gx, gw);
    hbar_.resize(N);
    for (int i = 0; i < N; ++i) {
        double sum = 0;
        for (std::size_t k = 0; k < gx.size(); ++k)
            sum += gw[k] * vertical_h(r_[i] * gx[k]);
        hbar_[i] = sum;
    }
    // The reference potential psi = -Phi averaged over spheres, from which the halo's and the bulge's distribution
    // functions come: theirs and the black hole's from psi(r) = int_r^inf M / r^2, the disc's monopole above.
    std::vector<double> mt(N);
    for (int i = 0; i < N; ++i)
        mt[i] = mass_[halo][i] + mass_[bulge][i] + mbh_;
    psi_[N - 1] = mt[N - 1] / r_[N - 1];
    for (int i = N - 2; i >= 0; --i)
        psi_[i] = psi_[i + 1] + 0.5 * dlnr_ * (mt[i] / r_[i] + mt[i + 1] / r_[i + 1]);
    for (int i = 0; i < N; ++i)
        psi_[i] -= disc_monopole(r_[i]);

    // Eddington's inversion, f(E) = 1 / (sqrt(8) pi^2) d/dE int_0^E (drho/dpsi) dpsi / sqrt(E - psi) (the boundary
    // term vanishes: rho falls faster than psi at large r). drho/dpsi is taken piecewise linear between the nodes,
    // each piece integrated exactly against 1 / sqrt(E - psi); then F is differentiated on the nodes.
    for (int c = 0; c < 2; ++c) {
        auto& f = f_[c];
        f.assign(N, 0.0);
        bound_[c].assign(N, 0.0);
        if (c == bulge && mb_ <= 0) continue;
        std::vector<double> g(N), F(N, 0.0);
        for (int i = 0; i < N; ++i) {
            const int a = std::max(i - 1, 0), b = std::min(i + 1, N - 1);
            g[i] = (rho[c][b] - rho[c][a]) / (psi_[b] - psi_[a]);
        }
        for (int j = 0; j < N; ++j) {
            const double E = psi_[j];
            double sum = 0;
            for (int k = j; k < N - 1; ++k) {
                const double pa = psi_[k + 1], pb = psi_[k]; // pa < pb <= E
                const double ga = g[k + 1], s = (g[k] - g[k + 1]) / (pb - pa);
                const double ua = E - pa, ub = E - pb;
                sum += (ga + s * ua) * 2.0 * (std::sqrt(ua) - std::sqrt(ub)) -
                       s * (2.0 / 3.0) * (ua * std::sqrt(ua) - ub * std::sqrt(ub));
            }
            F[j] = sum;
        }
        for (int j = 0; j < N; ++j) {
            const int a = std::max(j - 1, 0), b = std::min(j + 1, N - 1);
            f[j] = std::max(0.0, (F[a] - F[b]) / (psi_[a] - psi_[b]) / (std::sqrt(8.0) * pi * pi));
        }
    }
    // Rejection bounds: the largest v^2 f(psi - v^2 / 2) at each radius, found on 256 speeds.
    for (int c = 0; c < 2; ++c) {
        if (c == bulge && mb_ <= 0) continue;
        for (int i = 0; i < N; ++i) {
            const double ve2 = 2.0 * (psi_[i] - psi_.back());
            double best = 0;
            for (int k = 1; k < 256; ++k) {
                const double v2 = ve2 * (k / 256.0) * (k / 256.0);
                const double E = psi_[i] - 0.5 * v2;
                // f on the nodes: psi_ falls with the index.
                const auto it = std::lower_bound(psi_.begin(), psi_.end(), E, std::greater<double>());
                const int j = static_cast<int>(std::clamp<std::ptrdiff_t>(it - psi_.begin(), 1, N - 1));
                const double t = (E - psi_[j]) / (psi_[j - 1] - psi_[j]);
                best = std::max(best, v2 * (f_[c][j] + t * (f_[c][j - 1] - f_[c][j])));
            }
            bound_[c][i] = best;
        }
    }

    // The halo and the bulge are drawn from their f(E) in the true, flattened potential (a steady state by Jeans'
    // theorem): where the disc deepens it, rho_c(psi) is denser than the spherical profile. Positions come by
    // rejection from the spherical profile; this bounds the ratio (over radii and 21 polar angles, 5% spare).
    for (int c = 0; c < 2; ++c) {
        accept_bound_[c] = 1.0;
        if (c == bulge && mb_ <= 0) continue;
        for (int i = 0; i < N && r_[i] <= r_cap_[c]; i += 4)
            for (int k = 0; k <= 20; ++k) {
                const double mu = k / 20.0, R = r_[i] * std::sqrt(1.0 - mu * mu), z = r_[i] * mu;
                if (rho[c][i] > 0)
                    accept_bound_[c] =
                        std::max(accept_bound_[c], spheroid_density(Component(c), psi_at(R, z)) / rho[c][i]);
            }
        accept_bound_[c] *= 1.05;
    }

    // The disc's midplane: its own radial force by the Hankel transform of the thick exponential disc,
    // a_d(R) = G M_d int_0^inf k J1(k R) Z(k) (1 + k^2 R_d^2)^(-3/2) dk, with x = k R, on panels of width about pi
    // (8-point Gauss-Legendre each) up to k R_d = 200, beyond which the integrand is below 1e-5 of its scale.
    const int M = disc_grid_points;
    lnR0_ = std::log(disc_grid_start * rd_);
    dlnR_ = (std::log(12.0 * rd_) - lnR0_) / (M - 1);
    vc2_.resize(M), kappa2_.resize(M), omega2_.resize(M);
    for (int j = 0; j < M; ++j) {
        const double R = std::exp(lnR0_ + j * dlnR_);
        const double x_max = 200.0 * R / rd_;
        const int panels = std::max(1, static_cast<int>(std::ceil(x_max / pi)));
        const double w = x_max / panels;
        double sum = 0;
        for (int p = 0; p < panels; ++p)
            for (int q = 0; q < 8; ++q) {
                const double x = w * (p + 0.5 * (gl_x[q] + 1.0));
                const double k = x / R;
                sum += 0.5 * w * gl_w[q] * x * bessel_j1(x) * sech2_transform(k * z0_) *
                       std::pow(1.0 + k * k * rd_ * rd_, -1.5);
            }
        const double ad = md_ * sum / (R * R);
        vc2_[j] = enclosed_spherical(R) / R + R * ad;
        omega2_[j] = vc2_[j] / (R * R);
    }
    for (int j = 0; j < M; ++j) {
        const int a = std::max(j - 1, 0), b = std::min(j + 1, M - 1);
        const double d = (omega2_[b] - omega2_[a]) / ((b - a) * dlnR_); // dOmega^2 / dln R
        kappa2_[j] = std::max(0.0, d + 4.0 * omega2_[j]);
    }
    // sigma_R^2 = sigma_R0^2 exp(-R / R_d), proportional to Sigma (Hernquist 1993), Q at q_radius as asked.
    const double sr = in.toomre_q * 3.36 * surface_density(q_radius_) / kappa(q_radius_);
    sigma_r0_ = sr * std::exp(0.5 * q_radius_ / rd_);
}

GalaxyProfile::~GalaxyProfile() = default;

double GalaxyProfile::interp_log_r(const std::vector<double>& t, double r) const
{
    const double u = (std::log(r) - lnr0_) / dlnr_;
    if (u <= 0) return t.front();
    const int i = std::min(static_cast<int>(u), static_cast<int>(t.size()) - 2);
    const double w = u - i;
    return t[i] + w * (t[i + 1] - t[i]);
}

double GalaxyProfile::disc_table(const std::vector<double>& t, double R) const
{
    const double u = (std::log(std::max(R, 1e-300)) - lnR0_) / dlnR_;
    if (u <= 0) return t.front();
    const int i = std::min(static_cast<int>(u), static_cast<int>(t.size()) - 2);
    const double w = std::min(u - i, 1.0);
    return t[i] + w * (t[i + 1] - t[i]);
}

double GalaxyProfile::enclosed_spherical(double r) const
{
    if (r <= 0) return mbh_;
    double m = mbh_;
    for (int c = 0; c < 2; ++c) {
        if (r < r_.front())
            m += mass_[c].front() * (r / r_.front()) * (r / r_.front()); // the 1/r cusp: M ~ r^2
        else
            m += interp_log_r(mass_[c], r);
    }
    return m;
}

// ---- The disc's potential and the total one, off the midplane -------------------------------------------------

double GalaxyProfile::vertical_h(double z) const
{
    // H(z) = (z0 / 2) ln cosh(z / z0): H'' = sech^2(z / z0) / (2 z0), the disc's vertical profile.
    const double x = std::fabs(z) / z0_;
    return 0.5 * z0_ * (x + std::log1p(std::exp(-2.0 * x)) - std::numbers::ln2);
}

double GalaxyProfile::disc_rest_density(double r, double mu) const
{
    // rho_d - lap(4 pi Sigma(r) H(z)) / (4 pi), with Sigma' = -Sigma / R_d, Sigma'' = Sigma / R_d^2:
    // [Sigma(R) - Sigma(r)] zeta(z) - H (Sigma'' + 2 Sigma' / r) - 2 H' Sigma' z / r.
    const double z = r * mu, R = r * std::sqrt(std::max(0.0, 1.0 - mu * mu));
    const double sr = sigma0_ * std::exp(-r / rd_), sR = sigma0_ * std::exp(-R / rd_);
    const double e = std::exp(-2.0 * std::fabs(z) / z0_);
    const double zeta = 2.0 * e / ((1.0 + e) * (1.0 + e) * z0_); // sech^2(z / z0) / (2 z0)
    const double h = vertical_h(z), dh = 0.5 * std::tanh(z / z0_);
    return (sR - sr) * zeta - h * sr * (1.0 / (rd_ * rd_) - 2.0 / (rd_ * r)) + 2.0 * dh * sr * z / (rd_ * r);
}

double GalaxyProfile::disc_monopole(double r) const
{
    return 4.0 * pi * sigma0_ * std::exp(-r / rd_) * interp_log_r(hbar_, r) + disc_rest_->monopole(r);
}

double GalaxyProfile::disc_potential(double R, double z) const
{
    const double r = std::hypot(R, z);
    return 4.0 * pi * sigma0_ * std::exp(-r / rd_) * vertical_h(z) + disc_rest_->potential(R, z);
}

void GalaxyProfile::disc_acceleration(double R, double z, double& a_R, double& a_z) const
{
    disc_rest_->acceleration(R, z, a_R, a_z);
    const double r = std::hypot(R, z);
    if (!(r > 0)) return;
    const double s = 4.0 * pi * sigma0_ * std::exp(-r / rd_), h = vertical_h(z);
    a_R += s * h * R / (rd_ * r);
    a_z -= s * (0.5 * std::tanh(z / z0_) - h * z / (rd_ * r));
}

double GalaxyProfile::reference_psi(double r) const
{
    return r < r_.front() ? psi_.front() + mbh_ * (1.0 / r - 1.0 / r_.front()) : interp_log_r(psi_, r);
}

double GalaxyProfile::psi_at(double R, double z) const
{
    const double r = std::hypot(R, z);
    return reference_psi(r) - (disc_potential(R, z) - disc_monopole(r));
}

double GalaxyProfile::spheroid_density(Component c, double psi) const
{
    // psi_ falls with the index; rho_c is a function of psi through the reference potential (what f(E) gives).
    if (psi >= psi_.front()) return rho_[c].front();
    if (psi <= psi_.back()) return 0.0;
    const auto it = std::lower_bound(psi_.begin(), psi_.end(), psi, std::greater<double>());
    const int j = static_cast<int>(std::clamp<std::ptrdiff_t>(it - psi_.begin(), 1, grid_points - 1));
    const double t = (psi - psi_[j]) / (psi_[j - 1] - psi_[j]);
    return rho_[c][j] + t * (rho_[c][j - 1] - rho_[c][j]);
}

double GalaxyProfile::circular_speed(double R) const
{
    if (R < std::exp(lnR0_)) return std::sqrt(std::max(0.0, enclosed_spherical(R) / std::max(R, 1e-300)));
    return std::sqrt(disc_table(vc2_, R));
}
double GalaxyProfile::kappa(double R) const
{
    return std::sqrt(disc_table(kappa2_, R));
}
double GalaxyProfile::omega(double R) const
{
    return std::sqrt(disc_table(omega2_, R));
}
double GalaxyProfile::surface_density(double R) const
{
    return md_ / (2.0 * pi * rd_ * rd_) * std::exp(-R / rd_);
}
double GalaxyProfile::sigma_r(double R) const
{
    return sigma_r0_ * std::exp(-0.5 * R / rd_);
}

double GalaxyProfile::enclosed_mass(double r) const
{
    const double x = r / rd_;
    return enclosed_spherical(r) + md_ * (1.0 - (1.0 + x) * std::exp(-x));
}

double GalaxyProfile::particle_mass_total(Component c) const
{
    if (c == bulge && mb_ <= 0) return 0;
    return interp_log_r(mass_[c], r_cap_[c]);
}

double GalaxyProfile::half_mass_radius(Component c) const
{
    const double half = 0.5 * particle_mass_total(c);
    const auto& m = mass_[c];
    const auto it = std::lower_bound(m.begin(), m.end(), half);
    const int i = static_cast<int>(std::clamp<std::ptrdiff_t>(it - m.begin(), 1, grid_points - 1));
    const double w = (half - m[i - 1]) / (m[i] - m[i - 1]);
    return std::exp(lnr0_ + (i - 1 + w) * dlnr_);
}

double GalaxyProfile::disc_half_mass_radius() const
{
    auto cum = [](double x) { return 1.0 - (1.0 + x) * std::exp(-x); };
    const double half = 0.5 * cum(disc_max_r);
    double lo = 0, hi = disc_max_r;
    for (int k = 0; k < 100; ++k) {
        const double mid = 0.5 * (lo + hi);
        (cum(mid) < half ? lo : hi) = mid;
    }
    return 0.5 * (lo + hi) * rd_;
}

double GalaxyProfile::sigma_z2(double R, double z) const
{
    // The vertical Jeans equation, sigma_z^2(z) = (1 / rho(z)) int_z^inf rho dPhi/dz dz', with the vertical pull of
    // the disc itself (its true potential, not a sheet's) and of the spherical components, G M(<r) z / r^3,
    // integrated over 6 z0 above |z| (where rho has fallen by e^-12) by Simpson's rule.
    const double az = std::fabs(z);
    const int n = 48; // even
    const double h = 6.0 * z0_ / n;
    const double ca = az / z0_;
    double sum = 0;
    for (int k = 0; k <= n; ++k) {
        const double zp = az + k * h;
        const double cb = zp / z0_;
        // (cosh(ca) / cosh(cb))^2 without overflow.
        const double ratio =
            std::exp(2.0 * (ca - cb)) * std::pow((1.0 + std::exp(-2.0 * ca)) / (1.0 + std::exp(-2.0 * cb)), 2);
        const double r = std::sqrt(R * R + zp * zp);
        double a_R, a_z;
        disc_acceleration(R, zp, a_R, a_z);
        const double pull = (r > 0 ? enclosed_spherical(r) * zp / (r * r * r) : 0.0) - a_z;
        sum += (k == 0 || k == n ? 1.0 : (k % 2 ? 4.0 : 2.0)) * ratio * pull;
    }
    return sum * h / 3.0;
}

void GalaxyProfile::draw_spherical(Component c, std::uint64_t& s, double x[3], double v[3]) const
{
    // The position: radius from the spherical profile's enclosed mass (linear in ln r between the nodes; r^2 within
    // the innermost node), the direction isotropic, kept with probability rho_c(psi(x)) / (bound rho_c(r)).
    const auto& m = mass_[c];
    double psi = 0;
    for (int tries = 0;; ++tries) {
        const double target = uniform(s) * particle_mass_total(c);
        double r;
        if (target <= m.front()) {
            r = r_.front() * std::sqrt(target / m.front());
        } else {
            const auto it = std::lower_bound(m.begin(), m.end(), target);
            const int i = static_cast<int>(std::clamp<std::ptrdiff_t>(it - m.begin(), 1, grid_points - 1));
            const double w = (target - m[i - 1]) / (m[i] - m[i - 1]);
            r = std::exp(lnr0_ + (i - 1 + w) * dlnr_);
        }
        isotropic(s, r, x);
        psi = psi_at(std::hypot(x[0], x[1]), x[2]);
        const double spherical = r < r_.front() ? rho_[c].front() : interp_log_r(rho_[c], r);
        if (tries >= 1000 || uniform(s) * accept_bound_[c] * spherical <= spheroid_density(c, psi)) break;
    }
    // The speed by rejection from v^2 f(psi - v^2 / 2) on [0, v_esc]; the bound is a function of psi.
    const auto at = std::lower_bound(psi_.begin(), psi_.end(), psi, std::greater<double>());
    const int i = static_cast<int>(std::clamp<std::ptrdiff_t>(at - psi_.begin(), 1, grid_points - 1));
    const double bound = 1.3 * std::max(bound_[c][i - 1], bound_[c][i]);
    const double ve = std::sqrt(std::max(0.0, 2.0 * (psi - psi_.back())));
    const auto& f = f_[c];
    double speed = 0;
    for (int tries = 0; tries < 100000; ++tries) {
        speed = ve * uniform(s);
        const double E = psi - 0.5 * speed * speed;
        const auto it = std::lower_bound(psi_.begin(), psi_.end(), E, std::greater<double>());
        const int j = static_cast<int>(std::clamp<std::ptrdiff_t>(it - psi_.begin(), 1, grid_points - 1));
        const double t = std::clamp((E - psi_[j]) / (psi_[j - 1] - psi_[j]), 0.0, 1.0);
        const double g = speed * speed * (f[j] + t * (f[j - 1] - f[j]));
        if (uniform(s) * bound < g) break;
    }
    isotropic(s, speed, v);
}

void GalaxyProfile::draw_disc(std::uint64_t& s, double x[3], double v[3]) const
{
    // R / R_d is Gamma(2) distributed (mass in [R, R + dR] ~ R exp(-R / R_d)): the sum of two exponential deviates.
    double R;
    do {
        R = -rd_ * (std::log(uniform(s)) + std::log(uniform(s)));
    } while (!(R <= disc_max_r * rd_));
    const double phi = 2.0 * pi * uniform(s);
    const double z = z0_ * std::atanh((2.0 * uniform(s) - 1.0) * std::tanh(disc_max_z));
    const double cp = std::cos(phi), sp = std::sin(phi);
    x[0] = R * cp, x[1] = R * sp, x[2] = z;

    // The radial pull at the particle's height, not the midplane's: the spherical components' G M(<r) R^2 / r^3
    // (a third weaker at z = 0.6 kpc above R = 1 kpc) plus the disc's own at (R, z). With the midplane's, the thick
    // inner disc starts with too much rotation and spreads, and the bulge with it.
    const double r = std::sqrt(R * R + z * z);
    double a_R, a_z;
    disc_acceleration(R, z, a_R, a_z);
    const double vc2 = r > 0 ? enclosed_spherical(r) * R * R / (r * r * r) - R * a_R : 0.0;
    const double k2 = disc_table(kappa2_, R), o2 = disc_table(omega2_, R);
    const double sr2 = sigma_r(R) * sigma_r(R);
    const double epi = o2 > 0 ? k2 / (4.0 * o2) : 1.0; // sigma_phi^2 / sigma_R^2 (epicyclic)
    // Asymmetric drift (Hernquist 1993, eq. 2.28) for Sigma sigma_R^2 ~ exp(-2 R / R_d).
    const double vphi2 = vc2 + sr2 * (1.0 - epi - 2.0 * R / rd_);
    const double vphi = std::sqrt(std::max(0.0, vphi2)) + std::sqrt(sr2 * epi) * normal(s);
    const double vr = std::sqrt(sr2) * normal(s);
    const double vz = std::sqrt(sigma_z2(R, z)) * normal(s);
    v[0] = vr * cp - vphi * sp;
    v[1] = vr * sp + vphi * cp;
    v[2] = vz;
}

// ---- The generator --------------------------------------------------------------------------------------------

struct GalaxyGenerator::Placement {
    double x[3] = {0, 0, 0}, v[3] = {0, 0, 0};
    double rot[3][3] = {{1, 0, 0}, {0, 1, 0}, {0, 0, 1}};
};

GalaxyGenerator::~GalaxyGenerator() = default;

GalaxyGenerator::GalaxyGenerator(const GalaxySetup& setup, const OptionSpelling& name) : n_(setup.n), seed_(setup.seed)
{
    check_galaxy_parameters(setup, "galaxy", name);
    length_factor_ = 1.0 / setup.length_unit_kpc;
    mass_factor_ = model_mass_msun / setup.mass_unit_msun;
    velocity_factor_ = std::sqrt(mass_factor_ / length_factor_);
    std::vector<GalaxyModel> models{setup.model};
    std::vector<std::uint64_t> n_gal{setup.n};
    if (setup.merger) {
        const double q = setup.orbit.mass_ratio, l = std::cbrt(q);
        GalaxyModel b = setup.model;
        b.halo_mass *= q, b.disc_mass *= q, b.bulge_mass *= q, b.bh_mass *= q;
        b.halo_scale *= l, b.disc_scale_length *= l, b.disc_scale_height *= l, b.bulge_scale *= l, b.q_radius *= l;
        models.push_back(b);
        n_gal = {setup.n - setup.n / 2, setup.n / 2};
    }
    for (std::size_t g = 0; g < models.size(); ++g) {
        profiles_.push_back(std::make_unique<GalaxyProfile>(models[g]));
        counts_.push_back(galaxy_counts(
            models[g], n_gal[g], profiles_[g]->particle_mass_total(GalaxyProfile::halo) * model_mass_msun, name));
        places_.emplace_back();
        types_[0] += counts_[g].halo, types_[1] += counts_[g].disc, types_[2] += counts_[g].bulge;
        types_[3] += counts_[g].bh;
    }
    if (setup.merger) {
        // The centres on the Kepler orbit of two point masses, each its galaxy's mass within the starting separation
        // (with the whole masses, halos that overlap at the start would meet far faster than the Kepler orbit and
        // fly apart again), centre of mass at rest at 0.
        const GalaxyOrbit& o = setup.orbit;
        double mass[2];
        for (int g = 0; g < 2; ++g)
            mass[g] = profiles_[g]->enclosed_mass(o.separation);
        const double mu = mass[0] + mass[1];
        const double r0 = o.separation;
        const double v2 = mu * (2.0 / r0 - (1.0 - o.eccentricity) / o.pericentre);
        const double vt = std::sqrt(mu * o.pericentre * (1.0 + o.eccentricity)) / r0;
        const double vr = -std::sqrt(std::max(v2 - vt * vt, 0.0)); // incoming
        const double rel_x[3] = {r0, 0, 0}, rel_v[3] = {vr, vt, 0};
        double total[2]; // what the particles carry: the centre of mass at 0 weighs these
        for (int g = 0; g < 2; ++g) {
            const GalaxyProfile& p = *profiles_[g];
            total[g] = p.particle_mass_total(GalaxyProfile::halo) + p.particle_mass_total(GalaxyProfile::bulge) +
                       p.disc_mass() + p.bh_mass();
        }
        const double side[2] = {-total[1] / (total[0] + total[1]), total[0] / (total[0] + total[1])};
        for (int g = 0; g < 2; ++g) {
            Placement& p = places_[g];
            for (int k = 0; k < 3; ++k)
                p.x[k] = side[g] * rel_x[k], p.v[k] = side[g] * rel_v[k];
            // Spin axis (sin i cos w, sin i sin w, cos i): rot = Rz(w) Ry(i).
            const double inc = o.orientation[2 * g] * pi / 180, az = o.orientation[2 * g + 1] * pi / 180;
            const double ci = std::cos(inc), si = std::sin(inc), cw = std::cos(az), sw = std::sin(az);
            const double m[3][3] = {{cw * ci, -sw, cw * si}, {sw * ci, cw, sw * si}, {-si, 0, ci}};
            std::copy(&m[0][0], &m[0][0] + 9, &p.rot[0][0]);
        }
    }
}

std::vector<std::uint64_t> GalaxyGenerator::black_holes() const
{
    std::vector<std::uint64_t> out;
    const std::uint64_t first = types_[0] + types_[1] + types_[2];
    for (std::uint64_t k = 0; k < types_[3]; ++k)
        out.push_back(first + k);
    return out;
}

Particles GalaxyGenerator::make(std::uint64_t first, std::uint64_t count) const
{
    if (first > n_ || count > n_ - first) throw std::out_of_range("GalaxyGenerator::make: beyond the particles");
    Particles out;
    out.pos.resize(count), out.vel.resize(count);
    // The blocks of the order: component (halo, disc, bulge, black hole) major, galaxy minor.
    struct Block {
        std::uint64_t begin, size;
        int component, galaxy;
    };
    std::vector<Block> blocks;
    std::uint64_t at = 0;
    for (int c = 0; c < 4; ++c)
        for (int g = 0; g < galaxies(); ++g) {
            const GalaxyCounts& k = counts_[g];
            const std::uint64_t size = c == 0 ? k.halo : c == 1 ? k.disc : c == 2 ? k.bulge : k.bh;
            blocks.push_back({at, size, c, g});
            at += size;
        }
    std::size_t b = 0;
    for (std::uint64_t i = first; i < first + count; ++i) {
        while (i >= blocks[b].begin + blocks[b].size)
            ++b;
        const Block& blk = blocks[b];
        const GalaxyProfile& p = *profiles_[blk.galaxy];
        const std::uint64_t j = i - blk.begin;
        double x[3] = {0, 0, 0}, v[3] = {0, 0, 0}, m = 0;
        std::uint64_t s = stream(seed_, blk.galaxy, blk.component, j / 2);
        switch (blk.component) {
        case 0:
            p.draw_spherical(GalaxyProfile::halo, s, x, v);
            m = p.particle_mass_total(GalaxyProfile::halo) / static_cast<double>(blk.size);
            break;
        case 1:
            p.draw_disc(s, x, v);
            m = p.disc_mass() / static_cast<double>(blk.size);
            break;
        case 2:
            p.draw_spherical(GalaxyProfile::bulge, s, x, v);
            m = p.particle_mass_total(GalaxyProfile::bulge) / static_cast<double>(blk.size);
            break;
        default:
            m = p.bh_mass();
            break;
        }
        if (j % 2 == 1)
            for (int k = 0; k < 3; ++k)
                x[k] = -x[k], v[k] = -v[k];
        const Placement& pl = places_[blk.galaxy];
        double X[3], V[3];
        for (int r = 0; r < 3; ++r) {
            X[r] = pl.x[r] + pl.rot[r][0] * x[0] + pl.rot[r][1] * x[1] + pl.rot[r][2] * x[2];
            V[r] = pl.v[r] + pl.rot[r][0] * v[0] + pl.rot[r][1] * v[1] + pl.rot[r][2] * v[2];
        }
        const std::size_t o = i - first;
        out.pos[o] = bn_f4{static_cast<float>(X[0] * length_factor_), static_cast<float>(X[1] * length_factor_),
                           static_cast<float>(X[2] * length_factor_), static_cast<float>(m * mass_factor_)};
        out.vel[o] = bn_f4{static_cast<float>(V[0] * velocity_factor_), static_cast<float>(V[1] * velocity_factor_),
                           static_cast<float>(V[2] * velocity_factor_), 0.0f};
    }
    return out;
}

// ---- Measures --------------------------------------------------------------------------------------------------

namespace {
double median_of(std::vector<double> v)
{
    if (v.empty()) return 0;
    const std::size_t k = v.size() / 2;
    std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(k), v.end());
    return v[k];
}
} // namespace

GalaxyMeasures measure_galaxy(const GalaxyGenerator& gen, std::span<const bn_f4> pos, std::span<const bn_f4> vel,
                              std::span<const bn_f4> acc)
{
    if (gen.galaxies() != 1 || pos.size() != gen.size() || vel.size() != pos.size() || acc.size() != pos.size())
        throw std::invalid_argument("measure_galaxy: one galaxy's particles, velocities and accelerations");
    const GalaxyProfile& p = gen.profile(0);
    const auto t = gen.type_counts();
    const std::size_t halo_end = t[0], disc_end = halo_end + t[1], bulge_end = disc_end + t[2];
    // The centre: disc and bulge, mass-weighted.
    double c[3] = {0, 0, 0}, cv[3] = {0, 0, 0}, m = 0;
    for (std::size_t i = halo_end; i < bulge_end; ++i) {
        const double x[3] = {pos[i].x, pos[i].y, pos[i].z}, v[3] = {vel[i].x, vel[i].y, vel[i].z};
        for (int k = 0; k < 3; ++k)
            c[k] += pos[i].w * x[k], cv[k] += pos[i].w * v[k];
        m += pos[i].w;
    }
    for (int k = 0; k < 3; ++k)
        c[k] /= m, cv[k] /= m;
    auto radius = [&](std::size_t i, bool spherical) {
        const double dx = pos[i].x - c[0], dy = pos[i].y - c[1], dz = pos[i].z - c[2];
        return std::sqrt(dx * dx + dy * dy + (spherical ? dz * dz : 0.0));
    };
    GalaxyMeasures out;
    std::vector<double> r;
    for (std::size_t i = 0; i < halo_end; ++i)
        r.push_back(radius(i, true));
    out.halo_half_mass = median_of(r);
    r.clear();
    for (std::size_t i = disc_end; i < bulge_end; ++i)
        r.push_back(radius(i, true));
    out.bulge_half_mass = median_of(r);
    r.clear();
    std::vector<double> z;
    const double rd = p.scale_length();
    for (std::size_t i = halo_end; i < disc_end; ++i) {
        const double R = radius(i, false);
        r.push_back(R);
        if (R >= rd && R <= 3 * rd) z.push_back(std::fabs(pos[i].z - c[2]));
    }
    out.disc_half_mass = median_of(r);
    out.thickness = median_of(z);

    // Circular speeds from the accelerations in bins of the disc particles' radii: sum of -R a_R over the sum of
    // the model's v_c^2 at the same radii.
    auto vc_ratio2 = [&](double lo, double hi, double* mean_vc2, std::size_t* in_bin = nullptr) {
        double meas = 0, model = 0;
        std::size_t count = 0;
        for (std::size_t i = halo_end; i < disc_end; ++i) {
            const double dx = pos[i].x - c[0], dy = pos[i].y - c[1];
            const double R = std::hypot(dx, dy);
            // Near the midplane only: off it the radial pull is weaker than the model's midplane one.
            if (R < lo || R >= hi || std::fabs(pos[i].z - c[2]) > 0.25 * p.scale_height()) continue;
            meas += -(acc[i].x * dx + acc[i].y * dy);
            const double v = p.circular_speed(R);
            model += v * v;
            ++count;
        }
        if (mean_vc2) *mean_vc2 = count ? meas / static_cast<double>(count) : 0.0;
        if (in_bin) *in_bin = count;
        return model > 0 ? meas / model : 0.0;
    };
    // A bin of too few particles measures nothing (an empty one gave 0, a "-100 %" departure).
    out.vc_worst = std::numeric_limits<double>::quiet_NaN();
    for (double b = 1.0; b < 4.0; b += 0.5) {
        std::size_t in_bin = 0;
        const double ratio = std::sqrt(std::max(0.0, vc_ratio2(b * rd, (b + 0.5) * rd, nullptr, &in_bin)));
        if (in_bin < GalaxyMeasures::measured_bin) continue;
        if (!(std::fabs(ratio - 1.0) < std::fabs(out.vc_worst - 1.0))) {
            out.vc_worst = ratio;
            out.vc_worst_radius = (b + 0.25) * rd;
        }
    }
    // Toomre Q at R_q.
    const double rq = p.q_radius(), h = 0.25 * rd;
    double sum = 0, sum2 = 0, mass = 0;
    std::size_t count = 0;
    for (std::size_t i = halo_end; i < disc_end; ++i) {
        const double dx = pos[i].x - c[0], dy = pos[i].y - c[1];
        const double R = std::hypot(dx, dy);
        if (R < rq - h || R >= rq + h) continue;
        const double vr = ((vel[i].x - cv[0]) * dx + (vel[i].y - cv[1]) * dy) / R;
        sum += vr, sum2 += vr * vr, mass += pos[i].w;
        ++count;
    }
    out.toomre_q = std::numeric_limits<double>::quiet_NaN();
    if (count >= GalaxyMeasures::measured_bin) {
        const double n = static_cast<double>(count);
        const double sigma = std::sqrt(std::max(0.0, (sum2 - sum * sum / n) / (n - 1)));
        const double surface = mass / (pi * ((rq + h) * (rq + h) - (rq - h) * (rq - h)));
        // Omega^2 = v_c^2 / R^2 at R_q - 2h, R_q, R_q + 2h (bins of width 2h); kappa^2 = R dOmega^2/dR + 4 Omega^2.
        double w[3];
        std::size_t fewest = count;
        for (int k = 0; k < 3; ++k) {
            const double at = rq + (k - 1) * 2 * h;
            double vc2 = 0;
            std::size_t in_bin = 0;
            vc_ratio2(at - h, at + h, &vc2, &in_bin);
            w[k] = vc2 / (at * at);
            fewest = std::min(fewest, in_bin);
        }
        const double kappa2 = rq * (w[2] - w[0]) / (4 * h) + 4 * w[1];
        if (fewest >= GalaxyMeasures::measured_bin)
            out.toomre_q = sigma * std::sqrt(std::max(0.0, kappa2)) / (3.36 * surface);
    }
    return out;
}

} // namespace banyan
