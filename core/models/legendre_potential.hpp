/**
 * @file legendre_potential.hpp
 * @brief The potential of an axisymmetric density, mirror-symmetric about the plane z = 0, by its expansion in
 *        Legendre polynomials of even order (Binney & Tremaine 2008, section 2.4; the way GalactICS, Kuijken &
 *        Dubinski 1995, solves Poisson's equation for a galaxy's components). G = 1.
 */
#pragma once

#include <functional>
#include <vector>

namespace banyan {

/// The nodes and weights of the n-point Gauss-Legendre rule on [-1, 1] (n even): the n / 2 positive nodes, with
/// their weights, in @p x and @p w (for an even integrand, the integral over [0, 1] is sum w g(x)).
void gauss_legendre_half(int n, std::vector<double>& x, std::vector<double>& w);

/// Phi(r, theta) = sum over even l <= l_max of Phi_l(r) P_l(cos theta), Phi_l from the density's projections
/// rho_l(r) by the two radial integrals of the Green's function, tabulated on log-spaced radii.
class LegendrePotential {
public:
    /// @p density(r, mu): the density at spherical radius r and mu = cos(theta) in [0, 1]; taken as negligible
    /// outside [r_min, r_max] (within r_min: as at r_min), which holds @p radii log-spaced nodes.
    LegendrePotential(const std::function<double(double r, double mu)>& density, double r_min, double r_max, int radii,
                      int l_max, int mu_nodes);

    /// The potential at (R, z).
    double potential(double R, double z) const;
    /// The monopole Phi_0 at spherical radius r (the potential averaged over the sphere).
    double monopole(double r) const;
    /// The acceleration -grad Phi at (R, z): its cylindrical components.
    void acceleration(double R, double z, double& a_R, double& a_z) const;

private:
    /// Phi_l and dPhi_l / dr at r, for every even l.
    void radial(double r, double* phi, double* dphi) const;

    int lmax_ = 0;
    double lnr0_ = 0, dlnr_ = 0;
    std::vector<std::vector<double>> phi_, dphi_; // [l / 2][radius node]
};

} // namespace banyan
