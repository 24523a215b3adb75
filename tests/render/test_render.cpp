/**
 * @file test_render.cpp
 * @brief `banyan render`'s library: the cloud-in-cell deposit conserves mass, particles land in the right pixel for
 *        every projection axis, PNG files round-trip through libpng, particle types (--type) select the particles
 *        drawn and frame the field, and bad input is refused with a UsageError that names the problem. Device-free
 *        (test suite "static").
 */
#include "core/error.hpp"
#include "core/files/png_image.hpp"
#include "core/render/render.hpp"
#include "core/files/snapshot_file.hpp"
#include "core/files/tipsy.hpp"

#include <doctest/doctest.h>
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <random>

using namespace banyan;

namespace {

namespace fs = std::filesystem;

fs::path render_temp(const std::string& name)
{
    return fs::temp_directory_path() / fmt::format("banyan-test-render-{}-{}", ::getpid(), name);
}

/// @p n particles of random masses, uniform in [-w, w]^3.
Snapshot cube(std::size_t n, float w, std::uint64_t seed)
{
    std::mt19937_64 g(seed);
    std::uniform_real_distribution<float> u(-w, w), m(0.5f, 2.0f);
    Snapshot s = Snapshot::dark(n);
    for (std::size_t i = 0; i < n; ++i) {
        s.mass[i] = m(g);
        for (int k = 0; k < 3; ++k)
            s.pos[3 * i + k] = u(g);
    }
    return s;
}

/// counts[t] particles of each GADGET type t, stored as a Snapshot keeps them (types 0, 1, 2, 3, 5, 4), each type a
/// cube of half-width 1 about its own centre at[t], every particle of type t of mass t + 1 (its mass tells its type).
Snapshot typed(const std::array<std::size_t, 6>& counts, const std::array<std::array<float, 3>, 6>& at)
{
    std::mt19937_64 g(17);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    Snapshot s;
    s.n_gas = counts[0];
    s.n_dark = counts[1] + counts[2] + counts[3] + counts[5];
    s.n_star = counts[4];
    s.n_type2 = counts[2], s.n_type3 = counts[3], s.n_type5 = counts[5];
    const std::size_t n = s.size();
    s.mass.resize(n);
    s.pos.resize(3 * n);
    s.vel.assign(3 * n, 0.f);
    s.eps.assign(n, 0.01f);
    s.phi.assign(n, 0.f);
    s.gas_rho.assign(s.n_gas, 1.f), s.gas_temp.assign(s.n_gas, 1e4f), s.gas_metals.assign(s.n_gas, 0.02f);
    s.star_metals.assign(s.n_star, 0.01f), s.star_tform.assign(s.n_star, 0.5f);
    std::size_t i = 0;
    for (int t : {0, 1, 2, 3, 5, 4})
        for (std::size_t k = 0; k < counts[t]; ++k, ++i) {
            s.mass[i] = float(t + 1);
            for (int d = 0; d < 3; ++d)
                s.pos[3 * i + d] = at[t][d] + u(g);
        }
    return s;
}

double deposited(const SurfaceDensityMap& map)
{
    double sum = 0;
    for (double x : map.sigma)
        sum += x;
    return sum * map.pixel_width() * map.pixel_width();
}

std::string usage_error(const std::function<void()>& f)
{
    try {
        f();
    } catch (const UsageError& e) {
        return e.what();
    } catch (const std::exception& e) {
        return std::string("not a UsageError: ") + e.what();
    }
    return "no error";
}

} // namespace

