/**
 * @file hdf5_snapshot.hpp
 * @brief Snapshots in the GADGET-4 / SWIFT HDF5 layout, through the HDF5 C library (1.10 API), so that pynbody and
 *        yt open banyan's snapshots without being told the format, and banyan reads what GADGET-2, GADGET-4, SWIFT
 *        and h5py scripts write.
 *
 * Layout written (one file per snapshot, NumFilesPerSnapshot 1, up to max_file_particles(): 2^31 - 1; more make a
 * set of K files, below):
 *   /Header      attributes NumPart_ThisFile (6 int32), NumPart_Total and NumPart_Total_HighWord (6 uint32 each),
 *                MassTable (6 doubles, all 0: every particle has its mass in Masses), Time, Redshift 0, BoxSize 0
 *                (not periodic), NumFilesPerSnapshot 1 (K), Flag_Sfr, Flag_Cooling, Flag_Feedback, Flag_StellarAge,
 *                Flag_Metals, Flag_DoublePrecision (int32, as GADGET-2 writes them), Code "banyan", CodeVersion
 *   /Config      NTYPES 6 (GADGET-4 keeps its compile-time options here; yt takes a file with gas Metallicity and
 *                no Config group for a GIZMO snapshot)
 *   /Parameters  the run's options as string attributes (key=value lines of RunOptions::to_text), and as numbers
 *                GravityConstantInternal 1, ComovingIntegrationOn 0 and, with physical units, UnitLength_in_cm,
 *                UnitMass_in_g, UnitVelocity_in_cm_per_s (GADGET-4's place for them) and Time_GYR (the time in
 *                Gyr, where pynbody looks for it; without it pynbody gives a cosmology's age instead)
 *   /Units       (physical units only) UnitLength_in_cm, UnitMass_in_g, UnitVelocity_in_cm_per_s, UnitTime_in_s
 *                (GADGET-3 / EAGLE, which pynbody reads first) and SWIFT's "Unit length in cgs (U_L)", "Unit mass
 *                in cgs (U_M)", "Unit time in cgs (U_t)", "Unit current in cgs (U_I)", "Unit temperature in cgs (U_T)"
 *   /PartTypeK   for each type with particles: Coordinates (N,3), Velocities (N,3), ParticleIDs (N, uint64),
 *                Masses, Potential, Acceleration (N,3, when known); type 0 (gas) Density, Temperature,
 *                SmoothingLength (tipsy's hsmooth, banyan's eps of gas) and Metallicity; type 4 (stars) Metallicity,
 *                StellarFormationTime and Softenings; types 1, 2, 3, 5 Softenings (SWIFT's name). All float32.
 * Particle types: banyan holds gas, dark, star. Type 0 is gas, type 4 stars, types 1, 2, 3 and 5 collisionless
 * "dark" particles (Snapshot::n_type2, n_type3, n_type5 keep which, in that order after type 1), so a file's types
 * come back as they were. Particle i of a snapshot is row i of the types in the order 0, 1, 2, 3, 5, 4.
 *
 * Sets (GADGET's multi-file snapshots): a snapshot "name.hdf5" of more than max_file_particles() particles is written
 * as the files "name.0.hdf5" .. "name.K-1.hdf5" (hdf5_set_file), file k holding rows [s_k, s_(k+1)) of the whole in
 * the whole's order, as the layout above: NumPart_ThisFile its own counts, NumPart_Total and NumPart_Total_HighWord
 * the whole's, NumFilesPerSnapshot K, and ParticleIDs the rows' indices in the whole (or their own ids). Type t of
 * the whole is then type t of file 0, then of file 1, ..., as GADGET's readers (and yt, pynbody) join them. Writers
 * over ranks write their own files at once (core/parallel/parallel_files.hpp; hdf5_file_starts says which rows);
 * each file goes through a temporary name and a rename, and the files of the name's other layout (the single file,
 * or a set's beyond K) are removed, so that no reader takes an older snapshot for the new one. Reading takes a
 * set given by any of its files' names, by "name.hdf5" when only the set is there, or by the base name "name";
 * a set whose files disagree (NumFilesPerSnapshot, NumPart_Total, Time, ids in some files only), whose
 * NumPart_ThisFile do not add up to NumPart_Total, or that misses a file is refused, naming the file.
 *
 * Reading accepts float32 or float64 (or integer) datasets, converted to float (a finite value beyond float's range
 * is refused); a MassTable entry for a type without Masses; missing Potential, Acceleration, ParticleIDs, softening
 * and gas or star fields (zero, or empty); SWIFT's plural names (Potentials, Softenings, Densities,
 * SmoothingLengths, Temperatures, BirthTimes). Units come from Parameters (GADGET-4), Units (GADGET-3, SWIFT), in that
 * order. Files whose velocity unit is not the one G = 1 implies for their length and mass units (a GADGET run in
 * kpc, 1e10 Msun and km/s, where G = 43007.1) have velocities, potentials, accelerations, times and formation times
 * converted to it, since banyan computes with G = 1. Refused with UsageError naming the file and the problem: a file
 * that is not HDF5 or is damaged, no Header, no NumPart_ThisFile (nor NumPart_Total), a set as above, a type with
 * particles but no group or no Coordinates, a dataset whose shape disagrees with NumPart, no
 * mass (neither Masses nor a MassTable entry), and no Velocities unless the caller does without (forces).
 *
 * Writes go to "<path>.tmp.<pid>" in the same folder, are synced, then renamed over @p path.
 *
 * Implemented by hdf5_read.cpp, hdf5_write.cpp and hdf5_units.cpp (the units, both ways), on the checked HDF5 calls
 * of hdf5_access.hpp; the datasets of the PartTypeK groups are declared once, in hdf5_fields.hpp, which the reader,
 * the writer and the units loop over; those headers are theirs alone.
 */
