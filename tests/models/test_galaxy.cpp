/**
 * @file test_galaxy.cpp
 * @brief Galaxy models (core/models/galaxy.hpp). Device-free ("static"): the model's circular speed against a
 *        direct sum of its particles' forces, the disc's Toomre Q from its velocities, virial equilibrium, half-mass
 *        radii, mirrored pairs, any share made alone, the merger's order, orbit and units, the options. On the
 *        device: a short run at small N in which the disc's thickness and Q and the half-mass radii of halo and disc
 *        stay put, and in which a disc without dispersions fails the thickness and Q checks.
 */
#include "core/error.hpp"
#include "core/gravity/precision.hpp"
#include "core/models/legendre_potential.hpp"
#include "core/simulation/run.hpp"
#include "core/simulation/run_options.hpp"
#include "core/simulation/simulation.hpp"
#include "tests/support/harness.hpp"

#include <doctest/doctest.h>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <numbers>
#include <string>
#include <vector>

using namespace banyan;

namespace {

/// The Milky Way model of @p n particles, a sixth of them stars (the paper's share: enough disc particles at
/// small N).
GalaxySetup mw(std::uint64_t n, std::uint64_t seed = 1)
{
    GalaxySetup s;
    s.n = n;
    s.seed = seed;
    s.model.star_fraction = 1.0 / 6;
    return s;
}

bool same(const bn_f4& a, const bn_f4& b)
{
    return a.x == b.x && a.y == b.y && a.z == b.z && a.w == b.w;
}

} // namespace

