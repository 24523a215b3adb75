/**
 * @file test_transport.cpp
 * @brief The paths of the trees between ranks (core/parallel/transport.hpp): which path a run takes, and the forces
 *        of the device path against the host path's, bit for bit. The device path runs everywhere through a test
 *        double of the transport that stages its messages through host memory (StagedExchange), and on machines with
 *        a transport of their own (NCCL under CUDA, a GPU per rank) through that: the test suite "device transport",
 *        which mpi_main.cpp runs only when asked (--device-transport) and reports as skipped where the ranks have no
 *        such transport.
 *
 * Every rank makes the same particles and starts with the slice [r N / P, (r + 1) N / P) (ids = global indices);
 * checks sit between collectives (CHECK, not REQUIRE).
 */
#include "core/error.hpp"
#include "core/parallel/comm.hpp"
#include "core/parallel/parallel_forces.hpp"
#include "core/parallel/transport.hpp"
#include "core/models/plummer.hpp"
#include "core/tree/octree.hpp"
#include "tests/support/harness.hpp"
#include "tests/support/scoped_env.hpp"

#include <doctest/doctest.h>
#include <fmt/format.h>

#include <cstdlib>
#include <cstring>
#include <numeric>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace banyan {
namespace {

using test::backend;

/// The device path's messages staged through host memory: each send downloaded, all of them through Comm::exchange,
/// each receive uploaded. A test double of a transport, so that the device path of the trees (the send buffer, the
/// arrays received in place, the links shifted on the device) runs on every backend; it checks the contract of
/// PeerExchange::exchange as it goes (no message to itself, the bytes of each pair matched one to one).
class StagedExchange final : public PeerExchange {
public:
    explicit StagedExchange(const Comm& comm) : comm_(comm) {}
    std::string name() const override { return "a test double through host memory"; }
    void exchange(std::span<const PeerSend> sends, std::span<const PeerRecv> recvs) override
    {
        const std::size_t P = static_cast<std::size_t>(comm_.size());
        std::vector<std::byte> out;
        std::vector<std::size_t> offsets(P + 1, 0);
        for (std::size_t q = 0; q < P; ++q) {
            offsets[q] = out.size();
            for (const auto& s : sends) {
                if (s.peer < 0 || s.peer >= comm_.size() || s.peer == comm_.rank())
                    throw std::logic_error(fmt::format("a send to rank {}", s.peer));
                if (static_cast<std::size_t>(s.peer) != q || !s.bytes) continue;
                const std::size_t at = out.size();
                out.resize(at + s.bytes);
                s.buffer->download(out.data() + at, s.bytes, s.offset);
            }
        }
        offsets[P] = out.size();
        std::vector<std::size_t> in_offsets;
        const auto in = comm_.exchange(out, offsets, in_offsets);
        std::vector<std::size_t> at(in_offsets.begin(), in_offsets.end() - 1);
        for (const auto& r : recvs) {
            if (r.peer < 0 || r.peer >= comm_.size() || r.peer == comm_.rank())
                throw std::logic_error(fmt::format("a receive from rank {}", r.peer));
            if (!r.bytes) continue;
            const std::size_t q = static_cast<std::size_t>(r.peer);
            if (at[q] + r.bytes > in_offsets[q + 1])
                throw std::logic_error(fmt::format("rank {} sent fewer bytes than were received", q));
            r.buffer->upload(in.data() + at[q], r.bytes, r.offset);
            at[q] += r.bytes;
        }
        for (std::size_t q = 0; q < P; ++q)
            if (at[q] != in_offsets[q + 1])
                throw std::logic_error(fmt::format("rank {} sent more bytes than were received", q));
        ++calls;
    }
    int calls = 0;

private:
    const Comm& comm_;
};

/// What one path gave: the results by global id, every rank's (collective), and the walks' and trees' counts.
struct PathResult {
    std::vector<bn_f4> acc; ///< by id, all ranks
    std::vector<int> seen;  ///< how often each id was seen
    InteractionTotals totals;
    std::uint64_t cells_received = 0, particles_received = 0, bytes_sent = 0, bytes_received = 0;
};

/// Forces on @p all over the ranks with the trees through @p peers (null: host memory), top trees of 1 /
/// @p top_per_rank; @p rounds evaluations (the later ones weighted by the measured work), the last one's results.
PathResult forces_through(const std::vector<bn_f4>& all, std::shared_ptr<PeerExchange> peers, float theta,
                          std::size_t top_per_rank, int rounds)
{
    const Comm& comm = Comm::world();
    const std::size_t n = all.size(), P = static_cast<std::size_t>(comm.size()),
                      r = static_cast<std::size_t>(comm.rank());
    const std::size_t a = r * n / P, b = (r + 1) * n / P;
    std::vector<std::uint64_t> ids(b - a);
    std::iota(ids.begin(), ids.end(), std::uint64_t{a});
    Octree tree(backend());
    tree.set_particles(std::span<const bn_f4>(all.data() + a, b - a), {}, ids);
    ParallelForces pf(backend(), comm, Transport::host);
    pf.use_peer_exchange(std::move(peers));
    pf.let().set_top_per_rank(top_per_rank);
    PathResult out;
    ParallelTimings t;
    for (int k = 0; k < rounds; ++k)
        pf.compute(tree, theta, 0.01f, &t);
    const std::size_t m = tree.size();
    const auto acc = m ? pf.forces().acc().download(m) : std::vector<bn_f4>{};
    const auto mine = m ? tree.ids().download(m) : std::vector<bn_u32>{};
    const auto all_acc = all_gather<bn_f4>(comm, acc);
    const auto all_ids = all_gather<bn_u32>(comm, mine);
    out.acc.assign(n, bn_f4{0, 0, 0, 0});
    out.seen.assign(n, 0);
    for (std::size_t i = 0; i < all_ids.size(); ++i)
        if (all_ids[i] < n) ++out.seen[all_ids[i]], out.acc[all_ids[i]] = all_acc[i];
    out.totals = pf.forces().totals();
    out.cells_received = t.let.cells_received, out.particles_received = t.let.particles_received;
    out.bytes_sent = t.let.bytes_sent, out.bytes_received = t.let.bytes_received;
    return out;
}

/// @p device's results equal @p host's to the bit, every particle once.
void check_same(const PathResult& host, const PathResult& device)
{
    CHECK(std::all_of(host.seen.begin(), host.seen.end(), [](int s) { return s == 1; }));
    CHECK(device.seen == host.seen);
    CHECK(std::memcmp(device.acc.data(), host.acc.data(), host.acc.size() * sizeof(bn_f4)) == 0);
    CHECK(device.totals.pp == host.totals.pp);
    CHECK(device.totals.pc == host.totals.pc);
    CHECK(device.cells_received == host.cells_received);
    CHECK(device.particles_received == host.particles_received);
    CHECK(device.bytes_sent == host.bytes_sent);
    CHECK(device.bytes_received == host.bytes_received);
}

} // namespace

