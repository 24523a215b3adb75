/**
 * @file initial_conditions.cpp
 * @brief Uniform spheres, the galaxy merger, the Hernquist sphere, the exponential disc and the models by name (see
 *        initial_conditions.hpp).
 */
#include "core/models/initial_conditions.hpp"

#include "core/error.hpp"
#include "core/models/centring.hpp"
#include "core/models/counter_rng.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numbers>
#include <numeric>
#include <random>
#include <string>

namespace banyan {

namespace {

using draw::isotropic;
using draw::uniform;

/// A standard normal deviate by Box-Muller (our own, for the same values on every standard library).
template <class Rng> double normal(Rng& rng)
{
    const double u = uniform(rng), v = uniform(rng);
    return std::sqrt(-2.0 * std::log(u)) * std::cos(2.0 * std::numbers::pi * v);
}

/// The share of particles the whole of which is @p whole (a model that needs all its particles at once).
Particles slice(Particles whole, Share share)
{
    const std::size_t a = std::min(share.first, whole.size()), b = a + share.size(whole.size());
    if (a == 0 && b == whole.size()) return whole;
    Particles p;
    p.pos.assign(whole.pos.begin() + static_cast<std::ptrdiff_t>(a),
                 whole.pos.begin() + static_cast<std::ptrdiff_t>(b));
    p.vel.assign(whole.vel.begin() + static_cast<std::ptrdiff_t>(a),
                 whole.vel.begin() + static_cast<std::ptrdiff_t>(b));
    return p;
}

/// Hernquist's distribution function (1990, eq. 17) without its constant factor, for q^2 = a eps / (G M) (eps the
/// binding energy per unit mass) and s = 1 - q^2, passed apart so that the caller computes s without cancellation
/// near the cusp: 3 asin q + q (1 - q^2)^(1/2) (1 - 2 q^2) (8 q^4 - 8 q^2 - 3), over (1 - q^2)^(5/2). It rises
/// monotonically with q. For small q the bracket loses its leading digits (it is 128 q^5 / 5 + ...), so there it
/// is summed as its series.
double hernquist_df(double q2, double s)
{
    if (!(q2 > 0.0)) return 0.0;
    const double q = std::sqrt(q2);
    double b;
    if (q < 0.1) // next term O(q^15): relative error below 1e-12
        b = q2 * q2 * q *
            (128.0 / 5.0 + q2 * (-192.0 / 7.0 + q2 * (16.0 / 3.0 + q2 * (8.0 / 11.0 + q2 * (3.0 / 13.0)))));
    else
        b = 3.0 * std::asin(q) + q * std::sqrt(s) * (1.0 - 2.0 * q2) * (8.0 * q2 * q2 - 8.0 * q2 - 3.0);
    return b / (s * s * std::sqrt(s));
}

} // namespace

Particles uniform_sphere(std::size_t n, std::uint64_t seed, bool virialised, Share share)
{
    if (n == 0) throw UsageError("uniform sphere: no particles (N = 0)");
    const double radius = virialised ? 1.2 : 2.4;
    const double sigma = virialised ? std::sqrt(1.0 / (5.0 * radius)) : 0.0;
    const double m = 1.0 / static_cast<double>(n);
    return Centring(n, std::move(share)).make([&](std::size_t i, double& mi, double* x, double* v) {
        CounterRng rng(seed, i);
        double p[3], r2;
        do {
            for (double& c : p)
                c = 2.0 * uniform(rng) - 1.0;
            r2 = p[0] * p[0] + p[1] * p[1] + p[2] * p[2];
        } while (r2 > 1.0);
        for (int k = 0; k < 3; ++k)
            x[k] = radius * p[k], v[k] = 0.0;
        if (virialised)
            for (int k = 0; k < 3; ++k)
                v[k] = sigma * normal(rng);
        mi = m;
    });
}

void check_merger_options(const MergerOptions& o)
{
    // Lengths within 10^4 of the galaxies' sizes (radii 0.6 and 0.9): the particles' positions and speeds then stay
    // far inside the range the centring's exact sums and single precision hold (Centring: |m x| < 2^26).
    for (const auto& [name, v] : {std::pair{"pericentre", o.pericentre}, {"separation", o.separation}})
        if (!(v >= merger_min_length && v <= merger_max_length))
            throw UsageError(fmt::format("merger: --{} must be in [{:g}, {:g}] (N-body units: the galaxies' radii "
                                         "are 0.6 and 0.9), got {}",
                                         name, merger_min_length, merger_max_length, v));
    if (!(o.eccentricity >= 0.0 && o.eccentricity < 1.0))
        throw UsageError(
            fmt::format("merger: --eccentricity must be in [0, 1) (a bound orbit), got {}", o.eccentricity));
    // The smaller galaxy's central particle, a quarter of this of the total mass, stays far above the 1e-30 of it
    // that single precision holds beside the total (README, "Limits"); below, it would round to 0.
    if (!(o.bh_fraction >= 1e-20 && o.bh_fraction < 1.0))
        throw UsageError(fmt::format("merger: --bh-fraction must be in [1e-20, 1), got {}", o.bh_fraction));
    const double apocentre = o.pericentre * (1.0 + o.eccentricity) / (1.0 - o.eccentricity);
    // A little slack, so that a circular orbit (e = 0) accepts separation == pericentre after rounding.
    if (!(o.separation >= o.pericentre * (1 - 1e-12) && o.separation <= apocentre * (1 + 1e-12)))
        throw UsageError(fmt::format("merger: --separation {} must lie between the pericentre {} and the apocentre "
                                     "{} of the orbit (eccentricity {})",
                                     o.separation, o.pericentre, apocentre, o.eccentricity));
}

Merger galaxy_merger(std::size_t n, std::uint64_t seed, const MergerOptions& o, Share share)
{
    if (n < 4) throw UsageError(fmt::format("merger: needs at least 4 particles (two per galaxy), got {}", n));
    check_merger_options(o);
    const std::size_t n_gal[2] = {n - n / 2, n / 2};
    const double mass[2] = {0.75, 0.25};

    // Kepler orbit of the centres, relative coordinates (r from the larger to the smaller), G (M1 + M2) = 1.
    const double a = o.pericentre / (1.0 - o.eccentricity);
    const double r0 = o.separation;
    const double h = std::sqrt(a * (1.0 - o.eccentricity * o.eccentricity));
    const double v2 = std::max(2.0 / r0 - 1.0 / a, 0.0);
    const double vt = h / r0;
    const double vr = -std::sqrt(std::max(v2 - vt * vt, 0.0)); // incoming
    const double rel_x[3] = {r0, 0.0, 0.0}, rel_v[3] = {vr, vt, 0.0};
    // The larger galaxy sits at -M2 r, the smaller at +M1 r (total mass 1), so that the centre of mass is at rest.
    const double side[2] = {-mass[1], mass[0]};

    Centring out(n, share);
    std::size_t at = 0; // the index of the galaxy's first particle, its central one
    for (int g = 0; g < 2; ++g) {
        const double M = mass[g];
        const double R = std::cbrt(M);
        const double V = std::sqrt(M / R);
        const double m_bh = o.bh_fraction * M;
        const std::size_t np = n_gal[g] - 1;
        const double m_star = (M - m_bh) / static_cast<double>(np);
        double x[3], v[3];
        for (int k = 0; k < 3; ++k)
            x[k] = side[g] * rel_x[k], v[k] = side[g] * rel_v[k];
        if (at >= out.begin() && at < out.end()) out.add(at, m_bh, x, v);
        // Each galaxy's Plummer sphere, centred on its own first (particle j of it is particle at + 1 + j of all),
        // then placed on the orbit.
        const std::uint64_t seed_g = seed + static_cast<std::uint64_t>(g) * 0x9E3779B97F4A7C15ull;
        const std::size_t first = at + 1;
        const std::size_t lo = std::max(out.begin(), first), hi = std::min(out.end(), first + np);
        Share own{lo > first ? lo - first : 0, hi > lo ? hi - lo : 0, share.sum_over_ranks};
        Centring sphere(np, own);
        const double w = 1.0 / static_cast<double>(np);
        for (std::size_t j = sphere.begin(); j < sphere.end(); ++j) {
            plummer_particle(seed_g, j, {}, x, v);
            sphere.add(j, w, x, v);
        }
        double cx[3], cv[3];
        sphere.centre(cx, cv);
        for (std::size_t i = lo; i < hi; ++i) {
            plummer_particle(seed_g, i - first, {}, x, v);
            double xs[3], vs[3];
            for (int k = 0; k < 3; ++k) {
                xs[k] = side[g] * rel_x[k] + R * (x[k] - cx[k]);
                vs[k] = side[g] * rel_v[k] + V * (v[k] - cv[k]);
            }
            out.add(i, m_star, xs, vs);
        }
        at += n_gal[g];
    }
    Merger result;
    result.particles = out.finish();
    result.centre_a = 0;
    result.centre_b = static_cast<std::uint32_t>(n_gal[0]);
    return result;
}

Particles hernquist_sphere(std::size_t n, std::uint64_t seed, Share share)
{
    if (n == 0) throw UsageError("hernquist sphere: no particles (N = 0)");
    const double a = hernquist_scale_radius;
    const double m = 1.0 / static_cast<double>(n);
    return Centring(n, std::move(share)).make([&](std::size_t i, double& mi, double* x, double* v) {
        CounterRng rng(seed, i);
        // Radius: M(<r) = r^2 / (r + a)^2 = X, so r = a sqrt(X) / (1 - sqrt(X)); X < 0.999 is the truncation.
        const double sx = std::sqrt(hernquist_mass_fraction * uniform(rng));
        const double r = a * sx / (1.0 - sx);
        // Speed: density proportional to v^2 f(psi - v^2 / 2) on [0, v_esc]. f rises with the binding energy, so
        // v_esc^2 f(psi) bounds it everywhere (loosely: some 28 draws per particle, 1.4 s for 10^6 particles).
        const double psi = 1.0 / (r + a);
        const double ve2 = 2.0 * psi;
        const double s0 = r / (r + a); // 1 - a psi, without cancellation at small r
        const double bound = ve2 * hernquist_df(a * psi, s0);
        double speed;
        for (;;) {
            speed = std::sqrt(ve2) * uniform(rng);
            const double v2 = speed * speed;
            const double g = v2 * hernquist_df(a * (psi - 0.5 * v2), s0 + 0.5 * a * v2);
            if (uniform(rng) * bound < g) break;
        }
        isotropic(rng, r, x);
        isotropic(rng, speed, v);
        mi = m;
    });
}

Particles exponential_disc(std::size_t n, std::uint64_t seed)
{
    if (n == 0) throw UsageError("exponential disc: no particles (N = 0)");
    std::mt19937_64 rng(seed);
    const double rd = disc_scale_length, z0 = disc_scale_height;
    const double zt = std::tanh(disc_max_height / z0);
    const double mass = 1.0 / static_cast<double>(n);
    std::vector<double> m(n, mass), x(3 * n), v(3 * n), r2(n);
    for (std::size_t i = 0; i < n; ++i) {
        // The mass in [R, R + dR] is proportional to R exp(-R / Rd): R / Rd is Gamma(2) distributed, the sum of two
        // exponential deviates.
        double rc;
        do {
            rc = -rd * (std::log(uniform(rng)) + std::log(uniform(rng)));
        } while (!(rc <= disc_max_radius));
        const double phi = 2.0 * std::numbers::pi * uniform(rng);
        // The mass below z is proportional to tanh(z / z0): inverted over (-tanh(5), tanh(5)).
        const double z = z0 * std::atanh((2.0 * uniform(rng) - 1.0) * zt);
        x[3 * i] = rc * std::cos(phi);
        x[3 * i + 1] = rc * std::sin(phi);
        x[3 * i + 2] = z;
        r2[i] = rc * rc + z * z;
    }
    // Enclosed mass from the particles themselves, so that the truncation (and the sample's noise) is in it: the
    // particle of rank k by spherical radius has k particles inside. Ties are broken by index, for one order on
    // every platform (std::sort is not stable).
    std::vector<std::size_t> order(n);
    std::iota(order.begin(), order.end(), std::size_t{0});
    std::sort(order.begin(), order.end(),
              [&](std::size_t i, std::size_t j) { return r2[i] < r2[j] || (r2[i] == r2[j] && i < j); });
    std::vector<double> vc(n), vphi(n);
    for (std::size_t k = 0; k < n; ++k) {
        const std::size_t i = order[k];
        const double r = std::sqrt(r2[i]);
        const double mr = static_cast<double>(k) * mass;
        const double rc2 = x[3 * i] * x[3 * i] + x[3 * i + 1] * x[3 * i + 1];
        vc[i] = r > 0.0 ? std::sqrt(mr / r) : 0.0;
        vphi[i] = r > 0.0 ? std::sqrt(mr * rc2 / (r2[i] * r)) : 0.0;
    }
    for (std::size_t i = 0; i < n; ++i) {
        const double rc = std::hypot(x[3 * i], x[3 * i + 1]);
        // Rotation about +z: along (-y, x, 0) / R.
        const double ex = rc > 0.0 ? -x[3 * i + 1] / rc : 0.0, ey = rc > 0.0 ? x[3 * i] / rc : 0.0;
        const double sigma = 0.1 * vc[i];
        v[3 * i] = vphi[i] * ex + sigma * normal(rng);
        v[3 * i + 1] = vphi[i] * ey + sigma * normal(rng);
        v[3 * i + 2] = sigma * normal(rng);
    }
    Centring out(n, {});
    for (std::size_t i = 0; i < n; ++i)
        out.add(i, m[i], &x[3 * i], &v[3 * i]);
    return out.finish();
}

const std::vector<std::string_view>& model_names()
{
    static const std::vector<std::string_view> names{"plummer", "hernquist", "disc"};
    return names;
}

Particles make_model(std::string_view name, std::size_t n, std::uint64_t seed, Share share)
{
    const auto& names = model_names();
    if (std::find(names.begin(), names.end(), name) == names.end()) {
        std::string list;
        for (std::size_t i = 0; i < names.size(); ++i)
            list += fmt::format("{}'{}'", i == 0 ? "" : i + 1 == names.size() ? " or " : ", ", names[i]);
        throw UsageError(fmt::format("unknown model '{}': the models are {}", name, list));
    }
    if (n == 0) throw UsageError(fmt::format("model '{}': no particles (N = 0)", name));
    if (name == "hernquist") return hernquist_sphere(n, seed, share);
    if (name == "disc") return slice(exponential_disc(n, seed), share); // its velocities need every radius
    return plummer(n, seed, {}, share);
}

} // namespace banyan