TEST_SUITE("static")
{
    TEST_CASE("galaxy: the model's circular speed is that of its particles' forces, 1 to 4 R_d (direct sum)")
    {
        // The model's midplane speed (spherical parts exact, the thick disc by its Hankel transform) against the
        // direct-sum pull of 2^19 particles (softened by 100 pc) on 128 points of each ring: within 2% where the
        // issue asks for it (the sampling noise is about 1%; the spheroids, flattened by the disc's potential,
        // pull up to 1% harder in the midplane than their spherical profiles, which the model's speed uses).
        const GalaxyGenerator gen(mw(1 << 19));
        const Particles p = gen.make_all();
        const GalaxyProfile& m = gen.profile(0);
        for (double x : {1.0, 2.0, 3.0, 4.0}) {
            const double R = x * m.scale_length();
            double vc2 = 0;
            for (int k = 0; k < 128; ++k) {
                const double ph = 2 * std::numbers::pi * k / 128, px = R * std::cos(ph), py = R * std::sin(ph);
                double ax = 0, ay = 0;
                for (const bn_f4& q : p.pos) {
                    const double dx = q.x - px, dy = q.y - py, dz = q.z, r2 = dx * dx + dy * dy + dz * dz + 1e-2;
                    const double f = q.w / (r2 * std::sqrt(r2));
                    ax += f * dx, ay += f * dy;
                }
                vc2 -= (ax * px + ay * py) / 128;
            }
            INFO("R = " << x << " R_d: particles " << std::sqrt(vc2) << ", model " << m.circular_speed(R));
            CHECK(std::fabs(std::sqrt(vc2) / m.circular_speed(R) - 1) < 0.02);
        }
        // The thick disc is weaker than a razor-thin one: the model is not Freeman's thin-disc curve.
        CHECK(m.circular_speed(m.scale_length()) > 0.5);
    }

    TEST_CASE("galaxy: the Legendre expansion gives the Miyamoto-Nagai potential and forces of its density")
    {
        // Phi = -M / sqrt(R^2 + (a + sqrt(z^2 + b^2))^2) and its density (Miyamoto & Nagai 1975), b / a = 0.8:
        // a flattened density of known field. Potential within 0.3%, forces within 1% (l <= 32).
        const double a = 1, b = 0.8;
        auto zeta = [&](double z) { return std::sqrt(z * z + b * b); };
        auto rho = [&](double r, double mu) {
            const double R = r * std::sqrt(1 - mu * mu), z = r * mu, s = zeta(z), t = a + s;
            return b * b / (4 * std::numbers::pi) * (a * R * R + (a + 3 * s) * t * t) /
                   (std::pow(R * R + t * t, 2.5) * s * s * s);
        };
        const LegendrePotential lp(rho, 1e-3, 1e3, 400, 32, 48);
        for (auto [R, z] : {std::pair{0.5, 0.0}, {1.0, 0.5}, {2.0, 0.0}, {3.0, 3.0}, {0.2, 1.0}, {10.0, 1.0}}) {
            const double t = a + zeta(z), d = std::pow(R * R + t * t, 1.5);
            const double phi = -1 / std::sqrt(R * R + t * t), aR = -R / d, az = -z * t / (zeta(z) * d);
            double gR, gz;
            lp.acceleration(R, z, gR, gz);
            INFO("(R, z) = (" << R << ", " << z << "): Phi " << lp.potential(R, z) << " (" << phi << "), a_R " << gR
                              << " (" << aR << "), a_z " << gz << " (" << az << ")");
            CHECK(std::fabs(lp.potential(R, z) / phi - 1) < 3e-3);
            const double scale = std::hypot(aR, az);
            CHECK(std::fabs(gR - aR) < 0.01 * scale);
            CHECK(std::fabs(gz - az) < 0.01 * scale);
        }
    }

    TEST_CASE("galaxy: the disc's field off the midplane is that of its particles (direct sum)")
    {
        // The thick disc's potential (Kuijken & Dubinski's split: 4 pi G Sigma(r) H(z) and a Legendre expansion)
        // against the direct-sum pull of 2^18 disc particles (no bulge; 99% of the particles stars; softened by
        // 10 pc) averaged over 64 azimuths, in and above the disc: a_R and a_z within 2% of the field there. (The
        // model agrees with a brute-force quadrature of the density to 0.2% at (0.5, 1), (1, 0.5) and (0.5, 0) kpc;
        // the particles' noise is larger in the midplane within 1 kpc of the centre: 3 to 9% in a_R.)
        GalaxySetup s = mw(1 << 18);
        s.model.bulge_mass = 0, s.model.star_fraction = 0.99;
        const GalaxyGenerator gen(s);
        const Particles p = gen.make_all();
        const GalaxyProfile& m = gen.profile(0);
        const auto t = gen.type_counts();
        for (auto [R, z] : {std::pair{0.5, 1.0},
                            {1.0, 0.5},
                            {2.5, 0.3},
                            {2.5, 1.5},
                            {5.0, 0.6},
                            {1.0, 3.0},
                            {7.5, 0.15},
                            {1.0, 1.0}}) {
            double gR = 0, gz = 0;
            for (int k = 0; k < 64; ++k) {
                const double ph = 2 * std::numbers::pi * k / 64, px = R * std::cos(ph), py = R * std::sin(ph);
                for (std::size_t i = t[0]; i < t[0] + t[1]; ++i) {
                    const bn_f4& q = p.pos[i];
                    const double dx = q.x - px, dy = q.y - py, dz = q.z - z, r2 = dx * dx + dy * dy + dz * dz + 1e-4;
                    const double f = q.w / (r2 * std::sqrt(r2));
                    gR += f * (dx * px + dy * py) / R / 64, gz += f * dz / 64;
                }
            }
            double aR, az;
            m.disc_acceleration(R, z, aR, az);
            INFO("(R, z) = (" << R << ", " << z << "): particles a_R " << gR << ", a_z " << gz << "; model " << aR
                              << ", " << az);
            const double scale = std::hypot(aR, az);
            CHECK(std::fabs(gR - aR) < 0.02 * scale);
            CHECK(std::fabs(gz - az) < 0.02 * scale);
        }
    }

    TEST_CASE("galaxy: the disc's velocities give the Toomre Q asked for, and the model's half-mass radii")
    {
        for (double q : {1.2, 2.0}) {
            GalaxySetup s = mw(1 << 19, 3);
            s.model.toomre_q = q;
            const GalaxyGenerator gen(s);
            const Particles p = gen.make_all();
            const GalaxyProfile& m = gen.profile(0);
            CHECK(std::fabs(m.toomre_q(m.q_radius()) / q - 1) < 1e-9);
            // Q from the particles' sigma_R and Sigma, the model's kappa (no forces here).
            const auto t = gen.type_counts();
            const double rq = m.q_radius(), h = 0.25 * m.scale_length();
            double s1 = 0, s2 = 0, mass = 0, n = 0;
            for (std::size_t i = t[0]; i < t[0] + t[1]; ++i) {
                const double R = std::hypot(p.pos[i].x, p.pos[i].y);
                if (R < rq - h || R >= rq + h) continue;
                const double vr = (p.pos[i].x * p.vel[i].x + p.pos[i].y * p.vel[i].y) / R;
                s1 += vr, s2 += vr * vr, mass += p.pos[i].w, n += 1;
            }
            const double sigma = std::sqrt(s2 / n - (s1 / n) * (s1 / n));
            const double surface = mass / (std::numbers::pi * ((rq + h) * (rq + h) - (rq - h) * (rq - h)));
            const double measured = sigma * m.kappa(rq) / (3.36 * surface);
            INFO("Q asked " << q << ", from the particles " << measured << " (" << n << " in the annulus)");
            CHECK(std::fabs(measured / q - 1) < 0.05);
            // Half-mass radii of the sample against the model's (sampling noise of 2^19 particles: < 3%).
            const std::vector<bn_f4> zero(p.size(), bn_f4{0, 0, 0, 0});
            const GalaxyMeasures g = measure_galaxy(gen, p.pos, p.vel, zero);
            CHECK(std::fabs(g.halo_half_mass / m.half_mass_radius(GalaxyProfile::halo) - 1) < 0.03);
            CHECK(std::fabs(g.bulge_half_mass / m.half_mass_radius(GalaxyProfile::bulge) - 1) < 0.03);
            CHECK(std::fabs(g.disc_half_mass / m.disc_half_mass_radius() - 1) < 0.03);
        }
    }

    TEST_CASE("galaxy: a model of too few particles leaves the circular speed and Q unmeasured, not 0")
    {
        // `bench galaxy` on a small model showed an empty bin's v_c as a "-100 %" miss (issue 48): a bin of fewer
        // than measured_bin particles measures nothing, and with every bin such, the result says so (NaN).
        const GalaxyGenerator gen(mw(600, 3));
        const Particles p = gen.make_all();
        std::vector<bn_f4> acc(p.size(), bn_f4{0, 0, -1, 0});
        const GalaxyMeasures g = measure_galaxy(gen, p.pos, p.vel, acc);
        CHECK(std::isnan(g.vc_worst));
        CHECK(std::isnan(g.toomre_q));
        CHECK(g.disc_half_mass > 0); // the radii still are measured
    }

    TEST_CASE("galaxy: the bulge's and the halo's f(E) in the flattened potential: dispersions and shape")
    {
        // An isotropic f(E) in any potential has sigma^2 a function of psi alone,
        // sigma^2(psi) = (1 / rho(psi)) int_0^psi rho dpsi', and rho(psi) is the spherical profile at the radius where
        // the reference potential (the true one averaged over spheres) is psi. So the particles on the
        // equipotential psi_ref(r0) have the dispersion of the spherical Jeans equation at r0,
        // (1 / rho(r0)) int_r0^inf rho (-dpsi_ref / dr) dr, wherever they lie: bulge at 0.5, 1 and 2 kpc, halo at
        // 10 and 30 kpc, within 4% (sampling noise about 1.5%; a DF of the bulge alone, without the halo's and the
        // disc's mass, misses by 25 to 50%; one in the spherical potential, by 4 to 7% in the plane).
        const GalaxyGenerator gen(mw(1 << 20, 9));
        const Particles p = gen.make_all();
        const GalaxyProfile& m = gen.profile(0);
        const auto t = gen.type_counts();
        const GalaxyModel model;
        auto hernquist = [&](double r) { return std::pow(r, -1) * std::pow(r + model.bulge_scale, -3); };
        const double c = model.halo_concentration, rs = model.halo_scale;
        auto nfw = [&](double r) { // up to its constant; the shells lie inside r200
            const double x = r / rs;
            return r <= c * rs ? 1.0 / (x * (1 + x) * (1 + x)) : 0.0;
        };
        auto pull = [&](double r) { return (m.reference_psi(0.999 * r) - m.reference_psi(1.001 * r)) / (0.002 * r); };
        auto jeans = [&](const auto& rho, double r, double r_max) {
            double sum = 0;
            const int n = 20000;
            const double h = std::log(r_max / r) / n;
            for (int i = 0; i <= n; ++i) {
                const double x = r * std::exp(i * h);
                sum += (i == 0 || i == n ? 0.5 : 1.0) * rho(x) * pull(x) * x * h;
            }
            return std::sqrt(sum / rho(r));
        };
        // sigma on the equipotentials between psi_ref(1.1 r0) and psi_ref(0.9 r0), and the particles near the plane
        // (|z| < 0.2 r) over those near the axis (|z| > 0.8 r): the same solid angle.
        auto measured = [&](std::size_t begin, std::size_t end, double r0, double& plane_over_axis) {
            const double hi = m.reference_psi(0.9 * r0), lo = m.reference_psi(1.1 * r0);
            double s2 = 0, n = 0, plane = 0, axis = 0;
            for (std::size_t i = begin; i < end; ++i) {
                const double R = std::hypot(double(p.pos[i].x), double(p.pos[i].y)), z = p.pos[i].z;
                const double psi = m.psi_at(R, z);
                if (psi < lo || psi > hi) continue;
                s2 +=
                    double(p.vel[i].x) * p.vel[i].x + double(p.vel[i].y) * p.vel[i].y + double(p.vel[i].z) * p.vel[i].z;
                n += 1;
                const double mu = std::fabs(z) / std::hypot(R, z);
                plane += mu<0.2, axis += mu> 0.8;
            }
            plane_over_axis = plane / axis;
            return std::sqrt(s2 / n / 3);
        };
        const std::size_t bulge = t[0] + t[1];
        for (double r : {0.5, 1.0, 2.0}) {
            double flat = 0;
            const double want = jeans(hernquist, r, 100 * model.bulge_scale),
                         got = measured(bulge, bulge + t[2], r, flat);
            INFO("bulge at " << r << " kpc: " << got << ", Jeans " << want << "; plane / axis " << flat);
            CHECK(std::fabs(got / want - 1) < 0.04);
        }
        for (double r : {10.0, 30.0}) {
            double flat = 0;
            const double want = jeans(nfw, r, c * rs), got = measured(0, t[0], r, flat);
            INFO("halo at " << r << " kpc: " << got << ", Jeans " << want << "; plane / axis " << flat);
            // Truncated at r200 here, smoothly beyond it in the model: the Jeans integral stops at r200 (a small
            // deficit, far below the 4%, at 10 and 30 kpc).
            CHECK(std::fabs(got / want - 1) < 0.04);
        }
    }

    TEST_CASE("galaxy: virial equilibrium, 2T / |W| = 1 within 3% (direct sum, N 12000)")
    {
        // The distribution functions and the disc's Jeans velocities together: a galaxy whose velocities were a
        // tenth too large or too small would miss by 20%.
        const GalaxyGenerator gen(mw(12000, 5));
        const Particles p = gen.make_all();
        double T = 0, W = 0;
        for (std::size_t i = 0; i < p.size(); ++i) {
            const bn_f4 v = p.vel[i];
            T += 0.5 * p.pos[i].w * (double(v.x) * v.x + double(v.y) * v.y + double(v.z) * v.z);
            for (std::size_t j = i + 1; j < p.size(); ++j) {
                const double dx = p.pos[i].x - p.pos[j].x, dy = p.pos[i].y - p.pos[j].y, dz = p.pos[i].z - p.pos[j].z;
                W -= double(p.pos[i].w) * p.pos[j].w / std::sqrt(dx * dx + dy * dy + dz * dz + 1e-4);
            }
        }
        INFO("2T/|W| = " << 2 * T / -W);
        CHECK(std::fabs(2 * T / -W - 1) < 0.03);
    }

    TEST_CASE("galaxy: equal particle masses by default, or the share of stars asked for")
    {
        GalaxySetup s = mw(100001);
        s.model.star_fraction = 0;
        const GalaxyGenerator equal(s);
        const Particles p = equal.make_all();
        const auto t = equal.type_counts();
        CHECK(p.pos[0].w == doctest::Approx(p.pos[t[0]].w).epsilon(0.01));           // halo and disc
        CHECK(p.pos[t[0]].w == doctest::Approx(p.pos[t[0] + t[1]].w).epsilon(0.01)); // disc and bulge
        const GalaxyGenerator sixth(mw(100001));
        CHECK(sixth.type_counts()[1] + sixth.type_counts()[2] == 16667);
        CHECK(sixth.counts(0).halo == 83333);
    }

    TEST_CASE("galaxy: mirrored pairs, any share made alone, the seed")
    {
        const GalaxyGenerator gen(mw(10001, 7));
        const Particles all = gen.make_all();
        // Particle 2k + 1 of each component is particle 2k reflected: exactly (negation is exact).
        const auto t = gen.type_counts();
        CHECK(all.pos[1].x == -all.pos[0].x);
        CHECK(all.vel[1].z == -all.vel[0].z);
        CHECK(all.pos[t[0] + 1].y == -all.pos[t[0]].y);
        // Shares of three and of seven ranks give the same bits.
        for (std::uint64_t ranks : {3u, 7u}) {
            std::vector<bn_f4> pos;
            for (std::uint64_t r = 0; r < ranks; ++r) {
                const std::uint64_t a = r * all.size() / ranks, b = (r + 1) * all.size() / ranks;
                const Particles part = gen.make(a, b - a);
                pos.insert(pos.end(), part.pos.begin(), part.pos.end());
            }
            bool equal = pos.size() == all.size();
            for (std::size_t i = 0; equal && i < pos.size(); ++i)
                equal = same(pos[i], all.pos[i]);
            CHECK(equal);
        }
        const Particles other = GalaxyGenerator(mw(10001, 8)).make_all();
        CHECK(!same(other.pos[5], all.pos[5]));
        // The black hole last, at rest at the centre.
        CHECK(t[3] == 1);
        CHECK(all.pos.back().x == 0.0f);
        CHECK(all.pos.back().w == doctest::Approx(4.152e-4));
    }

    TEST_CASE("galaxy-merger: the paper's counts, types in GADGET order, black holes last, a bound orbit")
    {
        GalaxySetup s = mw(240002);
        s.merger = true;
        s.model.bh_mass = 1e8;
        const GalaxyGenerator gen(s);
        const auto t = gen.type_counts();
        // Each galaxy 10^5 halo, 2 x 10^4 stars (disc and bulge) and one black hole.
        CHECK(t[0] == 200000);
        CHECK(t[1] + t[2] == 40000);
        CHECK(t[3] == 2);
        CHECK(gen.black_holes() == std::vector<std::uint64_t>{240000, 240001});
        const Particles p = gen.make(240000, 2);
        const double dx = p.pos[1].x - p.pos[0].x, dy = p.pos[1].y - p.pos[0].y;
        CHECK(std::hypot(dx, dy) == doctest::Approx(100).epsilon(1e-5));
        // The second galaxy is a third of the first: its black hole too; centre of mass at rest.
        CHECK(p.pos[1].w / p.pos[0].w == doctest::Approx(1.0 / 3).epsilon(1e-5));
        // The Kepler orbit of the masses within the separation: the relative speed is below the parabolic speed of
        // the whole masses (with which these halos fly apart after one passage).
        const double vrel = std::hypot(p.vel[1].x - p.vel[0].x, p.vel[1].y - p.vel[0].y);
        double whole = 0;
        for (int g = 0; g < 2; ++g)
            whole += gen.profile(g).particle_mass_total(GalaxyProfile::halo) + gen.profile(g).disc_mass() +
                     gen.profile(g).particle_mass_total(GalaxyProfile::bulge);
        CHECK(vrel < 0.9 * std::sqrt(2 * whole / 100));
    }

    TEST_CASE("galaxy: units scale the model; options by name; bad options are refused")
    {
        GalaxySetup s = mw(2000);
        const Particles kpc = GalaxyGenerator(s).make_all();
        s.length_unit_kpc = 1e-3, s.mass_unit_msun = 1; // pc, Msun
        const Particles pc = GalaxyGenerator(s).make_all();
        CHECK(pc.pos[10].x == doctest::Approx(1e3 * kpc.pos[10].x).epsilon(1e-6));
        CHECK(pc.pos[10].w == doctest::Approx(1e10 * kpc.pos[10].w).epsilon(1e-6));
        // Velocity unit sqrt(G M / L): (1e10 / 1e3)^(1/2) times smaller a unit, numbers 10^-3.5 ... as many.
        CHECK(pc.vel[10].y == doctest::Approx(std::sqrt(1e10 / 1e3) * kpc.vel[10].y).epsilon(1e-5));

        RunOptions o;
        o.ic = "galaxy-merger";
        o.n = 5000;
        set_galaxy_option(o.galaxy, o.orbit, "toomre_q", "2.5", "toomre_q");
        set_galaxy_option(o.galaxy, o.orbit, "orientation", "10,20,30,40", "orientation");
        CHECK(o.galaxy.toomre_q == 2.5);
        CHECK(o.orbit.orientation[3] == 40);
        const RunOptions back = RunOptions::from_text(parse_key_values(o.to_text()));
        CHECK(back.galaxy.toomre_q == 2.5);
        CHECK(back.orbit.orientation[2] == 30);
        CHECK(back.galaxy.halo_mass == o.galaxy.halo_mass);
        o.galaxy.star_fraction = 0.25;
        CHECK(RunOptions::from_text(parse_key_values(o.to_text())).galaxy.star_fraction == 0.25);
        CHECK_THROWS_WITH_AS(set_galaxy_option(o.galaxy, o.orbit, "toomre_q", "high", "--toomre-q"),
                             "--toomre-q expects a finite decimal number, got 'high'", UsageError);
        CHECK_THROWS_AS(set_galaxy_option(o.galaxy, o.orbit, "orientation", "1,2,3", "--orientation"), UsageError);
        o.galaxy.disc_scale_height = 10; // thicker than long
        CHECK_THROWS_AS(o.check(), UsageError);
        o.galaxy = galaxy_preset("m31");
        CHECK(o.galaxy.bh_mass == 1.4e8);
        o.orbit.mass_ratio = 1.5;
        CHECK_THROWS_AS(o.check(), UsageError);
        CHECK_THROWS_AS(galaxy_preset("andromeda"), UsageError);
        o.orbit = GalaxyOrbit{};
        o.n = 20; // too few for three components in each galaxy
        CHECK_THROWS_AS(o.check(), UsageError);
    }

    TEST_CASE("galaxy: options beyond what the model can make are refused before any table, naming the option")
    {
        // Each galaxy option at values that crashed the generator (a bulge scale of 1e-100, a mass ratio of 1e-300:
        // SIGSEGV), gave non-finite velocities, masses of 0 or particles single precision cannot hold (issue 45),
        // and units in which the particles leave float's range: refused by RunOptions::check (what plan_run and the
        // Python module call) in each front end's spelling, and by GalaxyGenerator itself, before any table.
        struct Bad {
            const char* key;
            bool merger;
            std::vector<double> values;
        };
        const std::vector<double> tiny{1e-300, 1e-100, 1e-30, 1e-10}, huge{1e30, 1e300}, far{1e10, 1e30, 1e300};
        auto both = [&](const std::vector<double>& a, const std::vector<double>& b) {
            std::vector<double> v = a;
            v.insert(v.end(), b.begin(), b.end());
            return v;
        };
        const Bad table[] = {
            {"halo_mass", false, both(tiny, huge)},         {"halo_scale", false, both(tiny, far)},
            {"halo_concentration", false, both(tiny, far)}, {"disc_mass", false, both(tiny, huge)},
            {"disc_scale_length", false, both(tiny, far)},  {"disc_scale_height", false, both(tiny, far)},
            {"toomre_q", false, both(tiny, far)},           {"q_radius", false, both(tiny, far)},
            {"bulge_mass", false, both(tiny, huge)},        {"bulge_scale", false, both(tiny, far)},
            {"bh_mass", false, both(tiny, huge)},           {"star_fraction", false, both(tiny, far)},
            {"mass_ratio", true, both(tiny, far)},          {"pericentre", true, both(tiny, far)},
            {"separation", true, both(tiny, far)},          {"eccentricity", true, far}};
        for (const OptionStyle style : {OptionStyle::cli, OptionStyle::python}) {
            auto refused = [&](const RunOptions& o, std::string_view key) {
                const std::string name = option_name(key, style);
                INFO(name << ", " << (style == OptionStyle::cli ? "CLI" : "Python"));
                try {
                    o.check(style);
                    FAIL("accepted");
                } catch (const UsageError& e) {
                    INFO(e.what());
                    CHECK(std::string(e.what()).find(name) != std::string::npos);
                }
            };
            for (const Bad& b : table)
                for (const double v : b.values) {
                    RunOptions o;
                    o.ic = b.merger ? "galaxy-merger" : "galaxy";
                    o.n = 4096;
                    set_galaxy_option(o.galaxy, o.orbit, b.key, fmt::format("{}", v), b.key);
                    INFO(b.key << " = " << v);
                    refused(o, b.key);
                    CHECK_THROWS_AS(GalaxyGenerator(galaxy_setup(o)), UsageError);
                }
            // Masses of 10^41 (cm,g), accelerations below 10^-36 (cm,Msun), lengths below 10^-33.
            for (const char* units : {"cm,g", "m,kg", "km,kg", "Gpc,g", "cm,Msun", "1e30Gpc,1e30Msun"})
                for (const char* ic : {"galaxy", "galaxy-merger"}) {
                    RunOptions o;
                    o.ic = ic, o.n = 4096, o.units = units;
                    INFO(ic << " --units " << units);
                    refused(o, "units");
                }
        }
        // The N-body merger's (--ic merger) lengths and central particles: an internal error of the exact sums
        // ("ExactSums: a value out of range") at 1e14 or 1e-30, a central particle of mass 0 at 1e-100.
        for (const double v : both(tiny, far)) {
            RunOptions o;
            o.ic = "merger";
            o.merger.pericentre = o.merger.separation = v, o.merger.eccentricity = 0;
            CHECK_THROWS_WITH_AS(o.check(), doctest::Contains("--pericentre"), UsageError);
            o.merger = MergerOptions{};
            o.merger.separation = v, o.merger.pericentre = 1e-4, o.merger.eccentricity = 1 - 1e-15;
            CHECK_THROWS_WITH_AS(o.check(), doctest::Contains("--separation"), UsageError);
        }
        for (const double v : {1e-300, 1e-100, 1e-30}) {
            RunOptions o;
            o.ic = "merger", o.merger.bh_fraction = v;
            CHECK_THROWS_WITH_AS(o.check(), doctest::Contains("--bh-fraction"), UsageError);
        }
    }

    TEST_CASE("galaxy: options at the edges of their ranges make finite particles single precision holds")
    {
        // The Milky Way's disc (R_d 2.5 kpc, M_d 4.57e10 Msun) as the reference: each edge alone, then the widest
        // spans together. Every particle finite, every mass a positive normal float, the masses and the softening
        // within what the run accepts (check_precision_range), as the run would judge them.
        struct Edge {
            bool merger;
            std::vector<std::pair<const char*, const char*>> options;
            const char* units = "";
            std::uint64_t n = 8192;
        };
        const Edge edges[] = {
            {false, {{"halo_scale", "2.5e-4"}}},
            {false, {{"halo_scale", "2.5e4"}}},
            {false, {{"halo", "hernquist"}, {"halo_scale", "2.5e4"}}},
            {false, {{"halo", "hernquist"}, {"halo_scale", "2.5e-4"}}},
            {false, {{"halo_concentration", "1"}}},
            {false, {{"halo_concentration", "100"}}},
            {false, {{"halo_mass", "4.57e6"}, {"star_fraction", "0.5"}}},
            {false, {{"halo_mass", "4.57e14"}, {"bh_mass", "0"}, {"star_fraction", "0.25"}}},
            {false, {{"disc_scale_height", "2.5e-4"}}},
            {false, {{"disc_scale_height", "2.5"}}},
            {false, {{"bulge_scale", "2.5e-4"}}},
            {false, {{"bulge_scale", "2.5e4"}}},
            {false, {{"bulge_mass", "4.57e6"}, {"star_fraction", "0.5"}}, "", 65536}, // a bulge of 3 particles
            {false, {{"bulge_mass", "4.57e14"}, {"bh_mass", "0"}, {"star_fraction", "0.5"}}, "", 65536}, // disc: 3
            {false, {{"bh_mass", "13546"}}},     // 1e-8 of 1.3546e12 Msun
            {false, {{"bh_mass", "1.3546e11"}}}, // a tenth
            {false, {{"q_radius", "0.0025"}}},
            {false, {{"q_radius", "25"}}},
            {false, {{"toomre_q", "0.1"}}},
            {false,
             {{"disc_mass", "1e-30"}, {"halo_mass", "1e-28"}, {"bulge_mass", "1e-31"}, {"bh_mass", "0"}},
             "kpc,1e-40Msun"},
            {false,
             {{"disc_scale_length", "1e30"},
              {"halo_scale", "1e26"},
              {"disc_scale_height", "1e26"},
              {"bulge_scale", "1e34"}},
             "1e30kpc,1e10Msun"},
            {false,
             {{"halo_scale", "2.5e4"},
              {"halo_concentration", "100"},
              {"bulge_scale", "2.5e-4"},
              {"disc_scale_height", "2.5e-4"},
              {"bh_mass", "1.3e11"}}},
            {false, {}, "pc,Msun"},
            {false, {}, "au,Msun"},
            {false, {}, "Mpc,1e10Msun"},
            {true, {{"mass_ratio", "1e-4"}, {"separation", "2.5e4"}}},
            {true, {{"pericentre", "2.5e-4"}, {"separation", "2.5e-4"}, {"eccentricity", "0"}}},
            {true, {{"pericentre", "2.5e4"}, {"separation", "2.5e4"}, {"eccentricity", "0"}}},
            {true, {{"eccentricity", "1000"}}},
            {true,
             {{"mass_ratio", "1e-4"},
              {"bulge_scale", "2.5e-4"},
              {"halo_scale", "2.5e4"},
              {"halo_concentration", "100"},
              {"separation", "2.5e4"},
              {"bh_mass", "13546"}}},
        };
        for (const Edge& e : edges) {
            RunOptions o;
            o.ic = e.merger ? "galaxy-merger" : "galaxy";
            o.n = e.n, o.units = e.units;
            std::string shown = o.ic + " " + e.units;
            for (const auto& [key, value] : e.options) {
                set_galaxy_option(o.galaxy, o.orbit, key, value, key);
                shown += fmt::format(" {}={}", key, value);
            }
            INFO(shown);
            std::unique_ptr<GalaxyGenerator> gen; // checks the setup as RunOptions::check does, then counts
            REQUIRE_NOTHROW(gen = std::make_unique<GalaxyGenerator>(galaxy_setup(o)));
            const Particles p = gen->make_all();
            std::size_t bad = 0;
            for (std::size_t i = 0; i < p.size(); ++i) {
                const bn_f4 &x = p.pos[i], &v = p.vel[i];
                bad += !(std::isfinite(x.x) && std::isfinite(x.y) && std::isfinite(x.z) && std::isnormal(x.w) &&
                         x.w > 0 && std::isfinite(v.x) && std::isfinite(v.y) && std::isfinite(v.z));
            }
            CHECK(bad == 0);
            CHECK_NOTHROW(check_precision_range(p.pos, o.eps, shown));
        }
    }
}

