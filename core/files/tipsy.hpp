/**
 * @file tipsy.hpp
 * @brief Tipsy snapshots: read standard (big-endian, XDR) and native little-endian files, write standard ones.
 *
 * Layout: a 32-byte header {double time; int nbodies, ndim, nsph, ndark, nstar, pad}, then nsph gas records
 * {mass, pos[3], vel[3], rho, temp, hsmooth, metals, phi}, ndark dark records {mass, pos[3], vel[3], eps, phi} and
 * nstar star records {mass, pos[3], vel[3], metals, tform, eps, phi}, all 4-byte floats. The byte order is detected
 * from the header (ndim must be 3 and the counts must add up). Every field is kept, so a read-write round trip is
 * exact to the bit, and particle i stays particle i.
 */
#pragma once

#include "core/files/snapshot.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace banyan {

enum class Endian { big, little };

/// Reads a tipsy file, or only its particles @p rows (read from their offset: the rest of the file is never
/// loaded), with the whole file's counts in @p whole. Throws UsageError naming the file and the problem for a
/// missing, foreign or truncated file, or one whose header counts disagree with its size. Does not judge the values
/// (see check_particles).
Snapshot read_tipsy(const std::string& path, Endian* detected = nullptr, Rows rows = {}, FileCounts* whole = nullptr);

/// Refuses a tipsy file of @p n particles, more than its format holds: its header's counts are 32-bit signed, at
/// most 2^31 - 1 (fewer with BANYAN_MAX_FILE_PARTICLES: max_file_particles()). UsageError naming @p what, the limit
/// and HDF5, whose snapshots hold more as sets of files.
void check_tipsy_count(std::uint64_t n, const std::string& what);

/// Writes a tipsy file (standard big-endian by default) through a temporary name and a rename; check_tipsy_count
/// first.
void write_tipsy(const std::string& path, const Snapshot& s, Endian order = Endian::big);

/// The records of @p s as a tipsy file holds them (gas, dark, stars; in @p order's byte order), without the header:
/// what write_tipsy writes after it, and writers over ranks write a slice of a file from.
/// @throws std::invalid_argument when the snapshot's arrays disagree with its counts.
std::vector<float> tipsy_records(const Snapshot& s, Endian order = Endian::big);
/// The byte offset of record @p i in a tipsy file of @p counts (header included).
std::uint64_t tipsy_offset(const FileCounts& counts, std::uint64_t i);

} // namespace banyan
