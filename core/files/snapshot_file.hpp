/**
 * @file snapshot_file.hpp
 * @brief Snapshot files of either format banyan speaks: HDF5 (GADGET-4 / SWIFT layout, hdf5_snapshot.hpp) and
 *        tipsy (tipsy.hpp). Reading detects the format from the file's first bytes, never from its name.
 *
 * An HDF5 file starts with the signature "\x89HDF\r\n\x1a\n" at byte 0 (or at 512, 1024, 2048, ... when it has a user
 * block); anything else is read as tipsy, whose reader says what is wrong with a file that is neither. Tipsy has no
 * place for units, parameters, accelerations, particle ids or GADGET types 2, 3, 5: writing tipsy drops them.
 */
#pragma once

#include "core/files/hdf5_snapshot.hpp"
#include "core/files/snapshot.hpp"

#include <string>

namespace banyan {

enum class SnapshotFormat { hdf5, tipsy };

/// "hdf5" or "tipsy"; anything else is a UsageError naming @p what (the option) and the text.
SnapshotFormat parse_snapshot_format(const std::string& text, const std::string& what = "--format");
/// "hdf5" or "tipsy": the option's spelling and the file name's extension.
const char* to_string(SnapshotFormat f) noexcept;

/// The format of the file at @p path from its first bytes (tipsy when it is not HDF5, or cannot be opened: the tipsy
/// reader then names the problem).
SnapshotFormat detect_snapshot_format(const std::string& path);

/// Reads a snapshot of either format (detected), with its units (N-body for tipsy), or only its particles @p rows
/// (what one MPI rank reads), with the whole file's counts in @p whole. @p meta, when given, receives an HDF5 file's
/// parameters and writer. Without @p need_velocities an HDF5 file may lack Velocities.
/// Throws UsageError naming the file and the problem.
Snapshot read_snapshot(const std::string& path, SnapshotMeta* meta = nullptr, bool need_velocities = true,
                       SnapshotFormat* detected = nullptr, Rows rows = {}, FileCounts* whole = nullptr);

/// The softening to use for the particles of the file @p path when the user gave none: @p common, the one every
/// collisionless particle carries (common_softening of the file's particles, over all ranks where each read part).
/// Throws UsageError, naming @p command and asking for --eps, when the file gives them none (@p meta.has_softening
/// false: no PartTypeK/Softenings) or not all the same one (banyan uses one for all).
float softening_from_file(const SnapshotMeta& meta, const std::string& path, const std::string& command,
                          std::optional<float> common);
/// The same for a file read whole into @p s.
float softening_from_file(const Snapshot& s, const SnapshotMeta& meta, const std::string& path,
                          const std::string& command);

/// Writes @p s to @p path in @p format (tipsy: standard big-endian; @p meta is not written), through a temporary name
/// and a rename.
void write_snapshot(const std::string& path, const Snapshot& s, SnapshotFormat format, const SnapshotMeta& meta);

} // namespace banyan
