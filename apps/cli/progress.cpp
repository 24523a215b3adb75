/**
 * @file progress.cpp
 * @brief A run's progress for the user (progress.hpp).
 */
#include "apps/cli/progress.hpp"

#include "core/parallel/comm.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <unistd.h>

namespace banyan::cli {

bool live_terminal(std::FILE* f)
{
    return ::isatty(::fileno(f)) && !Comm::launched();
}

std::string bytes_text(double bytes)
{
    const char* units[] = {"bytes", "KiB", "MiB", "GiB", "TiB"};
    int k = 0;
    while (k < 4 && std::fabs(bytes) >= 1024)
        bytes /= 1024, ++k;
    if (k == 0) return fmt::format("{:.0f} bytes", bytes);
    return fmt::format("{:.3g} {}", bytes, units[k]);
}

std::string clock_text(double seconds)
{
    if (!(seconds >= 0) || !std::isfinite(seconds)) return "?";
    const auto s = static_cast<long long>(seconds + 0.5);
    return fmt::format("{}:{:02d}:{:02d}", s / 3600, (s / 60) % 60, s % 60);
}

Progress::Progress(bool quiet, std::FILE* out) : out_(out), quiet_(quiet), live_(!quiet && live_terminal(out)) {}

void Progress::attach(RunHooks& hooks)
{
    hooks.on_log = [this](const RunRecord&) {
        if (run_ && !quiet_) show();
    };
    hooks.on_step = [this]() {
        if (!run_ || quiet_) return;
        if (!first_done_) first_step();
        if (Clock::now() - last_shown_ >= (live_ ? std::chrono::milliseconds(200) : plain_every)) show();
    };
    // A block step of many substeps may take minutes.
    hooks.on_substep = [this]() {
        if (run_ && !quiet_ && Clock::now() - last_shown_ >= (live_ ? std::chrono::milliseconds(200) : plain_every))
            show();
    };
}

void Progress::follow(const Run& run)
{
    run_ = &run;
    last_shown_ = Clock::now();
    if (live_) show();
}

void Progress::finish()
{
    if (live_ && run_) fmt::print(out_, "\n");
    std::fflush(out_);
    run_ = nullptr; // nothing more from the hooks
}

std::string Progress::status(const Run& r)
{
    const std::uint64_t step = r.log_step();
    const double sps =
        r.session_steps() ? static_cast<double>(r.session_steps()) / std::max(r.session_seconds(), 1e-9) : 0.0;
    const double left = sps > 0 ? static_cast<double>(r.end_step() - std::min(step, r.end_step())) / sps : -1;
    std::string s = fmt::format("step {}/{}  t {:.4g}", step, r.end_step(), r.simulation().time());
    // dE/E is 0 by definition at the start: shown once a step has been logged, never as a perfect "+0.00e+00".
    const RunRecord& last = r.last_record();
    if (last.step > 0 || last.time != r.simulation().t_begin()) {
        s += fmt::format("  dE/E {:+.2e} (max {:.2e})", last.de, last.max_de);
        if (last.time != r.simulation().time()) s += fmt::format(" at t {:.4g}", last.time);
    }
    if (sps > 0)
        s += fmt::format("  {:.3g} particles/s  left {}", sps * static_cast<double>(r.simulation().total_size()),
                         clock_text(left));
    if (last.centre_distance >= 0) s += fmt::format("  centres {:.4g} apart", last.centre_distance);
    if (r.options().steps == "block") {
        const BlockStats& b = r.simulation().block_stats();
        s += fmt::format("  {}  {:.3g}x fewer forces", rung_text(b), shared_step_ratio(b));
    }
    return s;
}

void Progress::show()
{
    if (live_)
        fmt::print(out_, "\r\033[K{}", status(*run_));
    else
        fmt::print(out_, "{}\n", status(*run_));
    std::fflush(out_);
    last_shown_ = Clock::now();
}

void Progress::first_step()
{
    first_done_ = true;
    const Run& r = *run_;
    const double took = r.session_seconds();
    const std::uint64_t left = r.end_step() - std::min(r.log_step(), r.end_step());
    std::string text = fmt::format("first step: {:.3g} s", took);
    if (left)
        text += fmt::format("; the {} steps left to t = {:.6g} take about {} at that rate", left, r.options().t_end,
                            clock_text(took * static_cast<double>(left)));
    fmt::print(out_, "{}{}\n", live_ ? "\r\033[K" : "", text);
    if (live_) {
        show(); // the live line again, below
        return;
    }
    std::fflush(out_);          // into a file or a pipe now, not when the buffer fills
    last_shown_ = Clock::now(); // the next plain line at the next log interval, or in 10 s
}

} // namespace banyan::cli
