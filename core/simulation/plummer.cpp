/**
 * @file plummer.cpp
 * @brief Plummer sphere generator (Aarseth, Henon & Wielen 1974, A&A 37, 183).
 */
#include "core/simulation/plummer.hpp"

#include "core/error.hpp"

#include <cmath>
#include <numbers>
#include <random>

namespace banyan {

double draw::uniform(std::mt19937_64& rng)
{
    return (static_cast<double>(rng() >> 11) + 0.5) * 0x1.0p-53;
}

void draw::isotropic(std::mt19937_64& rng, double r, double out[3])
{
    const double z = (1.0 - 2.0 * uniform(rng)) * r;
    const double phi = 2.0 * std::numbers::pi * uniform(rng);
    const double rxy = std::sqrt(std::max(r * r - z * z, 0.0));
    out[0] = rxy * std::cos(phi);
    out[1] = rxy * std::sin(phi);
    out[2] = z;
}

namespace {
using draw::isotropic;
using draw::uniform;
} // namespace

namespace {
/// One particle's position and velocity in N-body units, before centring.
void draw_plummer(std::mt19937_64& rng, const PlummerOptions& options, double x[3], double v[3])
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

/// The sums over all n particles that centre them (plain means: the particles weigh the same).
void plummer_centre(std::size_t n, std::uint64_t seed, const PlummerOptions& options, double cx[3], double cv[3])
{
    std::mt19937_64 rng(seed);
    for (int k = 0; k < 3; ++k)
        cx[k] = cv[k] = 0;
    for (std::size_t i = 0; i < n; ++i) {
        double x[3], v[3];
        draw_plummer(rng, options, x, v);
        for (int k = 0; k < 3; ++k)
            cx[k] += x[k], cv[k] += v[k];
    }
    for (int k = 0; k < 3; ++k) {
        cx[k] /= static_cast<double>(n ? n : 1);
        cv[k] /= static_cast<double>(n ? n : 1);
    }
}

void check_cutoff(const PlummerOptions& options)
{
    if (!(options.cutoff > 0.0)) throw UsageError("plummer: the radius cut-off must be positive");
}
} // namespace

Particles plummer(std::size_t n, std::uint64_t seed, const PlummerOptions& options, Share share)
{
    check_cutoff(options);
    std::mt19937_64 rng(seed);
    const std::size_t kept = share.size(n);
    std::vector<double> x(3 * kept), v(3 * kept);
    double cx[3] = {0, 0, 0}, cv[3] = {0, 0, 0};
    for (std::size_t i = 0; i < n; ++i) {
        double xi[3], vi[3];
        draw_plummer(rng, options, xi, vi);
        for (int k = 0; k < 3; ++k) {
            cx[k] += xi[k];
            cv[k] += vi[k];
        }
        if (share.holds(i))
            for (int k = 0; k < 3; ++k)
                x[3 * (i - share.first) + k] = xi[k], v[3 * (i - share.first) + k] = vi[k];
    }
    Particles p;
    p.pos.resize(kept);
    p.vel.resize(kept);
    const float m = n ? static_cast<float>(1.0 / static_cast<double>(n)) : 0.0f;
    for (int k = 0; k < 3; ++k) {
        cx[k] /= static_cast<double>(n ? n : 1);
        cv[k] /= static_cast<double>(n ? n : 1);
    }
    for (std::size_t i = 0; i < kept; ++i) {
        const double* xi = &x[3 * i];
        const double* vi = &v[3 * i];
        p.pos[i] = bn_f4{static_cast<float>(xi[0] - cx[0]), static_cast<float>(xi[1] - cx[1]),
                         static_cast<float>(xi[2] - cx[2]), m};
        p.vel[i] = bn_f4{static_cast<float>(vi[0] - cv[0]), static_cast<float>(vi[1] - cv[1]),
                         static_cast<float>(vi[2] - cv[2]), 0.0f};
    }
    return p;
}

void plummer_each(std::size_t n, std::uint64_t seed, const PlummerOptions& options,
                  const std::function<void(std::size_t, const bn_f4&, const bn_f4&)>& emit)
{
    check_cutoff(options);
    double cx[3], cv[3];
    plummer_centre(n, seed, options, cx, cv);
    std::mt19937_64 rng(seed);
    const float m = n ? static_cast<float>(1.0 / static_cast<double>(n)) : 0.0f;
    for (std::size_t i = 0; i < n; ++i) {
        double xi[3], vi[3];
        draw_plummer(rng, options, xi, vi);
        emit(i,
             bn_f4{static_cast<float>(xi[0] - cx[0]), static_cast<float>(xi[1] - cx[1]),
                   static_cast<float>(xi[2] - cx[2]), m},
             bn_f4{static_cast<float>(vi[0] - cv[0]), static_cast<float>(vi[1] - cv[1]),
                   static_cast<float>(vi[2] - cv[2]), 0.0f});
    }
}

} // namespace banyan
