/**
 * @file parallel_files.hpp
 * @brief Files written by all ranks together, in the order of the input, through MPI-IO: no rank ever holds more
 *        than its share. Snapshots of a run (standard big-endian tipsy, dark-matter particles) and the (N, 4) arrays
 *        of `banyan forces` (.npy).
 *
 * Both go the same way: every particle's record goes to the rank that writes its block of the file (rank q writes
 * ids [q N / P, (q + 1) N / P)); then every rank writes its block at its offset into a temporary name that rank 0
 * renames when all are done.
 */
#pragma once

#include "core/device_shared.h"
#include "core/parallel/comm.hpp"

#include <span>
#include <string>
#include <vector>

namespace banyan {

/// This rank's particles: ids (0 .. N - 1 over all ranks, each once), x y z mass, vx vy vz, and the potential.
struct RankParticles {
    std::vector<bn_u32> ids;
    std::vector<bn_f4> pos, vel;
    std::vector<float> phi;
};

/// Writes @p path: a tipsy header (time, N dark particles) and particle id i as record i (mass, position, velocity,
/// @p eps, potential). Collective.
void write_tipsy_parallel(const Comm& comm, const std::string& path, double time, std::size_t n_total,
                          const RankParticles& mine, float eps);

/// Writes @p path as a float32 .npy array of shape (n_total, 4) whose row ids[i] is @p rows[i] (x, y, z, w of this
/// rank's particle i). Collective; on one rank the same bytes as write_npy.
void write_npy_parallel(const Comm& comm, const std::string& path, std::size_t n_total, std::span<const bn_u32> ids,
                        std::span<const bn_f4> rows);

/// The records of ids [first, last) of this rank's block, in id order (record_bytes each), gathered from the ranks
/// that hold them: @p ids[i] is the id of @p records[i * record_bytes, (i + 1) * record_bytes). Collective. Throws
/// when an id is out of range or twice, or when some rank's block misses records.
std::vector<std::byte> records_of_my_block(const Comm& comm, std::size_t n_total, std::span<const bn_u32> ids,
                                           std::span<const std::byte> records, std::size_t record_bytes,
                                           std::size_t& first, std::size_t& last);

} // namespace banyan
