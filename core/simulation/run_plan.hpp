/**
 * @file run_plan.hpp
 * @brief The input of a run in one room: what a front end asks to start (RunRequest), the one check of its
 *        options, input and outputs (plan_run), and its result, the plan a Run starts from. Every check of the
 *        initial particles, read from a file, given by a front end, on the device or generated from a model, is
 *        the one function check_input.
 */
#pragma once

#include "core/device/buffer.hpp"
#include "core/files/particles.hpp"
#include "core/files/snapshot.hpp"
#include "core/gravity/precision.hpp"
#include "core/parallel/comm.hpp"
#include "core/simulation/outputs.hpp"
#include "core/simulation/run_options.hpp"

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace banyan {

/// Initial particles that lie on the run's device already (the Python module's CuPy and PyTorch arrays), checked by
/// the front end in their own library (finite, positive masses) and scaled there into the internal units: what a
/// one-rank run starts from with nothing copied through the host.
struct DeviceParticles {
    std::size_t n = 0;
    double time = 0;
    /// Their extent (the largest side of their box), total mass, smallest mass and its particle, for
    /// check_precision_range; @p units must be InternalUnits::for_extent_and_mass(extent, total_mass, eps).
    double extent = 0, total_mass = 0, min_mass = 0;
    std::size_t lightest = 0;
    InternalUnits units;
    std::vector<std::uint64_t> ids; ///< the front end's own ids, or empty
    /// Writes them, in @p units, into the tree's (x, y, z, m) and (vx, vy, vz, -) arrays in input order (once, when
    /// the run starts: the arrays it reads must live until then).
    std::function<void(Buffer<bn_f4>& pos, Buffer<bn_f4>& vel)> put;
};

/// What a front end asks to start: the options as the user gave them and, where the front end has them, the
/// initial particles.
struct RunRequest {
    RunRequest() = default;
    RunRequest(RunOptions o) : options(std::move(o)) {} // NOLINT: plan_run({options}) asks with defaults
    RunOptions options;
    /// Initial conditions the front end holds (the Python module's arrays, a test's particles); otherwise they come
    /// from options.in (ic "file") or are generated from options.ic when the run starts.
    std::optional<Snapshot> particles;
    /// Or particles on the device (one rank only).
    std::optional<DeviceParticles> device_particles;
    /// Take the softening the input file's particles carry instead of options.eps (`banyan run --in` without --eps).
    bool eps_from_file = false;
    OptionStyle style = OptionStyle::cli;
    /// Where the run's outputs go; empty: files in options.out (RunOutputs::files).
    std::shared_ptr<RunOutputs> outputs;
};

/// A new run whose options and input have been checked, once, by plan_run: what Run starts from.
class RunPlan {
public:
    const RunOptions& options() const noexcept { return options_; }
    /// Particles in all ranks together.
    std::size_t size() const noexcept { return input_ || device_ ? whole_.size() : options_.n; }
    /// The input file's or the front end's particles; nothing for generated ones, which Run makes when it starts
    /// (after the caller had the chance to judge the device memory they need). Over several ranks, an input file's
    /// particles [first_row(), first_row() + input()->size()) only: each rank reads its own rows.
    const std::optional<Snapshot>& input() const noexcept { return input_; }
    std::size_t first_row() const noexcept { return first_row_.value_or(0); }
    const std::shared_ptr<RunOutputs>& outputs() const noexcept { return outputs_; }

private:
    friend RunPlan plan_run(RunRequest request, const Comm& comm);
    friend class Run;
    RunOptions options_;
    std::optional<Snapshot> input_;
    std::optional<DeviceParticles> device_; // or particles on the device
    Particles particles_;                   // input_ in the device's layout (converted once)
    std::optional<std::size_t> first_row_;  // over ranks: input_ holds this rank's rows of the file, from here
    FileCounts whole_;                      // the counts of the whole input
    std::shared_ptr<RunOutputs> outputs_;
};

/// Checks a request once, before any device is opened: the options (RunOptions::check, in the request's spelling),
/// the input file read (HDF5 or tipsy) or the given particles, the file's units taken (adopt_units) and, with
/// eps_from_file, its softening; then the particles (check_input) and the outputs (RunOutputs::prepare: an output
/// folder is created and must not hold a run). Throws UsageError naming the first problem.
RunPlan plan_run(RunRequest request, const Comm& comm = Comm::world());

/// A run's initial particles as check_input sees them, whichever their source.
struct InputParticles {
    std::string what;                 ///< named in refusals: the input file, or "initial conditions"
    double time = 0;                  ///< their start time
    std::size_t total = 0;            ///< in all ranks together
    std::size_t first = 0;            ///< this rank's first particle among them
    const Snapshot* values = nullptr; ///< this rank's particles on the host, whose values are checked
    std::span<const bn_f4> pos_mass;  ///< the same in the device's layout, for the precision range
    /// Or particles on the device, checked by the front end in their own library (values and pos_mass unused).
    const DeviceParticles* device = nullptr;
    bool sized_by_n = false; ///< options.n asks for this many (a model, a front end's particles)
    bool over_ranks = false; ///< the precision range of all ranks' particles (collective)
};

/// The one check of a run's initial particles, for files, front ends' arrays and models alike: a count of at least 1
/// and at most 2^31 - 1 on each rank (check_count; options.n for a model), finite positions and velocities, positive
/// masses, valid softenings, a start time the time grids can serve and options.t_end after it, and the coordinates,
/// masses and softening in the range single precision serves (check_precision_range). Throws UsageError naming @p
/// in.what and the first problem.
void check_input(const InputParticles& in, const RunOptions& options, const Comm& comm);

} // namespace banyan