namespace {

/// A short run of the Milky Way model (N 16384, a quarter of a rotation at R_d, dt 1/32) from @p p, measured at
/// the end against the start.
struct Evolved {
    GalaxyMeasures start, end;
};
Evolved evolve_galaxy(const GalaxyGenerator& gen, const Particles& p)
{
    SimulationOptions o;
    o.eps = 0.05f;
    o.dt = 1.0 / 32;
    Simulation sim(test::backend(), o);
    sim.start(p.pos, p.vel, 0.0);
    std::vector<bn_f4> pos, vel, acc;
    sim.input_order(pos, vel, acc);
    Evolved e;
    e.start = measure_galaxy(gen, pos, vel, acc);
    const GalaxyProfile& m = gen.profile(0);
    const double quarter = 0.25 * 2 * std::numbers::pi * m.scale_length() / m.circular_speed(m.scale_length());
    for (int k = 0; k * o.dt < quarter; ++k)
        sim.step();
    sim.input_order(pos, vel, acc);
    e.end = measure_galaxy(gen, pos, vel, acc);
    return e;
}

} // namespace

TEST_CASE("galaxy: a short run keeps the disc's thickness, Q and radii; a disc without dispersions fails")
{
    const GalaxyGenerator gen(mw(16384, 2));
    const GalaxyProfile& m = gen.profile(0);
    const auto t = gen.type_counts();
    const Particles good = gen.make_all();
    // The tolerances of 2^18 particles and 5 rotations (docs/benchmarks.md), Q's widened for 16384 particles.
    auto thickness_ok = [](const Evolved& e) { return std::fabs(e.end.thickness / e.start.thickness - 1) < 0.15; };
    auto q_ok = [&](const Evolved& e) { return std::fabs(e.end.toomre_q / m.toomre_q(m.q_radius()) - 1) < 0.25; };
    const Evolved e = evolve_galaxy(gen, good);
    INFO("thickness " << e.start.thickness << " -> " << e.end.thickness << ", Q " << e.start.toomre_q << " -> "
                      << e.end.toomre_q << ", halo " << e.start.halo_half_mass << " -> " << e.end.halo_half_mass
                      << ", disc " << e.start.disc_half_mass << " -> " << e.end.disc_half_mass);
    CHECK(thickness_ok(e));
    CHECK(q_ok(e));
    CHECK(std::fabs(e.end.halo_half_mass / e.start.halo_half_mass - 1) < 0.03);
    CHECK(std::fabs(e.end.disc_half_mass / e.start.disc_half_mass - 1) < 0.05);

    // The disc's dispersions set to zero (pure rotation at the circular speed): it falls to its midplane, Q is 0.
    Particles cold = good;
    for (std::size_t i = t[0]; i < t[0] + t[1]; ++i) {
        const double R = std::hypot(cold.pos[i].x, cold.pos[i].y), v = m.circular_speed(R);
        cold.vel[i] =
            bn_f4{static_cast<float>(-v * cold.pos[i].y / R), static_cast<float>(v * cold.pos[i].x / R), 0.0f, 0.0f};
    }
    const Evolved c = evolve_galaxy(gen, cold);
    INFO("cold disc: thickness " << c.end.thickness << ", Q " << c.end.toomre_q);
    CHECK(!thickness_ok(c));
    CHECK(!q_ok(c));
}

