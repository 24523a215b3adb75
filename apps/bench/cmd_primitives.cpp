/**
 * @file cmd_primitives.cpp
 * @brief `banyan bench primitives`: times our sort, exclusive scan and compaction against the vendor's (CUB on
 *        CUDA) and Boost.Compute's sort_by_key (OpenCL), over a sweep of sizes, on one device or on all.
 *
 * Every figure is the median of device-event times taken after untimed warm-up runs; inputs are random and made
 * once per size (the same for every implementation and device); each implementation's result is checked on the
 * CPU once per size, and a wrong result posts no time.
 */
#include "apps/bench/bench_util.hpp"
#include "apps/cli/cli.hpp"
#include "core/error.hpp"
#include "core/numbers.hpp"

#ifdef BANYAN_HAVE_OPENCL
#include "backend_opencl/boost_reference.hpp"
#endif

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <optional>
#include <set>

namespace banyan::cli {

namespace {

struct Settings {
    int min_log2 = 16;
    std::optional<int> max_log2; ///< unset: 26 on a GPU, 20 on a CPU
    int reps = 20;
    int warmup = 2;
    int boost_max_log2 = 24;
    int boost_reps = 5;
    std::set<std::string> primitives;
    std::size_t work_group = 0; ///< 0: the backend's default
};

/// One line of the report: one implementation of one primitive at one size.
struct Result {
    std::string primitive;      ///< "sort", "scan", "compact"
    std::string implementation; ///< "ours", "CUB", "Boost.Compute"
    bool reference = false;
    bool external = false; ///< not run through our Backend (Boost.Compute): a failure is n/a, not ours
    std::size_t n = 0;
    std::string unit; ///< what n counts: "pairs" or "items"
    std::optional<bench::Timing> timing;
    std::optional<double> ours_over_ref; ///< on reference rows: our rate / this rate
    std::string error;                   ///< why there is no timing (exception text or wrong result)
    bool failed = false;                 ///< a failure of ours (not Boost.Compute's, not out of memory for inputs)
    std::string note;                    ///< extra facts (e.g. the algorithm Boost.Compute picked)
};

struct DeviceReport {
    DeviceInfo info;
    std::size_t work_group = 0;
    std::vector<Result> results;
};

// ---- Inputs and CPU checks --------------------------------------------------------------------------------

/// A small, fast, seedable generator (splitmix64): inputs of 2^26 items are made in well under a second.
struct SplitMix {
    std::uint64_t s;
    std::uint64_t operator()()
    {
        std::uint64_t z = (s += 0x9e3779b97f4a7c15ull);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        return z ^ (z >> 31);
    }
};

/// The same inputs for every device and implementation: the seed depends only on primitive and size.
SplitMix input_rng(int primitive, int log2)
{
    return SplitMix{0x62616e79616eull + 1000ull * primitive + log2};
}

/// Checks that (keys_out, values_out) is (keys_in, iota) sorted by key: every value is an input index used
/// once, carries its own key, and keys do not decrease; when @p stable, equal keys keep input order.
/// Returns what is wrong, or an empty string.
std::string check_sort(const std::vector<bn_u64>& keys_in, const std::vector<bn_u64>& keys_out,
                       const std::vector<bn_u32>& values_out, bool stable)
{
    const std::size_t n = keys_in.size();
    std::vector<bool> seen(n, false);
    for (std::size_t j = 0; j < n; ++j) {
        const bn_u32 v = values_out[j];
        if (v >= n || seen[v]) return fmt::format("value {} at {} is not an unused input index", v, j);
        seen[v] = true;
        if (keys_out[j] != keys_in[v]) return fmt::format("key at {} does not belong to its value {}", j, v);
        if (j && keys_out[j - 1] > keys_out[j]) return fmt::format("keys decrease at {}", j);
        if (stable && j && keys_out[j - 1] == keys_out[j] && values_out[j - 1] > v)
            return fmt::format("equal keys out of input order at {} (not stable)", j);
    }
    return {};
}

template <class T> std::string check_equal(const std::vector<T>& want, const std::vector<T>& got, std::string_view what)
{
    for (std::size_t i = 0; i < want.size(); ++i)
        if (got[i] != want[i]) return fmt::format("{}[{}] = {}, expected {}", what, i, got[i], want[i]);
    return {};
}

std::string first_line(std::string s)
{
    if (auto nl = s.find('\n'); nl != std::string::npos) s.resize(nl);
    return s;
}

// ---- Running and reporting --------------------------------------------------------------------------------

/// Runs the timing of one implementation and its CPU check, turning any failure into Result::error.
/// @param poison fills the outputs with a sentinel (before warm-up), so a kernel that writes nothing shows.
void measure(Backend& be, Result& r, int warmup, int reps, const std::function<void()>& poison,
             const std::function<void()>& run, const std::function<void()>& before_each,
             const std::function<std::string()>& check)
{
    try {
        if (poison) poison();
        const bench::Timing t = bench::time_on_device(be, warmup, reps, run, before_each);
        if (std::string bad = check(); !bad.empty())
            r.error = "wrong result: " + bad;
        else
            r.timing = t;
    } catch (const std::exception& e) {
        r.error = first_line(e.what());
    }
    r.failed = !r.timing && !r.external;
}

class Reporter {
public:
    Reporter()
        : table_({bench::left("primitive", 9), bench::left("impl", 13), bench::right("n", 5),
                  bench::right("median ms", 11), bench::right("rate", 18), bench::right("ours/ref", 8),
                  bench::left("note", 0)})
    {
    }

