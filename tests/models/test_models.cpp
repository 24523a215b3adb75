/**
 * @file test_models.cpp
 * @brief The particle models of core/models/initial_conditions.hpp for benchmarks and runs: the Hernquist sphere
 *        (enclosed mass against the analytic profile, radial dispersion, virial equilibrium by a direct sum), the
 *        exponential disc (enclosed mass, thickness, rotation about +z), their determinism, and make_model() by
 *        name. Device-free (test suite "static").
 */
#include "core/error.hpp"
#include "core/models/centring.hpp"
#include "core/models/counter_rng.hpp"
#include "core/models/initial_conditions.hpp"

#include <doctest/doctest.h>
#include <fmt/format.h>

#include <algorithm>
#include <barrier>
#include <cmath>
#include <cstring>
#include <mutex>
#include <numbers>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

using namespace banyan;

namespace {

struct Totals {
    double mass = 0, com[3] = {0, 0, 0}, mom[3] = {0, 0, 0}, l[3] = {0, 0, 0}, kinetic = 0;
};

/// Mass, centre of mass, momentum, angular momentum and kinetic energy, summed in double precision.
Totals totals(const Particles& p)
{
    Totals t;
    for (std::size_t i = 0; i < p.size(); ++i) {
        const double m = p.pos[i].w;
        const double x[3] = {p.pos[i].x, p.pos[i].y, p.pos[i].z}, v[3] = {p.vel[i].x, p.vel[i].y, p.vel[i].z};
        t.mass += m;
        for (int k = 0; k < 3; ++k)
            t.com[k] += m * x[k], t.mom[k] += m * v[k];
        t.l[0] += m * (x[1] * v[2] - x[2] * v[1]);
        t.l[1] += m * (x[2] * v[0] - x[0] * v[2]);
        t.l[2] += m * (x[0] * v[1] - x[1] * v[0]);
        t.kinetic += 0.5 * m * (v[0] * v[0] + v[1] * v[1] + v[2] * v[2]);
    }
    for (int k = 0; k < 3; ++k)
        t.com[k] /= t.mass;
    return t;
}

/// Potential energy by the O(N^2) direct sum in double precision, no softening.
double potential_energy(const Particles& p)
{
    double w = 0;
    for (std::size_t i = 0; i < p.size(); ++i) {
        double wi = 0;
        for (std::size_t j = i + 1; j < p.size(); ++j) {
            const double dx = double(p.pos[i].x) - p.pos[j].x, dy = double(p.pos[i].y) - p.pos[j].y,
                         dz = double(p.pos[i].z) - p.pos[j].z;
            wi += double(p.pos[j].w) / std::sqrt(dx * dx + dy * dy + dz * dz);
        }
        w -= double(p.pos[i].w) * wi;
    }
    return w;
}

/// The centre of the densest part by shrinking spheres (Power et al. 2003): the mean position of the particles
/// within a sphere that shrinks by 10% a step about the last mean, down to some 1000 particles. The Hernquist
/// sphere's centre of mass, at the origin, lies off its cusp (its far particles make it wander).
void density_centre(const Particles& p, double c[3])
{
    c[0] = c[1] = c[2] = 0;
    double radius = 0;
    for (const bn_f4& q : p.pos)
        radius = std::max(radius, double(std::hypot(q.x, q.y, q.z)));
    for (;;) {
        radius *= 0.9;
        double s[3] = {0, 0, 0};
        std::size_t in = 0;
        for (const bn_f4& q : p.pos) {
            const double d[3] = {q.x - c[0], q.y - c[1], q.z - c[2]};
            if (d[0] * d[0] + d[1] * d[1] + d[2] * d[2] < radius * radius) {
                ++in;
                s[0] += q.x, s[1] += q.y, s[2] += q.z;
            }
        }
        if (in < 1000) return;
        for (int k = 0; k < 3; ++k)
            c[k] = s[k] / double(in);
    }
}

/// The relative difference |x / expected - 1| (doctest's Approx adds 1 to the scale, too loose for small values).
double off(double x, double expected)
{
    return std::fabs(x / expected - 1);
}

/// |measured - expected| in binomial standard deviations, for a fraction of @p n particles.
double sigmas(double measured, double expected, std::size_t n)
{
    return std::fabs(measured - expected) / std::sqrt(expected * (1 - expected) / double(n));
}

bool same_bits(const Particles& a, const Particles& b)
{
    return a.size() == b.size() && std::memcmp(a.pos.data(), b.pos.data(), a.size() * sizeof(bn_f4)) == 0 &&
           std::memcmp(a.vel.data(), b.vel.data(), a.size() * sizeof(bn_f4)) == 0;
}

/// Checks total mass 1, centre of mass and total momentum zero (to 1e-6); returns the totals.
Totals check_mass_one_and_centred(const Particles& p)
{
    const Totals t = totals(p);
    CHECK(std::fabs(t.mass - 1) < 1e-6);
    for (int k = 0; k < 3; ++k) {
        CHECK(std::fabs(t.com[k]) < 1e-6);
        CHECK(std::fabs(t.mom[k]) < 1e-6);
    }
    return t;
}

} // namespace

