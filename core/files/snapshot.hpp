/**
 * @file snapshot.hpp
 * @brief The format-neutral host snapshot: every field a snapshot file of either format (HDF5, tipsy) can hold, the
 *        rows one rank reads of a file, a whole file's counts, and the checks of particle data a run starts from.
 *        The readers and writers of each format (hdf5_snapshot.hpp, tipsy.hpp) and everything above them use it.
 */
#pragma once

#include "core/files/units.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace banyan {

struct Snapshot {
    double time = 0;
    std::size_t n_gas = 0, n_dark = 0, n_star = 0;    ///< particles are stored gas, then dark, then star
    std::vector<float> mass;                          ///< N
    std::vector<float> pos, vel;                      ///< 3N each, x y z per particle
    std::vector<float> eps;                           ///< N: softening (gas: hsmooth)
    std::vector<float> phi;                           ///< N: potential
    std::vector<float> gas_rho, gas_temp, gas_metals; ///< n_gas each
    std::vector<float> star_metals, star_tform;       ///< n_star each
    /// HDF5 snapshots (core/files/hdf5_snapshot.hpp) only; tipsy has no place for them and ignores them.
    std::vector<float> acc;         ///< 3N accelerations, or empty (none known)
    std::vector<std::uint64_t> ids; ///< N particle ids, or empty (the index in the file, 0 .. N-1)
    /// GADGET particle types of the dark particles: the last n_type2 + n_type3 + n_type5 of them are of types 2, 3
    /// and 5, in that order, the others of type 1 (gas is type 0, stars type 4), so that a file's types survive.
    std::size_t n_type2 = 0, n_type3 = 0, n_type5 = 0;
    Units units; ///< the units of the numbers (N-body when not physical): HDF5 files carry them, tipsy files never

    std::size_t size() const noexcept { return n_gas + n_dark + n_star; }
    /// A snapshot of @p n dark-matter particles with all fields zero.
    static Snapshot dark(std::size_t n);
};

/// Particles [first, first + count) of a snapshot file in its order (gas, dark, star): what one MPI rank reads of
/// an input (count is clipped to the file; the default is the whole file).
struct Rows {
    std::size_t first = 0;
    std::size_t count = static_cast<std::size_t>(-1);
};

/// The particle counts of a whole file, whatever rows were read (a slice's own counts are in its Snapshot).
struct FileCounts {
    std::size_t n_gas = 0, n_dark = 0, n_star = 0;
    std::size_t n_type2 = 0, n_type3 = 0, n_type5 = 0; ///< as Snapshot's
    std::size_t size() const noexcept { return n_gas + n_dark + n_star; }
};

/// The most particles one snapshot file holds: 2^31 - 1 (HDF5's NumPart_ThisFile and tipsy's header counts are
/// 32-bit signed), or fewer where the environment variable BANYAN_MAX_FILE_PARTICLES says so (for tests: a few
/// thousand particles then take the paths of billions). HDF5 snapshots of more are written as sets of several files
/// (hdf5_snapshot.hpp), tipsy snapshots of more refused (tipsy.hpp). Read at every call; a value that is no whole
/// number from 1 to 2^31 - 1 is a UsageError naming the variable.
std::uint64_t max_file_particles();

/// The particles @p rows of @p s (as read_snapshot would read them from a file of @p s): every array cut, the counts
/// of each kind (and of types 2, 3, 5) those of the rows.
Snapshot rows_of(const Snapshot& s, Rows rows);

/// The softening that every dark and star particle of @p s carries, when they all carry the same one; nothing when
/// they differ or there are none (gas records carry a smoothing length, not a softening).
std::optional<float> common_softening(const Snapshot& s);

/// Refuses particle data no simulation can start from: N = 0, NaN or infinite positions or velocities, masses that
/// are not positive and finite. Throws UsageError naming @p what, the first bad particle and its value.
void check_particles(const Snapshot& s, const std::string& what);
/// check_particles' tests of the values alone (an empty slice passes), for rows read from @p first of the file on:
/// a bad particle is named by its index in the file.
void check_particle_values(const Snapshot& s, const std::string& what, std::size_t first = 0);
/// Refuses softenings that are not finite or negative (the first named, as particle @p first + i of @p what).
void check_softenings(const Snapshot& s, const std::string& what, std::size_t first = 0);

} // namespace banyan