TEST_CASE("galaxy: the widest models the ranges allow run to their end with finite numbers")
{
    // What `banyan run` does with them: the plan's checks, the particles made, four steps and a snapshot in the
    // particles' units (where forces and potentials beyond float's range would stop the run: "went non-finite").
    struct Wide {
        const char* ic;
        std::vector<std::pair<const char*, const char*>> options;
        const char* units = "";
    };
    const Wide wide[] = {
        {"galaxy",
         {{"halo_scale", "2.5e4"},
          {"halo_concentration", "100"},
          {"bulge_scale", "2.5e-4"},
          {"disc_scale_height", "2.5e-4"},
          {"bh_mass", "1.3e11"}}},
        {"galaxy-merger",
         {{"mass_ratio", "1e-4"}, {"bulge_scale", "2.5e-4"}, {"separation", "2.5e4"}, {"bh_mass", "13546"}}},
        {"galaxy", {}, "au,Msun"},
    };
    for (const Wide& w : wide) {
        RunOptions o;
        o.ic = w.ic, o.n = 8192, o.units = w.units, o.t_end = 4 * o.dt;
        o.snapshot_every = o.checkpoint_every = RunOptions::never;
        std::string shown = o.ic + " " + w.units;
        for (const auto& [key, value] : w.options) {
            set_galaxy_option(o.galaxy, o.orbit, key, value, key);
            shown += fmt::format(" {}={}", key, value);
        }
        INFO(shown);
        RunRequest request(o);
        request.outputs = RunOutputs::none();
        Run run(test::backend(), plan_run(std::move(request)));
        CHECK(run.run() == Run::Outcome::finished);
        CHECK(all_finite(run.record().energies));
        const Snapshot& s = run.snapshot();
        CHECK_NOTHROW(check_particle_values(s, shown));
        CHECK(std::all_of(s.acc.begin(), s.acc.end(), [](float a) { return std::isfinite(a); }));
        CHECK(std::all_of(s.phi.begin(), s.phi.end(), [](float a) { return std::isfinite(a) && a != 0; }));
    }
}