TEST_CASE("the path of the trees: auto, host or device, from BANYAN_TRANSPORT, alike on every rank")
{
    const Comm& comm = Comm::world();
    CHECK(parse_transport("auto", "t") == Transport::automatic);
    CHECK(parse_transport("host", "t") == Transport::host);
    CHECK(parse_transport("device", "t") == Transport::device);
    CHECK_THROWS_WITH_AS(parse_transport("nccl", "--transport"),
                         "--transport: expected auto, host or device, got 'nccl'", UsageError);
    {
        test::ScopedEnv env("BANYAN_TRANSPORT", std::nullopt);
        CHECK(default_transport() == Transport::automatic);
    }
    {
        test::ScopedEnv env("BANYAN_TRANSPORT", "host");
        CHECK(default_transport() == Transport::host);
    }
    {
        test::ScopedEnv env("BANYAN_TRANSPORT", "gpu");
        CHECK_THROWS_WITH_AS(default_transport(), "BANYAN_TRANSPORT: expected auto, host or device, got 'gpu'",
                             UsageError);
    }
    CHECK(open_peer_exchange(backend(), comm, Transport::host) == nullptr);
    CHECK(ParallelForces(backend(), comm, Transport::host).transport() == "trees: through host memory (MPI)");
    if (!comm.parallel()) {
        // One rank: nothing travels, whatever is asked.
        CHECK(open_peer_exchange(backend(), comm, Transport::device) == nullptr);
        CHECK(open_peer_exchange(backend(), comm, Transport::automatic) == nullptr);
    } else {
        // Ranks that ask for different paths are told so, all of them (not left waiting in a collective).
        CHECK_THROWS_AS(open_peer_exchange(backend(), comm, comm.rank() == 0 ? Transport::host : Transport::automatic),
                        UsageError);
        // A backend without a transport: automatic goes through host memory, device says why it cannot.
        std::uint64_t without = backend().peer_transport() ? 0 : 1;
        comm.max(std::span<std::uint64_t>(&without, 1));
        if (without) {
            CHECK(open_peer_exchange(backend(), comm, Transport::automatic) == nullptr);
            CHECK_THROWS_AS(open_peer_exchange(backend(), comm, Transport::device), UsageError);
        }
    }
}

