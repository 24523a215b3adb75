/**
 * @file legendre_potential.cpp
 * @brief Poisson's equation for an axisymmetric density by Legendre expansion (see the header).
 */
#include "core/models/legendre_potential.hpp"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <stdexcept>

namespace banyan {

void gauss_legendre_half(int n, std::vector<double>& x, std::vector<double>& w)
{
    if (n < 2 || n % 2) throw std::invalid_argument("gauss_legendre_half: an even number of nodes");
    x.clear(), w.clear();
    for (int i = n / 2; i >= 1; --i) { // the positive roots, smallest first
        double t = std::cos(std::numbers::pi * (i - 0.25) / (n + 0.5));
        double d = 0;
        for (int it = 0; it < 100; ++it) { // Newton on P_n
            double p0 = 1, p1 = t;
            for (int k = 2; k <= n; ++k) {
                const double p2 = ((2 * k - 1) * t * p1 - (k - 1) * p0) / k;
                p0 = p1, p1 = p2;
            }
            d = n * (t * p1 - p0) / (t * t - 1);
            const double step = p1 / d;
            t -= step;
            if (std::fabs(step) < 1e-16) break;
        }
        x.push_back(t);
        w.push_back(2.0 / ((1 - t * t) * d * d));
    }
}

namespace {
/// P_l(mu) and P_l'(mu) for l = 0 .. lmax.
void legendre(int lmax, double mu, double* p, double* dp)
{
    p[0] = 1, dp[0] = 0;
    if (lmax == 0) return;
    p[1] = mu, dp[1] = 1;
    for (int l = 1; l < lmax; ++l) {
        p[l + 1] = ((2 * l + 1) * mu * p[l] - l * p[l - 1]) / (l + 1);
        dp[l + 1] = dp[l - 1] + (2 * l + 1) * p[l];
    }
}
constexpr int max_l = 64;
} // namespace

LegendrePotential::LegendrePotential(const std::function<double(double, double)>& density, double r_min, double r_max,
                                     int radii, int l_max, int mu_nodes)
    : lmax_(l_max)
{
    if (!(r_min > 0 && r_max > r_min && radii >= 4 && l_max >= 0 && l_max % 2 == 0 && l_max < max_l))
        throw std::invalid_argument("LegendrePotential: radii 0 < r_min < r_max, >= 4 nodes, even l_max < 64");
    std::vector<double> mx, mw;
    gauss_legendre_half(2 * mu_nodes, mx, mw);
    const int n = radii, terms = l_max / 2 + 1;
    lnr0_ = std::log(r_min);
    dlnr_ = (std::log(r_max) - lnr0_) / (n - 1);
    // rho_l(r) = (2 l + 1) / 2 * integral over [-1, 1] of rho P_l = (2 l + 1) * integral over [0, 1] (l even).
    std::vector<std::vector<double>> rho(terms, std::vector<double>(n, 0.0));
    double p[max_l + 1], dp[max_l + 1];
    for (std::size_t k = 0; k < mx.size(); ++k) {
        legendre(l_max, mx[k], p, dp);
        for (int i = 0; i < n; ++i) {
            const double d = density(std::exp(lnr0_ + i * dlnr_), mx[k]) * mw[k];
            for (int t = 0; t < terms; ++t)
                rho[t][i] += (4 * t + 1) * d * p[2 * t];
        }
    }
    // Phi_l(r) = -4 pi / (2 l + 1) [A + B], A = r^-(l+1) int_0^r rho_l s^(l+2) ds, B = r^l int_r^inf rho_l s^(1-l) ds,
    // each by the trapezoid rule in ln s, carried from node to node with the factor (r_(i-1) / r_i)^(l+1) or ^l
    // (no powers of r that could overflow); within r_min, rho_l is taken constant.
    phi_.assign(terms, std::vector<double>(n));
    dphi_.assign(terms, std::vector<double>(n));
    const double q = std::exp(-dlnr_), h = dlnr_;
    for (int t = 0; t < terms; ++t) {
        const int l = 2 * t;
        const auto& f = rho[t];
        std::vector<double> A(n), B(n);
        const double r0 = r_min;
        A[0] = f[0] * r0 * r0 / (l + 3);
        const double ql1 = std::pow(q, l + 1), ql = std::pow(q, l);
        for (int i = 1; i < n; ++i) {
            const double ri = std::exp(lnr0_ + i * dlnr_), rp = std::exp(lnr0_ + (i - 1) * dlnr_);
            A[i] = A[i - 1] * ql1 + 0.5 * h * (f[i - 1] * rp * rp * ql1 + f[i] * ri * ri);
        }
        B[n - 1] = 0;
        for (int i = n - 2; i >= 0; --i) {
            const double ri = std::exp(lnr0_ + i * dlnr_), rn = std::exp(lnr0_ + (i + 1) * dlnr_);
            B[i] = B[i + 1] * ql + 0.5 * h * (f[i] * ri * ri + f[i + 1] * rn * rn * ql);
        }
        const double c = -4.0 * std::numbers::pi / (2 * l + 1);
        for (int i = 0; i < n; ++i) {
            const double ri = std::exp(lnr0_ + i * dlnr_);
            phi_[t][i] = c * (A[i] + B[i]);
            dphi_[t][i] = c * (-(l + 1) * A[i] + l * B[i]) / ri;
        }
    }
}

void LegendrePotential::radial(double r, double* phi, double* dphi) const
{
    const int n = static_cast<int>(phi_[0].size()), terms = lmax_ / 2 + 1;
    const double u = (std::log(r) - lnr0_) / dlnr_;
    if (u <= 0) { // inside: interior solutions, Phi_l ~ r^l (Phi_0 flat, its slope ~ r)
        const double x = r / std::exp(lnr0_);
        for (int t = 0; t < terms; ++t) {
            const int l = 2 * t;
            phi[t] = phi_[t][0] * (l ? std::pow(x, l) : 1.0);
            dphi[t] = l ? l * phi[t] / r : dphi_[t][0] * x;
        }
        return;
    }
    if (u >= n - 1) { // outside: exterior solutions, Phi_l ~ r^-(l+1)
        const double x = std::exp(lnr0_ + (n - 1) * dlnr_) / r;
        for (int t = 0; t < terms; ++t) {
            const int l = 2 * t;
            phi[t] = phi_[t][n - 1] * std::pow(x, l + 1);
            dphi[t] = -(l + 1) * phi[t] / r;
        }
        return;
    }
    // Phi_l by cubic Hermite interpolation in ln r (values and slopes r dPhi_l / dr at the nodes: smooth slopes,
    // which Eddington's inversion differentiates), dPhi_l / dr linearly.
    const int i = static_cast<int>(u);
    const double w = u - i, w2 = w * w, w3 = w2 * w;
    const double r0 = std::exp(lnr0_ + i * dlnr_), r1 = r0 * std::exp(dlnr_);
    for (int t = 0; t < terms; ++t) {
        phi[t] = (2 * w3 - 3 * w2 + 1) * phi_[t][i] + (w3 - 2 * w2 + w) * dlnr_ * r0 * dphi_[t][i] +
                 (-2 * w3 + 3 * w2) * phi_[t][i + 1] + (w3 - w2) * dlnr_ * r1 * dphi_[t][i + 1];
        dphi[t] = dphi_[t][i] + w * (dphi_[t][i + 1] - dphi_[t][i]);
    }
}

double LegendrePotential::monopole(double r) const
{
    double phi[max_l / 2 + 1], dphi[max_l / 2 + 1];
    radial(std::max(r, 1e-300), phi, dphi);
    return phi[0];
}

double LegendrePotential::potential(double R, double z) const
{
    const double r = std::hypot(R, z);
    double phi[max_l / 2 + 1], dphi[max_l / 2 + 1], p[max_l + 1], dp[max_l + 1];
    radial(std::max(r, 1e-300), phi, dphi);
    legendre(lmax_, r > 0 ? z / r : 0.0, p, dp);
    double sum = 0;
    for (int t = 0; t <= lmax_ / 2; ++t)
        sum += phi[t] * p[2 * t];
    return sum;
}

void LegendrePotential::acceleration(double R, double z, double& a_R, double& a_z) const
{
    const double r = std::hypot(R, z);
    a_R = a_z = 0;
    if (!(r > 0)) return;
    double phi[max_l / 2 + 1], dphi[max_l / 2 + 1], p[max_l + 1], dp[max_l + 1];
    radial(r, phi, dphi);
    const double mu = z / r;
    legendre(lmax_, mu, p, dp);
    double dr = 0, dmu = 0; // dPhi / dr, dPhi / dmu
    for (int t = 0; t <= lmax_ / 2; ++t)
        dr += dphi[t] * p[2 * t], dmu += phi[t] * dp[2 * t];
    // mu = z / r: dmu / dR = -z R / r^3, dmu / dz = R^2 / r^3.
    a_R = -(dr * R / r - dmu * z * R / (r * r * r));
    a_z = -(dr * z / r + dmu * R * R / (r * r * r));
}

} // namespace banyan
