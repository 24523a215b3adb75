/**
 * @file test_render.cpp
 * @brief `banyan render`'s library: the cloud-in-cell deposit conserves mass, particles land in the right pixel for
 *        every projection axis, PNG files round-trip through libpng, and bad input is refused with a UsageError that
 *        names the problem. Device-free (test suite "static").
 */
#include "core/error.hpp"
#include "core/files/png_image.hpp"
#include "core/render/render.hpp"
#include "core/files/tipsy.hpp"

#include <doctest/doctest.h>
#include <fmt/format.h>
#include <unistd.h>

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
        fs::remove(file);
        CHECK(usage_error([&] { read_png(missing); }).find("cannot read as PNG") != std::string::npos);
        // A snapshot that is not there (the command reads it with read_tipsy).
        CHECK(usage_error([&] { read_tipsy(missing); }).find("no such file") != std::string::npos);
    }
}