TEST_SUITE("static")
{
    TEST_CASE("models: hernquist sphere, enclosed mass at a, 2a, 5a and truncation (N 100000)")
    {
        const std::size_t n = 100000;
        const Particles p = hernquist_sphere(n, 20261123);
        REQUIRE(p.size() == n);
        check_mass_one_and_centred(p);
        CHECK(std::all_of(p.pos.begin(), p.pos.end(), [](const bn_f4& q) { return q.w == float(1.0 / n); }));

        const double a = hernquist_scale_radius;
        CHECK(off(a, 1.0 / 3.0) < 1e-12);
        // r_t holds 0.999 of the mass: r_t / (r_t + a) = sqrt(0.999).
        const double st = std::sqrt(0.999), rt = a * st / (1 - st);
        double c[3];
        density_centre(p, c);
        MESSAGE(fmt::format("cusp at ({:.4f}, {:.4f}, {:.4f}), {:.3f} a from the origin", c[0], c[1], c[2],
                            std::hypot(c[0], c[1], c[2]) / a));
        std::vector<double> r(n);
        for (std::size_t i = 0; i < n; ++i)
            r[i] = std::hypot(p.pos[i].x - c[0], p.pos[i].y - c[1], p.pos[i].z - c[2]);
        const double rmax = *std::max_element(r.begin(), r.end());
        MESSAGE(fmt::format("largest radius {:.2f}, truncation radius {:.2f}", rmax, rt));
        CHECK(rmax <= rt * 1.001);
        CHECK(rmax >= rt * 0.9); // some 11 particles are expected between 0.9 r_t and r_t
        for (double x : {1.0, 2.0, 5.0}) {
            const double inside = double(std::count_if(r.begin(), r.end(), [&](double ri) { return ri < x * a; }));
            const double expected = (x / (x + 1)) * (x / (x + 1)) / 0.999;
            const double z = sigmas(inside / double(n), expected, n);
            MESSAGE(
                fmt::format("inside {} a: {:.5f}, expected {:.5f} ({:.2f} sigma)", x, inside / double(n), expected, z));
            CHECK(z < 4);
        }
        // Radial velocity dispersion against the Jeans equation's (Hernquist 1990, eq. 10), between a / 2 and 2 a:
        // the mean of vr^2 / sigma_r^2(r) is 1, to within 4 standard errors.
        const auto sigma_r2 = [a](double x) {
            const double y = x / a;
            return (12 * y * std::pow(1 + y, 3) * std::log((1 + y) / y) -
                    y / (1 + y) * (25 + 52 * y + 42 * y * y + 12 * y * y * y)) /
                   (12 * a);
        };
        CHECK(off(sigma_r2(a), (96 * std::log(2.0) - 65.5) / (12 * a)) < 1e-9);
        double sum = 0, sum2 = 0;
        std::size_t shell = 0;
        for (std::size_t i = 0; i < n; ++i) {
            if (r[i] < 0.5 * a || r[i] > 2 * a) continue;
            const double vr = ((p.pos[i].x - c[0]) * p.vel[i].x + (p.pos[i].y - c[1]) * p.vel[i].y +
                               (p.pos[i].z - c[2]) * p.vel[i].z) /
                              r[i];
            const double u = vr * vr / sigma_r2(r[i]);
            sum += u, sum2 += u * u;
            ++shell;
        }
        const double mean = sum / double(shell),
                     error = std::sqrt((sum2 / double(shell) - mean * mean) / double(shell));
        MESSAGE(fmt::format("mean vr^2 / sigma_r^2 between a / 2 and 2 a: {:.4f} +- {:.4f} ({} particles)", mean, error,
                            shell));
        CHECK(std::fabs(mean - 1) < 4 * error);
        CHECK(error < 0.02);
    }

    TEST_CASE("models: hernquist sphere in virial equilibrium with E = -1/4 (4 x N 4000, direct sum)")
    {
        // One sample of 4000 scatters by 0.018 in 2K/|W| (its cusp and far particles): the sums over four
        // independent ones, 0.01 (measured over 400 seeds: mean 0.9986, the truncation expects 0.999).
        double k = 0, w = 0;
        for (std::uint64_t seed = 7; seed < 11; ++seed) {
            const Particles p = hernquist_sphere(4000, seed);
            const double wi = potential_energy(p), ki = totals(p).kinetic;
            MESSAGE(fmt::format("seed {}: K {:.4f}, W {:.4f}, 2K/|W| {:.4f}, E {:.4f}", seed, ki, wi,
                                2 * ki / std::fabs(wi), ki + wi));
            k += ki / 4, w += wi / 4;
        }
        MESSAGE(
            fmt::format("all four: K {:.4f}, W {:.4f}, 2K/|W| {:.4f}, E {:.4f}", k, w, 2 * k / std::fabs(w), k + w));
        CHECK(std::fabs(2 * k / std::fabs(w) - 1) < 0.05);
        CHECK(off(k + w, -0.25) < 0.1);
    }

    TEST_CASE("models: exponential disc, enclosed mass, thickness and rotation about +z (N 100000)")
    {
        const std::size_t n = 100000;
        const Particles p = exponential_disc(n, 20261124);
        REQUIRE(p.size() == n);
        const Totals t = check_mass_one_and_centred(p);
        const double rd = disc_scale_length, z0 = disc_scale_height;
        CHECK(off(rd, 3 * std::numbers::pi / 16) < 1e-12);
        CHECK(off(z0, 0.1 * rd) < 1e-12);
        double rmax = 0, zmax = 0, z2 = 0;
        for (const bn_f4& q : p.pos) {
            rmax = std::max(rmax, double(std::hypot(q.x, q.y)));
            zmax = std::max(zmax, double(std::fabs(q.z)));
            z2 += double(q.z) * q.z;
        }
        CHECK(rmax <= 10 * rd * 1.001);
        CHECK(rmax >= 9 * rd); // 0.9995 - 0.9988 of the mass lies between 9 and 10 Rd: some 50 particles
        CHECK(zmax <= 5 * z0 * 1.01);
        CHECK(zmax >= 4 * z0); // some 25 particles between 4 and 5 z0
        // Enclosed mass of the truncated exponential disc: 1 - (1 + x) exp(-x), over its value at x = 10.
        for (double x : {1.0, 2.0}) {
            const double inside = double(std::count_if(p.pos.begin(), p.pos.end(),
                                                       [&](const bn_f4& q) { return std::hypot(q.x, q.y) < x * rd; }));
            const double expected = (1 - (1 + x) * std::exp(-x)) / (1 - 11 * std::exp(-10.0));
            const double z = sigmas(inside / double(n), expected, n);
            MESSAGE(fmt::format("inside R = {} Rd: {:.5f}, expected {:.5f} ({:.2f} sigma)", x, inside / double(n),
                                expected, z));
            CHECK(z < 4);
        }
        // rms z of sech^2(z / z0) truncated at 5 z0: z0^2 times int t^2 sech^2 t / int sech^2 t over [0, 5]
        // (Simpson's rule; untruncated it would be pi^2 / 12).
        double num = 0, den = 0;
        const int steps = 2000;
        for (int i = 0; i <= steps; ++i) {
            const double s = 5.0 * i / steps, w = (i == 0 || i == steps) ? 1 : (i % 2 ? 4 : 2);
            const double sech2 = 1 / (std::cosh(s) * std::cosh(s));
            num += w * s * s * sech2;
            den += w * sech2;
        }
        const double rms_expected = z0 * std::sqrt(num / den), rms = std::sqrt(z2 / double(n));
        MESSAGE(fmt::format("rms z {:.5f}, expected {:.5f}", rms, rms_expected));
        CHECK(off(rms, rms_expected) < 0.05);
        // Rotation about +z: mean specific angular momentum along +z, the other components near zero.
        MESSAGE(fmt::format("L = ({:.2e}, {:.2e}, {:.4f})", t.l[0], t.l[1], t.l[2]));
        CHECK(t.l[2] > 0.1);
        CHECK(std::fabs(t.l[0]) < 0.01 * t.l[2]);
        CHECK(std::fabs(t.l[1]) < 0.01 * t.l[2]);
        // The rotation speed near the mid-plane at R = 2 Rd against sqrt(G M(<R) / R), M from the sample; the
        // vertical dispersion is a tenth of it.
        const double r0 = 2 * rd;
        const double enclosed = double(std::count_if(p.pos.begin(), p.pos.end(),
                                                     [&](const bn_f4& q) { return std::hypot(q.x, q.y, q.z) < r0; })) /
                                double(n);
        double vphi = 0, vz2 = 0;
        std::size_t ring = 0;
        for (std::size_t i = 0; i < n; ++i) {
            const double rc = std::hypot(p.pos[i].x, p.pos[i].y);
            if (std::fabs(rc - r0) > 0.05 * rd || std::fabs(p.pos[i].z) > z0) continue;
            vphi += (p.pos[i].x * p.vel[i].y - p.pos[i].y * p.vel[i].x) / rc;
            vz2 += double(p.vel[i].z) * p.vel[i].z;
            ++ring;
        }
        vphi /= double(ring);
        const double vc = std::sqrt(enclosed / r0), sz = std::sqrt(vz2 / double(ring));
        MESSAGE(
            fmt::format("at R = 2 Rd: v_phi {:.4f}, v_c {:.4f}, sigma_z {:.4f} ({} particles)", vphi, vc, sz, ring));
        CHECK(off(vphi, vc) < 0.02);
        CHECK(off(sz, 0.1 * vc) < 0.1);
        // Not in equilibrium, but near virial: W about -1/2, 2K / |W| below 1 (the spherical estimate of the
        // rotation speed is low for a disc beyond R = Rd).
        const Particles small = exponential_disc(4000, 3);
        const double w = potential_energy(small), k = totals(small).kinetic;
        MESSAGE(fmt::format("N 4000: K {:.4f}, W {:.4f}, 2K/|W| {:.4f}", k, w, 2 * k / std::fabs(w)));
        CHECK(off(w, -0.5) < 0.1);
    }

    TEST_CASE("models: the same seed gives the same bits, another seed others")
    {
        for (const char* name : {"hernquist", "disc"}) {
            const auto make = [&](std::size_t n, std::uint64_t seed) { return make_model(name, n, seed); };
            const Particles p = make(3000, 42);
            CHECK(same_bits(p, make(3000, 42)));
            const Particles q = make(3000, 43);
            CHECK(!same_bits(p, q));
            CHECK(std::memcmp(p.pos.data(), q.pos.data(), sizeof(bn_f4)) != 0);
            CHECK_THROWS_AS(make(0, 1), UsageError);
        }
    }

    TEST_CASE("models: any share of a model is those particles of the whole, bit for bit (a rank's share)")
    {
        // What each MPI rank makes of generated initial conditions: [first, first + count), each particle from its
        // own stream, centred by exact sums over every particle, so the same bits as the whole model's for any
        // number of ranks. Here without sums over ranks (the share draws all for them); below with them.
        const std::size_t n = 1001;
        auto check = [&](const char* what, const auto& make) {
            const Particles whole = make(Share{});
            REQUIRE(whole.size() == n);
            for (auto [first, count] : {std::pair<std::size_t, std::size_t>{0, 1001},
                                        {0, 334},
                                        {334, 333},
                                        {667, 334},
                                        {1000, 1},
                                        {1001, 0},
                                        {500, 0},
                                        {990, 100}}) {
                const Particles part = make(Share{first, count, {}});
                INFO(what << ": share [" << first << ", +" << count << ")");
                const std::size_t kept = first >= n ? 0 : std::min(count, n - first);
                REQUIRE(part.size() == kept);
                for (std::size_t i = 0; i < kept; ++i) {
                    CHECK(std::memcmp(&part.pos[i], &whole.pos[first + i], sizeof(bn_f4)) == 0);
                    CHECK(std::memcmp(&part.vel[i], &whole.vel[first + i], sizeof(bn_f4)) == 0);
                }
            }
        };
        for (const auto name : model_names())
            check(std::string(name).c_str(), [&](Share s) { return make_model(name, n, 7, s); });
        check("uniform", [&](Share s) { return uniform_sphere(n, 7, true, s); });
        check("uniform-cold", [&](Share s) { return uniform_sphere(n, 7, false, s); });
        check("merger", [&](Share s) { return galaxy_merger(n, 7, {}, s).particles; });
    }

    TEST_CASE("models: a model drawn on threads in two passes has the bits of one drawn once, its doubles kept")
    {
        // Centring::make draws every particle twice (the sums, then the share about the centre) on several
        // threads and keeps no doubles; add() and finish() keep the share's doubles from one pass.
        const std::size_t n = 50000; // 12 pieces of 4096 at most
        for (const Share& base : {Share{}, Share{20000, 7000, {}}}) {
            Centring once(n, base);
            for (std::size_t i = once.begin(); i < once.end(); ++i) {
                double x[3], v[3];
                plummer_particle(11, i, {}, x, v);
                once.add(i, 1.0 / n, x, v);
            }
            const Particles want = once.finish();
            for (const unsigned threads : {1u, 3u, 8u}) {
                Share s = base;
                s.threads = threads;
                const Particles got = Centring(n, s).make([&](std::size_t i, double& m, double* x, double* v) {
                    plummer_particle(11, i, {}, x, v);
                    m = 1.0 / n;
                });
                INFO("share [" << base.first << ", +" << std::min(base.count, n) << "), " << threads << " threads");
                REQUIRE(got.size() == want.size());
                CHECK(std::memcmp(got.pos.data(), want.pos.data(), want.size() * sizeof(bn_f4)) == 0);
                CHECK(std::memcmp(got.vel.data(), want.vel.data(), want.size() * sizeof(bn_f4)) == 0);
            }
        }
        // An exception on a thread reaches the caller.
        Share s;
        s.threads = 4;
        CHECK_THROWS_AS(Centring(n, s).make([](std::size_t i, double& m, double* x, double* v) {
            if (i == 30000) throw std::runtime_error("no particle 30000");
            m = 1.0, x[0] = x[1] = x[2] = v[0] = v[1] = v[2] = 0.0;
        }),
                        std::runtime_error);
    }

    TEST_CASE("models: shares drawn alone by P ranks, their centring sums added up over them, are the whole's bits")
    {
        // P threads stand for P ranks: each draws only its share [r n / P, (r + 1) n / P), and sum_over_ranks adds
        // their integers together (every thread calls it at the same points, as ranks call a collective).
        const std::size_t n = 1001;
        auto over = [&](std::size_t P, const auto& make) {
            std::vector<Particles> parts(P);
            std::vector<std::uint64_t> total;
            std::mutex lock;
            std::barrier sync(static_cast<std::ptrdiff_t>(P));
            std::vector<std::thread> ranks;
            for (std::size_t r = 0; r < P; ++r)
                ranks.emplace_back([&, r] {
                    auto sum = [&](std::span<std::uint64_t> v) {
                        {
                            const std::lock_guard<std::mutex> hold(lock);
                            if (total.size() != v.size()) total.assign(v.size(), 0);
                            for (std::size_t k = 0; k < v.size(); ++k)
                                total[k] += v[k];
                        }
                        sync.arrive_and_wait();
                        std::copy(total.begin(), total.end(), v.begin());
                        sync.arrive_and_wait();
                        if (r == 0) total.clear();
                        sync.arrive_and_wait();
                    };
                    parts[r] = make(Share{r * n / P, (r + 1) * n / P - r * n / P, sum});
                });
            for (auto& t : ranks)
                t.join();
            Particles all;
            for (const auto& p : parts) {
                all.pos.insert(all.pos.end(), p.pos.begin(), p.pos.end());
                all.vel.insert(all.vel.end(), p.vel.begin(), p.vel.end());
            }
            return all;
        };
        auto check = [&](const char* what, const auto& make) {
            const Particles whole = make(Share{});
            for (const std::size_t P : {1, 2, 3, 7}) {
                INFO(what << " over " << P << " ranks");
                CHECK(same_bits(over(P, make), whole));
            }
        };
        check("plummer", [&](Share s) { return plummer(n, 7, {}, std::move(s)); });
        check("hernquist", [&](Share s) { return hernquist_sphere(n, 7, std::move(s)); });
        check("uniform", [&](Share s) { return uniform_sphere(n, 7, true, std::move(s)); });
        check("merger", [&](Share s) { return galaxy_merger(n, 7, {}, std::move(s)).particles; });
    }

    TEST_CASE("models: each particle's stream is Philox4x32-10, Random123's known answers")
    {
        // Random123's tests/kat_vectors, the three philox4x32 10 lines: counter, key, result.
        const std::uint32_t kat[3][10] = {{0, 0, 0, 0, 0, 0, 0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8},
                                          {0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff,
                                           0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd},
                                          {0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344, 0xa4093822, 0x299f31d0,
                                           0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}};
        for (const auto& v : kat) {
            std::uint32_t c[4] = {v[0], v[1], v[2], v[3]};
            CounterRng::philox(c, v + 4);
            CHECK(c[0] == v[6]);
            CHECK(c[1] == v[7]);
            CHECK(c[2] == v[8]);
            CHECK(c[3] == v[9]);
        }
        // The stream (seed 0, particle 0) is the first vector's words, two to a draw.
        CounterRng rng(0, 0);
        const std::uint64_t a = rng(), b = rng();
        CHECK(a == ((std::uint64_t{0x9b00dbd8} << 32) | 0xbc57ac4c));
        CHECK(b == ((std::uint64_t{0xe169c58d} << 32) | 0x6627e8d5));
    }

    TEST_CASE("models: make_model by name, and an unknown name refused by name")
    {
        const auto& names = model_names();
        REQUIRE(names.size() == 3);
        CHECK(names[0] == "plummer");
        CHECK(names[1] == "hernquist");
        CHECK(names[2] == "disc");
        CHECK(same_bits(make_model("plummer", 1000, 5), plummer(1000, 5)));
        CHECK(same_bits(make_model("hernquist", 1000, 5), hernquist_sphere(1000, 5)));
        CHECK(same_bits(make_model("disc", 1000, 5), exponential_disc(1000, 5)));
        for (const char* bad : {"spiral", "Plummer", ""}) {
            std::string what;
            try {
                make_model(bad, 100, 1);
            } catch (const UsageError& e) {
                what = e.what();
            }
            INFO(what);
            CHECK(what.find(fmt::format("'{}'", bad)) != std::string::npos);
            for (std::string_view name : names)
                CHECK(what.find(name) != std::string::npos);
        }
        CHECK_THROWS_AS(make_model("plummer", 0, 1), UsageError);
    }
}
