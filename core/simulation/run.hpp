/**
 * @file run.hpp
 * @brief A simulation run as `banyan run` drives it: initial conditions, the step loop, the energy log, snapshots
 *        in the order of the input, checkpoints and restarts.
 *
 * Files in the output folder:
 *   energy.csv            one line per log interval (CSV, header first), appended in whole lines
 *   snapshot_NNNNN.hdf5   snapshots every snapshot_every time units and at the end, in RunOptions::format: HDF5
 *   (or .tipsy)           (GADGET-4 layout, core/files/hdf5_snapshot.hpp: positions, velocities, masses,
 *                         potentials, accelerations, the run's options, banyan's version and the units) or standard
 *                         big-endian tipsy (potentials); particle i of the input is particle i of every snapshot
 *                         (and has ParticleID i: an input file's own ids are not carried)
 *   checkpoint.bin        the exact device state and the run's bookkeeping (every checkpoint_every time units, at
 *                         the end and when stopped), enough to continue bit for bit
 * Snapshots and checkpoints are written to a temporary name and renamed, so a run killed at any moment leaves only
 * whole files. A restart truncates energy.csv to its length at the checkpoint, and the steps it repeats write the
 * same lines and snapshots again (every phase is deterministic on one device and backend).
 */
#pragma once

#include "core/device/backend.hpp"
#include "core/files/snapshot.hpp"
#include "core/parallel/comm.hpp"
#include "core/simulation/run_options.hpp"
#include "core/simulation/simulation.hpp"

#include <csignal>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

namespace banyan {

/// One line of the energy log.
struct RunRecord {
    std::uint64_t step = 0;
    double time = 0;
    Energies energies;
    double de = 0;               ///< (E0 - E) / E0, the paper's relative energy error
    double max_de = 0;           ///< the largest |de| so far
    double centre_distance = -1; ///< mergers: distance of the two central particles or black holes (-1 otherwise)
};

struct RunHooks {
    std::function<void(const RunRecord&)> on_log;         ///< after each line of the energy log
    std::function<void()> on_step;                        ///< after each step (and its outputs)
    std::function<void(const std::string& path)> on_file; ///< after each snapshot or checkpoint
};

/// Where a run's outputs go: files in its output folder (`banyan run`), or nowhere (the Python module's
/// Simulation, which asks for states, energies and checkpoints itself).
enum class RunOutputs { files, none };

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
    RunOutputs outputs = RunOutputs::files;
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
    RunOutputs outputs() const noexcept { return outputs_; }

private:
    friend RunPlan plan_run(RunRequest request, const Comm& comm);
    friend class Run;
    RunOptions options_;
    std::optional<Snapshot> input_;
    std::optional<DeviceParticles> device_; // or particles on the device
    Particles particles_;                   // input_ in the device's layout (converted once)
    std::optional<std::size_t> first_row_;  // over ranks: input_ holds this rank's rows of the file, from here
    FileCounts whole_;                      // the counts of the whole input
    RunOutputs outputs_ = RunOutputs::files;
};

/// Checks a request once, before any device is opened: the options (RunOptions::check, in the request's spelling),
/// the input file read (HDF5 or tipsy) or the given particles, the file's units taken (adopt_units) and, with
/// eps_from_file, its softening; then the particles (check_initial_conditions) and, with RunOutputs::files, the
/// output folder (created; it must not hold a run). Throws UsageError naming the first problem.
RunPlan plan_run(RunRequest request, const Comm& comm = Comm::world());

/// The one run engine: the CLI (`banyan run`) and the Python module's Simulation both drive it.
class Run {
public:
    /// Starts a new run from @p plan on @p be, over the ranks of @p comm: generated initial conditions are made
    /// now; first forces, then the outputs of step 0 (log line, snapshot 0, checkpoint).
    Run(Backend& be, RunPlan plan, RunHooks hooks = {}, const Comm& comm = Comm::world());
    /// Continues the run whose checkpoint is @p path (a checkpoint file, or a run folder holding checkpoint.bin;
    /// with RunOutputs::files a folder, which becomes the output folder); @p t_end, when given, replaces the stored
    /// end time (to extend a run).
    static std::unique_ptr<Run> resume(Backend& be, const std::string& path, std::optional<double> t_end,
                                       RunHooks hooks = {}, RunOutputs outputs = RunOutputs::files,
                                       const Comm& comm = Comm::world());

    enum class Outcome { finished, stopped };
    /// Steps until the end time, or until *stop is nonzero (checked between steps; then a checkpoint is written).
    /// Energies and the state are checked to be finite at every log line and before every snapshot and checkpoint:
    /// a run whose numbers went NaN or infinite stops with a NumericalError, its last good outputs untouched.
    Outcome run(const volatile std::sig_atomic_t* stop = nullptr);
    /// One step and the outputs due after it (a line of the energy log every options().log_every steps and at the
    /// end, snapshots and checkpoints on their time grids): what run() repeats.
    void step();
    /// Energies now: a line of the energy log (with RunOutputs::files), e0, dE/E and the largest |dE/E| updated.
    const RunRecord& record();
    /// Moves the end time to @p t_end (the step count to it on the run's time grid).
    void set_end(double t_end);
    /// Writes a checkpoint of the run as it is now to @p path (the Python module's save; Run's own checkpoints go
    /// to checkpoint_path()).
    void save(const std::string& path);
    /// Writes a snapshot of the run as it is now to @p path in @p format (as the run's own snapshots; collective
    /// over ranks). The Python module's write_snapshot; the run's own go on its time grid.
    void write_snapshot(const std::string& path, SnapshotFormat format);
    /// One rank: the particles now in input order (positions, velocities, masses, potentials, with @p with_acc the
    /// accelerations) with the input's fields, in its units: what a snapshot holds. Valid until the next call.
    const Snapshot& snapshot(bool with_acc = true);

