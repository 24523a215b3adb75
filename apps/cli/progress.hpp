/**
 * @file progress.hpp
 * @brief How a run of the engine (core/simulation/run.hpp) reports its progress to the user: a live line redrawn in
 *        place on a terminal the user sees, plain lines elsewhere (files, pipes, the ranks of an MPI launcher); the
 *        first step's time with an estimate of the whole run's, and a line at least every 10 s of wall time, so that
 *        a slow device is never silent for minutes. `banyan run` and `banyan bench galaxy` use it.
 */
#pragma once

#include "core/simulation/run.hpp"

#include <chrono>
#include <cstdio>
#include <string>

namespace banyan::cli {

/// Whether @p f is a terminal the user sees, where a line may be redrawn in place (carriage return, ESC[K): a
/// terminal, and the process not started by an MPI launcher (Comm::launched: Open MPI gives its ranks a
/// pseudo-terminal, whose output ends up in the launcher's pipes and files).
bool live_terminal(std::FILE* f);

/// @p bytes with the unit that shows the figure: "640 bytes", "218 KiB", "3.41 MiB", "12.1 GiB".
std::string bytes_text(double bytes);

/// @p seconds as h:mm:ss ("?" when not known).
std::string clock_text(double seconds);

/// The progress of a run: on a live terminal a line redrawn in place (at most five times a second, at each line of
/// the energy log and between the substeps of a long block step); elsewhere a line per log interval and at least
/// one every 10 s of wall time. Both say after the first step how long it took and about how long the run will.
/// Nothing when quiet.
class Progress {
public:
    /// Reports to @p out (live when live_terminal(out)), or nowhere when @p quiet.
    explicit Progress(bool quiet, std::FILE* out = stdout);

    /// Hooks that draw the progress of the run given to follow() (on_log, on_step, on_substep).
    void attach(RunHooks& hooks);
    /// Follows @p run from now on (its steps so far are not this session's).
    void follow(const Run& run);
    /// Ends the line redrawn in place; the hooks print nothing more.
    void finish();

    /// The status of @p run in a line: the step, the time, dE/E once a step logged one, the rate, the time left.
    static std::string status(const Run& run);

    /// Plain lines at least this often (wall time), where the line is not live.
    static constexpr std::chrono::seconds plain_every{10};

private:
    using Clock = std::chrono::steady_clock;
    /// The status, redrawn in place (live) or as a line of its own.
    void show();
    /// After the first step of the session: its time and the estimate of the rest.
    void first_step();

    std::FILE* out_;
    bool quiet_, live_;
    const Run* run_ = nullptr;
    bool first_done_ = false;
    Clock::time_point last_shown_ = Clock::now();
};

} // namespace banyan::cli
