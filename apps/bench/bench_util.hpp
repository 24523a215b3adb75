/**
 * @file bench_util.hpp
 * @brief What every benchmark needs: device-event timing (warm-up, then timed repetitions, median), a plain
 *        fixed-width table printer and a small JSON writer (files are written with core/files/atomic_file.hpp).
 */
#pragma once

#include "core/device/backend.hpp"
#include "core/gravity/forces.hpp"
#include "core/tree/octree.hpp"

#include <cstddef>
#include <cstdio>
#include <exception>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace banyan::cli {
class Options;
}

namespace banyan::bench {

/// Device times of the timed repetitions of one operation, in milliseconds.
struct Timing {
    double median_ms = 0;
    double min_ms = 0;
    double max_ms = 0;
    int reps = 0;
};

/// The median of @p v (the mean of the two middle values for an even count); 0 for an empty @p v.
double median(std::vector<double> v);

/// Times @p run on @p be's command stream.
///
/// @p warmup untimed runs come first (program builds, scratch growth and first-touch costs land there), then
/// @p reps runs, each between two Backend::record() markers. The repetitions are issued back to back and read
/// once all are issued, so that the device stays busy and the host's launch latency hides behind device work;
/// @p before_each (optional) runs before every run, warm-up included, outside the markers (e.g. restoring an
/// input that @p run overwrites). Returns the median and the range of the @p reps device times.
/// @param warmup at least 1, so that nothing built on first use is ever timed.
Timing time_on_device(Backend& be, int warmup, int reps, const std::function<void()>& run,
                      const std::function<void()>& before_each = {});

/// One force evaluation timed as `bench forces` times it: a fresh tree and walk from unsorted particles, @p warmup
/// untimed evaluations, then the medians of @p reps device-event times of each phase.
struct ForceRow {
    std::size_t n = 0;
    double theta = 0;
    double tree_ms = 0, multipoles_ms = 0, walk_ms = 0, total_ms = 0;
    double pp = 0, pc = 0; ///< per particle
    std::size_t groups = 0, bytes = 0;
    int retries = 0;
    std::string error;

    double flops() const { return 23.0 * pp + 65.0 * pc; } ///< per particle
};

/// Times the tree build, multipoles and walk of @p pos (x, y, z, m; internal units) at @p theta (criterion
/// @p opening) and @p eps; with @p groups_per_unit nonzero, that many walk work-groups per compute unit. A failure
/// (out of memory, wrong forces) lands in the row's error, not in an exception.
ForceRow time_forces(Backend& be, const std::vector<bn_f4>& pos, double theta, Opening opening, float eps, int warmup,
                     int reps, unsigned groups_per_unit = 0);
/// As above with the relative criterion on top (alpha > 0; TreeForces::set_relative): @p acc_old holds the
/// previous accelerations in the tree order that a build of @p pos gives (every build of the same input gives the
/// same order).
ForceRow time_forces(Backend& be, const std::vector<bn_f4>& pos, double theta, Opening opening, float alpha,
                     const Buffer<bn_f4>* acc_old, float eps, int warmup, int reps, unsigned groups_per_unit = 0);

/// The relative criterion's previous accelerations for @p pos: one untimed walk at theta 0.5 (criterion
/// @p opening), |a| in .w, in the tree order that every build of @p pos gives.
Buffer<bn_f4> previous_accelerations(Backend& be, const std::vector<bn_f4>& pos, Opening opening, float eps);

/// Comma-separated opening criteria ("paper,bmax"); UsageError naming @p what for an unknown or empty item.
std::vector<Opening> opening_list(const std::string& s, std::string_view what);

/// What is wrong with the walk's results in a few cheap checks (a sample of its particles), or an empty string.
std::string sanity(const TreeForces& f, std::size_t n);

/// The particles of a snapshot file (HDF5 or tipsy, told apart by their first bytes) as (x, y, z, m), checked as
/// `banyan forces` checks them and brought into internal units (precision.hpp), so that any absolute scale is
/// served; @p eps (in the file's units) is converted with them. For `bench forces --in` and `accuracy --in`.
std::vector<bn_f4> file_particles(const std::string& path, double& eps);

/// Items per second, in millions, for @p n items in @p ms milliseconds (0 when @p ms is not positive).
double mega_per_s(std::size_t n, double ms);

/// The first line of @p e's message for a row of a benchmark table of @p n particles; std::bad_alloc, whose own
/// message names nothing, becomes "out of host memory for N particles".
std::string row_error(const std::exception& e, std::size_t n);

/// Runs @p measure, which fills in row @p r (a ForceRow or a row of its kind: n and error); what it throws becomes the
/// row's error (row_error), so that one failed row does not end the table.
template <class Row, class Measure> void measure_row(Row& r, Measure&& measure)
{
    try {
        measure();
    } catch (const std::exception& e) {
        r.error = row_error(e, r.n);
    }
}

/// The peak device memory of one benchmark row: frees the primitives' scratch and starts a new high-water mark on
/// construction; bytes() is the most held at once since, above what was held before (the row's own objects must
/// be created after this).
class PeakMemory {
public:
    explicit PeakMemory(Backend& be) : be_(be)
    {
        be_.release_scratch();
        be_.reset_peak();
        base_ = be_.memory().live;
    }
    std::size_t bytes() const noexcept { return be_.memory().peak - base_; }

private:
    Backend& be_;
    std::size_t base_ = 0;
};

/// An empty string when @p n particles (with velocities when @p velocities) are expected to fit on @p be, else the
/// row's error: how much they would need and how much the device has.
std::string fit_error(const Backend& be, std::size_t n, bool velocities);

/// @p v with three significant digits and no exponent (240, 23.1, 0.0123), so that a rate of a CPU is as readable
/// as that of a GPU.
std::string figure(double v);

/// A plain text table with fixed column widths, printed row by row as results come in (so that a long run
/// shows progress). A cell wider than its column widens that row only; the last column is never padded.
class Table {
public:
    struct Column {
        std::string title;
        int width;
        bool right = false; ///< right-aligned (numbers)
    };
    explicit Table(std::vector<Column> columns, std::FILE* out = stdout) : columns_(std::move(columns)), out_(out) {}

