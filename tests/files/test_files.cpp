/**
 * @file test_files.cpp
 * @brief Tipsy, HDF5 and .npy files: bit-exact round trips (tipsy in both byte orders, HDF5 with every field and
 *        GADGET particle type), GADGET / SWIFT files as other codes write them (float64, MassTable, their units),
 *        clear refusals of bad files and values, format detection and physical units. Device-free (test suite
 *        "static").
 */
#include "core/error.hpp"
#include "core/files/atomic_file.hpp"
#include "core/files/hdf5_snapshot.hpp"
#include "core/files/key_values.hpp"
#include "core/files/npy.hpp"
#include "core/files/snapshot_file.hpp"
#include "core/files/tipsy.hpp"
#include "core/files/units.hpp"
#include "core/parallel/parallel_files.hpp"
#include "core/version.hpp"
#include "tests/support/scoped_env.hpp"

#include <hdf5.h>

#include <doctest/doctest.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <future>
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
    // memcmp of empty vectors would be handed null pointers (undefined, whatever the length).
    return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
}

/// The float arrays a tipsy file holds, with their names (an HDF5 file holds acc too).
constexpr std::pair<std::vector<float> Snapshot::*, const char*> tipsy_arrays[] = {
    {&Snapshot::mass, "mass"},
    {&Snapshot::pos, "pos"},
    {&Snapshot::vel, "vel"},
    {&Snapshot::eps, "eps"},
    {&Snapshot::phi, "phi"},
    {&Snapshot::gas_rho, "gas_rho"},
    {&Snapshot::gas_temp, "gas_temp"},
    {&Snapshot::gas_metals, "gas_metals"},
    {&Snapshot::star_metals, "star_metals"},
    {&Snapshot::star_tform, "star_tform"}};

