/**
 * @file parallel_files.hpp
 * @brief Files read and written by all ranks together, in the order of the input: no rank ever holds more than its
 *        share. Reading: each rank reads its own rows of an input (read_snapshot with Rows), and what needs the
 *        whole input is formed by reductions over the ranks (below). Writing: snapshots of a run (standard
 *        big-endian tipsy or HDF5; gas and star fields from the rank whose rows they are) and the (N, 4) arrays of
 *        `banyan forces` (.npy).
 *
 * Writing:
 * All go the same way: every particle's record goes to the rank that writes its block of the file (rank q writes
 * ids [q N / P, (q + 1) N / P)). Tipsy and .npy: every rank writes its block at its offset into a temporary name
 * through MPI-IO, and rank 0 renames it when all are done. HDF5 (serial HDF5, no MPI-IO): rank 0 creates the
 * temporary file with every dataset at its full size, then the ranks open it and write their rows in rank order,
 * one after the other, and the last renames it; a snapshot of more than max_file_particles() is a set of files
 * (core/files/hdf5_snapshot.hpp), rank q's block of rows its files [q m, (q + 1) m), which every rank writes at once
 * under temporary names and then renames.
 */
#pragma once

#include "core/device_shared.h"
#include "core/files/hdf5_snapshot.hpp"
#include "core/files/snapshot_file.hpp"
#include "core/gravity/precision.hpp"
#include "core/parallel/comm.hpp"

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace banyan {

// ---- Files written by all ranks ---------------------------------------------------------------------------------

/// This rank's particles: ids (0 .. N - 1 over all ranks, each once), x y z mass, vx vy vz, and the potential.
struct RankParticles {
    std::vector<std::uint64_t> ids;
    std::vector<bn_f4> pos, vel;
    std::vector<float> phi;
    std::vector<bn_f4> acc; ///< ax, ay, az, potential: what an HDF5 snapshot holds (tipsy needs only phi)
};

/// Writes @p path: a tipsy header (time, @p whole's gas, dark and star counts) and particle id i as record i (mass,
/// position, velocity, potential from the rank that holds it; the static fields from @p fields). Rank q writes the
/// records of ids [q N / P, (q + 1) N / P) and gives their static fields: @p fields holds those rows (eps, gas and
/// star fields, as rows_of cuts them; the rows each rank of a run read of its input), or is empty and @p eps the
/// softening of every particle (none gas nor star). Collective; the same bytes as write_tipsy of the whole.
void write_tipsy_parallel(const Comm& comm, const std::string& path, double time, const FileCounts& whole,
                          const RankParticles& mine, const Snapshot& fields, float eps);

/// Writes @p path as an HDF5 snapshot (core/files/hdf5_snapshot.hpp): particle id i is row i of the types 0, 1, 2,
/// 3, 5, 4 in that order, @p whole's counts of each, with mass, position, velocity, mine.acc's accelerations and
/// potentials, and the static fields as write_tipsy_parallel takes them. Beyond max_file_particles() a set of files
/// (hdf5_file_starts of the ranks' blocks). Collective; one file has the same bytes whatever the number of ranks, a
/// set the same values.
void write_hdf5_parallel(const Comm& comm, const std::string& path, double time, const FileCounts& whole,
                         const RankParticles& mine, const Snapshot& fields, float eps, const Units& units,
                         const SnapshotMeta& meta);

/// The writer over ranks of one snapshot format: write_tipsy_parallel, write_hdf5_parallel or the like, in one
/// signature (a format that keeps no units or parameters ignores them; one that keeps no accelerations reads only
/// mine.phi of the potentials and accelerations).
using ParallelSnapshotWriter = void (*)(const Comm& comm, const std::string& path, double time, const FileCounts& whole,
                                        const RankParticles& mine, const Snapshot& fields, float eps,
                                        const Units& units, const SnapshotMeta& meta);
/// A row of the writers over ranks: the part of the table of snapshot formats (core/files/snapshot_file.hpp,
/// snapshot_formats()) that needs a communicator, and so lives in this layer, keyed by the format.
struct ParallelSnapshotFormat {
    SnapshotFormat format;
    ParallelSnapshotWriter write;
};
/// The writer over ranks of every snapshot format, in the order of snapshot_formats().
std::span<const ParallelSnapshotFormat> parallel_snapshot_writers();

/// Writes @p path in @p format by all ranks together (its row of parallel_snapshot_writers(); the arguments as
/// write_hdf5_parallel takes them; mine.acc is needed where snapshot_format_info(format).keeps_accelerations).
/// Collective. Throws std::logic_error for a format without a writer over ranks.
void write_snapshot_parallel(const Comm& comm, SnapshotFormat format, const std::string& path, double time,
                             const FileCounts& whole, const RankParticles& mine, const Snapshot& fields, float eps,
                             const Units& units, const SnapshotMeta& meta);

/// Writes @p path as a float32 .npy array of shape (n_total, 4) whose row ids[i] is @p rows[i] (x, y, z, w of this
/// rank's particle i). Collective; on one rank the same bytes as write_npy.
void write_npy_parallel(const Comm& comm, const std::string& path, std::size_t n_total,
                        std::span<const std::uint64_t> ids, std::span<const bn_f4> rows);

/// The records of ids [first, last) of this rank's block, in id order (record_bytes each), gathered from the ranks
/// that hold them: @p ids[i] is the id of @p records[i * record_bytes, (i + 1) * record_bytes). Collective. Throws
/// when an id is out of range or twice, or when some rank's block misses records.
std::vector<std::byte> records_of_my_block(const Comm& comm, std::size_t n_total, std::span<const std::uint64_t> ids,
                                           std::span<const std::byte> records, std::size_t record_bytes,
                                           std::size_t& first, std::size_t& last);

} // namespace banyan