TEST_CASE("the trees through the device path give the host path's forces bit for bit (a test double transport)")
{
    // The double stages the messages through host memory, so that the device path's own work (the send buffer on
    // the device, the arrays received where they are grafted, the links shifted by letShiftLinks) is checked on
    // every backend against the host path's (downloads, messages, links shifted on the host, uploads). With top
    // trees too (the far groups walk before the exchange), with ranks left without particles (3 particles), and a
    // second evaluation decomposed by the measured work.
    const Comm& comm = Comm::world();
    const std::size_t big = std::min<std::size_t>(test::max_size() / 4, 8000);
    for (const std::size_t n : {big, std::size_t{3}}) {
        const auto all = plummer(n, 4242).pos;
        for (const float theta : {0.6f})
            for (const std::size_t top : {std::size_t{0}, std::size_t{256}}) {
                INFO(fmt::format("P = {}, n = {}, theta {}, top trees 1/{}", comm.size(), n, theta, top));
                const PathResult host = forces_through(all, nullptr, theta, top, 2);
                auto staged = std::make_shared<StagedExchange>(comm);
                const PathResult device = forces_through(all, staged, theta, top, 2);
                check_same(host, device);
                CHECK(staged->calls == (comm.parallel() ? 2 : 0));
            }
    }
}

TEST_SUITE("device transport")
{
    TEST_CASE("GPU to GPU: messages of uneven sizes, empty ones and several per pair arrive whole")
    {
        const Comm& comm = Comm::world();
        const std::shared_ptr<PeerExchange> peers = open_peer_exchange(backend(), comm, Transport::device);
        REQUIRE(peers); // mpi_main.cpp runs this suite only where the transport opens
        const int P = comm.size(), me = comm.rank();
        // Two messages from rank r to rank q: the first empty for some pairs, odd sizes, one over a MiB.
        auto bytes = [](int r, int q, int k) -> std::size_t {
            if (k == 0) return (r + 2 * q) % 3 == 0 ? 0 : std::size_t(1 + 1000 * (r + 2 * q) + r);
            return std::size_t(3 + (1u << 20) * static_cast<unsigned>(q % 2) + 65537 * static_cast<unsigned>(r));
        };
        auto pattern = [](int r, int q, int k, std::size_t i) {
            return static_cast<std::byte>((static_cast<std::size_t>(r) * 31 + static_cast<std::size_t>(q) * 17 +
                                           static_cast<std::size_t>(k) * 7 + i * 13) &
                                          0xff);
        };
        constexpr std::size_t gap = 5; // untouched bytes between received messages, at odd offsets
        std::vector<std::byte> out;
        std::vector<PeerSend> sends;
        std::vector<PeerRecv> recvs;
        std::size_t in_bytes = 0;
        for (int q = 0; q < P; ++q)
            for (int k = 0; k < 2 && q != me; ++k) {
                sends.push_back({q, nullptr, out.size(), bytes(me, q, k)});
                for (std::size_t i = 0; i < bytes(me, q, k); ++i)
                    out.push_back(pattern(me, q, k, i));
                in_bytes += gap + bytes(q, me, k);
            }
        auto send = backend().alloc<std::byte>(out.size() + peer_read_slack, "test.send");
        if (!out.empty()) send.upload(std::span<const std::byte>(out));
        auto recv = backend().alloc<std::byte>(in_bytes + gap, "test.recv");
        recv.fill(std::byte{0xee});
        std::size_t at = 0;
        for (int q = 0; q < P; ++q)
            for (int k = 0; k < 2 && q != me; ++k) {
                at += gap;
                recvs.push_back({q, &recv.raw(), at, bytes(q, me, k)});
                at += bytes(q, me, k);
            }
        for (auto& s : sends)
            s.buffer = &send.raw();
        peers->exchange(sends, recvs);
        const auto got = recv.download();
        std::size_t wrong = 0;
        at = 0;
        for (int q = 0; q < P; ++q)
            for (int k = 0; k < 2 && q != me; ++k) {
                for (std::size_t i = 0; i < gap; ++i)
                    wrong += got[at++] != std::byte{0xee};
                for (std::size_t i = 0; i < bytes(q, me, k); ++i)
                    wrong += got[at++] != pattern(q, me, k, i);
            }
        CHECK(wrong == 0);
        // No messages at all: every rank still calls, and nothing waits.
        peers->exchange({}, {});
    }

    TEST_CASE("GPU to GPU: the forces over ranks equal the host path's, bit for bit")
    {
        const Comm& comm = Comm::world();
        const std::shared_ptr<PeerExchange> peers = open_peer_exchange(backend(), comm, Transport::device);
        REQUIRE(peers);
        CHECK(transport_text(peers.get()).rfind("trees: GPU to GPU through ", 0) == 0);
        const std::size_t big = std::min<std::size_t>(test::max_size() / 16, std::size_t{1} << 18);
        for (const std::size_t n : {big, std::size_t{3}}) {
            const auto all = plummer(n, 8642).pos;
            for (const float theta : {0.5f, 0.75f})
                for (const std::size_t top : {std::size_t{0}, std::size_t{256}}) {
                    INFO(fmt::format("P = {}, n = {}, theta {}, top trees 1/{}, {}", comm.size(), n, theta, top,
                                     peers->name()));
                    check_same(forces_through(all, nullptr, theta, top, 2), forces_through(all, peers, theta, top, 2));
                }
        }
    }
}

} // namespace banyan