/// Checks that each of the tipsy_arrays of @p r holds the bits of @p s's.
void check_same_tipsy_arrays(const Snapshot& r, const Snapshot& s)
{
    for (const auto& [array, name] : tipsy_arrays) {
        CAPTURE(name);
        CHECK(bits_equal(r.*array, s.*array));
    }
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
            check_same_tipsy_arrays(r, s);
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
        for (auto& e : s.eps)
            e = 0.05f;
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

        // What a run takes from a file without --eps: one softening for all, never 0 unasked, never a NaN said to
        // be "not all the same".
        auto taken = [](const Snapshot& f) {
            SnapshotMeta meta;
            meta.has_softening = true;
            try {
                return fmt::format("{}", softening_from_file(f, meta, "in.std", "run"));
            } catch (const UsageError& e) {
                return std::string(e.what());
            }
        };
        CHECK(taken(s) == "run: the particles of in.std do not all carry the same softening (banyan uses one for all): "
                          "give --eps");
        s.eps.assign(4, 0.05f);
        CHECK(taken(s) == "0.05");
        s.eps.assign(4, 0.0f); // what tools without a softening of their own write
        CHECK(taken(s).find("all carry a softening of 0") != std::string::npos);
        CHECK(taken(s).find("--eps 0 runs unsoftened") != std::string::npos);
        s.eps[1] = std::numeric_limits<float>::quiet_NaN();
        CHECK(taken(s) == "in.std: particle 1 has the softening nan; softenings must be finite and >= 0");
        s.eps[1] = -0.5f;
        CHECK(taken(s) == "in.std: particle 1 has the softening -0.5; softenings must be finite and >= 0");
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

// ---- HDF5 snapshots and units ----------------------------------------------------------------------------------

namespace {

/// A snapshot with every field an HDF5 file holds: accelerations, ids, types 2, 3, 5, units.
Snapshot full_snapshot(std::size_t ng, std::size_t nd, std::size_t ns, std::uint64_t seed)
{
    Snapshot s = random_snapshot(ng, nd, ns, seed);
    std::mt19937_64 g(seed + 1);
    std::uniform_real_distribution<float> u(-5.f, 5.f);
    for (std::size_t i = 0; i < 3 * s.size(); ++i)
        s.acc.push_back(u(g));
    for (std::size_t i = 0; i < s.size(); ++i)
        s.ids.push_back(g());
    s.units = parse_units("kpc,1e10Msun");
    return s;
}

void check_same(const Snapshot& r, const Snapshot& s)
{
    CHECK(r.time == s.time);
    CHECK(r.n_gas == s.n_gas);
    CHECK(r.n_dark == s.n_dark);
    CHECK(r.n_star == s.n_star);
    CHECK(r.n_type2 == s.n_type2);
    CHECK(r.n_type3 == s.n_type3);
    CHECK(r.n_type5 == s.n_type5);
    check_same_tipsy_arrays(r, s);
    CHECK(bits_equal(r.acc, s.acc));
    CHECK(r.ids == s.ids);
    CHECK(r.units.length_cm == s.units.length_cm);
    CHECK(r.units.mass_g == s.units.mass_g);
}

/// Writes GADGET-style HDF5 files by hand, as an h5py script or another code would.
struct H5Writer {
    hid_t file;
    explicit H5Writer(const std::string& path) : file(H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT))
    {
        REQUIRE(file >= 0);
    }
    ~H5Writer() { H5Fclose(file); }
    hid_t group(const char* name)
    {
        hid_t g = H5Lexists(file, name, H5P_DEFAULT) > 0
                      ? H5Gopen2(file, name, H5P_DEFAULT)
                      : H5Gcreate2(file, name, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
        REQUIRE(g >= 0);
        return g;
    }
    template <class T> void attr(const char* where, const char* name, hid_t type, const std::vector<T>& v)
    {
        const hid_t g = group(where);
        const hsize_t n = v.size();
        const hid_t space = n == 1 ? H5Screate(H5S_SCALAR) : H5Screate_simple(1, &n, nullptr);
        const hid_t a = H5Acreate2(g, name, type, space, H5P_DEFAULT, H5P_DEFAULT);
        REQUIRE(H5Awrite(a, type, v.data()) >= 0);
        H5Aclose(a), H5Sclose(space), H5Gclose(g);
    }
    template <class T>
    void data(const char* where, const char* name, hid_t type, const std::vector<T>& v, hsize_t rows, hsize_t cols)
    {
        const hid_t g = group(where);
        const hsize_t dims[2] = {rows, cols};
        const hid_t space = H5Screate_simple(cols == 1 ? 1 : 2, dims, nullptr);
        const hid_t d = H5Dcreate2(g, name, type, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
        REQUIRE(H5Dwrite(d, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, v.data()) >= 0);
        H5Dclose(d), H5Sclose(space), H5Gclose(g);
    }
};

/// A GADGET-2 style file: n type-1 particles of float64 data with their mass in the MassTable, m stars in float32
/// with Masses; the header's counts as int32 (GADGET-2) and units of kpc, 1e10 Msun and km/s in Parameters.
void gadget_file(const std::string& path, std::size_t n, std::size_t m, bool units = true)
{
    H5Writer w(path);
    w.attr<std::int32_t>("Header", "NumPart_ThisFile", H5T_NATIVE_INT32,
                         {0, std::int32_t(n), 0, 0, std::int32_t(m), 0});
    w.attr<double>("Header", "MassTable", H5T_NATIVE_DOUBLE, {0, 0.25, 0, 0, 0, 0});
    w.attr<double>("Header", "Time", H5T_NATIVE_DOUBLE, {2.5});
    w.attr<std::int32_t>("Header", "NumFilesPerSnapshot", H5T_NATIVE_INT32, {1});
    std::vector<double> x(3 * n), v(3 * n);
    for (std::size_t i = 0; i < 3 * n; ++i)
        x[i] = 0.1 * double(i) + 1e-12, v[i] = -0.5 * double(i);
    w.data("PartType1", "Coordinates", H5T_NATIVE_DOUBLE, x, n, 3);
    w.data("PartType1", "Velocities", H5T_NATIVE_DOUBLE, v, n, 3);
    std::vector<std::uint32_t> ids(n);
    for (std::size_t i = 0; i < n; ++i)
        ids[i] = std::uint32_t(1000 + i);
    w.data("PartType1", "ParticleIDs", H5T_NATIVE_UINT32, ids, n, 1);
    if (m) {
        std::vector<float> xs(3 * m, 1.5f), vs(3 * m, 2.0f), ms(m, 0.125f);
        w.data("PartType4", "Coordinates", H5T_NATIVE_FLOAT, xs, m, 3);
        w.data("PartType4", "Velocities", H5T_NATIVE_FLOAT, vs, m, 3);
        w.data("PartType4", "Masses", H5T_NATIVE_FLOAT, ms, m, 1);
        std::vector<std::uint32_t> star_ids(m);
        for (std::size_t i = 0; i < m; ++i)
            star_ids[i] = std::uint32_t(2000 + i);
        w.data("PartType4", "ParticleIDs", H5T_NATIVE_UINT32, star_ids, m, 1);
    }
    if (units) {
        w.attr<double>("Parameters", "UnitLength_in_cm", H5T_NATIVE_DOUBLE, {cgs::kpc});
        w.attr<double>("Parameters", "UnitMass_in_g", H5T_NATIVE_DOUBLE, {1e10 * cgs::msun});
        w.attr<double>("Parameters", "UnitVelocity_in_cm_per_s", H5T_NATIVE_DOUBLE, {1e5});
    }
}

/// The numbers of attribute @p name of the Header of the HDF5 file @p path, as whole numbers.
std::vector<std::uint64_t> header_numbers(const fs::path& path, const char* name)
{
    const hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
    REQUIRE(f >= 0);
    const hid_t a = H5Aopen_by_name(f, "Header", name, H5P_DEFAULT, H5P_DEFAULT);
    REQUIRE(a >= 0);
    const hid_t space = H5Aget_space(a);
    const hssize_t n = H5Sget_simple_extent_npoints(space);
    std::vector<std::uint64_t> v(static_cast<std::size_t>(n));
    REQUIRE(H5Aread(a, H5T_NATIVE_UINT64, v.data()) >= 0);
    H5Sclose(space), H5Aclose(a), H5Fclose(f);
    return v;
}

/// Overwrites the values of attribute @p name of the Header of the HDF5 file @p path (as another tool would).
void set_header_numbers(const fs::path& path, const char* name, const std::vector<std::uint64_t>& v)
{
    const hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
    REQUIRE(f >= 0);
    const hid_t g = H5Gopen2(f, "Header", H5P_DEFAULT);
    const hid_t a = H5Aopen(g, name, H5P_DEFAULT);
    REQUIRE(a >= 0);
    REQUIRE(H5Awrite(a, H5T_NATIVE_UINT64, v.data()) >= 0);
    H5Aclose(a), H5Gclose(g), H5Fclose(f);
}

std::string hdf5_error(const std::string& path, bool need_velocities = true)
{
    try {
        read_snapshot(path, nullptr, need_velocities);
    } catch (const UsageError& e) {
        return e.what();
    }
    return "no error";
}

bool contains(const std::string& text, const std::string& part)
{
    return text.find(part) != std::string::npos;
}

} // namespace

TEST_SUITE("static")
{
    TEST_CASE("hdf5: every field, every particle type and the units round-trip to the bit")
    {
        const auto path = temp_path("roundtrip.hdf5");
        for (const bool extra_types : {false, true}) {
            Snapshot s = full_snapshot(5, 17, 3, extra_types ? 9 : 8);
            if (extra_types) s.n_type2 = 2, s.n_type3 = 3, s.n_type5 = 4; // types 1 (8), 2, 3, 5 among the dark
            SnapshotMeta meta;
            meta.parameters = "theta=0.75\nin=\nformat=hdf5\n";
            write_hdf5(path, s, meta);
            SnapshotMeta back;
            const Snapshot r = read_hdf5(path, &back);
            check_same(r, s);
            CHECK(parse_key_values(back.parameters) == parse_key_values(meta.parameters));
            CHECK(back.code == fmt::format("banyan {}", version));
            CHECK(back.has_softening);
            CHECK(back.velocity_factor == 1.0);
            // The same snapshot gives the same bytes (no time stamps): restarted runs write the same files.
            const std::string first = [&] {
                std::ifstream in(path, std::ios::binary);
                return std::string(std::istreambuf_iterator<char>(in), {});
            }();
            write_hdf5(path, s, meta);
            std::ifstream in(path, std::ios::binary);
            CHECK(std::string(std::istreambuf_iterator<char>(in), {}) == first);
        }
        // Without ids and accelerations: ids are the particles' indices, no Acceleration.
        Snapshot s = random_snapshot(0, 6, 2, 3);
        write_hdf5(path, s, {});
        const Snapshot r = read_hdf5(path);
        CHECK(r.acc.empty());
        CHECK(r.ids == std::vector<std::uint64_t>{0, 1, 2, 3, 4, 5, 6, 7});
        CHECK(!r.units.physical());
        fs::remove(path);
    }

    TEST_CASE("snapshot files read by rows (what each MPI rank reads): the slices of any cut make the whole")
    {
        Snapshot s = full_snapshot(5, 17, 3, 12);
        s.n_type2 = 2, s.n_type3 = 3, s.n_type5 = 4;
        for (const SnapshotFormat format : {SnapshotFormat::tipsy, SnapshotFormat::hdf5}) {
            CAPTURE(to_string(format));
            const auto path = temp_path(fmt::format("rows.{}", to_string(format)));
            write_snapshot(path, s, format, {});
            const Snapshot all = read_snapshot(path);
            const std::size_t n = all.size();
            REQUIRE(n == 25);
            for (const std::size_t P : {1, 2, 3, 4, 7, 25, 40}) {
                CAPTURE(P);
                Snapshot joined;
                joined.units = all.units;
                for (std::size_t r = 0; r < P; ++r) {
                    FileCounts whole;
                    const Snapshot part = read_snapshot(path, nullptr, true, nullptr,
                                                        Rows{r * n / P, (r + 1) * n / P - r * n / P}, &whole);
                    CHECK(whole.size() == n);
                    CHECK(whole.n_gas == all.n_gas);
                    CHECK(whole.n_star == all.n_star);
                    CHECK(whole.n_type5 == all.n_type5);
                    CHECK(part.size() == (r + 1) * n / P - r * n / P);
                    CHECK(part.time == all.time);
                    joined.time = part.time;
                    joined.n_gas += part.n_gas, joined.n_dark += part.n_dark, joined.n_star += part.n_star;
                    joined.n_type2 += part.n_type2, joined.n_type3 += part.n_type3, joined.n_type5 += part.n_type5;
                    for (const auto& [array, name] : tipsy_arrays) {
                        auto& to = joined.*array;
                        to.insert(to.end(), (part.*array).begin(), (part.*array).end());
                    }
                    joined.acc.insert(joined.acc.end(), part.acc.begin(), part.acc.end());
                    joined.ids.insert(joined.ids.end(), part.ids.begin(), part.ids.end());
                }
                check_same(joined, all);
            }
            // Rows beyond the end: none, with the file's counts.
            FileCounts whole;
            const Snapshot none = read_snapshot(path, nullptr, true, nullptr, Rows{n + 5, 10}, &whole);
            CHECK(none.size() == 0);
            CHECK(whole.size() == n);
            fs::remove(path);
        }
    }

    TEST_CASE("hdf5: a snapshot of more particles than one file holds is a set of files, read whole or by rows")
    {
        // BANYAN_MAX_FILE_PARTICLES lowers the per-file limit (2^31 - 1) so that 3001 particles make 4 files.
        const test::ScopedEnv limit("BANYAN_MAX_FILE_PARTICLES", "1000");
        Snapshot s = full_snapshot(700, 1801, 500, 31);
        s.n_type2 = 300, s.n_type3 = 200, s.n_type5 = 100;
        const std::size_t n = s.size();
        const fs::path dir = temp_path("sets");
        fs::create_directories(dir);
        const fs::path path = dir / "snap.hdf5";
        SnapshotMeta meta;
        meta.parameters = "n=3001\n";
        write_hdf5(path.string(), s, meta);
        CHECK(!fs::exists(path));
        // File k holds rows [k n / 4, (k + 1) n / 4) of the whole, its own counts, and the whole's.
        std::uint64_t this_file_sum[6] = {};
        for (std::uint64_t k = 0; k < 4; ++k) {
            const fs::path file = dir / fmt::format("snap.{}.hdf5", k);
            CHECK(hdf5_set_file(path.string(), k) == file.string());
            REQUIRE(fs::exists(file));
            const std::vector<std::uint64_t> this_file = header_numbers(file, "NumPart_ThisFile");
            std::uint64_t rows = 0;
            for (std::size_t t = 0; t < 6; ++t)
                rows += this_file[t], this_file_sum[t] += this_file[t];
            CHECK(rows == (k + 1) * n / 4 - k * n / 4);
            CHECK(header_numbers(file, "NumFilesPerSnapshot") == std::vector<std::uint64_t>{4});
            CHECK(header_numbers(file, "NumPart_Total") == std::vector<std::uint64_t>{700, 1201, 300, 200, 500, 100});
            CHECK(header_numbers(file, "NumPart_Total_HighWord") == std::vector<std::uint64_t>(6, 0));
        }
        CHECK(std::vector<std::uint64_t>(this_file_sum, this_file_sum + 6) ==
              std::vector<std::uint64_t>{700, 1201, 300, 200, 500, 100});
        CHECK(!fs::exists(dir / "snap.4.hdf5"));
        // The whole, by the name written, by any file of the set, and by the base name; the format found too.
        for (const fs::path& name : {path, dir / "snap.0.hdf5", dir / "snap.2.hdf5", dir / "snap"}) {
            CAPTURE(name);
            SnapshotMeta back;
            SnapshotFormat format{};
            const Snapshot r = read_snapshot(name.string(), &back, true, &format);
            CHECK(format == SnapshotFormat::hdf5);
            check_same(r, s);
            CHECK(parse_key_values(back.parameters) == parse_key_values(meta.parameters));
        }
        // Rows that cross the files' and the types' boundaries, as ranks read them.
        for (const Rows rows : {Rows{0, 1}, Rows{690, 70}, Rows{740, 1600}, Rows{2248, 753}, Rows{2990, 100}}) {
            CAPTURE(rows.first);
            FileCounts whole;
            const Snapshot part = read_snapshot(path.string(), nullptr, true, nullptr, rows, &whole);
            check_same(part, rows_of(s, rows));
            CHECK(whole.size() == n);
            CHECK(whole.n_type5 == 100);
        }
        // Without ids of their own the particles get their indices in the whole, file after file.
        s.ids.clear();
        write_hdf5(path.string(), s, meta);
        std::vector<std::uint64_t> index(n);
        for (std::size_t i = 0; i < n; ++i)
            index[i] = i;
        CHECK(read_snapshot(path.string()).ids == index);
        // Written again as one file (the limit back to 2^31 - 1), the set goes; written as a set again, the file goes.
        {
            const test::ScopedEnv none("BANYAN_MAX_FILE_PARTICLES", std::nullopt);
            write_hdf5(path.string(), s, meta);
        }
        CHECK(fs::exists(path));
        CHECK(!fs::exists(dir / "snap.0.hdf5"));
        CHECK(read_snapshot(path.string()).ids == index);
        write_hdf5(path.string(), s, meta);
        CHECK(!fs::exists(path));
        CHECK(fs::exists(dir / "snap.3.hdf5"));
        for (const auto& e : fs::directory_iterator(dir))
            CHECK(e.path().string().find(".tmp") == std::string::npos);
        fs::remove_all(dir);
    }

    TEST_CASE("hdf5: a set that misses a file or whose files disagree is refused, naming the file")
    {
        const test::ScopedEnv limit("BANYAN_MAX_FILE_PARTICLES", "400");
        const Snapshot s = full_snapshot(0, 1000, 0, 5);
        const fs::path dir = temp_path("bad_sets");
        fs::create_directories(dir);
        const std::string path = (dir / "snap.hdf5").string();
        auto file = [&](int k) { return (dir / fmt::format("snap.{}.hdf5", k)).string(); };
        auto error = [&](const std::string& name) {
            try {
                read_snapshot(name);
            } catch (const UsageError& e) {
                return std::string(e.what());
            }
            return std::string("no error");
        };
        // A missing file.
        write_hdf5(path, s, {});
        fs::remove(file(1));
        CHECK(contains(error(path), file(1) + ": missing: the snapshot " + file(0) + " is a set of 3 files"));
        // A file of another snapshot: another time, or other counts.
        write_hdf5(path, s, {});
        Snapshot other = s;
        other.time = 2.5;
        {
            const fs::path elsewhere = dir / "other";
            fs::create_directories(elsewhere);
            write_hdf5((elsewhere / "snap.hdf5").string(), other, {});
            fs::copy_file(elsewhere / "snap.2.hdf5", file(2), fs::copy_options::overwrite_existing);
        }
        CHECK(contains(error(path), file(2) + ": Header/Time is 2.5 but " + file(0) + " says 1.25"));
        write_hdf5(path, s, {});
        set_header_numbers(file(1), "NumPart_Total", {0, 1001, 0, 0, 0, 0});
        CHECK(contains(error(path), file(1) +
                                        ": Header/NumPart_Total (with NumPart_Total_HighWord) is 0, 1001, 0, 0, "
                                        "0, 0 but " +
                                        file(0) + " says 0, 1000, 0, 0, 0, 0"));
        // Counts that agree but do not add up: a high word (2^32 more particles) in every file.
        write_hdf5(path, s, {});
        for (int k = 0; k < 3; ++k)
            set_header_numbers(file(k), "NumPart_Total_HighWord", {0, 1, 0, 0, 0, 0});
        CHECK(contains(error(file(2)), file(0) + ": the NumPart_ThisFile of its set's 3 files add up to 0, 1000, 0, 0, "
                                                 "0, 0 but NumPart_Total says 0, 4294968296, 0, 0, 0, 0"));
        // One file of a set named otherwise.
        write_hdf5(path, s, {});
        fs::rename(file(0), dir / "first.hdf5");
        CHECK(contains(error((dir / "first.hdf5").string()),
                       "Header/NumFilesPerSnapshot is 3, but the file's name is not that of a file of a set of 3"));
        fs::remove_all(dir);
    }

    TEST_CASE("tipsy: a snapshot of more particles than a tipsy file holds is refused, naming the limit and HDF5")
    {
        const Snapshot s = random_snapshot(10, 2000, 20, 3);
        const auto path = temp_path("many.tipsy");
        {
            const test::ScopedEnv limit("BANYAN_MAX_FILE_PARTICLES", "1000");
            CHECK_THROWS_WITH_AS(write_snapshot(path.string(), s, SnapshotFormat::tipsy, {}),
                                 doctest::Contains("2030 particles is more than a tipsy file holds (1000, lowered by "
                                                   "BANYAN_MAX_FILE_PARTICLES: its header's counts are 32-bit); write "
                                                   "HDF5 (--format hdf5)"),
                                 UsageError);
            CHECK(!fs::exists(path));
            CHECK_THROWS_WITH_AS(check_tipsy_count(std::uint64_t{1} << 31, "run"),
                                 doctest::Contains("run: 2147483648 particles is more than a tipsy file holds"),
                                 UsageError);
        }
        CHECK_THROWS_WITH_AS(check_tipsy_count(std::uint64_t{1} << 31, "x.tipsy"),
                             "x.tipsy: 2147483648 particles is more than a tipsy file holds (2^31 - 1: its header's "
                             "counts are 32-bit); write HDF5 (--format hdf5), whose snapshots hold more as sets of "
                             "files",
                             UsageError);
        CHECK_NOTHROW(check_tipsy_count(0x7FFFFFFF, "x.tipsy"));
        for (const char* bad : {"0", "-5", "2147483648", "1e3", "many", ""}) {
            CAPTURE(bad);
            const test::ScopedEnv limit("BANYAN_MAX_FILE_PARTICLES", bad);
            CHECK_THROWS_WITH_AS(max_file_particles(),
                                 doctest::Contains(fmt::format("BANYAN_MAX_FILE_PARTICLES={}: must be a whole number "
                                                               "from 1 to 2^31 - 1",
                                                               bad)
                                                       .c_str()),
                                 UsageError);
        }
    }

    TEST_CASE("hdf5: GADGET files with float64 data, a MassTable and units where G is not 1")
    {
        const auto path = temp_path("gadget.hdf5");
        gadget_file(path, 4, 2);
        SnapshotMeta meta;
        const Snapshot s = read_snapshot(path, &meta);
        CHECK(s.n_dark == 4);
        CHECK(s.n_star == 2);
        CHECK(s.n_gas == 0);
        for (std::size_t i = 0; i < 12; ++i)
            CHECK(s.pos[i] == static_cast<float>(0.1 * double(i) + 1e-12));
        for (std::size_t i = 0; i < 4; ++i)
            CHECK(s.mass[i] == 0.25f); // from the MassTable
        CHECK(s.mass[4] == 0.125f);
        CHECK(s.pos[12] == 1.5f);
        CHECK(s.ids == std::vector<std::uint64_t>{1000, 1001, 1002, 1003, 2000, 2001});
        CHECK(!meta.has_softening); // no Softenings: runs must be given --eps
        // kpc, 1e10 Msun, km/s: G is not 1; velocities and the time go to the velocity unit G = 1 implies.
        CHECK(s.units.length_cm == cgs::kpc);
        CHECK(s.units.mass_g == 1e10 * cgs::msun);
        const double v_unit = std::sqrt(cgs::G * 1e10 * cgs::msun / cgs::kpc);
        CHECK(meta.velocity_factor == doctest::Approx(1e5 / v_unit).epsilon(1e-12));
        CHECK(s.vel[3] == static_cast<float>(-1.5 * 1e5 / v_unit));
        CHECK(s.vel[12] == static_cast<float>(2.0 * 1e5 / v_unit));
        CHECK(s.time == doctest::Approx(2.5 * v_unit / 1e5).epsilon(1e-12));
        CHECK(detect_snapshot_format(path) == SnapshotFormat::hdf5);
        fs::remove(path);

        // SWIFT's Units group (U_L, U_M, U_t): the same units read back.
        {
            H5Writer w(path);
            w.attr<std::int64_t>("Header", "NumPart_ThisFile", H5T_NATIVE_INT64, {0, 2, 0, 0, 0, 0});
            w.data<float>("PartType1", "Coordinates", H5T_NATIVE_FLOAT, {1, 2, 3, 4, 5, 6}, 2, 3);
            w.data<float>("PartType1", "Velocities", H5T_NATIVE_FLOAT, {1, 2, 3, 4, 5, 6}, 2, 3);
            w.data<double>("PartType1", "Masses", H5T_NATIVE_DOUBLE, {1, 2}, 2, 1);
            w.data<float>("PartType1", "Softenings", H5T_NATIVE_FLOAT, {0.1f, 0.1f}, 2, 1);
            const Units u = parse_units("pc,Msun");
            w.attr<double>("Units", "Unit length in cgs (U_L)", H5T_NATIVE_DOUBLE, {u.length_cm});
            w.attr<double>("Units", "Unit mass in cgs (U_M)", H5T_NATIVE_DOUBLE, {u.mass_g});
            w.attr<double>("Units", "Unit time in cgs (U_t)", H5T_NATIVE_DOUBLE, {u.time_s()});
        }
        const Snapshot swift = read_snapshot(path, &meta);
        CHECK(same_units(swift.units, parse_units("pc,Msun")));
        CHECK(meta.velocity_factor == doctest::Approx(1.0).epsilon(1e-9));
        CHECK(swift.vel[5] == 6.0f);
        CHECK(swift.mass[1] == 2.0f);
        CHECK(meta.has_softening);
        CHECK(swift.acc.empty());
        CHECK(swift.ids.empty());
        fs::remove(path);
    }

    TEST_CASE("hdf5: files without what a snapshot needs are refused, naming the file and the problem")
    {
        const auto path = temp_path("bad.hdf5");
        auto starts_with_path = [&](const std::string& e) { return e.rfind(path.string() + ": ", 0) == 0; };
        {
            std::ofstream(path) << "this is no HDF5 file, nor a tipsy file";
            const std::string e = [&] {
                try {
                    read_hdf5(path);
                } catch (const UsageError& x) {
                    return std::string(x.what());
                }
                return std::string("no error");
            }();
            CHECK(contains(e, "not an HDF5 file"));
            CHECK(starts_with_path(e));
            CHECK(detect_snapshot_format(path) == SnapshotFormat::tipsy);
            CHECK(contains(hdf5_error(path), "not a tipsy file")); // read_snapshot: tipsy's reader says why
        }
        {
            H5Writer w(path);
            w.attr<double>("Other", "Time", H5T_NATIVE_DOUBLE, {1.0});
        }
        CHECK(contains(hdf5_error(path), "no Header group"));
        {
            H5Writer w(path);
            w.attr<double>("Header", "Time", H5T_NATIVE_DOUBLE, {1.0});
        }
        CHECK(contains(hdf5_error(path), "no NumPart_ThisFile"));
        {
            H5Writer w(path);
            w.attr<std::int32_t>("Header", "NumPart_ThisFile", H5T_NATIVE_INT32, {0, 2, 0, 0});
        }
        CHECK(contains(hdf5_error(path), "has 4 entries"));
        {
            H5Writer w(path);
            w.attr<std::int32_t>("Header", "NumPart_ThisFile", H5T_NATIVE_INT32, {0, 2, 0, 0, 0, 0});
            w.data<float>("PartType1", "Velocities", H5T_NATIVE_FLOAT, {1, 2, 3, 4, 5, 6}, 2, 3);
            w.data<float>("PartType1", "Masses", H5T_NATIVE_FLOAT, {1, 2}, 2, 1);
        }
        CHECK(contains(hdf5_error(path), "PartType1/Coordinates is missing"));
        {
            H5Writer w(path);
            w.attr<std::int32_t>("Header", "NumPart_ThisFile", H5T_NATIVE_INT32, {0, 2, 0, 0, 3, 0});
            w.data<float>("PartType1", "Coordinates", H5T_NATIVE_FLOAT, {1, 2, 3, 4, 5, 6}, 2, 3);
            w.data<float>("PartType1", "Masses", H5T_NATIVE_FLOAT, {1, 2}, 2, 1);
        }
        CHECK(contains(hdf5_error(path), "type 4 but there is no PartType4 group"));
        CHECK(contains(hdf5_error(path, false), "type 4 but there is no PartType4 group"));
        {
            H5Writer w(path);
            w.attr<std::int32_t>("Header", "NumPart_ThisFile", H5T_NATIVE_INT32, {0, 2, 0, 0, 0, 0});
            w.data<float>("PartType1", "Coordinates", H5T_NATIVE_FLOAT, {1, 2, 3, 4, 5, 6}, 2, 3);
            w.data<float>("PartType1", "Masses", H5T_NATIVE_FLOAT, {1, 2}, 2, 1);
        }
        CHECK(contains(hdf5_error(path), "PartType1/Velocities is missing"));
        {
            // Forces need positions and masses only: no velocities is fine there (zero).
            const Snapshot s = read_snapshot(path, nullptr, false);
            CHECK(s.vel == std::vector<float>(6, 0.f));
            CHECK(s.mass == std::vector<float>{1.f, 2.f});
        }
        {
            H5Writer w(path);
            w.attr<std::int32_t>("Header", "NumPart_ThisFile", H5T_NATIVE_INT32, {0, 3, 0, 0, 0, 0});
            w.data<float>("PartType1", "Coordinates", H5T_NATIVE_FLOAT, {1, 2, 3, 4, 5, 6}, 2, 3);
        }
        {
            const std::string e = hdf5_error(path, false);
            CHECK(contains(e, "PartType1/Coordinates holds 2 rows but Header/NumPart_ThisFile[1] says 3 particles: "
                              "the header's counts and the datasets disagree"));
            CHECK(starts_with_path(e));
        }
        {
            // A header that promises far more than the file holds: said before anything of that size is allocated
            // (it was reported as "out of host memory").
            H5Writer w(path);
            w.attr<std::int32_t>("Header", "NumPart_ThisFile", H5T_NATIVE_INT32, {0, 2000000000, 0, 0, 0, 0});
            w.data<float>("PartType1", "Coordinates", H5T_NATIVE_FLOAT, {1, 2, 3, 4, 5, 6}, 2, 3);
            w.data<float>("PartType1", "Velocities", H5T_NATIVE_FLOAT, {1, 2, 3, 4, 5, 6}, 2, 3);
            w.data<float>("PartType1", "Masses", H5T_NATIVE_FLOAT, {1, 2}, 2, 1);
        }
        CHECK(contains(hdf5_error(path), "PartType1/Coordinates holds 2 rows but Header/NumPart_ThisFile[1] says "
                                         "2000000000 particles"));
        {
            H5Writer w(path);
            w.attr<std::int32_t>("Header", "NumPart_ThisFile", H5T_NATIVE_INT32, {0, 2, 0, 0, 0, 0});
            w.data<float>("PartType1", "Coordinates", H5T_NATIVE_FLOAT, {1, 2, 3, 4, 5, 6}, 2, 3);
        }
        CHECK(contains(hdf5_error(path, false), "no Masses dataset and Header/MassTable[1] is 0"));
        {
            H5Writer w(path);
            w.attr<std::int32_t>("Header", "NumPart_ThisFile", H5T_NATIVE_INT32, {0, 2, 0, 0, 0, 0});
            w.data<double>("PartType1", "Coordinates", H5T_NATIVE_DOUBLE, {1, 2, 3, 4, 5e39, 6}, 2, 3);
            w.data<float>("PartType1", "Masses", H5T_NATIVE_FLOAT, {1, 2}, 2, 1);
        }
        {
            const std::string e = hdf5_error(path, false);
            CHECK(contains(e, "PartType1/Coordinates holds 5e+39 (particle 1), beyond single precision"));
        }
        {
            H5Writer w(path);
            w.attr<std::int32_t>("Header", "NumPart_ThisFile", H5T_NATIVE_INT32, {0, 2, 0, 0, 0, 0});
            w.attr<std::int32_t>("Header", "NumFilesPerSnapshot", H5T_NATIVE_INT32, {4});
        }
        CHECK(contains(hdf5_error(path), "NumFilesPerSnapshot is 4"));

        // A damaged datatype (a float whose exponent and mantissa fields moved, an integer of odd precision) would be
        // converted by HDF5 into other numbers; it is refused, as h5py refuses it.
        auto with_type = [&](hid_t file_type, const char* dataset) {
            {
                H5Writer w(path);
                w.attr<std::int32_t>("Header", "NumPart_ThisFile", H5T_NATIVE_INT32, {0, 2, 0, 0, 0, 0});
                w.data<float>("PartType1", "Coordinates", H5T_NATIVE_FLOAT, {1, 2, 3, 4, 5, 6}, 2, 3);
                w.data<float>("PartType1", "Velocities", H5T_NATIVE_FLOAT, {1, 2, 3, 4, 5, 6}, 2, 3);
                if (std::string(dataset) != "Masses")
                    w.data<float>("PartType1", "Masses", H5T_NATIVE_FLOAT, {1, 2}, 2, 1);
                const hid_t g = w.group("PartType1");
                const hsize_t n = 2;
                const hid_t space = H5Screate_simple(1, &n, nullptr);
                const hid_t d = H5Dcreate2(g, dataset, file_type, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
                const std::uint64_t raw[2] = {0x3f800000'3f800000ull, 0x40000000'40000000ull}; // the bytes as written
                REQUIRE(H5Dwrite(d, file_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, raw) >= 0);
                H5Dclose(d), H5Sclose(space), H5Gclose(g);
            }
            return hdf5_error(path);
        };
        {
            const hid_t odd = H5Tcopy(H5T_IEEE_F32LE);
            REQUIRE(H5Tset_fields(odd, 31, 20, 11, 0, 20) >= 0); // sign, exponent at 20 (11 bits), mantissa 20 bits
            CHECK(contains(with_type(odd, "Masses"),
                           "PartType1/Masses has a floating-point type of 4 bytes that is not IEEE single or double"));
            H5Tclose(odd);
            const hid_t narrow = H5Tcopy(H5T_STD_U32LE);
            REQUIRE(H5Tset_precision(narrow, 20) >= 0);
            CHECK(contains(with_type(narrow, "ParticleIDs"), "PartType1/ParticleIDs has an integer type of 4 bytes "
                                                             "with 20 bits of precision at offset 0"));
            H5Tclose(narrow);
            CHECK(with_type(H5T_IEEE_F32BE, "Masses") == "no error"); // big-endian IEEE is a standard type
        }

        // Impossible units are refused, never read as N-body units or as a factor of zero: zero or negative values,
        // and a length without a mass.
        auto with_units = [&](std::vector<std::pair<const char*, double>> units) {
            {
                H5Writer w(path);
                w.attr<std::int32_t>("Header", "NumPart_ThisFile", H5T_NATIVE_INT32, {0, 2, 0, 0, 0, 0});
                w.data<float>("PartType1", "Coordinates", H5T_NATIVE_FLOAT, {1, 2, 3, 4, 5, 6}, 2, 3);
                w.data<float>("PartType1", "Masses", H5T_NATIVE_FLOAT, {1, 2}, 2, 1);
                for (const auto& [name, v] : units)
                    w.attr<double>("Units", name, H5T_NATIVE_DOUBLE, {v});
            }
            return hdf5_error(path, false);
        };
        const double kpc = 3.0857e21, m10 = 1.989e43, kms = 1e5;
        CHECK(with_units({{"UnitLength_in_cm", kpc}, {"UnitMass_in_g", m10}, {"UnitVelocity_in_cm_per_s", kms}}) ==
              "no error");
        CHECK(contains(with_units({{"UnitLength_in_cm", kpc}, {"UnitMass_in_g", m10}, {"UnitVelocity_in_cm_per_s", 0}}),
                       "Units/UnitVelocity_in_cm_per_s is 0; a unit must be positive and finite"));
        CHECK(contains(with_units({{"UnitLength_in_cm", 0}, {"UnitMass_in_g", m10}}),
                       "Units/UnitLength_in_cm is 0; a unit must be positive and finite"));
        CHECK(contains(with_units({{"UnitLength_in_cm", kpc}, {"UnitMass_in_g", -m10}}),
                       "Units/UnitMass_in_g is -1.989e+43; a unit must be positive and finite"));
        CHECK(contains(with_units({{"UnitLength_in_cm", kpc}}),
                       "Units gives UnitLength_in_cm but not UnitMass_in_g: a file's units need both"));
        CHECK(contains(
            with_units(
                {{"Unit length in cgs (U_L)", kpc}, {"Unit mass in cgs (U_M)", m10}, {"Unit time in cgs (U_t)", -1.0}}),
            "Units/Unit time in cgs (U_t) is -1; a unit must be positive and finite"));

        // A truncated file (a copy cut short, a write that never finished) is refused, never read as garbage.
        Snapshot big = full_snapshot(0, 2000, 0, 5);
        write_hdf5(path, big, {});
        const auto size = fs::file_size(path);
        for (const double keep : {0.5, 0.99}) {
            fs::resize_file(path, static_cast<std::uintmax_t>(double(size) * keep));
            const std::string e = hdf5_error(path);
            INFO(e);
            CHECK(starts_with_path(e));
            CHECK((contains(e, "truncated") || contains(e, "damaged")));
        }
        fs::remove(path);
    }

    TEST_CASE("hdf5: particle ids are kept or refused, never changed: negative ids, ids for some types only")
    {
        const auto path = temp_path("ids.hdf5");
        auto with_ids = [&](hid_t type, const std::vector<std::int64_t>& dark, const std::vector<std::int64_t>& star) {
            H5Writer w(path);
            w.attr<std::int32_t>("Header", "NumPart_ThisFile", H5T_NATIVE_INT32, {0, 3, 0, 0, 1, 0});
            for (const char* g : {"PartType1", "PartType4"}) {
                const hsize_t n = std::string(g) == "PartType1" ? 3 : 1;
                w.data<float>(g, "Coordinates", H5T_NATIVE_FLOAT, std::vector<float>(3 * n, 1.0f), n, 3);
                w.data<float>(g, "Velocities", H5T_NATIVE_FLOAT, std::vector<float>(3 * n, 0.0f), n, 3);
                w.data<float>(g, "Masses", H5T_NATIVE_FLOAT, std::vector<float>(n, 1.0f), n, 1);
                const std::vector<std::int64_t>& ids = n == 3 ? dark : star;
                if (ids.empty()) continue;
                const hid_t grp = w.group(g);
                const hid_t space = H5Screate_simple(1, &n, nullptr);
                const hid_t d = H5Dcreate2(grp, "ParticleIDs", type, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
                REQUIRE(H5Dwrite(d, H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, ids.data()) >= 0);
                H5Dclose(d), H5Sclose(space), H5Gclose(grp);
            }
        };
        // Signed ids of any width are read as they are.
        with_ids(H5T_STD_I64LE, {5, 7, 9}, {11});
        CHECK(read_snapshot(path).ids == std::vector<std::uint64_t>{5, 7, 9, 11});
        // A negative one is refused, naming the file, the dataset and its row (HDF5 made it 0).
        for (const hid_t type : {H5T_STD_I64LE, H5T_STD_I32LE, H5T_STD_I8LE}) {
            with_ids(type, {5, -7, -9}, {11});
            const std::string e = hdf5_error(path);
            INFO(e);
            CHECK(e.rfind(path.string() + ": ", 0) == 0);
            CHECK(contains(e, "PartType1/ParticleIDs holds -7 at row 1: particle ids are whole numbers 0 or more"));
        }
        with_ids(H5T_STD_I32LE, {5, 7, 9}, {-1});
        CHECK(contains(hdf5_error(path), "PartType4/ParticleIDs holds -1 at row 0"));
        // Ids for some types only: refused, naming a type without them, whatever rows are read (an MPI rank's).
        with_ids(H5T_STD_U64LE, {5, 7, 9}, {});
        CHECK(contains(hdf5_error(path), "PartType4/ParticleIDs is missing but PartType1/ParticleIDs is there: "
                                         "particle ids for some types only"));
        CHECK_THROWS_AS(read_snapshot(path, nullptr, true, nullptr, Rows{0, 2}), UsageError);
        with_ids(H5T_STD_U64LE, {}, {11});
        CHECK(contains(hdf5_error(path), "PartType1/ParticleIDs is missing but PartType4/ParticleIDs is there"));
        // None at all: the rows' indices, as before.
        with_ids(H5T_STD_U64LE, {}, {});
        CHECK(read_snapshot(path).ids.empty());
        fs::remove(path);
    }

    TEST_CASE("snapshot files: format by content, not by name; hdf5 | tipsy options")
    {
        const Snapshot s = full_snapshot(2, 3, 1, 4);
        const auto h = temp_path("snap.tipsy"), t = temp_path("snap.hdf5"); // names that lie
        write_snapshot(h.string(), s, SnapshotFormat::hdf5, {});
        write_snapshot(t.string(), s, SnapshotFormat::tipsy, {});
        CHECK(detect_snapshot_format(h) == SnapshotFormat::hdf5);
        CHECK(detect_snapshot_format(t) == SnapshotFormat::tipsy);
        SnapshotFormat f{};
        CHECK(bits_equal(read_snapshot(h, nullptr, true, &f).pos, s.pos));
        CHECK(f == SnapshotFormat::hdf5);
        const Snapshot fromtipsy = read_snapshot(t, nullptr, true, &f);
        CHECK(f == SnapshotFormat::tipsy);
        CHECK(bits_equal(fromtipsy.pos, s.pos));
        CHECK(!fromtipsy.units.physical()); // tipsy has no units
        CHECK(parse_snapshot_format("hdf5") == SnapshotFormat::hdf5);
        CHECK(parse_snapshot_format("tipsy") == SnapshotFormat::tipsy);
        CHECK(std::string(to_string(SnapshotFormat::hdf5)) == "hdf5");
        CHECK_THROWS_WITH_AS(parse_snapshot_format("h5", "--format"), "--format must be hdf5 or tipsy, got 'h5'",
                             UsageError);
        CHECK(detect_snapshot_format(temp_path("missing").string()) == SnapshotFormat::tipsy);
        fs::remove(h), fs::remove(t);
    }

    TEST_CASE("snapshot formats: one table, each row read, written, detected, and written over ranks")
    {
        const auto formats = snapshot_formats();
        REQUIRE(formats.size() >= 2);
        CHECK(snapshot_format_list([](const SnapshotFormatInfo& f) { return f.name; }) == "hdf5 or tipsy");
        int fallbacks = 0;
        Snapshot s = full_snapshot(2, 3, 1, 4);
        for (std::size_t i = 0; i < formats.size(); ++i) {
            const SnapshotFormatInfo& f = formats[i];
            CAPTURE(f.name);
            CHECK(static_cast<std::size_t>(f.format) == i);
            CHECK(&snapshot_format_info(f.format) == &f);
            CHECK(parse_snapshot_format(f.name) == f.format);
            CHECK(std::string(to_string(f.format)) == f.name);
            fallbacks += f.detect == nullptr;
            const auto& writers = parallel_snapshot_writers();
            CHECK(std::count_if(writers.begin(), writers.end(), [&](const ParallelSnapshotFormat& w) {
                      return w.format == f.format && w.write != nullptr;
                  }) == 1);
            const auto path = temp_path(fmt::format("table.{}", f.name));
            write_snapshot(path.string(), s, f.format, {});
            SnapshotFormat detected{};
            const Snapshot back = read_snapshot(path.string(), nullptr, true, &detected);
            CHECK(detected == f.format);
            CHECK(bits_equal(back.pos, s.pos));
            CHECK(back.acc.empty() == !f.keeps_accelerations);
            CHECK(back.ids.empty() == !f.keeps_ids);
            fs::remove(path);
        }
        CHECK(fallbacks == 1); // one format takes the files no other claims
    }

    TEST_CASE("units: LENGTH,MASS with velocity and time from G = 1; bad items named")
    {
        // The Earth's orbit: in au and Msun the velocity unit is 2 pi au / yr (29.78 km/s), the time unit yr / 2 pi.
        const Units sun = parse_units("au,Msun");
        CHECK(sun.velocity_cm_per_s() / cgs::km ==
              doctest::Approx(2 * M_PI * cgs::au / cgs::year / cgs::km).epsilon(1e-4));
        CHECK(sun.time_s() == doctest::Approx(cgs::year / (2 * M_PI)).epsilon(1e-4));
        // Galaxies: kpc and 1e10 Msun give 207.4 km/s and 4.71 Myr (the well-known values of these units).
        const Units gal = parse_units("kpc,1e10Msun");
        CHECK(gal.velocity_cm_per_s() / cgs::km == doctest::Approx(207.4).epsilon(1e-3));
        CHECK(gal.time_s() / (1e6 * cgs::year) == doctest::Approx(4.71).epsilon(2e-3));
        CHECK(gal.length_cm == doctest::Approx(3.0857e21).epsilon(1e-4));
        CHECK(same_units(parse_units("1kpc, 1e10 Msun"), gal));
        CHECK(same_units(parse_units("3.0856775814913673e21cm,1.98841e43g"), gal) == false); // 1.98841 is rounded
        CHECK(same_units(parse_units(gal.text()), gal));
        CHECK(parse_units(gal.text()).length_cm == gal.length_cm); // the checkpoint's text gives the same doubles
        CHECK(parse_units(gal.text()).mass_g == gal.mass_g);
        CHECK(parse_units("Mpc,1e10Msun").length_cm == doctest::Approx(1e3 * gal.length_cm).epsilon(1e-12));
        CHECK(parse_units("pc,Msun").mass_g == doctest::Approx(1.988e33).epsilon(1e-3));
        CHECK(!parse_units("").physical());
        CHECK(!parse_units("nbody").physical());
        CHECK(!same_units(parse_units(""), gal));

        auto error = [](const std::string& text) {
            try {
                parse_units(text);
            } catch (const UsageError& e) {
                return std::string(e.what());
            }
            return std::string("no error");
        };
        CHECK(contains(error("kpc,1e10Msun,km/s"), "'km/s' is one item too many"));
        CHECK(contains(error("kpc,1e10Msun,km/s"), "207.4")); // says what the velocity unit is
        CHECK(contains(error("parsec,Msun"), "'parsec' is not a length"));
        CHECK(contains(error("kpc,1e10"), "'1e10' is not a mass: no unit"));
        CHECK(contains(error("kpc,-1Msun"), "positive"));
        CHECK(contains(error("kpc,1e10Mjup"), "unknown unit 'Mjup'"));
        CHECK(contains(error("Msun,kpc"), "'Msun' is not a length"));
        CHECK(contains(error("kpc"), "give LENGTH,MASS"));
        // Factors only in decimal: the C library would read 0x10 as 16, 0x1p3 as 8 and inf as infinity.
        CHECK(contains(error("kpc,0x10Msun"), "positive, finite decimal number"));
        CHECK(contains(error("kpc,0x1p3Msun"), "positive, finite decimal number"));
        CHECK(contains(error("kpc,infMsun"), "unknown unit 'infMsun'"));
        CHECK(contains(error("kpc,1e400Msun"), "positive, finite decimal number"));
        CHECK(parse_units("kpc,.5e10Msun").mass_g == doctest::Approx(0.5 * gal.mass_g).epsilon(1e-12));
    }
}

TEST_SUITE("static")
{
    TEST_CASE("outputs that are not regular files: devices and FIFOs written through, links kept, the rest refused")
    {
        const fs::path dir = temp_path("outputs");
        fs::remove_all(dir);
        fs::create_directories(dir);
        std::string bytes(1 << 20, '\0'); // more than a pipe holds: the writes to a FIFO are partial and wait
        std::mt19937 g(7);
        for (auto& c : bytes)
            c = static_cast<char>(g());
        auto write_bytes = [&](std::ostream& out) {
            out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
        };
        auto write_text = [](const fs::path& p, const std::string& text) {
            std::ofstream(p, std::ios::binary) << text;
        };
        auto text_of = [](const fs::path& p) {
            std::ifstream in(p, std::ios::binary);
            return std::string(std::istreambuf_iterator<char>(in), {});
        };
        auto usage_error = [](const std::function<void()>& f) {
            try {
                f();
            } catch (const UsageError& e) {
                return std::string(e.what());
            } catch (const std::exception& e) {
                return std::string("not a UsageError: ") + e.what();
            }
            return std::string("no error");
        };
        auto leftovers = [](const fs::path& folder) {
            int n = 0;
            for (const auto& e : fs::directory_iterator(folder))
                n += e.path().filename().string().find(".tmp.") != std::string::npos;
            return n;
        };
        // Reads a FIFO to its end on a thread of its own; gives up after 5 s without news (a writer that never came,
        // as when the FIFO was replaced by a regular file).
        auto read_fifo = [](const fs::path& fifo) {
            return std::async(std::launch::async, [fifo] {
                std::string got;
                const int fd = ::open(fifo.c_str(), O_RDONLY | O_NONBLOCK);
                if (fd < 0) return got;
                std::vector<char> buf(65536);
                for (;;) {
                    pollfd p{fd, POLLIN, 0};
                    if (::poll(&p, 1, 5000) <= 0) break;
                    const ssize_t r = ::read(fd, buf.data(), buf.size());
                    if (r > 0)
                        got.append(buf.data(), static_cast<std::size_t>(r));
                    else if (r == 0 || errno != EAGAIN)
                        break;
                }
                ::close(fd);
                return got;
            });
        };
        auto is_char_device = [](const char* p) {
            struct stat st {};
            return ::stat(p, &st) == 0 && S_ISCHR(st.st_mode);
        };

        SUBCASE("a FIFO is written through and stays a FIFO")
        {
            const fs::path fifo = dir / "pipe";
            REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
            auto reader = read_fifo(fifo);
            write_file_atomically(fifo.string(), write_bytes);
            const std::string got = reader.get();
            CHECK(got.size() == bytes.size());
            CHECK((got == bytes));
            CHECK(fs::is_fifo(fs::symlink_status(fifo)));
            // A writer that filled its temporary file itself (HDF5): the bytes are copied through, the file removed.
            const fs::path tmp = dir / "pipe.tmp.hdf5";
            write_text(tmp, bytes);
            auto reader2 = read_fifo(fifo);
            rename_durably(tmp.string(), fifo.string());
            CHECK((reader2.get() == bytes));
            CHECK(fs::is_fifo(fs::symlink_status(fifo)));
            CHECK(!fs::exists(tmp));
            CHECK(leftovers(dir) == 0);
        }

        SUBCASE("character devices: /dev/null written through and kept, /dev/full's failure reported")
        {
            REQUIRE(is_char_device("/dev/null"));
            const std::string tmp_of_null = fmt::format("/dev/null.tmp.{}", ::getpid());
            write_file_atomically("/dev/null", write_bytes);
            CHECK(is_char_device("/dev/null"));
            CHECK(!fs::exists(tmp_of_null));
            const fs::path tmp = dir / "null.tmp.hdf5";
            write_text(tmp, "some bytes");
            rename_durably(tmp.string(), "/dev/null");
            CHECK(is_char_device("/dev/null"));
            CHECK(!fs::exists(tmp));
            // Through a link, too: the link stays a link.
            const fs::path link = dir / "discard";
            fs::create_symlink("/dev/null", link);
            write_file_atomically(link.string(), write_bytes);
            CHECK(fs::is_symlink(link));
            CHECK(is_char_device("/dev/null"));
            if (is_char_device("/dev/full")) { // every write fails with ENOSPC: an error, and the device stays
                CHECK_THROWS_AS(write_file_atomically("/dev/full", write_bytes), std::runtime_error);
                CHECK(is_char_device("/dev/full"));
                CHECK(!fs::exists(fmt::format("/dev/full.tmp.{}", ::getpid())));
            }
            CHECK(leftovers(dir) == 0);
        }

        SUBCASE("an open descriptor (/dev/stdout > file): written at its offset, the file not replaced")
        {
            const fs::path file = dir / "stdout.txt";
            const int fd = ::open(file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
            REQUIRE(fd >= 0);
            REQUIRE(::write(fd, "printed first\n", 14) == 14);
            struct stat before {};
            ::fstat(fd, &before);
            write_file_atomically(fmt::format("/dev/fd/{}", fd), [](std::ostream& out) { out << "the bytes\n"; });
            REQUIRE(::write(fd, "printed after\n", 14) == 14); // the offset moved on: nothing overwritten
            ::close(fd);
            struct stat after {};
            ::stat(file.c_str(), &after);
            CHECK(after.st_ino == before.st_ino);
            CHECK(text_of(file) == "printed first\nthe bytes\nprinted after\n");
            CHECK(leftovers(dir) == 0);
            // One open for reading only is refused.
            const int in = ::open(file.c_str(), O_RDONLY);
            REQUIRE(in >= 0);
            const std::string read_only = fmt::format("/proc/self/fd/{}", in);
            const std::string e = usage_error([&] { write_file_atomically(read_only, write_bytes); });
            CHECK(contains(e, "open for reading only"));
            ::close(in);
            CHECK(text_of(file) == "printed first\nthe bytes\nprinted after\n");
        }

        SUBCASE("a link to a regular file: its target is replaced whole, the link stays")
        {
            fs::create_directories(dir / "run7");
            const fs::path target = dir / "run7" / "frame.png", link = dir / "latest.png";
            write_text(target, "old");
            fs::create_symlink("run7/frame.png", link); // relative, as ln -s makes it
            write_file_atomically(link.string(), [](std::ostream& out) { out << "new"; });
            CHECK(fs::is_symlink(link));
            CHECK(fs::read_symlink(link) == "run7/frame.png");
            CHECK(text_of(target) == "new");
            // A link to a link to the file, and a temporary file filled by its writer (in the link's folder).
            const fs::path link2 = dir / "latest-of-all.png";
            fs::create_symlink("latest.png", link2);
            const fs::path tmp = dir / "latest-of-all.png.tmp.hdf5";
            write_text(tmp, "newer");
            rename_durably(tmp.string(), link2.string());
            CHECK(fs::is_symlink(link2));
            CHECK(fs::is_symlink(link));
            CHECK(text_of(target) == "newer");
            CHECK(!fs::exists(tmp));
            CHECK(leftovers(dir) == 0);
            CHECK(leftovers(dir / "run7") == 0);
        }

        SUBCASE("a dangling link is refused, naming the link and its target")
        {
            const fs::path link = dir / "gone.png";
            fs::create_symlink("missing/frame.png", link);
            const std::string e = usage_error([&] { write_file_atomically(link.string(), write_bytes); });
            CHECK(contains(e, link.string()));
            CHECK(contains(e, "missing/frame.png"));
            CHECK(contains(e, "dangling"));
            CHECK(fs::is_symlink(link));
            const fs::path tmp = dir / "gone.png.tmp.hdf5";
            write_text(tmp, "bytes");
            CHECK(contains(usage_error([&] { rename_durably(tmp.string(), link.string()); }), "dangling"));
            CHECK(fs::is_symlink(link));
            fs::remove(tmp); // rename_durably's caller removes its temporary file
            CHECK(leftovers(dir) == 0);
        }

        SUBCASE("a folder, a socket and a block device are refused, and left as they were")
        {
            const fs::path folder = dir / "frames";
            fs::create_directories(folder);
            const std::string e = usage_error([&] { write_file_atomically(folder.string(), write_bytes); });
            CHECK(contains(e, folder.string()));
            CHECK(contains(e, "a folder"));
            CHECK(fs::is_directory(folder));
            const fs::path link = dir / "frames-link";
            fs::create_symlink("frames", link);
            CHECK(contains(usage_error([&] { write_file_atomically(link.string(), write_bytes); }), "a folder"));
            CHECK(fs::is_symlink(link));

            const fs::path sock = dir / "sock";
            const int s = ::socket(AF_UNIX, SOCK_STREAM, 0);
            sockaddr_un addr{};
            addr.sun_family = AF_UNIX;
            std::snprintf(addr.sun_path, sizeof addr.sun_path, "%s", sock.c_str());
            if (s >= 0 && ::bind(s, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) == 0) {
                CHECK(contains(usage_error([&] { write_file_atomically(sock.string(), write_bytes); }), "a socket"));
                CHECK(fs::is_socket(fs::symlink_status(sock)));
            }
            if (s >= 0) ::close(s);

            const fs::path block = dir / "block";
            if (::mknod(block.c_str(), S_IFBLK | 0600, ::makedev(7, 0)) == 0) { // needs CAP_MKNOD
                CHECK(contains(usage_error([&] { write_file_atomically(block.string(), write_bytes); }),
                               "a block device"));
                CHECK(fs::is_block_file(fs::symlink_status(block)));
            }
            CHECK(leftovers(dir) == 0);
        }

        SUBCASE("an output that cannot be written is a usage error, and no temporary file is left")
        {
            const fs::path missing = dir / "no-such-folder" / "snap.tipsy";
            const std::string e = usage_error([&] { write_file_atomically(missing.string(), write_bytes); });
            CHECK(contains(e, missing.string()));
            CHECK(contains(e, "not a UsageError") == false);
            // A writer that fails half-way: no file, no temporary file.
            const fs::path half = dir / "half.npy";
            CHECK_THROWS_AS(write_file_atomically(half.string(),
                                                  [&](std::ostream& out) {
                                                      out.write(bytes.data(), 1000);
                                                      throw std::runtime_error("the writer failed");
                                                  }),
                            std::runtime_error);
            CHECK(!fs::exists(half));
            if (::geteuid() == 0) {
                MESSAGE("running as root, who may write anywhere: the unwritable folder is not checked");
            } else {
                const fs::path locked = dir / "locked";
                fs::create_directories(locked);
                fs::permissions(locked, fs::perms::owner_read | fs::perms::owner_exec);
                const std::string e2 =
                    usage_error([&] { write_file_atomically((locked / "snap.hdf5").string(), write_bytes); });
                CHECK(contains(e2, (locked / "snap.hdf5").string()));
                CHECK(contains(e2, "not a UsageError") == false);
                CHECK(leftovers(locked) == 0);
                fs::permissions(locked, fs::perms::owner_all);
            }
            CHECK(leftovers(dir) == 0);
        }
        fs::remove_all(dir);
    }
}