    const RunOptions& options() const noexcept { return opt_; }
    /// The fields of the input's rows that never change (over several ranks this rank's rows, on one rank all):
    /// counts by type, eps, gas and star fields, and the input's own ids (empty: none, the index in the input).
    const Snapshot& fields() const noexcept { return template_; }
    Simulation& simulation() noexcept { return *sim_; }
    const Simulation& simulation() const noexcept { return *sim_; }
    std::uint64_t step_count() const noexcept { return sim_->steps(); }
    std::uint64_t end_step() const noexcept { return end_step_; }
    const RunRecord& last_record() const noexcept { return last_; }
    double e0() const noexcept { return e0_; }
    double max_de() const noexcept { return max_de_; }
    /// Steps taken in this process, wall seconds they took (outputs included), and seconds spent writing outputs.
    std::uint64_t session_steps() const noexcept { return session_steps_; }
    double session_seconds() const noexcept { return session_seconds_; }
    double output_seconds() const noexcept { return output_seconds_; }
    std::string checkpoint_path() const;
    std::string log_path() const;
    /// This rank's checkpoint file: checkpoint_path() on rank 0 (and on one rank), checkpoint.bin.rankR on rank R.
    std::string rank_checkpoint_path() const;

private:
    Run(Backend& be, const RunOptions& options, RunHooks hooks, RunOutputs outputs, const Comm& comm);
    bool files() const noexcept { return outputs_ == RunOutputs::files; }
    /// What survives a failure now: the last checkpoint and the outputs up to it, or that none was written yet.
    std::string kept_outputs() const;
    /// Throws NumericalError naming the step, the time, @p what went non-finite and the last good checkpoint.
    [[noreturn]] void fail_non_finite(const std::string& what) const;
    /// fail_non_finite at the first particle with a non-finite value; @p ids maps an index to the particle's index
    /// in the input (empty: the same).
    void check_state(const std::vector<bn_f4>& pos, const std::vector<bn_f4>& vel, const std::vector<bn_f4>& acc,
                     const std::vector<bn_u32>& ids) const;
    void append_log(const std::string& text);
    void write_snapshot();
    void write_checkpoint();
    /// The checkpoint's text block and state, as write_checkpoint and save write them.
    std::string checkpoint_text_now(const SimulationState& st) const;
    bool tracked() const noexcept { return tracked_pair(opt_).has_value(); }
    /// Whether this rank writes the energy log (rank 0; every rank forms the same lines).
    bool writes_log() const;

    Backend& be_;
    const Comm& comm_;
    RunOptions opt_;
    RunHooks hooks_;
    RunOutputs outputs_;
    std::unique_ptr<Simulation> sim_;
    // The fields of the input that the simulation does not change: all of them on one rank; over several, those of
    // this rank's rows [r N / P, (r + 1) N / P), the block it writes of every snapshot (none for generated
    // particles, whose softening is snapshot_eps_).
    Snapshot template_;
    FileCounts whole_;       // the particles of each kind of the whole input
    float snapshot_eps_ = 0; // the softening snapshots give every particle over several ranks
    std::uint64_t end_step_ = 0;
    double e0_ = 0, max_de_ = 0;
    std::uint64_t next_snapshot_ = 0, next_checkpoint_ = 0; // indices on the time grids
    std::uint64_t snapshots_written_ = 0;                   // the number of the next snapshot file
    std::optional<std::uint64_t> last_checkpoint_step_;     // the step of the checkpoint on disk, if any
    std::uint64_t log_bytes_ = 0;
    RunRecord last_;
    std::uint64_t session_steps_ = 0;
    double session_seconds_ = 0, output_seconds_ = 0;
};

/// What a run keeps of its progress beside the options and the device state: its checkpoint's bookkeeping.
struct RunProgress {
    double e0 = 0, max_de = 0;           ///< the energy at the start, the largest |dE/E| so far
    std::uint64_t next_snapshot = 1;     ///< the index of the next snapshot on its time grid
    std::uint64_t snapshots_written = 0; ///< the number of the next snapshot file
    std::uint64_t next_checkpoint = 1;   ///< the index of the next checkpoint on its time grid
    std::uint64_t log_bytes = 0;         ///< the length of energy.csv at the checkpoint
    RunRecord last;                      ///< the last line of the energy log
};

/// The text block of a checkpoint (checkpoint.hpp) of a run with @p options at @p state: what Run writes and
/// Run::resume reads back, and what the Python module's Simulation.save writes so that `banyan run --restart`
/// continues it. @p types gives the counts of GADGET types 2, 3, 5 of the whole input (n_type2 ...). Over several
/// ranks Run adds the ranks' lines.
std::string checkpoint_text(const RunOptions& options, const SimulationState& state, const RunProgress& progress,
                            const Backend& be, const FileCounts& types);

/// Creates @p dir if needed and checks that it is writable; with @p fresh, refuses a folder that holds a
/// checkpoint (a run to continue with --restart, not to overwrite). Throws UsageError.
void prepare_output_dir(const std::string& dir, bool fresh);

/// The device the checkpoint in @p dir was written on, in device_label's form (core/device/devices.hpp), read from its
/// header alone: a restart picks the same device by default, where a continuation is bit for bit.
std::string checkpoint_device(const std::string& dir);

} // namespace banyan
