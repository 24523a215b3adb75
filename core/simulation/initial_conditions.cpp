/**
 * @file initial_conditions.cpp
 * @brief Uniform spheres and the galaxy merger (see initial_conditions.hpp).
 */
#include "core/simulation/initial_conditions.hpp"

#include "core/error.hpp"

#include <fmt/format.h>

#include <cmath>
#include <numbers>
#include <random>

namespace banyan {

namespace {

/// A double uniform in the open interval (0, 1), from the top 53 bits (the same on every standard library).
double uniform(std::mt19937_64& rng) { return (static_cast<double>(rng() >> 11) + 0.5) * 0x1.0p-53; }

/// A standard normal deviate by Box-Muller (our own, for the same values on every standard library).
double normal(std::mt19937_64& rng)
{
    const double u = uniform(rng), v = uniform(rng);
    return std::sqrt(-2.0 * std::log(u)) * std::cos(2.0 * std::numbers::pi * v);
}

/// Removes the mass-weighted mean position and velocity (in double precision) and rounds to float.
Particles centred(const std::vector<double>& m, const std::vector<double>& x, const std::vector<double>& v)
{
    const std::size_t n = m.size();
    double mt = 0, cx[3] = {0, 0, 0}, cv[3] = {0, 0, 0};
    for (std::size_t i = 0; i < n; ++i) {
        mt += m[i];
        for (int k = 0; k < 3; ++k) {
            cx[k] += m[i] * x[3 * i + k];
            cv[k] += m[i] * v[3 * i + k];
        }
    }
    for (int k = 0; k < 3; ++k) {
        cx[k] /= mt;
        cv[k] /= mt;
    }
    Particles p;
    p.pos.resize(n);
    p.vel.resize(n);
    for (std::size_t i = 0; i < n; ++i) {
        p.pos[i] = bn_f4{static_cast<float>(x[3 * i] - cx[0]), static_cast<float>(x[3 * i + 1] - cx[1]),
                         static_cast<float>(x[3 * i + 2] - cx[2]), static_cast<float>(m[i])};
        p.vel[i] = bn_f4{static_cast<float>(v[3 * i] - cv[0]), static_cast<float>(v[3 * i + 1] - cv[1]),
                         static_cast<float>(v[3 * i + 2] - cv[2]), 0.0f};
    }
    return p;
}

} // namespace

Particles uniform_sphere(std::size_t n, std::uint64_t seed, bool virialised)
{
    if (n == 0) throw UsageError("uniform sphere: no particles (N = 0)");
    std::mt19937_64 rng(seed);
    const double radius = virialised ? 1.2 : 2.4;
    const double sigma = virialised ? std::sqrt(1.0 / (5.0 * radius)) : 0.0;
    std::vector<double> m(n, 1.0 / static_cast<double>(n)), x(3 * n), v(3 * n, 0.0);
    for (std::size_t i = 0; i < n; ++i) {
        double p[3], r2;
        do {
            for (double& c : p) c = 2.0 * uniform(rng) - 1.0;
            r2 = p[0] * p[0] + p[1] * p[1] + p[2] * p[2];
        } while (r2 > 1.0);
        for (int k = 0; k < 3; ++k) x[3 * i + k] = radius * p[k];
        if (virialised)
            for (int k = 0; k < 3; ++k) v[3 * i + k] = sigma * normal(rng);
    }
    return centred(m, x, v);
}

void check_merger_options(const MergerOptions& o)
{
    if (!(o.pericentre > 0.0 && std::isfinite(o.pericentre)))
        throw UsageError(fmt::format("merger: --pericentre must be positive, got {}", o.pericentre));
    if (!(o.eccentricity >= 0.0 && o.eccentricity < 1.0))
        throw UsageError(fmt::format("merger: --eccentricity must be in [0, 1) (a bound orbit), got {}",
                                     o.eccentricity));
    if (!(o.bh_fraction > 0.0 && o.bh_fraction < 1.0))
        throw UsageError(fmt::format("merger: --bh-fraction must be in (0, 1), got {}", o.bh_fraction));
    const double apocentre = o.pericentre * (1.0 + o.eccentricity) / (1.0 - o.eccentricity);
    // A little slack, so that a circular orbit (e = 0) accepts separation == pericentre after rounding.
    if (!(o.separation >= o.pericentre * (1 - 1e-12) && o.separation <= apocentre * (1 + 1e-12)))
        throw UsageError(fmt::format("merger: --separation {} must lie between the pericentre {} and the apocentre "
                                     "{} of the orbit (eccentricity {})",
                                     o.separation, o.pericentre, apocentre, o.eccentricity));
}

Merger galaxy_merger(std::size_t n, std::uint64_t seed, const MergerOptions& o)
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

    std::vector<double> m(n), x(3 * n), v(3 * n);
    std::size_t at = 0;
    for (int g = 0; g < 2; ++g) {
        const double M = mass[g];
        const double R = std::cbrt(M);
        const double V = std::sqrt(M / R);
        const double m_bh = o.bh_fraction * M;
        const std::size_t np = n_gal[g] - 1;
        const Particles p = plummer(np, seed + static_cast<std::uint64_t>(g) * 0x9E3779B97F4A7C15ull);
        const double m_star = (M - m_bh) / static_cast<double>(np);
        m[at] = m_bh;
        for (int k = 0; k < 3; ++k) {
            x[3 * at + k] = side[g] * rel_x[k];
            v[3 * at + k] = side[g] * rel_v[k];
        }
        ++at;
        for (std::size_t i = 0; i < np; ++i, ++at) {
            const double px[3] = {p.pos[i].x, p.pos[i].y, p.pos[i].z};
            const double pv[3] = {p.vel[i].x, p.vel[i].y, p.vel[i].z};
            m[at] = m_star;
            for (int k = 0; k < 3; ++k) {
                x[3 * at + k] = side[g] * rel_x[k] + R * px[k];
                v[3 * at + k] = side[g] * rel_v[k] + V * pv[k];
            }
        }
    }
    Merger out;
    out.particles = centred(m, x, v);
    out.centre_a = 0;
    out.centre_b = static_cast<std::uint32_t>(n_gal[0]);
    return out;
}

} // namespace banyan
