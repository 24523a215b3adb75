/**
 * @file test_files.cpp
 * @brief Tipsy and .npy files: bit-exact round trips in both byte orders, and clear refusals of bad files and values.
 *        Device-free (test suite "static").
 */
#include "core/error.hpp"
#include "core/files/npy.hpp"
#include "core/files/tipsy.hpp"

#include <doctest/doctest.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <random>

using namespace banyan;

namespace {

namespace fs = std::filesystem;

fs::path temp_path(const std::string& name)
{
    return fs::temp_directory_path() / fmt::format("banyan-test-{}-{}", ::getpid(), name);
}

Snapshot random_snapshot(std::size_t ng, std::size_t nd, std::size_t ns, std::uint64_t seed)
{
    std::mt19937_64 g(seed);
    std::uniform_real_distribution<float> u(-10.f, 10.f);
    Snapshot s;
    s.time = 1.25;
    s.n_gas = ng;
    s.n_dark = nd;
    s.n_star = ns;
    const std::size_t n = s.size();
    for (std::size_t i = 0; i < n; ++i) {
        s.mass.push_back(std::abs(u(g)) + 1e-3f);
        s.eps.push_back(std::abs(u(g)));
        s.phi.push_back(u(g));
        for (int k = 0; k < 3; ++k) {
            s.pos.push_back(u(g));
            s.vel.push_back(u(g));
        }
    }
    for (std::size_t i = 0; i < ng; ++i) {
        s.gas_rho.push_back(u(g));
        s.gas_temp.push_back(u(g));
        s.gas_metals.push_back(u(g));
    }
    for (std::size_t i = 0; i < ns; ++i) {
        s.star_metals.push_back(u(g));
        s.star_tform.push_back(u(g));
    }
    return s;
}

bool bits_equal(const std::vector<float>& a, const std::vector<float>& b)
{
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

std::string error_of(const std::string& path)
{
    try {
        read_tipsy(path);
    } catch (const UsageError& e) {
        return e.what();
    }
    return "";
}

} // namespace

TEST_SUITE("static")
{
    TEST_CASE("tipsy round trip is exact to the bit in both byte orders")
    {
        const Snapshot s = random_snapshot(5, 17, 3, 42);
        for (Endian order : {Endian::big, Endian::little}) {
            const auto path = temp_path("roundtrip.tipsy");
            write_tipsy(path, s, order);
            CHECK(fs::file_size(path) == 32 + 4 * (12 * 5 + 9 * 17 + 11 * 3));
            Endian detected{};
            const Snapshot r = read_tipsy(path, &detected);
            CHECK(detected == order);
            CHECK(r.time == s.time);
            CHECK(r.n_gas == 5);
            CHECK(r.n_dark == 17);
            CHECK(r.n_star == 3);
            CHECK(bits_equal(r.mass, s.mass));
            CHECK(bits_equal(r.pos, s.pos));
            CHECK(bits_equal(r.vel, s.vel));
            CHECK(bits_equal(r.eps, s.eps));
            CHECK(bits_equal(r.phi, s.phi));
            CHECK(bits_equal(r.gas_rho, s.gas_rho));
            CHECK(bits_equal(r.gas_temp, s.gas_temp));
            CHECK(bits_equal(r.gas_metals, s.gas_metals));
            CHECK(bits_equal(r.star_metals, s.star_metals));
            CHECK(bits_equal(r.star_tform, s.star_tform));
            fs::remove(path);
        }
    }

    TEST_CASE("standard tipsy is big-endian with a 32-byte header")
    {
        const auto path = temp_path("be.tipsy");
        write_tipsy(path, random_snapshot(0, 2, 0, 1));
        std::ifstream in(path, std::ios::binary);
        unsigned char h[32];
        in.read(reinterpret_cast<char*>(h), 32);
        // nbodies = 2 and ndim = 3 as big-endian ints at offsets 8 and 12
        CHECK((h[8] == 0 && h[9] == 0 && h[10] == 0 && h[11] == 2));
        CHECK((h[12] == 0 && h[13] == 0 && h[14] == 0 && h[15] == 3));
        fs::remove(path);
    }

    TEST_CASE("truncated, inconsistent and foreign files are refused with a clear message")
    {
        const auto path = temp_path("bad.tipsy");
        write_tipsy(path, random_snapshot(1, 10, 1, 7));
        const auto full = fs::file_size(path);

        fs::resize_file(path, full - 4);
        CHECK(error_of(path).find("truncated") != std::string::npos);

        fs::resize_file(path, full + 8);
        CHECK(error_of(path).find("disagree") != std::string::npos);

        {
            std::ofstream out(path, std::ios::binary | std::ios::trunc);
            out << "# this is a CSV file, not tipsy\nx,y,z\n1,2,3\n";
        }
        CHECK(error_of(path).find("not a tipsy file") != std::string::npos);

        {
            std::ofstream out(path, std::ios::binary | std::ios::trunc);
            out << "short";
        }
        CHECK(error_of(path).find("not a tipsy file") != std::string::npos);

        fs::remove(path);
        CHECK(error_of(path).find("cannot open") != std::string::npos);
    }

    TEST_CASE("the common softening of a snapshot: dark and star particles alike, gas smoothing lengths aside")
    {
        Snapshot s = Snapshot::dark(4);
        for (auto& e : s.eps) e = 0.05f;
        CHECK(common_softening(s) == 0.05f);
        s.eps[2] = 0.1f;
        CHECK(!common_softening(s)); // two softenings: the caller must ask for --eps
        Snapshot mixed = Snapshot::dark(3);
        mixed.n_gas = 1, mixed.n_dark = 1, mixed.n_star = 1;
        mixed.eps = {0.7f, 0.02f, 0.02f}; // the gas record's field is hsmooth
        CHECK(common_softening(mixed) == 0.02f);
        Snapshot gas = Snapshot::dark(2);
        gas.n_gas = 2, gas.n_dark = 0;
        CHECK(!common_softening(gas));
    }

    TEST_CASE("what is not a regular file, or has an impossible time, is refused at once (no hang)")
    {
        const fs::path dir = fs::temp_directory_path() / fmt::format("banyan-files-{}", ::getpid());
        fs::create_directories(dir);
        const fs::path fifo = dir / "fifo";
        REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0); // no writer: reading it would block for ever
        for (const fs::path& p : {fifo, dir, fs::path("/dev/zero"), dir / "missing.tipsy"}) {
            INFO(p.string());
            try {
                read_tipsy(p.string());
                FAIL("read");
            } catch (const UsageError& e) {
                CHECK(std::string(e.what()).find(p.string()) != std::string::npos); // names the path
            }
        }
        Snapshot s = Snapshot::dark(2);
        s.mass = {0.5f, 0.5f};
        s.pos = {0, 0, 0, 1, 0, 0};
        for (double t : {-std::numeric_limits<double>::infinity(), std::nan("")}) {
            s.time = t;
            write_tipsy((dir / "t.tipsy").string(), s);
            CHECK_THROWS_AS(read_tipsy((dir / "t.tipsy").string()), UsageError);
        }
        fs::remove_all(dir);
    }

