/**
 * @file run.hpp
 * @brief The one run engine, which `banyan run` and the Python module's Simulation both drive: the start from a
 *        plan (run_plan.hpp), the step loop, the energy log, snapshots in the order of the input and checkpoints on
 *        their time grids, into the run's outputs (outputs.hpp); checkpoints and restarts (run_checkpoints.cpp).
 *
 * Snapshots every snapshot_every time units and at the end, in RunOptions::format: HDF5 (GADGET-4 layout,
 * core/files/hdf5_snapshot.hpp: positions, velocities, masses, potentials, accelerations, the run's options,
 * banyan's version and the units) or standard big-endian tipsy (potentials); particle i of the input is particle i
 * of every snapshot, written by the collective writers (core/parallel/parallel_files.hpp) on one rank as on many.
 * Checkpoints: the exact device state and the run's bookkeeping (every checkpoint_every time units, at the end and
 * when stopped: between steps, or between the substeps of a block step with the substep reached), enough to
 * continue bit for bit. A restart cuts the energy log back to its length at the
 * checkpoint, and the steps it repeats write the same lines and snapshots again (every phase is deterministic on
 * one device and backend).
 */
#pragma once

#include "core/device/backend.hpp"
#include "core/files/snapshot.hpp"
#include "core/parallel/comm.hpp"
#include "core/simulation/outputs.hpp"
#include "core/simulation/run_options.hpp"
#include "core/simulation/run_plan.hpp"
#include "core/simulation/simulation.hpp"

#include <csignal>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

namespace banyan {

struct Checkpoint;

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
    std::function<void(const RunRecord&)> on_log; ///< after each line of the energy log
    std::function<void()> on_step;                ///< after each step (and its outputs)
    std::function<void()> on_substep; ///< block time steps: after each substep but a step's last (its progress)
    std::function<void(const std::string& path)> on_file; ///< after each snapshot or this rank's checkpoint file
};

/// The one run engine: the CLI (`banyan run`) and the Python module's Simulation both drive it.
class Run {
public:
    /// Starts a new run from @p plan on @p be, over the ranks of @p comm: generated initial conditions are made
    /// now; first forces, then the outputs of step 0 (log line, snapshot 0, checkpoint).
    Run(Backend& be, RunPlan plan, RunHooks hooks = {}, const Comm& comm = Comm::world());
    /// Continues the run whose checkpoint is @p path (a run folder holding checkpoint.bin, or with @p outputs that
    /// write nothing also a checkpoint file of any name); @p t_end, when given, replaces the stored end time (to
    /// extend a run). @p outputs empty: files in the folder @p path, the run's own.
    static std::unique_ptr<Run> resume(Backend& be, const std::string& path, std::optional<double> t_end,
                                       RunHooks hooks = {}, std::shared_ptr<RunOutputs> outputs = nullptr,
                                       const Comm& comm = Comm::world());

