/**
 * @file test_hdf5_fuzz.cpp
 * @brief Damaged HDF5 files never crash banyan (issue 30): the child process that decodes a file's structure first
 *        (core/files/child_process.hpp) turns a crash into a UsageError, and a seeded fuzz of a small snapshot,
 *        damaged where HDF5 decodes structure (superblock, object headers, attribute, dataspace, datatype and layout
 *        messages, the groups' heaps and B-trees), gets from read_snapshot either particles or a UsageError.
 *        Device-free (test suite "static").
 *
 * More mutations by hand: BANYAN_HDF5_FUZZ_COUNT=20000 (and BANYAN_HDF5_FUZZ_SEED) with
 * --test-case='*seeded damage*'; each file that crashed HDF5 in the child is printed with its recipe (and kept in
 * the folder BANYAN_HDF5_FUZZ_KEEP names).
 */
#include "core/error.hpp"
#include "core/files/child_process.hpp"
#include "core/files/hdf5_snapshot.hpp"
#include "core/files/snapshot_file.hpp"
#include "core/files/units.hpp"

#include <hdf5.h>

#include <doctest/doctest.h>
#include <fmt/format.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

using namespace banyan;

namespace {

namespace fs = std::filesystem;

fs::path temp_path(const std::string& name)
{
    return fs::temp_directory_path() / fmt::format("banyan-fuzz-{}-{}", ::getpid(), name);
}

bool contains(const std::string& text, const std::string& part)
{
    return text.find(part) != std::string::npos;
}

// ---- The snapshot damaged -----------------------------------------------------------------------------------------

/// 3 gas and 4 dark particles with ids, in kpc and 1e10 Msun (so Units and the unit attributes of Parameters are
/// written), with one parameter line.
void write_sample(const std::string& path)
{
    Snapshot s;
    s.time = 0.5;
    s.n_gas = 3;
    s.n_dark = 4;
    const std::size_t n = s.size();
    for (std::size_t i = 0; i < n; ++i) {
        const float x = static_cast<float>(i);
        s.mass.push_back(1.0f + x);
        s.eps.push_back(0.01f);
        s.phi.push_back(-x);
        s.ids.push_back(100 + i);
        for (int k = 0; k < 3; ++k) {
            s.pos.push_back(x + 0.25f * static_cast<float>(k));
            s.vel.push_back(-x);
            s.acc.push_back(0.5f * x);
        }
    }
    for (std::size_t i = 0; i < s.n_gas; ++i) {
        s.gas_rho.push_back(1.0f);
        s.gas_temp.push_back(1e4f);
        s.gas_metals.push_back(0.02f);
    }
    s.units = parse_units("kpc,1e10Msun");
    SnapshotMeta meta;
    meta.parameters = "theta=0.75\n";
    write_hdf5(path, s, meta);
}

std::vector<unsigned char> load(const std::string& path)
{
    std::ifstream in(path, std::ios::binary);
    return std::vector<unsigned char>(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

void save(const std::string& path, const std::vector<unsigned char>& bytes)
{
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
    REQUIRE(out.good());
}

/// A field of the file's structure: @p width bytes (little-endian) at @p at, named by where it is.
struct Field {
    std::string name;
    std::size_t at = 0;
    int width = 0;
};

/// The structure of a file as HDF5 1.10 writes it by default (superblock 0, object headers 1, symbol-table groups):
/// the fields of the superblock, of every object header and its messages (dataspace, datatype, attribute, layout,
/// fill value, symbol table, continuation), and of the groups' local heaps, B-tree nodes and symbol nodes, as the
/// file format specification lays them out. Only the file's own bytes are read (never HDF5's decoding of them).
class Structure {
public:
    Structure(const std::vector<unsigned char>& bytes,
              const std::vector<std::pair<std::string, std::uint64_t>>& objects)
        : b_(bytes)
    {
        superblock();
        for (const auto& [name, addr] : objects)
            object_header(name, addr);
        for (std::size_t at = 0; at + 4 <= b_.size(); ++at) {
            if (std::memcmp(&b_[at], "HEAP", 4) == 0) local_heap(at);
            if (std::memcmp(&b_[at], "TREE", 4) == 0) btree(at);
            if (std::memcmp(&b_[at], "SNOD", 4) == 0) symbol_node(at);
        }
    }
    const std::vector<Field>& fields() const { return fields_; }
    /// The first field whose name starts with @p start and ends with @p end (a recipe's), or a failed test.
    const Field& field(const std::string& start, const std::string& end = "") const
    {
        for (const Field& f : fields_)
            if (f.name.starts_with(start) && f.name.ends_with(end)) return f;
        FAIL("no field " << start << " ... " << end << " in the file's structure");
        return fields_.front();
    }

private:
    const std::vector<unsigned char>& b_;
    std::vector<Field> fields_;
    int message_ = 0; ///< the number of the next message of the object header being read

    bool inside(std::size_t at, std::size_t n) const { return at <= b_.size() && n <= b_.size() - at; }
    std::uint64_t get(std::size_t at, int width) const
    {
        std::uint64_t v = 0;
        for (int i = width - 1; i >= 0; --i)
            v = (v << 8) | b_[at + static_cast<std::size_t>(i)];
        return v;
    }
    void add(const std::string& name, std::size_t at, int width)
    {
        if (inside(at, static_cast<std::size_t>(width))) fields_.push_back({name, at, width});
    }
    /// A field at a fixed place in its structure: its name, its offset from the structure's start, its width.
    struct Slot {
        const char* name;
        std::size_t offset;
        int width;
    };
    /// The fields @p slots of the structure @p what at @p at, each named "@p what name".
    void add_fields(const std::string& what, std::size_t at, std::initializer_list<Slot> slots)
    {
        for (const Slot& f : slots)
            add(what + " " + f.name, at + f.offset, f.width);
    }
    static std::size_t pad8(std::size_t n) { return (n + 7) / 8 * 8; }

    void superblock()
    {
        add_fields("superblock", 0,
                   {{"version", 8, 1},
                    {"free-space version", 9, 1},
                    {"root symbol table version", 10, 1},
                    {"reserved", 11, 1},
                    {"shared header version", 12, 1},
                    {"size of offsets", 13, 1},
                    {"size of lengths", 14, 1},
                    {"reserved 2", 15, 1},
                    {"leaf K", 16, 2},
                    {"internal K", 18, 2},
                    {"flags", 20, 4},
                    {"base address", 24, 8},
                    {"free-space address", 32, 8},
                    {"end of file", 40, 8},
                    {"driver address", 48, 8},
                    {"root name offset", 56, 8},
                    {"root object header", 64, 8},
                    {"root cache type", 72, 4},
                    {"root B-tree", 80, 8},
                    {"root heap", 88, 8}});
    }

    void object_header(const std::string& obj, std::uint64_t addr)
    {
        if (!inside(addr, 16) || b_[addr] != 1) return;
        add_fields(obj + " header", addr,
                   {{"version", 0, 1}, {"messages", 2, 2}, {"references", 4, 4}, {"size", 8, 4}});
        message_ = 0;
        messages(obj, addr + 16, get(addr + 8, 4), 0);
    }

    void messages(const std::string& obj, std::size_t at, std::size_t size, int depth)
    {
        if (depth > 4 || !inside(at, size)) return;
        for (std::size_t end = at + size; at + 8 <= end; ++message_) {
            const unsigned type = static_cast<unsigned>(get(at, 2));
            const std::size_t n = get(at + 2, 2);
            const std::string m = fmt::format("{} message {} (type {})", obj, message_, type);
            add_fields(m, at, {{"type", 0, 2}, {"size", 2, 2}, {"flags", 4, 1}});
            const std::size_t data = at + 8;
            if (!inside(data, n)) return;
            if (type == 0x01) {
                dataspace(m, data);
            } else if (type == 0x03) {
                datatype(m, data);
            } else if (type == 0x05) {
                for (int i = 0; i < 4; ++i)
                    add(fmt::format("{} fill byte {}", m, i), data + static_cast<std::size_t>(i), 1);
                add(m + " fill size", data + 4, 4);
            } else if (type == 0x08) {
                add_fields(m + " layout", data,
                           {{"version", 0, 1}, {"class", 1, 1}, {"address", 2, 8}, {"size", 10, 8}});
            } else if (type == 0x0c) {
                attribute(obj, data);
            } else if (type == 0x10) {
                add_fields(m + " continuation", data, {{"address", 0, 8}, {"length", 8, 8}});
                messages(obj, get(data, 8), get(data + 8, 8), depth + 1);
            } else if (type == 0x11) {
                add_fields(m, data, {{"B-tree", 0, 8}, {"heap", 8, 8}});
            }
            at = data + n;
        }
    }

    void dataspace(const std::string& m, std::size_t at)
    {
        add_fields(m + " dataspace", at, {{"version", 0, 1}, {"rank", 1, 1}, {"flags", 2, 1}});
        const std::size_t dims = at + (b_[at] == 1 ? 8 : 4);
        const int rank = b_[at + 1];
        for (int i = 0; i < rank && i < 4; ++i)
            add(fmt::format("{} dataspace dim {}", m, i), dims + 8 * static_cast<std::size_t>(i), 8);
        if (b_[at + 2] & 1)
            for (int i = 0; i < rank && i < 4; ++i)
                add(fmt::format("{} dataspace max dim {}", m, i), dims + 8 * static_cast<std::size_t>(rank + i), 8);
    }

    void datatype(const std::string& m, std::size_t at)
    {
        const std::string t = m + " datatype";
        add_fields(t, at, {{"class and version", 0, 1}, {"bits 0", 1, 1}, {"bits 1", 2, 1}, {"size", 4, 4}});
        const unsigned cls = b_[at] & 0x0f;
        // Integer, float: bit offset and precision (float: exponent and mantissa).
        if (cls == 0 || cls == 1) add_fields(t, at, {{"bit offset", 8, 2}, {"precision", 10, 2}});
        if (cls == 1)
            add_fields(t, at,
                       {{"exponent location", 12, 1},
                        {"exponent size", 13, 1},
                        {"mantissa location", 14, 1},
                        {"mantissa size", 15, 1},
                        {"exponent bias", 16, 4}});
    }

    /// An attribute message at @p at of object @p obj: its fields named by the attribute's name.
    void attribute(const std::string& obj, std::size_t at)
    {
        const unsigned version = b_[at];
        const std::size_t name = get(at + 2, 2), type = get(at + 4, 2), space = get(at + 6, 2);
        const std::size_t text = at + (version == 3 ? 9 : 8);
        if (!inside(text, name)) return;
        const std::string a = fmt::format("{} attribute {}", obj,
                                          std::string(reinterpret_cast<const char*>(&b_[text]), name ? name - 1 : 0));
        add_fields(a, at, {{"version", 0, 1}, {"name size", 2, 2}, {"datatype size", 4, 2}, {"dataspace size", 6, 2}});
        const bool padded = version == 1;
        const std::size_t t = text + (padded ? pad8(name) : name);
        const std::size_t s = t + (padded ? pad8(type) : type);
        if (inside(t, 8)) datatype(a, t);
        if (inside(s, 8)) dataspace(a, s);
        add(a + " data", s + (padded ? pad8(space) : space), 1);
    }

    void local_heap(std::size_t at)
    {
        add_fields(fmt::format("heap at {}", at), at,
                   {{"version", 4, 1}, {"data size", 8, 8}, {"free list", 16, 8}, {"data address", 24, 8}});
    }

    void btree(std::size_t at)
    {
        const std::string t = fmt::format("B-tree at {}", at);
        add_fields(t, at, {{"node type", 4, 1}, {"level", 5, 1}, {"entries", 6, 2}, {"left", 8, 8}, {"right", 16, 8}});
        for (int i = 0; i < 2; ++i) {
            add(fmt::format("{} key {}", t, i), at + 24 + 16 * static_cast<std::size_t>(i), 8);
            add(fmt::format("{} child {}", t, i), at + 32 + 16 * static_cast<std::size_t>(i), 8);
        }
    }

    void symbol_node(std::size_t at)
    {
        const std::string s = fmt::format("symbol node at {}", at);
        add_fields(s, at, {{"version", 4, 1}, {"symbols", 6, 2}});
        for (int i = 0; i < 8; ++i)
            add_fields(fmt::format("{} entry {}", s, i), at + 8 + 40 * static_cast<std::size_t>(i),
                       {{"name offset", 0, 8}, {"object header", 8, 8}, {"cache type", 16, 4}});
    }
};

/// Every object of the file at @p path (groups, datasets) with the address of its object header.
std::vector<std::pair<std::string, std::uint64_t>> objects_of(const std::string& path)
{
    std::vector<std::pair<std::string, std::uint64_t>> out;
    const hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
    REQUIRE(f >= 0);
    H5Ovisit2(
        f, H5_INDEX_NAME, H5_ITER_INC,
        [](hid_t, const char* name, const H5O_info_t* info, void* data) -> herr_t {
            static_cast<std::vector<std::pair<std::string, std::uint64_t>>*>(data)->emplace_back(
                std::string("/") + (std::strcmp(name, ".") == 0 ? "" : name), info->addr);
            return 0;
        },
        &out, H5O_INFO_BASIC);
    H5Fclose(f);
    return out;
}

/// One change: @p width bytes at @p at set to @p value (little-endian), named for the recipe.
struct Change {
    std::string what;
    std::size_t at = 0;
    int width = 0;
    std::uint64_t value = 0;
};

void put(std::vector<unsigned char>& bytes, const Change& c)
{
    for (int i = 0; i < c.width && c.at + static_cast<std::size_t>(i) < bytes.size(); ++i)
        bytes[c.at + static_cast<std::size_t>(i)] = static_cast<unsigned char>(c.value >> (8 * i));
}

/// The mutation of @p field that the draw @p g picks: values that reach HDF5's size and bounds arithmetic (0, 1, all
/// ones, a sign bit, the file's size, the value plus or minus a little, shifted up) more often than random bytes.
Change mutate(const Field& field, const std::vector<unsigned char>& bytes, std::mt19937_64& g)
{
    std::uint64_t old = 0;
    for (int i = field.width - 1; i >= 0; --i)
        old = (old << 8) | bytes[field.at + static_cast<std::size_t>(i)];
    const int bits = 8 * field.width;
    const std::uint64_t ones = bits == 64 ? ~0ull : (1ull << bits) - 1;
    const std::uint64_t values[] = {0,
                                    1,
                                    ones,
                                    1ull << (bits - 1),
                                    (1ull << (bits - 1)) - 1,
                                    bytes.size() + g() % 64 - 32,
                                    old + 1 + g() % 8,
                                    old - 1 - g() % 8,
                                    old << (8 * (1 + g() % 3)),
                                    old ^ (1ull << (g() % static_cast<unsigned>(bits))),
                                    g() % 256,
                                    g()};
    const std::uint64_t v = values[g() % std::size(values)];
    return Change{field.name, field.at, field.width, v & ones};
}

/// What read_snapshot made of the damaged copy at @p path (its rows 1 .. 3 only, as an MPI rank reads, with
/// @p rows): "read", "refused", "crashed" (HDF5 crashed in the child that reads the structure first: refused), or
/// what went wrong.
std::string read_outcome(const std::string& path, bool rows)
{
    try {
        FileCounts whole;
        const Snapshot s = rows ? read_snapshot(path, nullptr, false, nullptr, Rows{1, 3}, &whole)
                                : read_snapshot(path, nullptr, false);
        const std::size_t n = s.size();
        if (n > 0x7fffffff || s.pos.size() != 3 * n || s.vel.size() != 3 * n || s.mass.size() != n ||
            s.gas_rho.size() != s.n_gas || (rows && whole.size() > 0x7fffffff))
            return fmt::format("read, with insane counts ({} particles, {} positions)", n, s.pos.size());
        return "read";
    } catch (const UsageError& e) {
        return contains(e.what(), "the HDF5 library crashed") ? "crashed" : "refused";
    } catch (const std::exception& e) {
        return fmt::format("threw something else than UsageError: {}", e.what());
    }
}

/// read_outcome, run in a child process: a crash of banyan's own read (what the test looks for) then fails the test
/// case instead of ending the suite, and HDF5's error paths, which lose some of its objects on damaged files
/// (LeakSanitizer reports them in CI), leave this process's memory as it was.
std::string outcome_of(const std::string& path, bool rows)
{
    const std::string note = path + ".outcome";
    fs::remove(note);
    try {
        in_child_process([&] { std::ofstream(note) << read_outcome(path, rows); }, "read_snapshot crashed");
    } catch (const UsageError& e) {
        return fmt::format("{}: a crash in-process, past the child that reads the structure first", e.what());
    }
    std::ifstream in(note);
    std::string outcome;
    std::getline(in, outcome);
    fs::remove(note);
    return outcome.empty() ? std::string("no outcome (the read took more than a minute?)") : outcome;
}

std::uint64_t env_number(const char* name, std::uint64_t fallback)
{
    const char* v = std::getenv(name);
    return v && *v ? std::strtoull(v, nullptr, 10) : fallback;
}

} // namespace

TEST_SUITE("static")
{
    TEST_CASE("child process: a crash is a UsageError naming the signal, anything else lets the caller go on")
    {
        // How the child ended: the caller then reads in-process (and throws the same clean error itself).
        CHECK(in_child_process([] {}, "x") == ChildEnd::returned);
        CHECK(in_child_process([] { throw UsageError("bad file"); }, "x") == ChildEnd::threw);
        CHECK(in_child_process([] { throw std::runtime_error("other"); }, "x") == ChildEnd::threw);
        // Nothing the child does reaches this process.
        int touched = 0;
        CHECK(in_child_process([&] { touched = 1; }, "x") == ChildEnd::returned);
        CHECK(touched == 0);
        // A child that dies of a crash signal, even where a handler is installed (doctest's; a sanitizer's in CI).
        const auto message = [](const std::function<void()>& fn) -> std::string {
            try {
                in_child_process(fn, "f.hdf5: the HDF5 library crashed");
            } catch (const UsageError& e) {
                return e.what();
            }
            return "no error";
        };
        const std::string segv = message([] { std::raise(SIGSEGV); });
        CHECK(contains(segv, "f.hdf5: the HDF5 library crashed"));
        CHECK(contains(segv, ::strsignal(SIGSEGV)));
        CHECK(contains(segv, fmt::format("signal {}", SIGSEGV)));
        CHECK(contains(message([] { std::raise(SIGBUS); }), ::strsignal(SIGBUS)));
        CHECK(contains(message([] { std::abort(); }), ::strsignal(SIGABRT)));
        // A null pointer written: a signal, or in a sanitized build the sanitizer's report and exit.
        CHECK(contains(message([] { *static_cast<volatile int*>(nullptr) = 1; }), "f.hdf5: the HDF5 library crashed"));
        // An exit of its own (a sanitizer's report, a library's exit()) is a crash too.
        CHECK(contains(message([] { std::_Exit(1); }), "(exit status 1)"));
        // Stopped by an interruption, or past its time: no judgement, the caller goes on.
        CHECK(in_child_process(
                  [] {
                      std::signal(SIGTERM, SIG_DFL); // not doctest's handler
                      std::raise(SIGTERM);
                  },
                  "x") == ChildEnd::unknown);
        const auto start = std::chrono::steady_clock::now();
        CHECK(in_child_process([] { std::this_thread::sleep_for(std::chrono::seconds(30)); }, "x", 0.2) ==
              ChildEnd::unknown);
        CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(10));
    }

    TEST_CASE("hdf5: seeded damage to the structure of a snapshot is refused (UsageError) or read, never a crash")
    {
        const std::string clean = temp_path("clean.hdf5").string();
        write_sample(clean);
        REQUIRE(read_snapshot(clean).size() == 7);
        const std::vector<unsigned char> bytes = load(clean);
        const Structure structure(bytes, objects_of(clean));
        const std::vector<Field>& fields = structure.fields();
        REQUIRE(fields.size() > 200);

        const std::uint64_t count = env_number("BANYAN_HDF5_FUZZ_COUNT", 400);
        const std::uint64_t seed = env_number("BANYAN_HDF5_FUZZ_SEED", 30);
        const std::string damaged = temp_path("damaged.hdf5").string();
        int read = 0, refused = 0, crashed = 0;
        for (std::uint64_t i = 0; i < count; ++i) {
            std::mt19937_64 g(seed * 1000003 + i);
            std::vector<unsigned char> copy = bytes;
            std::string recipe;
            const int changes = 1 + static_cast<int>(g() % 3);
            for (int k = 0; k < changes; ++k) {
                Change c;
                if (g() % 8 == 0) { // now and then a random byte anywhere, structure or not
                    c = Change{"byte", static_cast<std::size_t>(g() % copy.size()), 1, g() % 256};
                } else {
                    c = mutate(fields[g() % fields.size()], copy, g);
                }
                put(copy, c);
                recipe += fmt::format("{}{} @{} = {:#x}", k ? "; " : "", c.what, c.at, c.value);
            }
            save(damaged, copy);
            const std::string outcome = outcome_of(damaged, i % 4 == 3);
            INFO("mutation ", i, " (seed ", seed, "): ", recipe);
            if (outcome == "read") {
                ++read;
            } else if (outcome == "refused") {
                ++refused;
            } else if (outcome == "crashed") {
                ++crashed;
                MESSAGE("HDF5 crashed (refused, exit 2) on mutation ", i, ": ", recipe);
                if (const char* keep = std::getenv("BANYAN_HDF5_FUZZ_KEEP"))
                    save(fmt::format("{}/crash-{}-{}.hdf5", keep, seed, i), copy);
            } else {
                FAIL_CHECK(outcome);
            }
        }
        MESSAGE(fmt::format("{} damaged copies: {} read, {} refused, {} crashed HDF5 in the child (refused)", count,
                            read, refused, crashed));
        CHECK(refused + crashed > 0);
        fs::remove(clean);
        fs::remove(damaged);
    }

    TEST_CASE("hdf5: files that crash HDF5 1.10.8 when read in-process are refused, naming the crash")
    {
        // Found by the fuzz above and by hand (every field of the structure set to 0, 1, all ones, ...): each of
        // these kills a process that reads the file with HDF5 1.10.8 (SIGSEGV: a null pointer in H5A__close, and
        // memcpy from an address past the end of the file in H5F__accum_read). A newer HDF5 may refuse them cleanly.
        struct Recipe {
            const char* start;
            const char* end;
            std::uint64_t value;
        };
        const Recipe recipes[] = {
            // An attribute of Parameters whose datatype has 0 bytes: H5Aopen_by_idx releases a half-built table.
            {"/Parameters attribute Time_GYR datatype size", "", 0},
            // The fill value message of a dataset marked shared: read through the shared-message heap's address.
            {"/PartType1/Coordinates message ", "(type 5) flags", 2},
            // The root group's local heap (its links' names) at the undefined address, all ones: looking up Header.
            {"/ message ", "(type 17) heap", ~0ull},
        };
        const std::string clean = temp_path("clean.hdf5").string(), damaged = temp_path("crash.hdf5").string();
        write_sample(clean);
        const std::vector<unsigned char> bytes = load(clean);
        const Structure structure(bytes, objects_of(clean));
        const bool known = H5_VERS_MAJOR == 1 && H5_VERS_MINOR == 10 && H5_VERS_RELEASE == 8;
        for (const Recipe& recipe : recipes) {
            const Field& f = structure.field(recipe.start, recipe.end);
            std::vector<unsigned char> copy = bytes;
            put(copy, Change{f.name, f.at, f.width, recipe.value});
            save(damaged, copy);
            INFO(f.name, " = ", recipe.value);
            std::string error = "no error";
            try {
                read_snapshot(damaged);
            } catch (const UsageError& e) {
                error = e.what();
            }
            if (known || contains(error, "crashed")) {
                CHECK(contains(error, damaged + ": the HDF5 library crashed"));
                CHECK(contains(error, "a damaged or crafted file"));
            } else {
                CHECK(contains(error, damaged)); // refused cleanly by a newer HDF5
            }
        }
        fs::remove(clean);
        fs::remove(damaged);
    }
}

TEST_SUITE("static")
{
    TEST_CASE("hdf5: a dataset whose layout puts its data past the file's end, or states another size, is refused")
    {
        // HDF5 1.10 read such a dataset as zeros (data past the end, or never stored) or ignored the size its layout
        // states, where h5py (a newer HDF5) refuses the file: the layout is checked before the data are read.
        const std::string clean = temp_path("clean.hdf5").string(), damaged = temp_path("layout.hdf5").string();
        write_sample(clean);
        const std::vector<unsigned char> bytes = load(clean);
        const Structure structure(bytes, objects_of(clean));
        const Field& address = structure.field("/PartType1/Coordinates message ", "layout address");
        const Field& size = structure.field("/PartType1/Coordinates message ", "layout size");
        const std::uint64_t file_size = bytes.size();
        struct Recipe {
            const Field* field;
            std::uint64_t value;
            const char* says;
        };
        const Recipe recipes[] = {
            {&address, file_size - 8, "PartType1/Coordinates's 48 bytes of data start at byte"},
            {&address, file_size, "they lie past its end"},
            {&address, ~0ull, "PartType1/Coordinates has no data stored"},
            {&size, 0, "PartType1/Coordinates's layout says 0 bytes of data, but its 12 values take 48"},
            {&size, 1000000, "layout says 1000000 bytes"},
        };
        for (const Recipe& recipe : recipes) {
            std::vector<unsigned char> copy = bytes;
            put(copy, Change{recipe.field->name, recipe.field->at, recipe.field->width, recipe.value});
            save(damaged, copy);
            INFO(recipe.field->name, " = ", recipe.value);
            for (const Rows rows : {Rows{}, Rows{3, 2}}) { // all of it, and rows of PartType1 only (an MPI rank's)
                std::string error = "no error";
                try {
                    read_snapshot(damaged, nullptr, true, nullptr, rows);
                } catch (const UsageError& e) {
                    error = e.what();
                }
                CHECK(contains(error, damaged + ": "));
                CHECK(contains(error, recipe.says));
            }
        }
        CHECK(read_snapshot(clean).size() == 7);
        fs::remove(clean);
        fs::remove(damaged);
    }
}
