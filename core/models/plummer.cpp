/**
 * @file plummer.cpp
 * @brief Plummer sphere generator (Aarseth, Henon & Wielen 1974, A&A 37, 183).
 */
#include "core/models/plummer.hpp"

#include "core/error.hpp"
#include "core/models/centring.hpp"
#include "core/models/counter_rng.hpp"

#include <cmath>
#include <numbers>
#include <random>

namespace banyan {

namespace {
using draw::isotropic;
using draw::uniform;
} // namespace

namespace {
/// One particle's position and velocity in N-body units, before centring.
void draw_plummer(CounterRng& rng, const PlummerOptions& options, double x[3], double v[3])
{
    const double length = 3.0 * std::numbers::pi / 16.0; // Plummer scale radius in N-body units
    const double speed = 1.0 / std::sqrt(length);
    // Radius: the mass inside r is r^3 / (1 + r^2)^(3/2) = X, so r = (X^(-2/3) - 1)^(-1/2).
    double r;
    do {
        r = 1.0 / std::sqrt(std::pow(uniform(rng), -2.0 / 3.0) - 1.0);
    } while (!(r <= options.cutoff));
    // Speed: q = v / v_escape has density proportional to q^2 (1 - q^2)^(7/2), whose maximum is below 0.1.
    double q;
    for (;;) {
        q = uniform(rng);
        const double g = q * q * std::pow(1.0 - q * q, 3.5);
        if (0.1 * uniform(rng) < g) break;
    }
    const double ve = std::sqrt(2.0) * std::pow(1.0 + r * r, -0.25);
    isotropic(rng, r * length, x);
    isotropic(rng, q * ve * speed, v);
}

void check_cutoff(const PlummerOptions& options)
{
    if (!(options.cutoff > 0.0)) throw UsageError("plummer: the radius cut-off must be positive");
}
} // namespace

void plummer_particle(std::uint64_t seed, std::size_t i, const PlummerOptions& options, double x[3], double v[3])
{
    CounterRng rng(seed, i);
    draw_plummer(rng, options, x, v);
}

Particles plummer(std::size_t n, std::uint64_t seed, const PlummerOptions& options, Share share)
{
    check_cutoff(options);
    const double m = n ? 1.0 / static_cast<double>(n) : 0.0;
    return Centring(n, std::move(share)).make([&](std::size_t i, double& mi, double* x, double* v) {
        plummer_particle(seed, i, options, x, v);
        mi = m;
    });
}

} // namespace banyan