    enum class Outcome { finished, stopped };
    /// Steps until the end time (exactly: the step that passes it is cut short there, Simulation::step), or until
    /// *stop is nonzero on any rank: checked between steps and, with block time
    /// steps, between substeps (a step of 2^16 substeps can take minutes, more than a batch system's grace period
    /// after SIGTERM); then a checkpoint is written, from which a restart continues bit for bit (mid-step, the
    /// checkpoint holds the substep reached: SimulationState::tick). Energies and the state are checked to be
    /// finite at every log line and before every snapshot and checkpoint: a run whose numbers went NaN or infinite
    /// stops with a NumericalError, its last good outputs untouched.
    Outcome run(const volatile std::sig_atomic_t* stop = nullptr);
    /// One step (or the rest of one a checkpoint paused or a cut began) and the outputs due after it (a line of the
    /// energy log every options().log_every steps and at the end, snapshots at their times, checkpoints on their
    /// time grid): what run() repeats. A step inside which the end time or (where the outputs write snapshots) a
    /// snapshot's time lies is cut short there (Simulation::step), so that the run ends, and its snapshots are
    /// written, at the times asked; the next step goes on to the grid point. With block time steps it pauses
    /// between substeps when *stop is nonzero on any rank, and returns false (no outputs; run() then writes the
    /// checkpoint).
    bool step(const volatile std::sig_atomic_t* stop = nullptr);
    /// Whether the run is at its end time (tick() 0 and the time reached, to rounding: a time within 1e-9 of a
    /// step of a grid point counts as it, as steps_between counts).
    bool finished() const;
    /// Whether time @p t is reached: tick() 0, and the time at or past it to the same rounding.
    bool reached(double t) const;
    /// Energies now: a line of the energy log (where the outputs keep one), e0, dE/E and the largest |dE/E| updated.
    const RunRecord& record();
    /// Energies now as a line of the energy log would give them (dE/E against e0, the largest |dE/E| with this one),
    /// without writing one or changing the run's bookkeeping: the state a stopped run is in. Collective.
    RunRecord measure();
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
    /// Whole steps of dt done (Simulation::steps).
    std::uint64_t step_count() const noexcept { return sim_->steps(); }
    /// The step the run is in, as the energy log and the progress count it: step_count(), plus 1 off the grid (a
    /// step cut short at an output or end time is that step, and so is its rest to the grid point).
    std::uint64_t log_step() const noexcept;
    std::uint64_t end_step() const noexcept { return end_step_; }
    const RunRecord& last_record() const noexcept { return last_; }
    double e0() const noexcept { return e0_; }
    double max_de() const noexcept { return max_de_; }
    /// Steps taken in this process, wall seconds they took (outputs included), and seconds spent writing outputs.
    std::uint64_t session_steps() const noexcept { return session_steps_; }
    double session_seconds() const noexcept { return session_seconds_; }
    double output_seconds() const noexcept { return output_seconds_; }

private:
    struct Initial;
    Run(Backend& be, const RunOptions& options, RunHooks hooks, std::shared_ptr<RunOutputs> outputs, const Comm& comm);
    /// The initial particles of @p plan: taken from it, or made from the model (only this rank's share over several
    /// ranks) and checked (check_input).
    Initial initial_particles(RunPlan& plan) const;
    /// Keeps the fields of the input's rows that never change (template_, whole_, snapshot_eps_) and starts the
    /// simulation from @p ic on the device.
    void start(RunPlan& plan, Initial ic);
    /// Step 0's outputs: a fresh log, its first line, the first snapshot and a checkpoint.
    void first_outputs();
    /// From checkpoint @p c (of @p ranks ranks; @p other_ranks: cut anew for this run's): the fields of the input's
    /// rows, the counts, snapshot_eps_ and the run's bookkeeping (energies, time grids, log length).
    void restore_bookkeeping(Checkpoint& c, std::uint64_t ranks, bool other_ranks, const std::string& path,
                             const std::string& dir);
    /// The time of snapshot @p k of the run's snapshot times (k from 1: on the grid of snapshot_every from the start,
    /// or the list snapshot_times), or nothing.
    std::optional<double> snapshot_time(std::uint64_t k) const;
    /// Moves next_snapshot_ past every snapshot time reached; returns whether one was.
    bool pass_snapshot_times();
    /// Where the next step is cut short: the end time, or the next snapshot's where snapshots are written, when it
    /// lies inside that step off the grid; nothing otherwise.
    std::optional<double> cut_time() const;
    /// What survives a failure now: the last checkpoint and the outputs up to it, or that none was written yet.
    std::string kept_outputs() const;
    /// Throws NumericalError naming the step, the time, @p what went non-finite and the last good checkpoint.
    [[noreturn]] void fail_non_finite(const std::string& what) const;
    /// fail_non_finite at the first particle with a non-finite value; @p ids maps an index to the particle's index
    /// in the input (empty: the same).
    void check_state(const std::vector<bn_f4>& pos, const std::vector<bn_f4>& vel, const std::vector<bn_f4>& acc,
                     const std::vector<std::uint64_t>& ids) const;
    /// The line of the energy log for @p r (with the header first in a new log).
    std::string log_line(const RunRecord& r) const;
    void write_snapshot();
    void write_checkpoint();
    /// The checkpoint's text block and state, as write_checkpoint and save write them (over ranks into the set of
    /// @p slot).
    std::string checkpoint_text_now(const SimulationState& st, const std::string& slot) const;
    bool tracked() const noexcept { return tracked_pair(opt_).has_value(); }

    Backend& be_;
    const Comm& comm_;
    RunOptions opt_;
    RunHooks hooks_;
    std::shared_ptr<RunOutputs> outputs_;
    std::unique_ptr<Simulation> sim_;
    // The fields of the input that the simulation does not change: all of them on one rank; over several, those of
    // this rank's rows [r N / P, (r + 1) N / P), the block it writes of every snapshot (none for generated
    // particles, whose softening is snapshot_eps_).
    Snapshot template_;
    FileCounts whole_;       // the particles of each kind of the whole input
    float snapshot_eps_ = 0; // the softening snapshots give every particle over several ranks
    std::uint64_t end_step_ = 0;
    double e0_ = 0, max_de_ = 0;
    std::uint64_t next_snapshot_ = 0, next_checkpoint_ = 0;           // indices on the time grids
    std::uint64_t snapshots_written_ = 0;                             // the number of the next snapshot file
    std::optional<std::pair<std::uint64_t, double>> last_checkpoint_; // the step and time of the checkpoint on disk
    std::string checkpoint_slot_; // the slot of the set on disk ("a", "b"; empty: none, or of a release before slots)
    std::uint64_t log_bytes_ = 0;
    RunRecord last_;
    std::uint64_t session_steps_ = 0;
    double session_seconds_ = 0, output_seconds_ = 0;
};

/// What a run keeps of its progress beside the options and the device state: its checkpoint's bookkeeping.
struct RunProgress {
    double e0 = 0, max_de = 0;           ///< the energy at the start, the largest |dE/E| so far
    std::uint64_t next_snapshot = 1;     ///< the index of the next snapshot time (from 1: Run::snapshot_time)
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

/// The device the checkpoint in @p dir was written on, in device_label's form (core/device/devices.hpp), read from its
/// header alone: a restart picks the same device by default, where a continuation is bit for bit.
std::string checkpoint_device(const std::string& dir);

} // namespace banyan
