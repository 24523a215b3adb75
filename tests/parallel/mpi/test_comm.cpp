/**
 * @file test_comm.cpp
 * @brief Comm, the ranks of a parallel run: every collective against what each rank can predict for every other,
 *        on however many ranks mpirun started (1 to 4 in CTest), and without a launcher as one rank. Device-free.
 *
 * Collectives run on every rank whatever the checks found (CHECK, never REQUIRE, between them).
 */
#include "core/parallel/comm.hpp"
#include "tests/parallel/mpi/shared_folder.hpp"

#include <doctest/doctest.h>
#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

using namespace banyan;

namespace {

namespace fs = std::filesystem;

const Comm& comm()
{
    return Comm::world();
}
std::size_t ranks()
{
    return static_cast<std::size_t>(comm().size());
}
std::size_t me()
{
    return static_cast<std::size_t>(comm().rank());
}

/// The launcher's word for this process, when Open MPI started it (-1 otherwise).
int ompi_env(const char* name)
{
    const char* v = std::getenv(name);
    return v && *v ? std::atoi(v) : -1;
}

/// A double of rank @p r for element @p k whose sum depends on the order of the ranks: 1e16 and 1 alternate in
/// sign and size, so that 1e16 + 1 rounds back to 1e16 and the rank-order sum differs from a pairwise one.
double summand(std::size_t r, std::size_t k)
{
    const double big = (r / 2 % 2 == 0 ? 1.0 : -1.0) * 1e16 * static_cast<double>(k + 1);
    return (r % 2 == 0 ? big : 1.0 + static_cast<double>(k)) + 0.1 * static_cast<double>(r * 7 + k);
}

std::byte byte_of(std::size_t v)
{
    return static_cast<std::byte>(v & 0xff);
}

std::vector<std::byte> read_all(const fs::path& path)
{
    std::ifstream in(path, std::ios::binary);
    std::vector<char> chars((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::vector<std::byte> out(chars.size());
    for (std::size_t i = 0; i < chars.size(); ++i)
        out[i] = static_cast<std::byte>(chars[i]);
    return out;
}

} // namespace

TEST_CASE("comm: ranks, nodes and the library")
{
    CHECK(comm().size() >= 1);
    CHECK(comm().rank() >= 0);
    CHECK(comm().rank() < comm().size());
    CHECK(comm().parallel() == (comm().size() > 1));
    CHECK(comm().node_rank() >= 0);
    CHECK(comm().node_rank() < comm().node_size());
    CHECK(comm().node_size() <= comm().size());
    // As Open MPI's launcher numbered this process; without a launcher, one rank and no MPI.
    if (ompi_env("OMPI_COMM_WORLD_SIZE") > 0) {
        CHECK(comm().size() == ompi_env("OMPI_COMM_WORLD_SIZE"));
        CHECK(comm().rank() == ompi_env("OMPI_COMM_WORLD_RANK"));
        CHECK(comm().node_size() == ompi_env("OMPI_COMM_WORLD_LOCAL_SIZE"));
        CHECK(comm().node_rank() == ompi_env("OMPI_COMM_WORLD_LOCAL_RANK"));
        CHECK(Comm::library().rfind("MPI (", 0) == 0);
    } else if (!std::getenv("PMI_SIZE") && !std::getenv("PMIX_RANK")) {
        CHECK(comm().size() == 1);
        CHECK(Comm::library().find("one rank") != std::string::npos);
    }
    // Every rank a different number, 0 to P-1.
    const int mine = comm().rank();
    const auto all = all_gather<int>(comm(), std::span<const int>(&mine, 1));
    CHECK(all.size() == ranks());
    for (std::size_t r = 0; r < ranks() && r < all.size(); ++r)
        CHECK(all[r] == static_cast<int>(r));
    comm().barrier();
}

TEST_CASE("comm: sums of doubles are formed in rank order, the same bits on every rank")
{
    constexpr std::size_t n = 5;
    std::vector<double> v(n);
    for (std::size_t k = 0; k < n; ++k)
        v[k] = summand(me(), k);
    comm().sum(v);
    for (std::size_t k = 0; k < n; ++k) {
        double expected = 0;
        for (std::size_t r = 0; r < ranks(); ++r)
            expected += summand(r, k);
        CAPTURE(k);
        CHECK(std::bit_cast<std::uint64_t>(v[k]) == std::bit_cast<std::uint64_t>(expected));
    }
    const auto all = all_gather<double>(comm(), std::span<const double>(v));
    CHECK(all.size() == n * ranks());
    for (std::size_t i = 0; i < all.size() && i / n < ranks(); ++i)
        CHECK(std::bit_cast<std::uint64_t>(all[i]) == std::bit_cast<std::uint64_t>(v[i % n]));
    std::vector<double> none;
    comm().sum(none); // nothing to add: returns at once on every rank
    CHECK(none.empty());
}

TEST_CASE("comm: sums, minima and maxima of integers and floats, and any")
{
    constexpr std::size_t n = 4;
    const std::uint64_t big = std::uint64_t{1} << 40;
    std::vector<std::uint64_t> s(n), m(n);
    std::vector<float> lo(n), hi(n);
    for (std::size_t k = 0; k < n; ++k) {
        s[k] = big + me() * 1000 + k;
        m[k] = (me() * 7919 + k * 104729) % 1009 + big * k;
        lo[k] = hi[k] =
            (static_cast<float>(me()) - 1.5f) * static_cast<float>(k + 1) + 0.25f * static_cast<float>((me() + k) % 3);
    }
    comm().sum(s);
    comm().max(m);
    comm().min(lo);
    comm().max(hi);
    for (std::size_t k = 0; k < n; ++k) {
        std::uint64_t es = 0, em = 0;
        float elo = std::numeric_limits<float>::infinity(), ehi = -elo;
        for (std::size_t r = 0; r < ranks(); ++r) {
            es += big + r * 1000 + k;
            em = std::max<std::uint64_t>(em, (r * 7919 + k * 104729) % 1009 + big * k);
            const float f =
                (static_cast<float>(r) - 1.5f) * static_cast<float>(k + 1) + 0.25f * static_cast<float>((r + k) % 3);
            elo = std::min(elo, f);
            ehi = std::max(ehi, f);
        }
        CAPTURE(k);
        CHECK(s[k] == es);
        CHECK(m[k] == em);
        CHECK(lo[k] == elo);
        CHECK(hi[k] == ehi);
    }
    CHECK(comm().any(me() + 1 == ranks()));
    CHECK(comm().any(me() == 0));
    CHECK_FALSE(comm().any(false));
    CHECK(comm().any(true));
}

TEST_CASE("comm: exclusive prefix sums")
{
    auto value = [](std::size_t r) { return (std::uint64_t{1} << 33) * (r + 1) + r * r; };
    std::uint64_t expected = 0;
    for (std::size_t r = 0; r < me(); ++r)
        expected += value(r);
    CHECK(comm().exclusive_prefix(value(me())) == expected);
    CHECK(comm().exclusive_prefix(0) == 0);
}

TEST_CASE("comm: all_gather of unequal parts")
{
    // Rank r sends r + 1 bytes of value r.
    const std::vector<std::byte> mine(me() + 1, byte_of(me()));
    std::vector<std::size_t> counts;
    const auto all = comm().all_gather(mine, &counts);
    CHECK(all.size() == ranks() * (ranks() + 1) / 2);
    CHECK(counts.size() == ranks());
    std::size_t at = 0;
    for (std::size_t r = 0; r < ranks() && r < counts.size(); ++r) {
        CAPTURE(r);
        CHECK(counts[r] == r + 1);
        for (std::size_t i = 0; i < r + 1 && at < all.size(); ++i, ++at)
            CHECK(all[at] == byte_of(r));
    }
    CHECK(comm().all_gather(mine) == all); // counts are optional

    // Typed, with rank 0 sending nothing: rank r sends r values r * 100 + i.
    std::vector<std::uint64_t> values;
    for (std::size_t i = 0; i < me(); ++i)
        values.push_back(me() * 100 + i);
    std::vector<std::size_t> n;
    const auto got = all_gather<std::uint64_t>(comm(), std::span<const std::uint64_t>(values), &n);
    std::vector<std::uint64_t> expected;
    for (std::size_t r = 0; r < ranks(); ++r)
        for (std::size_t i = 0; i < r; ++i)
            expected.push_back(r * 100 + i);
    CHECK(got == expected);
    CHECK(n.size() == ranks());
    for (std::size_t r = 0; r < ranks() && r < n.size(); ++r)
        CHECK(n[r] == r);
}

TEST_CASE("comm: exchange of personalised parts, empty ones included")
{
    // Rank r sends rank q the byte r * 16 + q, (r + q) % 3 times.
    std::vector<std::byte> send;
    std::vector<std::size_t> offsets{0};
    for (std::size_t q = 0; q < ranks(); ++q) {
        send.insert(send.end(), (me() + q) % 3, byte_of(me() * 16 + q));
        offsets.push_back(send.size());
    }
    std::vector<std::size_t> recv_offsets;
    const auto recv = comm().exchange(send, offsets, recv_offsets);
    CHECK(recv_offsets.size() == ranks() + 1);
    if (recv_offsets.size() != ranks() + 1) recv_offsets.assign(ranks() + 1, 0); // and on to the next exchange
    CHECK(recv_offsets[0] == 0);
    CHECK(recv_offsets[ranks()] == recv.size());
    for (std::size_t r = 0; r < ranks(); ++r) {
        CAPTURE(r);
        CHECK(recv_offsets[r + 1] - recv_offsets[r] == (r + me()) % 3);
        for (std::size_t i = recv_offsets[r]; i < recv_offsets[r + 1] && i < recv.size(); ++i)
            CHECK(recv[i] == byte_of(r * 16 + me()));
    }

    // Larger parts (megabytes), unequal in both directions.
    send.clear();
    offsets.assign(1, 0);
    auto pattern = [](std::size_t from, std::size_t to, std::size_t i) { return byte_of(from * 7 + to * 13 + i * 31); };
    auto length = [](std::size_t from, std::size_t to) { return (std::size_t{1} << 20) + from * 4099 + to * 65537; };
    for (std::size_t q = 0; q < ranks(); ++q) {
        for (std::size_t i = 0; i < length(me(), q); ++i)
            send.push_back(pattern(me(), q, i));
        offsets.push_back(send.size());
    }
    const auto big = comm().exchange(send, offsets, recv_offsets);
    CHECK(recv_offsets.size() == ranks() + 1);
    if (recv_offsets.size() != ranks() + 1) recv_offsets.assign(ranks() + 1, 0);
    std::size_t wrong = 0;
    for (std::size_t r = 0; r < ranks(); ++r) {
        CAPTURE(r);
        CHECK(recv_offsets[r + 1] - recv_offsets[r] == length(r, me()));
        for (std::size_t i = recv_offsets[r]; i < recv_offsets[r + 1] && i < big.size(); ++i)
            wrong += big[i] != pattern(r, me(), i - recv_offsets[r]);
    }
    CHECK(wrong == 0);

    // Offsets that do not name one part per rank are refused before anything is sent (on every rank alike).
    const std::vector<std::size_t> bad(ranks() + 2, 0);
    CHECK_THROWS_AS(comm().exchange(send, bad, recv_offsets), std::invalid_argument);
}

TEST_CASE("comm: broadcast from every rank")
{
    for (int root = 0; root < comm().size(); ++root) {
        CAPTURE(root);
        const std::size_t n = static_cast<std::size_t>(root) * 1000 + 3;
        std::vector<std::byte> data(me() == static_cast<std::size_t>(root) ? n : 5 + me(), std::byte{0xee});
        if (me() == static_cast<std::size_t>(root))
            for (std::size_t i = 0; i < n; ++i)
                data[i] = byte_of(i * 5 + static_cast<std::size_t>(root));
        comm().broadcast(data, root);
        CHECK(data.size() == n);
        std::size_t wrong = 0;
        for (std::size_t i = 0; i < data.size(); ++i)
            wrong += data[i] != byte_of(i * 5 + static_cast<std::size_t>(root));
        CHECK(wrong == 0);
    }
    std::vector<std::byte> empty;
    if (me() != 0) empty.assign(9, std::byte{1});
    comm().broadcast(empty, 0);
    CHECK(empty.empty());
}

TEST_CASE("comm: write_file, every rank its part at its offset")
{
    const test::SharedFolder dir(comm());
    const fs::path path = dir / "parts.bin";
    // Rank r writes 1000 r + 17 bytes (rank 1 nothing), after the parts of the ranks below it.
    auto part_size = [](std::size_t r) { return r == 1 ? std::size_t{0} : 1000 * r + 17; };
    auto value = [](std::size_t r, std::size_t i) { return byte_of(r * 31 + i * 3 + i / 256); };
    std::uint64_t total = 0;
    for (std::size_t r = 0; r < ranks(); ++r)
        total += part_size(r);
    std::vector<std::byte> part(part_size(me()));
    for (std::size_t i = 0; i < part.size(); ++i)
        part[i] = value(me(), i);
    const std::uint64_t offset = comm().exclusive_prefix(part.size());

    // A longer file there already: write_file truncates it. Twice: the second write replaces the first.
    if (me() == 0) std::ofstream(path, std::ios::binary) << std::string(static_cast<std::size_t>(total) + 4096, 'x');
    comm().barrier();
    for (int round = 0; round < 2; ++round) {
        CAPTURE(round);
        if (round == 1)
            for (auto& b : part)
                b = ~b;
        comm().write_file(path.string(), total, offset, part);
        comm().barrier();
        if (me() == 0) {
            const auto bytes = read_all(path);
            CHECK(bytes.size() == total);
            std::size_t wrong = 0, at = 0;
            for (std::size_t r = 0; r < ranks(); ++r)
                for (std::size_t i = 0; i < part_size(r) && at < bytes.size(); ++i, ++at)
                    wrong += bytes[at] != (round == 0 ? value(r, i) : ~value(r, i));
            CHECK(wrong == 0);
        }
        comm().barrier();
    }
    // A part beyond the file is refused before anything is written (on every rank alike).
    CHECK_THROWS_AS(comm().write_file(path.string(), offset + part.size(), offset + 1, part), std::invalid_argument);
}

TEST_CASE("comm: one rank is the identity")
{
    if (comm().size() != 1) return; // the runs on one rank (mpirun -n 1, and without a launcher) check this
    std::vector<double> d{0.1, -3e300, 7.0};
    const auto d0 = d;
    comm().sum(d);
    for (std::size_t k = 0; k < d.size(); ++k)
        CHECK(std::bit_cast<std::uint64_t>(d[k]) == std::bit_cast<std::uint64_t>(d0[k]));
    std::vector<std::uint64_t> u{3, 1, 4};
    comm().sum(u);
    comm().max(u);
    CHECK(u == std::vector<std::uint64_t>{3, 1, 4});
    std::vector<float> f{-1.5f, 2.5f};
    comm().min(f);
    comm().max(f);
    CHECK(f == std::vector<float>{-1.5f, 2.5f});
    CHECK(comm().exclusive_prefix(42) == 0);
    CHECK(comm().any(true));
    CHECK_FALSE(comm().any(false));
    CHECK(comm().node_rank() == 0);
    CHECK(comm().node_size() == 1);

    const std::vector<std::byte> mine{std::byte{1}, std::byte{2}, std::byte{3}};
    std::vector<std::size_t> counts;
    CHECK(comm().all_gather(mine, &counts) == mine);
    CHECK(counts == std::vector<std::size_t>{3});
    const std::vector<std::size_t> offsets{0, 3};
    std::vector<std::size_t> recv_offsets;
    CHECK(comm().exchange(mine, offsets, recv_offsets) == mine);
    CHECK(recv_offsets == std::vector<std::size_t>{0, 3});
    std::vector<std::byte> data = mine;
    comm().broadcast(data, 0);
    CHECK(data == mine);
}