    /// The titles and a rule under them.
    void print_header() const;
    /// One row; missing trailing cells print empty. Flushes, so that progress shows at once.
    void print_row(const std::vector<std::string>& cells) const;
    /// A row of @p first cells, empty ones after them, and @p note in the last column (why a row has no figures).
    void print_note(std::vector<std::string> first, const std::string& note) const;

private:
    std::vector<Column> columns_;
    std::FILE* out_;
};

/// A column of a Table, @p width characters wide: right-aligned (numbers) or left-aligned (text).
inline Table::Column right(std::string title, int width)
{
    return {std::move(title), width, true};
}
inline Table::Column left(std::string title, int width)
{
    return {std::move(title), width, false};
}

/// Builds JSON text with two-space indentation. Calls must nest correctly (begin/end pairs; key() before each
/// value inside an object); misuse is a programming error and is not diagnosed.
class JsonWriter {
public:
    JsonWriter& begin_object() { return open('{'); }
    JsonWriter& end_object() { return close('}'); }
    JsonWriter& begin_array() { return open('['); }
    JsonWriter& end_array() { return close(']'); }
    JsonWriter& key(std::string_view k);
    JsonWriter& string(std::string_view s);
    /// A number in shortest round-trip form; NaN and infinities become null (JSON has no such numbers).
    JsonWriter& number(double v);
    JsonWriter& integer(long long v);
    JsonWriter& boolean(bool v);
    JsonWriter& null();

    /// The text so far (complete once every begin has its end).
    const std::string& text() const noexcept { return out_; }
    /// Ends every object and array still open; the text, complete.
    const std::string& finish();

private:
    void before_value();
    JsonWriter& open(char c);
    JsonWriter& close(char c);

    std::string out_;
    std::vector<bool> has_items_; // one per open object/array
    std::string closers_;         // one per open object/array: '}' or ']'
    bool after_key_ = false;
};

/// A benchmark's JSON report begun: an open object with "benchmark": @p name and "banyan_version"; the caller adds
/// its settings and results, then finish().
JsonWriter begin_report(std::string_view name);

/// "results": one object per row of @p rows (ForceRows or rows of their kind: n and error): "n", what @p setting(r)
/// writes (the row's setting beside n), then "error" for a failed row or what @p figures(r) writes.
template <class Row, class Setting, class Figures>
void write_results(JsonWriter& j, const std::vector<Row>& rows, Setting&& setting, Figures&& figures)
{
    j.key("results").begin_array();
    for (const Row& r : rows) {
        j.begin_object();
        j.key("n").integer(static_cast<long long>(r.n));
        setting(r);
        if (!r.error.empty())
            j.key("error").string(r.error);
        else
            figures(r);
        j.end_object();
    }
    j.end_array();
}

/// The --json FILE option of the benchmarks that write their results as JSON (write_report writes them).
void add_json_option(cli::Options& opt);

/// Writes @p text to @p path (temporary name, then renamed) and prints "wrote PATH".
void write_report(const std::string& path, const std::string& text);

} // namespace banyan::bench
