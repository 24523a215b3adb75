/**
 * @file parallel_tipsy.cpp
 * @brief The collective tipsy writer (parallel_tipsy.hpp). Format as core/files/tipsy.cpp writes it: big-endian,
 *        a 32-byte header (double time, int N, 3, ngas, ndark, nstar, pad), then 9 floats per dark particle.
 */
#include "core/parallel/parallel_tipsy.hpp"

#include <fmt/format.h>

#include <bit>
#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <unistd.h>

namespace banyan {

namespace {

constexpr std::size_t header_bytes = 32;
constexpr std::size_t record_bytes = 36; // mass, x, y, z, vx, vy, vz, eps, phi

void put_be32(std::byte* p, std::uint32_t v)
{
    if constexpr (std::endian::native == std::endian::little) v = __builtin_bswap32(v);
    std::memcpy(p, &v, 4);
}
void put_float(std::byte* p, float f) { put_be32(p, std::bit_cast<std::uint32_t>(f)); }

} // namespace

void write_tipsy_parallel(const Comm& comm, const std::string& path, double time, std::size_t n_total,
                          const RankParticles& mine, float eps)
{
    if (n_total >= (std::size_t{1} << 31)) throw std::runtime_error("tipsy: more than 2^31 - 1 particles");
    const std::size_t P = static_cast<std::size_t>(comm.size()), me = static_cast<std::size_t>(comm.rank());
    auto block_start = [&](std::size_t q) { return q * n_total / P; };
    auto owner = [&](std::size_t id) {
        std::size_t q = id * P / n_total; // a guess, then corrected: block starts are floors
        while (q + 1 < P && block_start(q + 1) <= id) ++q;
        while (q > 0 && block_start(q) > id) --q;
        return q;
    };
    // Records with their ids, to the ranks that write them.
    const std::size_t n = mine.ids.size();
    constexpr std::size_t wire = 4 + record_bytes;
    std::vector<std::size_t> offsets(P + 1, 0), dest(n);
    for (std::size_t i = 0; i < n; ++i) ++offsets[(dest[i] = owner(mine.ids[i])) + 1];
    for (std::size_t q = 0; q < P; ++q) offsets[q + 1] += offsets[q];
    std::vector<std::size_t> fill(offsets.begin(), offsets.end() - 1);
    std::vector<std::byte> send(n * wire);
    for (std::size_t i = 0; i < n; ++i) {
        std::byte* r = send.data() + fill[dest[i]]++ * wire;
        std::memcpy(r, &mine.ids[i], 4);
        const float f[9] = {mine.pos[i].w, mine.pos[i].x, mine.pos[i].y, mine.pos[i].z, mine.vel[i].x,
                            mine.vel[i].y, mine.vel[i].z, eps, mine.phi[i]};
        for (int k = 0; k < 9; ++k) put_float(r + 4 + 4 * k, f[k]);
    }
    for (auto& o : offsets) o *= wire;
    std::vector<std::size_t> recv_offsets;
    const auto recv = comm.exchange(send, offsets, recv_offsets);

    // This rank's part of the file: the header first on rank 0, then records first .. last - 1 in id order.
    const std::size_t first = block_start(me), last = block_start(me + 1);
    const std::size_t head = me == 0 ? header_bytes : 0;
    std::vector<std::byte> part(head + (last - first) * record_bytes);
    std::vector<unsigned char> seen(last - first, 0);
    for (std::size_t at = 0; at < recv.size(); at += wire) {
        bn_u32 id;
        std::memcpy(&id, recv.data() + at, 4);
        if (id < first || id >= last || seen[id - first]) throw std::runtime_error("tipsy: particle ids are not 0 .. N-1");
        seen[id - first] = 1;
        std::memcpy(part.data() + head + (id - first) * record_bytes, recv.data() + at + 4, record_bytes);
    }
    bool complete = recv.size() / wire == last - first;
    if (comm.any(!complete)) throw std::runtime_error(fmt::format("tipsy: {}: particles are missing", path));
    if (me == 0) {
        std::uint64_t t = std::bit_cast<std::uint64_t>(time);
        if constexpr (std::endian::native == std::endian::little) t = __builtin_bswap64(t);
        std::memcpy(part.data(), &t, 8);
        const std::uint32_t h[6] = {static_cast<std::uint32_t>(n_total), 3u, 0u, static_cast<std::uint32_t>(n_total),
                                    0u, 0u};
        for (int k = 0; k < 6; ++k) put_be32(part.data() + 8 + 4 * k, h[k]);
    }
    const std::string tmp = path + ".tmp.parallel";
    comm.write_file(tmp, header_bytes + n_total * record_bytes, me == 0 ? 0 : header_bytes + first * record_bytes,
                    part);
    comm.barrier();
    if (me == 0) std::filesystem::rename(tmp, path);
    comm.barrier();
}

} // namespace banyan