    TEST_CASE("a header-only tipsy file (N = 0) reads as an empty snapshot, which the particle check refuses")
    {
        const fs::path path = fs::temp_directory_path() / fmt::format("banyan-empty-{}.tipsy", ::getpid());
        write_tipsy(path.string(), Snapshot::dark(0));
        const Snapshot s = read_tipsy(path.string()); // no copy from an empty array (UBSan checks it)
        CHECK(s.size() == 0);
        CHECK_THROWS_AS(check_particles(s, path.string()), UsageError);
        fs::remove(path);
    }

    TEST_CASE("particle checks refuse N = 0, bad masses and non-finite coordinates")
    {
        CHECK_THROWS_AS(check_particles(Snapshot{}, "input"), UsageError);
        Snapshot s = random_snapshot(0, 4, 0, 3);
        CHECK_NOTHROW(check_particles(s, "input"));
        Snapshot one = random_snapshot(0, 1, 0, 3);
        CHECK_NOTHROW(check_particles(one, "N = 1 is valid"));

        auto refuses = [](Snapshot bad, const std::string& needle) {
            try {
                check_particles(bad, "input");
            } catch (const UsageError& e) {
                return std::string(e.what()).find(needle) != std::string::npos;
            }
            return false;
        };
        Snapshot a = s;
        a.mass[2] = 0.f;
        CHECK(refuses(a, "particle 2 has mass 0"));
        a.mass[2] = -1.f;
        CHECK(refuses(a, "particle 2 has mass -1"));
        Snapshot b = s;
        b.pos[3 * 1 + 2] = std::numeric_limits<float>::quiet_NaN();
        CHECK(refuses(b, "particle 1 has a non-finite coordinate"));
        Snapshot c = s;
        c.pos[0] = std::numeric_limits<float>::infinity();
        CHECK(refuses(c, "particle 0 has a non-finite coordinate"));
        Snapshot d = s;
        d.vel[5] = std::numeric_limits<float>::infinity();
        CHECK(refuses(d, "non-finite velocity"));
    }

    TEST_CASE("an interrupted write leaves the previous file intact")
    {
        const auto path = temp_path("atomic.tipsy");
        const Snapshot first = random_snapshot(0, 8, 0, 11);
        write_tipsy(path, first);
        Snapshot broken = first;
        broken.phi.pop_back(); // arrays disagree with counts: the writer refuses before touching the file
        CHECK_THROWS(write_tipsy(path, broken));
        CHECK(bits_equal(read_tipsy(path).pos, first.pos));
        for (const auto& e : fs::directory_iterator(path.parent_path()))
            CHECK(e.path().string().find(path.filename().string() + ".tmp") == std::string::npos);
        fs::remove(path);
    }
}

TEST_SUITE("static")
{
    TEST_CASE("npy files have a 64-byte aligned header and round-trip")
    {
        const auto path = temp_path("out.npy");
        std::vector<float> data{1.f, -2.f, 3.5f, 4.f, 5.f, 6.f, 7.f, -8.25f};
        write_npy(path, data, 2, 4);
        std::ifstream in(path, std::ios::binary);
        std::string head(10, '\0');
        in.read(head.data(), 10);
        CHECK(head.compare(0, 6, "\x93NUMPY") == 0);
        std::uint16_t len;
        std::memcpy(&len, head.data() + 8, 2);
        CHECK((10 + len) % 64 == 0);
        CHECK(fs::file_size(path) == 10u + len + 32u);
        std::size_t r = 0, c = 0;
        CHECK(read_npy(path, &r, &c) == data);
        CHECK(r == 2);
        CHECK(c == 4);
        fs::remove(path);
    }
}
