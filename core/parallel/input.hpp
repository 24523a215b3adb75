/**
 * @file input.hpp
 * @brief A run's input as the ranks hold it, in one room: an input file read (each rank its own rows over several
 *        ranks, the whole file on one), its softening, and the checks of the initial particles' values and
 *        precision range that need every rank's particles (collective; on one rank they are the serial checks).
 *        The plan (core/simulation/run_plan.cpp) calls read_input_file once for a file and, through check_input,
 *        check_initial_particles once for any input: the request's path comes back up from here twice.
 */
#pragma once

#include "core/device_shared.h"
#include "core/files/particles.hpp"
#include "core/files/snapshot.hpp"
#include "core/gravity/precision.hpp"
#include "core/parallel/comm.hpp"

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>

namespace banyan {

/// A run's @p n particles: at least one, and no more than @p ranks ranks hold, each at most 2^31 - 1 in its
/// [r n / P, (r + 1) n / P) (one tree's counts are 32-bit; the run's total has no limit of its own). UsageError
/// naming @p what otherwise.
void check_count(std::uint64_t n, const std::string& what, int ranks);

/// An input file as a run starts from it.
struct InputFile {
    Snapshot rows;       ///< this rank's rows of the file: [first_row, first_row + rows.size()), all on one rank
    Particles particles; ///< the same in the device's layout (the one conversion of the input)
    FileCounts whole;    ///< the whole file's counts
    std::size_t first_row = 0;
    bool by_rows = false;           ///< read over several ranks, each its rows
    std::optional<float> softening; ///< asked for (eps_from_file): the one every collisionless particle carries
};

/// How read_input_file reads: for `banyan run` (the defaults) or `banyan forces`, whose direct summation needs
/// every particle on every rank and no velocities.
struct InputFileOptions {
    std::string command = "run"; ///< named in refusals
    bool velocities = true;      ///< the file must hold them
    bool by_rows = true;         ///< over several ranks each reads only its rows; otherwise every rank all of them
    bool eps_from_file = false;  ///< take the softening the particles carry
};

/// Reads the input file @p path: over several ranks (@p how.by_rows) each reads only its rows [r N / P,
/// (r + 1) N / P) (tipsy from their offset, HDF5 by hyperslabs), on one rank the whole file; the count is checked
/// before any row is read. With @p how.eps_from_file the softening its particles carry (softening_from_file over
/// all ranks' particles). Throws UsageError naming the file and the problem. Collective.
InputFile read_input_file(const std::string& path, const InputFileOptions& how, const Comm& comm);

/// The checks of initial particles that look at their values: finite positions and velocities, positive masses,
/// valid softenings (check_particle_values of this rank's @p values, particles from @p first on, where given), and
/// the coordinates, masses and softening @p eps in the range single precision serves (check_precision_range of
/// @p pos_mass; of every rank's with @p over_ranks, a collective call). Throws UsageError naming @p what.
void check_initial_particles(const Snapshot* values, std::span<const bn_f4> pos_mass, std::size_t first,
                             std::size_t total, double eps, const std::string& what, bool over_ranks, const Comm& comm);

/// The softening every collisionless particle of every rank's @p mine carries, when they all carry the same one
/// (common_softening of all ranks' particles).
std::optional<float> common_softening(const Snapshot& mine, const Comm& comm);

/// InternalUnits::for_system of the particles of every rank, from each rank's @p mine: the bounding box's largest
/// side and the total mass.
InternalUnits system_units(std::span<const bn_f4> mine, double eps, const Comm& comm);

/// check_precision_range (precision.hpp) of the particles of every rank, from each rank's @p pos_mass, particles
/// [first, first + pos_mass.size()) of @p total: the lightest particle is named by its index in the input.
void check_precision_range(std::span<const bn_f4> pos_mass, std::size_t first, std::size_t total, double eps,
                           const std::string& what, const Comm& comm);

} // namespace banyan