    void device(const DeviceReport& d)
    {
        const DeviceInfo& i = d.info;
        fmt::print("device: {} #{}  {}  ({}; {}; {}, {} compute units; work-group {})\n", i.backend, i.index, i.name,
                   i.version, i.vendor, i.gpu ? "GPU" : "CPU", i.compute_units, d.work_group);
        table_.print_header();
    }

    /// Prints @p r; returns false when it is a failure of ours (our kernels or our use of the vendor library).
    bool row(const Result& r)
    {
        std::string ms, rate, ratio, note = r.note;
        if (r.timing) {
            ms = fmt::format("{:.4f}", r.timing->median_ms);
            rate = fmt::format("{} M{}/s", bench::figure(bench::mega_per_s(r.n, r.timing->median_ms)), r.unit);
            if (r.ours_over_ref) ratio = fmt::format("{:.2f}x", *r.ours_over_ref);
        } else {
            ms = r.failed ? "FAILED" : "n/a";
            note = r.error + (note.empty() ? "" : " [" + note + "]");
        }
        int log2 = 0;
        while ((std::size_t{1} << log2) < r.n)
            ++log2;
        table_.print_row({r.primitive, r.implementation, fmt::format("2^{}", log2), ms, rate, ratio, note});
        return !r.failed;
    }

private:
    bench::Table table_;
};

/// Implementations of a primitive on @p be other than Boost.Compute: ours, and CUB on CUDA.
struct Impl {
    std::string name;
    bool vendor;
};
std::vector<Impl> impls(const Backend& be)
{
    if (be.info().backend == "cuda") return {{"ours", false}, {"CUB", true}};
    return {{"ours", false}};
}

Result make_result(std::string primitive, const Impl& impl, std::size_t n, std::string unit)
{
    Result r;
    r.primitive = std::move(primitive);
    r.implementation = impl.name;
    r.reference = impl.vendor;
    r.n = n;
    r.unit = std::move(unit);
    return r;
}

/// Records @p r (with the ratio against our row when @p r is a reference), prints it, and notes failures.
struct Collector {
    DeviceReport& report;
    Reporter& out;
    bool& all_ok;
    std::optional<double> ours_ms;