TEST_SUITE("static")
{
    TEST_CASE("render: the cloud-in-cell deposit conserves the mass inside the field")
    {
        // Particles over [-3, 3]^3, field [-2, 2]^2 off centre: some lie outside, some near every edge.
        const Snapshot s = cube(20000, 3.0f, 7);
        for (Axis axis : {Axis::x, Axis::y, Axis::z}) {
            RenderOptions o;
            o.axis = axis;
            o.size = 37;
            o.centre = std::array<double, 3>{0.25, -0.5, 0.125};
            o.extent = 2.0;
            const SurfaceDensityMap map = project_surface_density(s, o);
            const auto [h, v] = image_axes(axis);
            double inside = 0;
            std::size_t count = 0;
            for (std::size_t i = 0; i < s.size(); ++i) {
                const double a = s.pos[3 * i + h] - ((*o.centre)[h] - 2.0),
                             b = s.pos[3 * i + v] - ((*o.centre)[v] - 2.0);
                if (a >= 0 && a < 4.0 && b >= 0 && b < 4.0) {
                    inside += s.mass[i];
                    ++count;
                }
            }
            CAPTURE(to_string(axis));
            CHECK(count > 1000);
            CHECK(count < s.size());
            CHECK(map.n_inside == count);
            CHECK(map.mass_inside == doctest::Approx(inside).epsilon(1e-12));
            CHECK(deposited(map) == doctest::Approx(inside).epsilon(1e-12));
        }
        // The whole snapshot inside: all of the mass.
        RenderOptions all;
        all.size = 64;
        all.extent = 3.5;
        const SurfaceDensityMap map = project_surface_density(s, all);
        double total = 0;
        for (float m : s.mass)
            total += m;
        CHECK(map.n_inside == s.size());
        CHECK(deposited(map) == doctest::Approx(total).epsilon(1e-12));
    }

    TEST_CASE("render: one particle lands in the right pixel along every axis (right: next axis, up: the one after)")
    {
        CHECK(image_axes(Axis::z) == std::array<int, 2>{0, 1}); // x right, y up
        CHECK(image_axes(Axis::x) == std::array<int, 2>{1, 2}); // y right, z up
        CHECK(image_axes(Axis::y) == std::array<int, 2>{2, 0}); // z right, x up
        for (Axis axis : {Axis::x, Axis::y, Axis::z}) {
            CAPTURE(to_string(axis));
            const auto [h, v] = image_axes(axis);
            Snapshot s = Snapshot::dark(1);
            s.mass[0] = 2.0f;
            s.pos[h] = 2.5f;                      // pixel centre of column 7 (pixels 1 wide from -5)
            s.pos[v] = -1.5f;                     // pixel centre of row 3 from the bottom
            s.pos[static_cast<int>(axis)] = 0.7f; // along the line of sight: no matter
            RenderOptions o;
            o.axis = axis;
            o.size = 10;
            o.extent = 5.0;
            o.centre = std::array<double, 3>{0, 0, 0};
            const SurfaceDensityMap map = project_surface_density(s, o);
            for (int j = 0; j < 10; ++j)
                for (int i = 0; i < 10; ++i) {
                    CAPTURE(i);
                    CAPTURE(j);
                    CHECK(map.sigma[j * 10 + i] == (i == 7 && j == 3 ? 2.0 : 0.0));
                }
            // In the image (map only), row 0 is the top: row 3 from the bottom is image row 6.
            o.annotate = false;
            const Image img = render_surface_density(s, o);
            REQUIRE(img.width == 10);
            REQUIRE(img.height == 10);
            const auto top = magma(1.0), bottom = magma(0.0);
            for (int y = 0; y < 10; ++y)
                for (int x = 0; x < 10; ++x) {
                    const auto want = x == 7 && y == 6 ? top : bottom;
                    CHECK(std::memcmp(img.at(x, y), want.data(), 3) == 0);
                }
            // A quarter pixel right and up of a centre: 3/4 and 1/4 shares, also in each direction.
            s.pos[h] = 2.75f;
            s.pos[v] = -1.25f;
            const SurfaceDensityMap split = project_surface_density(s, o);
            CHECK(split.sigma[3 * 10 + 7] == doctest::Approx(2.0 * 0.75 * 0.75));
            CHECK(split.sigma[3 * 10 + 8] == doctest::Approx(2.0 * 0.25 * 0.75));
            CHECK(split.sigma[4 * 10 + 7] == doctest::Approx(2.0 * 0.75 * 0.25));
            CHECK(split.sigma[4 * 10 + 8] == doctest::Approx(2.0 * 0.25 * 0.25));
        }
    }

    TEST_CASE("render: the default field is centred on the centre of mass and holds 90 % of the mass well inside")
    {
        Snapshot s = cube(4000, 1.0f, 3);
        for (std::size_t i = 0; i < s.size(); ++i)
            s.pos[3 * i] += 10.0f; // the system at x = 10
        RenderOptions o;
        o.size = 32;
        const SurfaceDensityMap map = project_surface_density(s, o);
        CHECK(map.centre[0] == doctest::Approx(10.0).epsilon(0.01));
        CHECK(map.extent == doctest::Approx(1.3 * mass_radius(s, map.centre, 0.9)));
        double total = 0;
        for (float m : s.mass)
            total += m;
        CHECK(map.mass_inside >= 0.9 * total); // the square field holds the projected 90 % sphere
        // The density centre finds the dense clump, not the centre of mass of clump and background.
        Snapshot two = cube(4000, 5.0f, 4);
        for (std::size_t i = 0; i < 2000; ++i)
            for (int k = 0; k < 3; ++k)
                two.pos[3 * i + k] = 0.05f * two.pos[3 * i + k] + (k == 0 ? 3.0f : 0.0f);
        const auto c = density_centre(two);
        CHECK(c[0] == doctest::Approx(3.0).epsilon(0.05));
        CHECK(std::abs(c[1]) < 0.1);
        CHECK(std::abs(c[2]) < 0.1);
    }

    TEST_CASE("render: the caption names the unit of surface density")
    {
        CHECK(surface_density_units(Units{}) == "N-body units");
        CHECK(surface_density_units(Units{cgs::kpc, 1e10 * cgs::msun}) == "1e10 Msun/kpc^2");
        CHECK(surface_density_units(Units{2.5 * cgs::pc, cgs::msun}) == "1 Msun/(2.5 pc)^2");
        CHECK(surface_density_units(Units{cgs::au, cgs::msun}) == "1 Msun/au^2");
        CHECK(length_unit(Units{}).empty());
        CHECK(length_unit(Units{cgs::Mpc, cgs::msun}) == "Mpc");
    }

    TEST_CASE("render: a written PNG reads back through libpng, with the PNG signature and the IHDR size")
    {
        const Snapshot s = cube(5000, 1.0f, 11);
        RenderOptions o;
        o.size = 200;
        RenderSummary summary;
        const Image img = render_surface_density(s, o, &summary);
        CHECK(img.width > 200);  // the colour bar's panel
        CHECK(img.height > 200); // the caption
        CHECK(summary.vmin == doctest::Approx(summary.vmax - 4.0));
        const auto path = render_temp("look.png");
        write_png(path, img);
        std::ifstream in(path, std::ios::binary);
        unsigned char head[24];
        in.read(reinterpret_cast<char*>(head), 24);
        REQUIRE(in);
        CHECK(std::memcmp(head, "\x89PNG\r\n\x1a\n", 8) == 0);
        CHECK(std::memcmp(head + 12, "IHDR", 4) == 0);
        const auto be32 = [&](int at) {
            return std::uint32_t(head[at]) << 24 | std::uint32_t(head[at + 1]) << 16 |
                   std::uint32_t(head[at + 2]) << 8 | head[at + 3];
        };
        CHECK(be32(16) == std::uint32_t(img.width));
        CHECK(be32(20) == std::uint32_t(img.height));
        const Image back = read_png(path);
        CHECK(back.width == img.width);
        CHECK(back.height == img.height);
        CHECK(back.rgb == img.rgb); // palette PNG: every colour exact
        for (const auto& e : fs::directory_iterator(path.parent_path()))
            CHECK(e.path().string().find(path.filename().string() + ".tmp") == std::string::npos);
        fs::remove(path);

        // More than 256 colours: written as RGB, still exact.
        Image ramp(64, 64);
        for (int y = 0; y < 64; ++y)
            for (int x = 0; x < 64; ++x)
                ramp.set(x, y, std::uint8_t(4 * x), std::uint8_t(4 * y), std::uint8_t(x ^ y));
        write_png(path, ramp);
        CHECK(read_png(path).rgb == ramp.rgb);
        fs::remove(path);
    }

    TEST_CASE("render: particle types by number and name, sorted and each once; unknown ones are refused")
    {
        using V = std::vector<int>;
        CHECK(parse_particle_types("2") == V{2});
        CHECK(parse_particle_types("disc,bulge") == V{2, 3});
        CHECK(parse_particle_types("bh,0") == V{0, 5});
        CHECK(parse_particle_types("Stars, HALO") == V{1, 4});
        CHECK(parse_particle_types("gas,halo,disc,bulge,stars,bh") == V{0, 1, 2, 3, 4, 5});
        CHECK(parse_particle_types("1,halo,1") == V{1});
        CHECK(parse_particle_types("disk") == V{2});
        for (int t = 0; t < n_particle_types; ++t)
            CHECK(parse_particle_types(particle_type_name(t)) == V{t});
        CHECK(describe_particle_types({2}) == "type 2 (disc)");
        CHECK(describe_particle_types({3, 5}) == "types 3 (bulge), 5 (bh)");
        CHECK(usage_error([] { parse_particle_types("discs"); }).find("unknown particle type 'discs':") !=
              std::string::npos);
        CHECK(usage_error([] { parse_particle_types("6"); }).find("unknown particle type '6'") != std::string::npos);
        CHECK(usage_error([] { parse_particle_types("-1"); }).find("unknown particle type '-1'") != std::string::npos);
        CHECK(usage_error([] { parse_particle_types("disc,dark"); }).find("'dark' in 'disc,dark'") !=
              std::string::npos);
        CHECK(usage_error([] { parse_particle_types("disc,,bulge"); }).find("an empty item") != std::string::npos);
        CHECK(usage_error([] { parse_particle_types(""); }).find("an empty item") != std::string::npos);
        CHECK(usage_error([] { parse_particle_types("x"); }).find("gas, halo, disc, bulge, stars, bh") !=
              std::string::npos);
    }

    TEST_CASE("render: select_particle_types keeps the particles of the types asked for, in order, with their ids")
    {
        const Snapshot s = typed({5, 40, 20, 10, 7, 3}, {});
        CHECK(gadget_type_counts(s) == std::array<std::uint64_t, 6>{5, 40, 20, 10, 7, 3});
        // Each type alone: its particles and no others, its count in the right place.
        for (int t = 0; t < n_particle_types; ++t) {
            CAPTURE(t);
            const Snapshot r = select_particle_types(s, {t});
            auto want = std::array<std::uint64_t, 6>{};
            want[t] = gadget_type_counts(s)[t];
            CHECK(gadget_type_counts(r) == want);
            REQUIRE(r.mass.size() == want[t]);
            for (float m : r.mass)
                CHECK(m == float(t + 1));
        }
        // Disc and black holes: the disc's first, then the black holes, as the file order has them; ids are the
        // indices in the whole snapshot (5 gas and 40 halo particles before the disc, 10 bulge ones before the bh).
        const Snapshot r = select_particle_types(s, {5, 2});
        CHECK(r.n_gas == 0);
        CHECK(r.n_star == 0);
        CHECK(r.n_dark == 23);
        CHECK(r.n_type2 == 20);
        CHECK(r.n_type3 == 0);
        CHECK(r.n_type5 == 3);
        REQUIRE(r.ids.size() == 23);
        CHECK(r.ids[0] == 45);
        CHECK(r.ids[19] == 64);
        CHECK(r.ids[20] == 75);
        CHECK(r.ids[22] == 77);
        REQUIRE(r.pos.size() == 3 * 23);
        CHECK(std::equal(r.pos.begin(), r.pos.begin() + 60, s.pos.begin() + 3 * 45));
        CHECK(std::equal(r.pos.begin() + 60, r.pos.end(), s.pos.begin() + 3 * 75));
        CHECK(r.mass[19] == 3.0f);
        CHECK(r.mass[20] == 6.0f);
        // Gas and stars keep their own fields; the selection is a whole snapshot that HDF5 takes.
        const Snapshot gs = select_particle_types(s, {0, 4});
        CHECK(gs.n_gas == 5);
        CHECK(gs.n_star == 7);
        CHECK(gs.gas_rho.size() == 5);
        CHECK(gs.star_tform.size() == 7);
        CHECK(gs.ids.front() == 0);
        CHECK(gs.ids.back() == 84); // the last star, after 5 + 40 + 20 + 10 + 3 particles of the other types
        const auto path = render_temp("gas-stars.hdf5");
        write_hdf5(path, gs, {});
        CHECK(gadget_type_counts(read_snapshot(path)) == std::array<std::uint64_t, 6>{5, 0, 0, 0, 7, 0});
        fs::remove(path);
        // No types: everything.
        CHECK(select_particle_types(s, {}).size() == s.size());
    }

    TEST_CASE("render: type 2 of an HDF5 file with types 1, 2, 3, 5 draws the disc alone and frames the field on it")
    {
        // A halo at x = -4, a disc at x = +4, a bulge at y = +4, black holes at y = -4 (each a cube of half-width 1).
        const Snapshot file_s =
            typed({0, 4000, 1000, 300, 0, 6}, {{{}, {-4, 0, 0}, {4, 0, 0}, {0, 4, 0}, {}, {0, -4, 0}}});
        const auto path = render_temp("types.hdf5");
        write_hdf5(path, file_s, {});
        const Snapshot s = read_snapshot(path, nullptr, false);
        fs::remove(path);
        REQUIRE(gadget_type_counts(s) == std::array<std::uint64_t, 6>{0, 4000, 1000, 300, 0, 6});

        // A fixed field of 24 x 24 pixels half a unit wide over [-6, 6]^2: the halo covers columns 1 .. 6 (with the
        // clouds' reach), the disc columns 17 .. 22, the bulge and black holes columns 9 .. 14.
        RenderOptions o;
        o.size = 24;
        o.centre = std::array<double, 3>{0, 0, 0};
        o.extent = 6.0;
        o.annotate = false;
        const auto column_mass = [](const SurfaceDensityMap& map, int from, int to) {
            double sum = 0;
            for (int j = 0; j < map.size; ++j)
                for (int i = from; i < to; ++i)
                    sum += map.sigma[static_cast<std::size_t>(j) * map.size + i];
            return sum * map.pixel_width() * map.pixel_width();
        };
        const SurfaceDensityMap all = project_surface_density(s, o);
        CHECK(column_mass(all, 0, 8) == doctest::Approx(4000 * 2.0)); // the halo drawn without --type
        const Snapshot disc = select_particle_types(s, parse_particle_types("disc"));
        const SurfaceDensityMap map = project_surface_density(disc, o);
        CHECK(map.n_inside == 1000);
        CHECK(map.mass_inside == doctest::Approx(1000 * 3.0));
        CHECK(column_mass(map, 0, 12) == 0.0); // where only the halo (and the bulge's left half) lies: nothing
        CHECK(column_mass(map, 12, 24) == doctest::Approx(1000 * 3.0));
        // In the image: the halo's pixels stay in the background colour, the disc's are lit.
        const Image img = render_surface_density(disc, o);
        const auto background = magma(0.0);
        int lit_left = 0, lit_disc = 0;
        for (int y = 0; y < 24; ++y)
            for (int x = 0; x < 24; ++x) {
                const bool lit = std::memcmp(img.at(x, y), background.data(), 3) != 0;
                (x < 12 ? lit_left : lit_disc) += lit;
            }
        CHECK(lit_left == 0);
        CHECK(lit_disc >= 16); // the disc's 4 x 4 pixels at least
        const Image both = render_surface_density(s, o);
        CHECK(std::memcmp(both.at(4, 12), background.data(), 3) != 0); // the halo's middle, drawn without --type

        // Disc and bulge: the bulge (at y = +4, rows 18 .. 21 from the bottom) too, the halo still not.
        const Snapshot db = select_particle_types(s, parse_particle_types("disc,bulge"));
        const SurfaceDensityMap two = project_surface_density(db, o);
        CHECK(two.n_inside == 1300);
        CHECK(column_mass(two, 0, 8) == 0.0);
        CHECK(two.sigma[19 * 24 + 12] > 0); // the bulge's centre

        // The default field is the disc's: its centre of mass (or density centre), 1.3 x its 90 % mass radius;
        // the whole snapshot's centre of mass lies far off, towards the heavier halo.
        RenderOptions framed;
        framed.size = 32;
        const SurfaceDensityMap f = project_surface_density(disc, framed);
        CHECK(f.centre[0] == doctest::Approx(4.0).epsilon(0.02));
        CHECK(std::abs(f.centre[1]) < 0.1);
        CHECK(f.extent == doctest::Approx(1.3 * mass_radius(disc, f.centre, 0.9)));
        CHECK(f.extent < 2.5);
        CHECK(f.n_inside >= 900);
        framed.centre_kind = CentreKind::density;
        CHECK(project_surface_density(disc, framed).centre[0] == doctest::Approx(4.0).epsilon(0.05));
        CHECK(project_surface_density(s, RenderOptions{}).centre[0] < -1.0);
    }

    TEST_CASE("render: a type without particles is refused, naming the types there are (tipsy: all dark are type 1)")
    {
        const Snapshot s = typed({0, 400, 100, 0, 0, 1}, {});
        CHECK(usage_error([&] { select_particle_types(s, {3}); }) ==
              "the snapshot has no particles of type 3 (bulge); it has types 1 (400), 2 (100), 5 (1)");
        CHECK(usage_error([&] {
                  select_particle_types(s, {2, 3, 4});
              }) ==
              "the snapshot has no particles of types 3 (bulge), 4 (stars); it has types 1 (400), 2 (100), 5 (1)");
        CHECK(usage_error([&] { select_particle_types(s, {6}); }).find("0 .. 5, got 6") != std::string::npos);
        // Tipsy has no types 2, 3, 5: written and read back, the disc and black hole are halo particles.
        const auto path = render_temp("types.tipsy");
        write_tipsy(path, s);
        const Snapshot back = read_snapshot(path);
        fs::remove(path);
        CHECK(usage_error([&] { select_particle_types(back, {2}); }) ==
              "the snapshot has no particles of type 2 (disc); it has type 1 (501)");
        CHECK(select_particle_types(back, {1}).size() == 501);
    }

    TEST_CASE("render: bad input is a UsageError that names the problem")
    {
        const Snapshot s = cube(100, 1.0f, 5);
        const auto render_with = [&](auto change) {
            return usage_error([&] {
                RenderOptions o;
                o.size = 16;
                change(o);
                render_surface_density(s, o);
            });
        };
        CHECK(usage_error([] { parse_axis("w"); }).find("x, y or z, got 'w'") != std::string::npos);
        CHECK(parse_axis("Y") == Axis::y);
        CHECK(render_with([](RenderOptions& o) { o.size = 0; }).find("size must be 1 .. 16384") != std::string::npos);
        CHECK(render_with([](RenderOptions& o) { o.size = 16385; }).find("got 16385") != std::string::npos);
        CHECK(render_with([](RenderOptions& o) { o.extent = 0.0; }).find("extent") != std::string::npos);
        CHECK(render_with([](RenderOptions& o) { o.extent = -1.0; }).find("must be > 0") != std::string::npos);
        CHECK(render_with([](RenderOptions& o) { o.range = 0; }).find("range") != std::string::npos);
        CHECK(render_with([](RenderOptions& o) { o.vmin = 1.0, o.vmax = 0.5; }).find("below vmax") !=
              std::string::npos);
        CHECK(render_with([](RenderOptions& o) { o.vmin = 1e6; }).find("brightest pixel") != std::string::npos);
        // Every particle outside the field: an error, not an empty image.
        CHECK(render_with([](RenderOptions& o) {
                  o.centre = std::array<double, 3>{100, 0, 0};
                  o.extent = 1.0;
              }).find("no particle lies inside the field") != std::string::npos);
        // A field so wide that a pixel's area leaves double's range: the particles are inside, and it says so.
        CHECK(render_with([](RenderOptions& o) { o.extent = 1e200; }).find("particles lie inside the field") !=
              std::string::npos);
        CHECK(render_with([](RenderOptions& o) { o.extent = 1e200; }).find("give a smaller --extent") !=
              std::string::npos);
        CHECK(usage_error([] { render_surface_density(Snapshot::dark(0), RenderOptions{}); }).find("no particles") !=
              std::string::npos);
        // Where the image cannot go.
        Image img(4, 4);
        const auto missing = render_temp("no-such-folder") / "a.png";
        CHECK(usage_error([&] { write_png(missing, img); }).find("does not exist") != std::string::npos);
        const auto file = render_temp("plain-file");
        std::ofstream(file) << "x";
        CHECK(usage_error([&] { write_png(file / "a.png", img); }).find("is not a folder") != std::string::npos);
        CHECK(usage_error([&] { write_png(fs::temp_directory_path(), img); }).find("it is a folder") !=
              std::string::npos);
        // PNG alone: a name asking for another format, or none, is refused (and nothing is written).
        for (const char* name : {"z.jpg", "z.JPEG", "z.png.gz", "z"}) {
            CHECK(usage_error([&] { write_png(render_temp(name), img); }).find("PNG images only") != std::string::npos);
            CHECK(!fs::exists(render_temp(name)));
        }
        fs::remove(file);
        CHECK(usage_error([&] { read_png(missing); }).find("cannot read as PNG") != std::string::npos);
        // A snapshot that is not there (the command reads it with read_tipsy).
        CHECK(usage_error([&] { read_tipsy(missing); }).find("no such file") != std::string::npos);
    }
}