#pragma once

#include "core/files/snapshot.hpp"
#include "core/files/units.hpp"

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace banyan {

/// What a snapshot file carries beside its particles.
struct SnapshotMeta {
    std::string parameters;     ///< key=value lines (a run's options): the string attributes of /Parameters
    std::string code;           ///< read: the writer ("banyan 0.9.0"), empty when the file does not say
    bool has_softening = true;  ///< read: whether every collisionless particle had a softening in the file
    double velocity_factor = 1; ///< read: file velocities were multiplied by this to make G = 1 (1: as they were)
};

/// Whether the regular file at @p path starts as an HDF5 file does: the signature at byte 0, 512, 1024, 2048, ...
/// (after a user block). Reads those bytes only, without the HDF5 library.
bool has_hdf5_signature(const std::string& path);

/// Whether @p path is an HDF5 snapshot by its first bytes (has_hdf5_signature): the file, or where no file has that
/// name the first file of a set of that name (name.hdf5 or the base name name: name.0.hdf5).
bool is_hdf5_snapshot(const std::string& path);

/// Reads an HDF5 snapshot (layout above; @p path a file, or a set: any of its files, name.hdf5 where only the set's
/// files are there, or its base name), with its units (Snapshot::units), or only its particles @p rows (hyperslabs
/// of every dataset, in the files that hold them: the rest is never read), with the whole snapshot's counts in
/// @p whole. Without @p need_velocities a file without Velocities reads with zero velocities (enough for forces).
/// Throws UsageError naming the file and the problem.
Snapshot read_hdf5(const std::string& path, SnapshotMeta* meta = nullptr, bool need_velocities = true, Rows rows = {},
                   FileCounts* whole = nullptr);

/// Writes @p s to @p path in the layout above (a set when it holds more than max_file_particles()), through a
/// temporary name and a rename. Throws std::invalid_argument
/// when the snapshot's arrays disagree with its counts, std::runtime_error naming the file when a write fails.
void write_hdf5(const std::string& path, const Snapshot& s, const SnapshotMeta& meta);

/// Particles per GADGET type 0 .. 5 of @p s.
std::array<std::uint64_t, 6> gadget_type_counts(const Snapshot& s);

/// File @p k of the snapshot set named @p path (GADGET's convention): "<stem>.<k><ext>" ("snap.hdf5": "snap.3.hdf5";
/// a name without an extension, "snap": "snap.3").
std::string hdf5_set_file(const std::string& path, std::uint64_t k);

/// Where the files of a snapshot begin whose writers hold the rows [blocks[q], blocks[q + 1]) (one writer: {0, N}):
/// one file, {blocks.front(), blocks.back()}, when the whole fits @p limit (max_file_particles()); else writer q's
/// rows in m files of sizes as even as can be, files [q m, (q + 1) m), m the fewest that hold the largest writer's
/// rows within @p limit. K + 1 numbers: file k holds rows [starts[k], starts[k + 1]).
std::vector<std::uint64_t> hdf5_file_starts(std::span<const std::uint64_t> blocks, std::uint64_t limit);

/// The snapshot a file of a set belongs to: its files, and its counts of each GADGET type (NumPart_Total).
struct Hdf5Set {
    std::uint64_t files = 1;
    std::array<std::uint64_t, 6> total{};
};

/// Writes @p part, the rows [first, first + part.size()) of the whole of @p set, as a file of that set (layout above:
/// NumPart_ThisFile its counts; ParticleIDs its ids or, without, first + i) straight to @p path: the caller writes a
/// temporary name and renames it. Throws std::invalid_argument when the arrays disagree with the counts,
/// std::runtime_error naming the file when a write fails.
void write_hdf5_part(const std::string& path, const Snapshot& part, std::uint64_t first, const Hdf5Set& set,
                     const SnapshotMeta& meta);

/// Once the snapshot @p path is written as @p files files (1: the file @p path; more: the set's): the files of the
/// other layout of that name removed (the file @p path, or the set's files from hdf5_set_file(path, files) on; for
/// one file, any set's), so that no reader takes an older snapshot of that name for it. Regular files only.
void remove_stale_hdf5_files(const std::string& path, std::uint64_t files);

/// For writers over several ranks (core/parallel/parallel_files.hpp), which fill one file in turns: creates @p path
/// (truncating it) with the header, the metadata and every dataset of the particles of types 0 .. 5 (@p counts) at
/// its full size, Acceleration among them; write_hdf5_rows fills them.
void create_hdf5_for_rows(const std::string& path, double time, const std::array<std::uint64_t, 6>& counts,
                          const Units& units, const SnapshotMeta& meta);

/// Writes the particles [first, first + rows.size()) of the snapshot's order (types 0, 1, 2, 3, 5, 4: gas first, stars
/// last) from @p rows (rows_of cuts such a slice; every field, Acceleration included, ParticleIDs empty for the rows'
/// indices) into the file that create_hdf5_for_rows made (opened, written, closed). Throws std::invalid_argument
/// when the arrays disagree with the rows, std::runtime_error naming the file.
void write_hdf5_rows(const std::string& path, std::uint64_t first, const Snapshot& rows);

} // namespace banyan