    void add(Result r)
    {
        if (!r.reference) ours_ms = r.timing ? std::optional<double>(r.timing->median_ms) : std::nullopt;
        if (r.reference && r.timing && ours_ms && *ours_ms > 0) r.ours_over_ref = r.timing->median_ms / *ours_ms;
        if (!out.row(r)) all_ok = false;
        report.results.push_back(std::move(r));
    }
};

/// Times @p run with every implementation of @p be (ours; on CUDA also CUB) and records each row; when the inputs
/// did not fit (@p alloc_error set), records that instead.
void time_implementations(Backend& be, const Settings& s, Collector& c, const char* primitive, const char* unit,
                          std::size_t n, const std::string& alloc_error, const std::function<void()>& poison,
                          const std::function<void()>& run, const std::function<std::string()>& check)
{
    for (const Impl& impl : impls(be)) {
        Result r = make_result(primitive, impl, n, unit);
        if (alloc_error.empty()) {
            be.set_vendor_primitives(impl.vendor);
            measure(be, r, s.warmup, s.reps, poison, run, {}, check);
            be.set_vendor_primitives(true);
        } else {
            r.error = alloc_error;
        }
        c.add(std::move(r));
    }
}

void bench_sort(Backend& be, const Settings& s, int log2, Collector& c)
{
    const std::size_t n = std::size_t{1} << log2;
    // 63 random key bits (what the tree's Morton keys use), values the input indices (what the tree sorts).
    std::vector<bn_u64> keys(n);
    std::vector<bn_u32> values(n);
    SplitMix rng = input_rng(0, log2);
    for (std::size_t i = 0; i < n; ++i) {
        keys[i] = rng() >> 1;
        values[i] = static_cast<bn_u32>(i);
    }
    const bool boost_wanted = be.info().backend == "opencl" && log2 <= s.boost_max_log2;
    {
        Buffer<bn_u64> k_in, k_out;
        Buffer<bn_u32> v_in, v_out;
        std::string alloc_error;
        try {
            k_in = be.upload<bn_u64>(keys, "bench: keys in");
            v_in = be.upload<bn_u32>(values, "bench: values in");
            k_out = be.alloc<bn_u64>(n, "bench: keys out");
            v_out = be.alloc<bn_u32>(n, "bench: values out");
        } catch (const std::exception& e) {
            alloc_error = "inputs do not fit: " + first_line(e.what());
        }
        time_implementations(
            be, s, c, "sort", "pairs", n, alloc_error,
            [&] {
                k_out.fill(~bn_u64{0});
                v_out.fill(~bn_u32{0});
            },
            [&] { be.sort_pairs(k_in, v_in, k_out, v_out, n, 0, 63); },
            [&] { return check_sort(keys, k_out.download(), v_out.download(), true); });
    } // frees our buffers before Boost.Compute allocates its own
#ifdef BANYAN_HAVE_OPENCL
    if (boost_wanted) {
        Result r = make_result("sort", {"Boost.Compute", false}, n, "pairs");
        r.reference = true;
        r.external = true;
        try {
            opencl::BoostComputeSort bs(be, keys, values);
            r.note = bs.algorithm();
            // One warm-up run builds Boost.Compute's kernels; its sort is slow, so fewer repetitions.
            measure(
                be, r, 1, std::min(s.reps, s.boost_reps), {}, [&] { bs.sort(); }, [&] { bs.restore(); },
                [&] {
                    std::vector<bn_u64> k;
                    std::vector<bn_u32> v;
                    bs.download(k, v);
                    return check_sort(keys, k, v, false);
                });
        } catch (const std::exception& e) {
            r.error = first_line(e.what());
        }
        c.add(std::move(r));
    }
#else
    (void)boost_wanted;
#endif
}

void bench_scan(Backend& be, const Settings& s, int log2, Collector& c)
{
    const std::size_t n = std::size_t{1} << log2;
    std::vector<bn_u32> in(n), want(n);
    SplitMix rng = input_rng(1, log2);
    bn_u32 sum = 0;
    for (std::size_t i = 0; i < n; ++i) {
        in[i] = static_cast<bn_u32>(rng() % 1000) + 1; // counts, as the tree scans; the sum wraps past 2^22 items
        want[i] = sum;
        sum += in[i];
    }
    Buffer<bn_u32> d_in, d_out;
    std::string alloc_error;
    try {
        d_in = be.upload<bn_u32>(in, "bench: scan in");
        d_out = be.alloc<bn_u32>(n, "bench: scan out");
    } catch (const std::exception& e) {
        alloc_error = "inputs do not fit: " + first_line(e.what());
    }
    time_implementations(
        be, s, c, "scan", "items", n, alloc_error, [&] { d_out.fill(0xdeadbeefu); },
        [&] { be.exclusive_scan(d_in, d_out, n); }, [&] { return check_equal(want, d_out.download(), "out"); });
}

void bench_compact(Backend& be, const Settings& s, int log2, Collector& c)
{
    const std::size_t n = std::size_t{1} << log2;
    std::vector<bn_u32> in(n), flags(n), want;
    want.reserve(n / 2 + n / 8);
    SplitMix rng = input_rng(2, log2);
    for (std::size_t i = 0; i < n; ++i) {
        const std::uint64_t r = rng();
        in[i] = static_cast<bn_u32>(r >> 32);
        flags[i] = static_cast<bn_u32>(r & 1); // about half kept, in no pattern
        if (flags[i]) want.push_back(in[i]);
    }
    Buffer<bn_u32> d_in, d_flags, d_out, d_count;
    std::string alloc_error;
    try {
        d_in = be.upload<bn_u32>(in, "bench: compact in");
        d_flags = be.upload<bn_u32>(flags, "bench: compact flags");
        d_out = be.alloc<bn_u32>(n, "bench: compact out");
        d_count = be.alloc<bn_u32>(1, "bench: compact count");
    } catch (const std::exception& e) {
        alloc_error = "inputs do not fit: " + first_line(e.what());
    }
    time_implementations(
        be, s, c, "compact", "items", n, alloc_error,
        [&] {
            d_out.fill(0xdeadbeefu);
            d_count.fill(0xffffffffu);
        },
        [&] { be.compact(d_in, d_flags, n, d_out, d_count); },
        [&]() -> std::string {
            const bn_u32 count = d_count.at(0);
            if (count != want.size()) return fmt::format("count {}, expected {}", count, want.size());
            return check_equal(want, d_out.download(want.size()), "out");
        });
}

/// Runs every selected primitive at every size on @p be; returns false when one of ours failed.
bool bench_device(Backend& be, const Settings& s, Reporter& out, DeviceReport& report)
{
    if (s.work_group && be.info().backend == "opencl") be.set_work_group_size(s.work_group);
    report.info = be.info();
    report.work_group = be.work_group_size();
    out.device(report);
    const int max_log2 = s.max_log2 ? *s.max_log2 : (be.info().gpu ? 26 : 20);
    bool all_ok = true;
    Collector c{report, out, all_ok, std::nullopt};
    // Sort, then scan, then compact, each over every size: a primitive's rows stay together.
    for (int log2 = s.min_log2; log2 <= max_log2 && s.primitives.count("sort"); ++log2)
        bench_sort(be, s, log2, c);
    for (int log2 = s.min_log2; log2 <= max_log2 && s.primitives.count("scan"); ++log2)
        bench_scan(be, s, log2, c);
    for (int log2 = s.min_log2; log2 <= max_log2 && s.primitives.count("compact"); ++log2)
        bench_compact(be, s, log2, c);
    return all_ok;
}

std::string json_report(const Settings& s, const std::vector<DeviceReport>& devices)
{
    bench::JsonWriter j = bench::begin_report("primitives");
    j.key("warmup").integer(s.warmup);
    j.key("reps").integer(s.reps);
    j.key("boost_reps").integer(std::min(s.reps, s.boost_reps));
    j.key("sort_bits").begin_array().integer(0).integer(63).end_array();
    j.key("devices").begin_array();
    for (const auto& d : devices) {
        j.begin_object();
        j.key("backend").string(d.info.backend);
        j.key("index").integer(d.info.index);
        j.key("name").string(d.info.name);
        j.key("vendor").string(d.info.vendor);
        j.key("version").string(d.info.version);
        j.key("gpu").boolean(d.info.gpu);
        j.key("compute_units").integer(d.info.compute_units);
        j.key("memory_bytes").integer(static_cast<long long>(d.info.memory_bytes));
        j.key("work_group").integer(static_cast<long long>(d.work_group));
        j.key("results").begin_array();
        for (const auto& r : d.results) {
            j.begin_object();
            j.key("primitive").string(r.primitive);
            j.key("implementation").string(r.implementation);
            j.key("reference").boolean(r.reference);
            j.key("n").integer(static_cast<long long>(r.n));
            j.key("unit").string(r.unit);
            j.key("status").string(r.timing ? "ok" : r.failed ? "failed" : "n/a");
            if (r.timing) {
                j.key("median_ms").number(r.timing->median_ms);
                j.key("min_ms").number(r.timing->min_ms);
                j.key("max_ms").number(r.timing->max_ms);
                j.key("reps").integer(r.timing->reps);
                j.key("rate_per_s").number(double(r.n) / (r.timing->median_ms * 1e-3));
            } else {
                j.key("median_ms").null();
            }
            if (r.ours_over_ref)
                j.key("ours_over_ref").number(*r.ours_over_ref);
            else
                j.key("ours_over_ref").null();
            if (r.error.empty())
                j.key("error").null();
            else
                j.key("error").string(r.error);
            if (!r.note.empty()) j.key("note").string(r.note);
            j.end_object();
        }
        j.end_array();
        j.end_object();
    }
    return j.finish();
}

} // namespace

int run_bench_primitives(const std::vector<std::string>& args)
{
    Options opt("bench primitives",
                "Time our sort (pairs/s: 64-bit keys with 63 random bits + 32-bit values, bits [0, 63)), exclusive\n"
                "scan (items/s, 32-bit) and compaction (items/s, 32-bit, about half the items kept) over sizes\n"
                "2^min .. 2^max, on one device or on all. Reference rows: CUB on CUDA (the same Backend with vendor\n"
                "primitives on), Boost.Compute's sort_by_key on OpenCL. Each figure is the median of --reps\n"
                "device-event timings after --warmup untimed runs; every result is checked on the CPU once per size\n"
                "(a wrong one prints FAILED and sets exit code 1). ours/ref = our rate / the reference's rate.\n\n"
                "examples:\n"
                "  banyan bench primitives\n"
                "  banyan bench primitives --backend all --primitives sort --max-log2 24");
    opt.value("backend", "auto|cuda|opencl|all",
              "backend (env BANYAN_BACKEND); auto: a CUDA GPU, else an OpenCL GPU, else a CPU;\n"
              "                               all: every device of every backend present, one after the other");
    opt.value("device", "N", "device index within the backend, as `banyan devices` lists it (env BANYAN_DEVICE)");
    opt.value("min-log2", "K", "smallest size, 2^K items", "16");
    opt.value("max-log2", "K", "largest size, 2^K items (default: 26 on a GPU, 20 on a CPU device)");
    opt.value("reps", "R", "timed repetitions per implementation and size; the median is reported", "20");
    opt.value("warmup", "W", "untimed runs first (program builds, scratch growth); at least 1", "2");
    opt.value("primitives", "LIST", "which primitives to time, comma-separated", "sort,scan,compact");
    opt.value("boost-max-log2", "K", "largest size for Boost.Compute's sort (it is slow)", "24");
    opt.value("boost-reps", "R", "timed repetitions for Boost.Compute's sort (at most --reps)", "5");
    opt.value("work-group", "N", "work-group size of our OpenCL kernels, 32|64|128|256 (default: 256)");
    bench::add_json_option(opt);
    if (!opt.parse(args)) return 0;

    Settings s;
    s.min_log2 = opt.integer_in("min-log2", 0, 30);
    if (opt.has("max-log2")) s.max_log2 = opt.integer_in("max-log2", s.min_log2, 30);
    s.reps = opt.integer_in("reps", 1, 100000);
    s.warmup = opt.integer_in("warmup", 1, 100000);
    s.boost_max_log2 = opt.integer_in("boost-max-log2", 0, 30);
    s.boost_reps = opt.integer_in("boost-reps", 1, 100000);
    for (const std::string& p : comma_items(opt.str("primitives"))) {
        if (p != "sort" && p != "scan" && p != "compact")
            throw UsageError(fmt::format("bench primitives: unknown primitive '{}' in --primitives (expected "
                                         "sort, scan, compact)",
                                         p));
        s.primitives.insert(p);
    }
    if (opt.has("work-group")) s.work_group = static_cast<std::size_t>(opt.integer_in("work-group", 32, 256));

    std::vector<std::unique_ptr<Backend>> backends;
    if (opt.str("backend") == "all") {
        if (opt.has("device")) throw UsageError("bench primitives: --device cannot be combined with --backend all");
        backends = open_all_devices();
        if (backends.empty()) throw UsageError("bench primitives: no device found on any backend");
    } else {
        backends.push_back(open_device(opt.device_request()));
    }
    if (s.work_group && backends.size() == 1 && backends[0]->info().backend != "opencl")
        throw UsageError("bench primitives: --work-group applies to OpenCL devices only");

    Reporter out;
    std::vector<DeviceReport> reports;
    bool all_ok = true;
    for (std::size_t i = 0; i < backends.size(); ++i) {
        if (i) fmt::print("\n");
        reports.emplace_back();
        if (!bench_device(*backends[i], s, out, reports.back())) all_ok = false;
    }
    if (opt.has("json")) {
        fmt::print("\n");
        bench::write_report(opt.str("json"), json_report(s, reports));
    }
    if (!all_ok) fmt::print(stderr, "bench primitives: some of our primitives failed or gave wrong results\n");
    return all_ok ? 0 : 1;
}

} // namespace banyan::cli
