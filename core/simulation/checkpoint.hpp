/**
 * @file checkpoint.hpp
 * @brief The checkpoint file of a run: the exact device state and the run's bookkeeping, enough to continue it bit
 *        for bit.
 *
 * Format (host byte order; the same machine writes and reads it): "BNYNCKPT", u32 version, u32 byte-order mark,
 * u64 length of a text block of key=value lines (the options and the bookkeeping, doubles in shortest round-trip
 * form), the text, then the arrays pos, vel, acc (N float4 each), ids (N u64, id_bytes=8; N u32 in checkpoints
 * before it) in device order, with block time
 * steps (rungs=1) the rungs (N u32), then the fields of the input that never change (eps for N, gas
 * rho/temp/metals, star metals/tform; over several ranks, rank_rows=1, those of the rows of the input the rank
 * writes: eps for n_gas + n_dark + n_star of them), with file_ids=1 the input's own particle ids of those rows (u64
 * each: HDF5 ParticleIDs), and last an FNV-1a 64-bit checksum of everything before it.
 *
 * A run over P ranks writes a set of P files, one per rank. Rank 0's file (checkpoint.bin) names the set: its ranks
 * (ranks=P) and its slot (slot=a or b); rank R's file is checkpoint.bin.rankR.SLOT (checkpoint_rank_file). Sets go
 * to the two slots in turn and rank 0's file is renamed into place last, once every rank's file of the new set is
 * whole on disk: that rename replaces the whole set at once, and until it the previous set is untouched.
 */
#pragma once

#include "core/files/key_values.hpp"
#include "core/files/snapshot.hpp"
#include "core/simulation/simulation.hpp"

#include <string>

namespace banyan {

struct Checkpoint {
    KeyValues header;      ///< the text block: the writer's lines, and particles, n_gas, n_dark, n_star, and the
                           ///< internal units' length_exp and mass_exp
    SimulationState state; ///< the exact device state
    Snapshot fields;       ///< counts and the fields the simulation never changes (eps, gas and star fields, the
                           ///< input's ids when it had some); mass, pos, vel and phi are zero-filled
};

/// Writes a checkpoint to @p path through a temporary name and a rename. @p header_text holds the caller's
/// key=value lines; the particle counts are added here.
void write_checkpoint(const std::string& path, const std::string& header_text, const SimulationState& state,
                      const Snapshot& fields);

/// What read_checkpoint keeps of a file: its particles @p particles (rows of its arrays, in device order) and the
/// rows @p fields of its fields (in input order: gas, dark, star); by default all of both.
struct CheckpointRows {
    Rows particles;
    Rows fields;
};

/// Reads a checkpoint, keeping @p rows of it (the counts of the fields kept: those of the rows kept). The whole
/// file is read through once, in pieces, for its checksum; only what is kept is held. Throws UsageError naming
/// @p path for a missing, foreign, damaged (checksum), truncated or inconsistent file.
Checkpoint read_checkpoint(const std::string& path, CheckpointRows rows = {});

/// The internal units a checkpoint's @p header states (length_exp, mass_exp); UsageError naming @p path for
/// impossible ones.
InternalUnits checkpoint_units(const KeyValues& header, const std::string& path);

/// The file of rank @p rank in the checkpoint set whose rank-0 file is @p first: @p first itself for rank 0, else
/// "<first>.rank<R>.<slot>" ("<first>.rank<R>" in sets of releases before slots, @p slot empty).
std::string checkpoint_rank_file(const std::string& first, std::uint64_t rank, const std::string& slot);

/// The slot a checkpoint's @p header names ("a" or "b"; empty in sets of releases before slots and from one rank);
/// UsageError naming @p path for another.
std::string checkpoint_slot(const KeyValues& header, const std::string& path);

/// Reads only the header of the checkpoint at @p path (its text block; the checksum is not verified).
KeyValues read_checkpoint_header(const std::string& path);

} // namespace banyan
