/**
 * @file outputs.hpp
 * @brief Where a run's outputs go: files in its output folder (`banyan run`), or nowhere (the Python module's
 *        Simulation, which asks for states, energies and checkpoints itself). The run decides when an output is due
 *        (its time grids advance whatever the outputs); the outputs object decides where it goes and whether
 *        anything is written at all.
 *
 * Files in the output folder:
 *   energy.csv            one line per log interval (CSV, header first), appended in whole lines by rank 0
 *   snapshot_NNNNN.hdf5   snapshots (or .tipsy: the format's extension), written by every rank together
 *   checkpoint.bin        the checkpoint (over P ranks rank R > 0 writes checkpoint.bin.rankR.SLOT beside it, SLOT
 *                         a or b: two sets in turn, checkpoint.bin naming the one in use; see checkpoint.hpp)
 * Snapshots and checkpoints are written to a temporary name and renamed, so a kill leaves only whole files; a
 * checkpoint over ranks is replaced as a whole set, by the rename of checkpoint.bin last.
 */
#pragma once

#include "core/files/snapshot_file.hpp"
#include "core/parallel/comm.hpp"

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

namespace banyan {

class RunOutputs {
public:
    virtual ~RunOutputs() = default;
    /// Files in @p dir.
    static std::shared_ptr<RunOutputs> files(std::string dir);
    /// Nothing written.
    static std::shared_ptr<RunOutputs> none();

    /// Whether the run forms a line of the energy log at each log interval (without a log the front end asks for
    /// energies when it wants them).
    virtual bool logs() const noexcept = 0;
    /// Before a run starts (@p fresh) or continues in the folder: see prepare_output_dir. Throws UsageError.
    virtual void prepare(bool fresh) const = 0;
    /// Step 0 of a new run: empties an energy log left by an earlier attempt that wrote no checkpoint, and removes
    /// the leftovers of its interrupted writes.
    virtual void start_log(const Comm& comm) const = 0;
    /// A continued run: removes leftovers of interrupted writes and cuts the log back to @p log_bytes, its length at
    /// the checkpoint (the steps after it run again). Returns the length the log has now, the same on every rank.
    virtual std::uint64_t resume_log(std::uint64_t log_bytes, const Comm& comm) const = 0;
    /// Appends @p text (whole lines) to the log; rank 0 writes, every rank calls.
    virtual void append_log(const std::string& text, const Comm& comm) const = 0;
    /// Whether snapshots are written (the run cuts its steps short to reach their times only then).
    virtual bool writes_snapshots() const noexcept = 0;
    /// Where snapshot number @p number in @p format goes, or nothing.
    virtual std::optional<std::string> snapshot_path(std::uint64_t number, SnapshotFormat format) const = 0;
    /// Where this rank's file of the checkpoint set in @p slot goes (checkpoint.bin on rank 0, which names the set;
    /// checkpoint.bin.rankR.SLOT on rank R), or nothing.
    virtual std::optional<std::string> checkpoint_path(const Comm& comm, const std::string& slot) const = 0;
    /// Rank 0 (every rank calls): removes the checkpoint files of ranks beyond the set of @p ranks ranks in @p slot,
    /// the one checkpoint.bin names (right after it was renamed into place, and on a restart): the previous set,
    /// those of a run on more ranks that this one continues, those of a write a kill cut short.
    virtual void keep_checkpoint_set(const Comm& comm, std::uint64_t ranks, const std::string& slot) const = 0;
};

/// Creates @p dir if needed and checks that it is writable; with @p fresh, refuses a folder that holds a
/// checkpoint (a run to continue with --restart, not to overwrite); without, requires one. Throws UsageError.
void prepare_output_dir(const std::string& dir, bool fresh);

} // namespace banyan
