/**
 * @file parallel_files.cpp
 * @brief Files written by all ranks together (parallel_files.hpp). Tipsy as core/files/tipsy.cpp writes it:
 *        big-endian, a 32-byte header (double time, int N, 3, ngas, ndark, nstar, pad), then the records
 *        (tipsy_records); .npy with the header of core/files/npy.cpp.
 */
#include "core/parallel/parallel_files.hpp"

#include "core/files/atomic_file.hpp"
#include "core/files/npy.hpp"
#include "core/files/tipsy.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <functional>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <stdexcept>

namespace banyan {

// ---- Files written by all ranks -----------------------------------------------------------------------------------

namespace {

constexpr std::size_t tipsy_header_bytes = 32;

void put_be32(std::byte* p, std::uint32_t v)
{
    if constexpr (std::endian::native == std::endian::little) v = __builtin_bswap32(v);
    std::memcpy(p, &v, 4);
}

/// Writes @p block at @p offset of a file of @p total bytes, together, into a temporary name that rank 0 renames
/// to @p path once every rank has written.
void write_blocks(const Comm& comm, const std::string& path, std::uint64_t total, std::uint64_t offset,
                  std::span<const std::byte> block)
{
    const std::string tmp = temporary_path(path, "parallel");
    try {
        comm.write_file(tmp, total, offset, block);
        comm.barrier();
        if (comm.rank() == 0) rename_durably(tmp, path); // a device or FIFO is written through, never replaced
    } catch (...) {
        std::remove(tmp.c_str()); // a full disk or a file-size limit leaves no temporary behind
        throw;
    }
    comm.barrier();
}

} // namespace

std::vector<std::byte> records_of_my_block(const Comm& comm, std::size_t n_total, std::span<const std::uint64_t> ids,
                                           std::span<const std::byte> records, std::size_t record_bytes,
                                           std::size_t& first, std::size_t& last)
{
    const std::size_t P = static_cast<std::size_t>(comm.size()), me = static_cast<std::size_t>(comm.rank());
    auto block_start = [&](std::size_t q) { return q * n_total / P; };
    auto owner = [&](std::size_t id) {
        std::size_t q = id * P / n_total; // a guess, then corrected: block starts are floors
        while (q + 1 < P && block_start(q + 1) <= id)
            ++q;
        while (q > 0 && block_start(q) > id)
            --q;
        return q;
    };
    const std::size_t n = ids.size();
    if (records.size() != n * record_bytes) throw std::invalid_argument("records_of_my_block: sizes disagree");
    bool bad_id = false;
    for (const std::uint64_t id : ids)
        bad_id |= id >= n_total;
    if (comm.any(bad_id)) throw std::runtime_error("parallel file: particle ids are not 0 .. N-1");
    // Records with their ids, to the ranks that write them.
    const std::size_t wire = sizeof(std::uint64_t) + record_bytes;
    std::vector<std::size_t> dest(n);
    for (std::size_t i = 0; i < n; ++i)
        dest[i] = owner(ids[i]);
    const Packed send = pack_by_rank(dest, P, wire, [&](std::size_t i, std::byte* r) {
        std::memcpy(r, &ids[i], sizeof(std::uint64_t));
        if (record_bytes) std::memcpy(r + sizeof(std::uint64_t), records.data() + i * record_bytes, record_bytes);
    });
    std::vector<std::size_t> recv_offsets;
    const auto recv = comm.exchange(send.bytes, send.offsets, recv_offsets);

    first = block_start(me), last = block_start(me + 1);
    std::vector<std::byte> block((last - first) * record_bytes);
    std::vector<unsigned char> seen(last - first, 0);
    bool twice = false;
    for (std::size_t at = 0; at < recv.size(); at += wire) {
        std::uint64_t id;
        std::memcpy(&id, recv.data() + at, sizeof id);
        twice |= seen[id - first] != 0;
        seen[id - first] = 1;
        if (record_bytes)
            std::memcpy(block.data() + (id - first) * record_bytes, recv.data() + at + sizeof id, record_bytes);
    }
    if (comm.any(twice)) throw std::runtime_error("parallel file: a particle id occurs twice");
    if (comm.any(recv.size() / wire != last - first)) throw std::runtime_error("parallel file: particles are missing");
    return block;
}

namespace {

/// The static fields of the rows [first, last) of a file of @p whole's counts: @p fields, which must hold those rows
/// (eps, gas and star fields), or, empty, a softening @p eps for every particle (then none may be gas or a star).
/// Mass, positions, velocities and potentials zero, for the caller to fill.
Snapshot block_of(const FileCounts& whole, std::size_t first, std::size_t last, const Snapshot& fields, float eps)
{
    Snapshot all; // the counts of the whole, for rows_of
    all.n_gas = whole.n_gas, all.n_dark = whole.n_dark, all.n_star = whole.n_star;
    all.n_type2 = whole.n_type2, all.n_type3 = whole.n_type3, all.n_type5 = whole.n_type5;
    Snapshot b = rows_of(all, Rows{first, last - first});
    const std::size_t m = b.size();
    if (fields.size() == 0 && fields.eps.empty()) {
        if (b.n_gas || b.n_star) throw std::logic_error("parallel file: gas or star particles without their fields");
        b.eps.assign(m, eps);
    } else {
        if (fields.size() != m || fields.n_gas != b.n_gas || fields.n_star != b.n_star || fields.eps.size() != m)
            throw std::logic_error("parallel file: the fields given are not those of this rank's rows");
        b.eps = fields.eps;
        b.gas_rho = fields.gas_rho, b.gas_temp = fields.gas_temp, b.gas_metals = fields.gas_metals;
        b.star_metals = fields.star_metals, b.star_tform = fields.star_tform;
        if (!fields.ids.empty() && fields.ids.size() != m)
            throw std::logic_error("parallel file: the ids given are not those of this rank's rows");
        b.ids = fields.ids; // the input's own (HDF5 ParticleIDs), or none: the rows' indices
    }
    b.mass.assign(m, 0.f), b.pos.assign(3 * m, 0.f), b.vel.assign(3 * m, 0.f), b.phi.assign(m, 0.f);
    return b;
}

} // namespace

void write_tipsy_parallel(const Comm& comm, const std::string& path, double time, const FileCounts& whole,
                          const RankParticles& mine, const Snapshot& fields, float eps)
{
    const std::size_t n_total = whole.size();
    check_tipsy_count(n_total, path);
    // What moves between ranks: mass, position, velocity, potential (native floats); the rest is the writer's.
    constexpr std::size_t floats = 8, record_bytes = floats * sizeof(float);
    const std::size_t n = mine.ids.size();
    std::vector<float> records(n * floats);
    for (std::size_t i = 0; i < n; ++i) {
        const float f[floats] = {mine.pos[i].w, mine.pos[i].x, mine.pos[i].y, mine.pos[i].z,
                                 mine.vel[i].x, mine.vel[i].y, mine.vel[i].z, mine.phi[i]};
        std::memcpy(records.data() + i * floats, f, sizeof f);
    }
    std::size_t first = 0, last = 0;
    std::vector<std::byte> block;
    try {
        block =
            records_of_my_block(comm, n_total, mine.ids, std::as_bytes(std::span(records)), record_bytes, first, last);
    } catch (const std::runtime_error& e) {
        throw std::runtime_error(fmt::format("tipsy: {}: {}", path, e.what()));
    }
    Snapshot b = block_of(whole, first, last, fields, eps);
    for (std::size_t i = 0; i < b.size(); ++i) {
        float f[floats];
        std::memcpy(f, block.data() + i * record_bytes, record_bytes);
        b.mass[i] = f[0], b.phi[i] = f[7];
        for (int k = 0; k < 3; ++k)
            b.pos[3 * i + k] = f[1 + k], b.vel[3 * i + k] = f[4 + k];
    }
    const std::vector<float> out = tipsy_records(b);
    const auto bytes = std::as_bytes(std::span(out));
    std::vector<std::byte> data;
    // Rank 0 writes the header before its records.
    if (comm.rank() == 0) {
        data.resize(tipsy_header_bytes);
        std::uint64_t t = std::bit_cast<std::uint64_t>(time);
        if constexpr (std::endian::native == std::endian::little) t = __builtin_bswap64(t);
        std::memcpy(data.data(), &t, 8);
        const std::uint32_t h[6] = {static_cast<std::uint32_t>(n_total),      3u,
                                    static_cast<std::uint32_t>(whole.n_gas),  static_cast<std::uint32_t>(whole.n_dark),
                                    static_cast<std::uint32_t>(whole.n_star), 0u};
        for (int k = 0; k < 6; ++k)
            put_be32(data.data() + 8 + 4 * k, h[k]);
    }
    data.insert(data.end(), bytes.begin(), bytes.end());
    write_blocks(comm, path, tipsy_offset(whole, n_total), comm.rank() == 0 ? 0 : tipsy_offset(whole, first), data);
}

void write_hdf5_parallel(const Comm& comm, const std::string& path, double time, const FileCounts& whole,
                         const RankParticles& mine, const Snapshot& fields, float eps, const Units& units,
                         const SnapshotMeta& meta)
{
    const std::size_t n = mine.ids.size();
    if (mine.pos.size() != n || mine.vel.size() != n || mine.acc.size() != n)
        throw std::invalid_argument("write_hdf5_parallel: sizes disagree");
    const std::uint64_t extra = whole.n_type2 + whole.n_type3 + whole.n_type5;
    if (extra > whole.n_dark) throw std::invalid_argument("write_hdf5_parallel: more types 2, 3, 5 than dark");
    const std::array<std::uint64_t, 6> counts = {whole.n_gas,   whole.n_dark - extra, whole.n_type2,
                                                 whole.n_type3, whole.n_star,         whole.n_type5};
    const std::uint64_t n_total = whole.size();
    // One record per particle: x y z, vx vy vz, mass, potential, ax ay az.
    constexpr std::size_t floats = 11, record_bytes = floats * sizeof(float);
    std::vector<float> records(n * floats);
    for (std::size_t i = 0; i < n; ++i) {
        const bn_f4 &p = mine.pos[i], &v = mine.vel[i], &a = mine.acc[i];
        const float f[floats] = {p.x, p.y, p.z, v.x, v.y, v.z, p.w, a.w, a.x, a.y, a.z};
        std::memcpy(records.data() + i * floats, f, sizeof f);
    }
    std::size_t first = 0, last = 0;
    std::vector<std::byte> block;
    try {
        block = records_of_my_block(comm, static_cast<std::size_t>(n_total), mine.ids,
                                    std::as_bytes(std::span(records)), record_bytes, first, last);
    } catch (const std::runtime_error& e) {
        throw std::runtime_error(fmt::format("{}: {}", path, e.what()));
    }
    Snapshot b = block_of(whole, first, last, fields, eps);
    const std::size_t m = last - first;
    b.acc.resize(3 * m);
    for (std::size_t i = 0; i < m; ++i) {
        float f[floats];
        std::memcpy(f, block.data() + i * record_bytes, record_bytes);
        for (int k = 0; k < 3; ++k) {
            b.pos[3 * i + k] = f[k];
            b.vel[3 * i + k] = f[3 + k];
            b.acc[3 * i + k] = f[8 + k];
        }
        b.mass[i] = f[6];
        b.phi[i] = f[7];
    }

    // The files: one, or a set whose files [q m, (q + 1) m) hold rank q's rows (hdf5_file_starts). The ranks agree on
    // the limit (it is the environment's, the same on every rank of a launch).
    const std::size_t P = static_cast<std::size_t>(comm.size()), me = static_cast<std::size_t>(comm.rank());
    std::uint64_t limit = max_file_particles();
    comm.max(std::span<std::uint64_t>(&limit, 1));
    std::vector<std::uint64_t> blocks(P + 1);
    for (std::size_t q = 0; q <= P; ++q)
        blocks[q] = q * n_total / P;
    const std::vector<std::uint64_t> starts = hdf5_file_starts(blocks, limit);
    const std::size_t K = starts.size() - 1;

    // Every step ends in a collective that tells every rank whether any failed, so that none waits for ever and all
    // stop with the failing rank's reason; @p undo then clears what this rank left.
    auto step = [&](bool mine_to_do, const std::function<void()>& work, const std::function<void()>& undo) {
        std::string error;
        if (mine_to_do) try {
                work();
            } catch (const std::exception& e) {
                error = e.what();
            }
        if (comm.any(!error.empty())) {
            undo();
            throw std::runtime_error(error.empty() ? fmt::format("{}: another rank failed to write it", path) : error);
        }
    };
    if (K > 1) {
        // A set: every rank writes its own files at once, each through a temporary name, then renames them.
        b.time = time, b.units = units;
        const Hdf5Set set{K, counts};
        const std::size_t m = K / P;
        std::vector<std::string> names, tmps;
        auto remove_tmps = [&] {
            for (const std::string& tmp : tmps)
                std::remove(tmp.c_str());
        };
        step(
            true,
            [&] {
                for (std::size_t k = me * m; k < (me + 1) * m; ++k) {
                    names.push_back(hdf5_set_file(path, k));
                    tmps.push_back(temporary_path(names.back(), "parallel"));
                    write_hdf5_part(tmps.back(), rows_of(b, Rows{starts[k] - first, starts[k + 1] - starts[k]}),
                                    starts[k], set, meta);
                }
            },
            remove_tmps);
        step(
            true,
            [&] {
                for (std::size_t j = 0; j < names.size(); ++j) {
                    rename_durably(tmps[j], names[j]);
                    tmps[j].clear();
                }
            },
            remove_tmps);
        if (comm.rank() == 0) remove_stale_hdf5_files(path, K);
        comm.barrier();
        return;
    }
    // One file, in serial HDF5: one rank at a time holds it open, and writes its rows in its turn.
    const std::string tmp = temporary_path(path, "parallel");
    auto remove_tmp = [&] {
        if (comm.rank() == 0) std::remove(tmp.c_str());
    };
    step(
        comm.rank() == 0, [&] { create_hdf5_for_rows(tmp, time, counts, units, meta); }, remove_tmp);
    for (int q = 0; q < comm.size(); ++q)
        step(
            comm.rank() == q, [&] { write_hdf5_rows(tmp, first, b); }, remove_tmp);
    step(
        comm.rank() == comm.size() - 1, [&] { rename_durably(tmp, path); }, remove_tmp);
    if (comm.rank() == 0) remove_stale_hdf5_files(path, 1);
    comm.barrier();
}

namespace {

void write_tipsy_row(const Comm& comm, const std::string& path, double time, const FileCounts& whole,
                     const RankParticles& mine, const Snapshot& fields, float eps, const Units&, const SnapshotMeta&)
{
    write_tipsy_parallel(comm, path, time, whole, mine, fields, eps);
}

constexpr ParallelSnapshotFormat parallel_writers[] = {
    {SnapshotFormat::hdf5, write_hdf5_parallel},
    {SnapshotFormat::tipsy, write_tipsy_row},
};

} // namespace

std::span<const ParallelSnapshotFormat> parallel_snapshot_writers()
{
    return parallel_writers;
}

void write_snapshot_parallel(const Comm& comm, SnapshotFormat format, const std::string& path, double time,
                             const FileCounts& whole, const RankParticles& mine, const Snapshot& fields, float eps,
                             const Units& units, const SnapshotMeta& meta)
{
    for (const ParallelSnapshotFormat& w : parallel_writers)
        if (w.format == format) return w.write(comm, path, time, whole, mine, fields, eps, units, meta);
    throw std::logic_error(fmt::format("no writer over ranks for {} snapshots", to_string(format)));
}

void write_npy_parallel(const Comm& comm, const std::string& path, std::size_t n_total,
                        std::span<const std::uint64_t> ids, std::span<const bn_f4> rows)
{
    static_assert(sizeof(bn_f4) == 16, "a row is 4 float32");
    if (ids.size() != rows.size()) throw std::invalid_argument("write_npy_parallel: sizes disagree");
    std::size_t first = 0, last = 0;
    std::vector<std::byte> block;
    try {
        block = records_of_my_block(comm, n_total, ids, std::as_bytes(rows), sizeof(bn_f4), first, last);
    } catch (const std::runtime_error& e) {
        throw std::runtime_error(fmt::format("{}: {}", path, e.what()));
    }
    const std::string head = npy_header(n_total, 4);
    if (comm.rank() == 0) {
        const auto* h = reinterpret_cast<const std::byte*>(head.data());
        block.insert(block.begin(), h, h + head.size());
    }
    write_blocks(comm, path, head.size() + n_total * sizeof(bn_f4),
                 comm.rank() == 0 ? 0 : head.size() + first * sizeof(bn_f4), block);
}

} // namespace banyan
