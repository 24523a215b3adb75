/**
 * @file snapshot_file.hpp
 * @brief Snapshot files of every format banyan speaks, as one table (snapshot_formats()): HDF5 (GADGET-4 / SWIFT
 *        layout, hdf5_snapshot.hpp) and tipsy (tipsy.hpp). Reading detects the format from the file's first bytes,
 *        never from its name.
 *
 * Each format is one SnapshotFormat and one row of the table (snapshot_file.cpp): its name (the option's spelling
 * and the file name's extension), the texts help messages list it with, how a file is recognised, its reader and
 * writer, and what it keeps. Everything that names formats goes through the table: the option parser
 * (parse_snapshot_format), the CLI's help (snapshot_format_list), detection, read_snapshot and write_snapshot,
 * `banyan run`'s choice of the state a snapshot needs (keeps_accelerations), Python's banyan.snapshot_formats. The
 * writers over several ranks are a table of their own one layer up, keyed by SnapshotFormat
 * (core/parallel/parallel_files.hpp, write_snapshot_parallel), since this layer knows no communicator. A new format
 * is its own reader and writer files, a SnapshotFormat, a row here and a row there.
 *
 * An HDF5 file starts with the signature "\x89HDF\r\n\x1a\n" at byte 0 (or at 512, 1024, 2048, ... when it has a user
 * block); anything else is read as tipsy (the format that detects nothing: the last resort), whose reader says what
 * is wrong with a file that is neither. Tipsy has no place for units, parameters, accelerations, particle ids or
 * GADGET types 2, 3, 5: writing tipsy drops them.
 */
#pragma once

#include "core/files/hdf5_snapshot.hpp"
#include "core/files/snapshot.hpp"

#include <functional>
#include <span>
#include <string>

namespace banyan {

/// A snapshot format: the key of its row in snapshot_formats().
enum class SnapshotFormat { hdf5, tipsy };

/// One snapshot format: a row of snapshot_formats().
struct SnapshotFormatInfo {
    SnapshotFormat format;
    const char* name;   ///< "hdf5": the option's spelling (--format, Python's format=) and the file name's extension
    const char* title;  ///< "HDF5": as help texts name the format
    const char* reads;  ///< what its reader takes, for help texts ("either byte order")
    const char* writes; ///< what its writer writes, for help texts ("standard big-endian")
    /// Whether the regular file at @p path is of this format, from its first bytes (where no file has that name, it
    /// may name a set of files: an HDF5 snapshot of several); nullptr for the format a file of no other format is read
    /// as (its reader then names what is wrong).
    bool (*detect)(const std::string& path);
    /// Reads the file (or only its @p rows, with the whole file's counts in @p whole; read_snapshot says more).
    Snapshot (*read)(const std::string& path, SnapshotMeta* meta, bool need_velocities, Rows rows, FileCounts* whole);
    /// Writes @p s (and, where the format has a place for it, @p meta) through a temporary name and a rename.
    void (*write)(const std::string& path, const Snapshot& s, const SnapshotMeta& meta);
    /// What a file of the format keeps of a Snapshot beside the particles' masses, positions, velocities,
    /// softenings, potentials and gas and star fields (none unless its row says so); writing drops the rest.
    bool keeps_accelerations = false; ///< Snapshot::acc (so a run gathers them for its snapshots)
    bool keeps_ids = false;           ///< Snapshot::ids
    bool keeps_types = false;         ///< GADGET types 2, 3, 5 (Snapshot::n_type2 ...); else dark ones are type 1
    bool keeps_units = false;         ///< Snapshot::units
    bool keeps_parameters = false;    ///< SnapshotMeta::parameters
};

/// Every snapshot format, in the order help texts list them: row i is SnapshotFormat i.
std::span<const SnapshotFormatInfo> snapshot_formats();
/// The row of @p f.
const SnapshotFormatInfo& snapshot_format_info(SnapshotFormat f);
/// The formats' @p item joined as a list in prose: "hdf5 or tipsy" (with three, "a, b or c").
std::string snapshot_format_list(const std::function<std::string(const SnapshotFormatInfo&)>& item);

/// A format's name ("hdf5" or "tipsy"); anything else is a UsageError naming @p what (the option) and the text.
SnapshotFormat parse_snapshot_format(const std::string& text, const std::string& what = "--format");
/// The format's name ("hdf5" or "tipsy"): the option's spelling and the file name's extension.
const char* to_string(SnapshotFormat f) noexcept;

/// The format of the file at @p path from its first bytes (the format that detects nothing, tipsy, when no other
/// claims it or it is no regular file: its reader then names the problem).
SnapshotFormat detect_snapshot_format(const std::string& path);

/// Reads a snapshot of any format (detected), with its units (N-body for tipsy), or only its particles @p rows
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

/// Writes @p s to @p path in @p format (its row's writer; tipsy: standard big-endian, @p meta not written), through a
/// temporary name and a rename.
void write_snapshot(const std::string& path, const Snapshot& s, SnapshotFormat format, const SnapshotMeta& meta);

} // namespace banyan
