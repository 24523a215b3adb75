/**
 * @file cmd_tree.cpp
 * @brief `banyan bench tree`: device time of each phase of the tree build (keys, sort, move, build, link, groups,
 *        multipoles, total) and the device memory in use, for Plummer spheres of 2^min .. 2^max particles.
 *
 * Each repetition builds from the generator's (unsorted) order: the particles are uploaded again before it,
 * outside the timing. Every figure is the median over the repetitions of device-event times, after untimed
 * warm-up builds (program builds and buffer growth land there). A cheap check of every build (root mass, groups
 * tile the particles) guards against timing a wrong result; the conformance suite checks the tree in full.
 */
#include "apps/bench/bench_util.hpp"
#include "apps/cli/cli.hpp"
#include "core/error.hpp"

#include "core/tree/octree.hpp"
#include "core/models/plummer.hpp"

#include <fmt/format.h>

#include <cmath>
#include <optional>

namespace banyan::cli {

namespace {

struct Row {
    std::size_t n = 0;
    TreeTimings median;
    std::size_t cells = 0, groups = 0, peak_bytes = 0;
    int depth = 0;
    std::string error;
};

/// The median of each phase over @p runs.
TreeTimings median_of(const std::vector<TreeTimings>& runs)
{
    TreeTimings m;
    auto pick = [&](double TreeTimings::*f) {
        std::vector<double> v;
        for (const auto& r : runs)
            v.push_back(r.*f);
        m.*f = bench::median(v);
    };
    for (auto f : {&TreeTimings::keys, &TreeTimings::sort, &TreeTimings::move, &TreeTimings::build, &TreeTimings::link,
                   &TreeTimings::groups, &TreeTimings::multipoles, &TreeTimings::total})
        pick(f);
    return m;
}

/// What is wrong with the tree in a few cheap checks, or an empty string.
std::string sanity(const Octree& t, double mass)
{
    if (t.cells() == 0 || t.groups() == 0) return "no cells or no groups";
    const bn_f4 root = t.cell_com().at(0);
    if (!(std::abs(root.w - mass) <= 1e-5 * mass)) return fmt::format("root mass {} instead of {}", root.w, mass);
    const std::size_t last = t.groups() - 1;
    if (t.group_first().at(last) + t.group_count().at(last) != t.size()) return "groups do not tile the particles";
    return {};
}

Row bench_size(Backend& be, int log2, int warmup, int reps, std::uint64_t seed)
{
    Row r;
    r.n = std::size_t{1} << log2;
    bench::measure_row(r, [&] {
        if (std::string why = bench::fit_error(be, r.n, false); !why.empty()) throw std::runtime_error(why);
        const Particles p = plummer(r.n, seed + static_cast<std::uint64_t>(log2));
        bench::PeakMemory peak(be); // a fresh tree per size: its peak is what one build needs
        Octree tree(be);
        double mass = 0;
        for (const auto& q : p.pos)
            mass += q.w;
        std::vector<TreeTimings> runs;
        for (int i = 0; i < warmup + reps; ++i) {
            tree.set_particles(p.pos);
            be.synchronize();
            TreeTimings t;
            tree.build(&t);
            if (i >= warmup) runs.push_back(t);
            if (i == 0 || i == warmup + reps - 1)
                if (std::string bad = sanity(tree, mass); !bad.empty()) throw std::runtime_error("wrong tree: " + bad);
        }
        r.median = median_of(runs);
        r.cells = tree.cells();
        r.groups = tree.groups();
        r.depth = tree.depth();
        r.peak_bytes = peak.bytes();
    });
    return r;
}

std::string json_report(const DeviceInfo& info, std::size_t wg, int warmup, int reps, const std::vector<Row>& rows)
{
    bench::JsonWriter j = bench::begin_report("tree");
    j.key("backend").string(info.backend);
    j.key("device").string(info.name);
    j.key("gpu").boolean(info.gpu);
    j.key("work_group").integer(static_cast<long long>(wg));
    j.key("warmup").integer(warmup);
    j.key("reps").integer(reps);
    bench::write_results(
        j, rows, [](const Row&) {},
        [&](const Row& r) {
            const TreeTimings& t = r.median;
            j.key("keys_ms").number(t.keys);
            j.key("sort_ms").number(t.sort);
            j.key("move_ms").number(t.move);
            j.key("build_ms").number(t.build);
            j.key("link_ms").number(t.link);
            j.key("groups_ms").number(t.groups);
            j.key("multipoles_ms").number(t.multipoles);
            j.key("total_ms").number(t.total);
            j.key("cells").integer(static_cast<long long>(r.cells));
            j.key("groups").integer(static_cast<long long>(r.groups));
            j.key("depth").integer(r.depth);
            j.key("peak_device_bytes").integer(static_cast<long long>(r.peak_bytes));
        });
    return j.finish();
}

} // namespace

int run_bench_tree(const std::vector<std::string>& args)
{
    Options opt("bench tree",
                "Time each phase of the tree build (paper section 2.1, 3.2) on Plummer spheres of 2^min .. 2^max\n"
                "particles: keys (bounding box + Morton keys), sort, move (reorder the particle arrays), build\n"
                "(level-by-level cells), link, groups, multipoles, total; median device-event times in ms over\n"
                "--reps builds from unsorted particles, after --warmup untimed builds. Memory: the tree's device\n"
                "buffers (particles included) plus the primitives' scratch buffers. (`bench forces --in FILE` times\n"
                "the build of your own particles.)\n\n"
                "examples:\n"
                "  banyan bench tree\n"
                "  banyan bench tree --min-log2 20 --max-log2 24 --json tree.json");
    opt.device_options();
    opt.value("min-log2", "K", "smallest size, 2^K particles", "15");
    opt.value("max-log2", "K", "largest size, 2^K particles (default: 24 on a GPU, 20 on a CPU device)");
    opt.value("reps", "R", "timed builds per size; the median is reported", "10");
    opt.value("warmup", "W", "untimed builds first; at least 1", "2");
    opt.value("seed", "S", "seed of the Plummer spheres (plus log2 of the size)", "1");
    opt.value("work-group", "N", "OpenCL only: work-group size of the kernels, 32|64|128|256 (default: 256)");
    bench::add_json_option(opt);
    if (!opt.parse(args)) return 0;

    auto be = open_device(opt.device_request());
    // Up to 2^31 - 1 particles fit one tree; a size the device cannot hold is reported as such in its row.
    const int min_log2 = opt.integer_in("min-log2", 0, 30);
    const int max_log2 =
        opt.has("max-log2") ? opt.integer_in("max-log2", min_log2, 30) : std::max(min_log2, be->info().gpu ? 24 : 20);
    const int reps = opt.integer_in("reps", 1, 100000);
    const int warmup = opt.integer_in("warmup", 1, 100000);
    const auto seed = static_cast<std::uint64_t>(opt.integer("seed"));
    if (opt.has("work-group")) {
        if (be->info().backend != "opencl") throw UsageError("bench tree: --work-group applies to OpenCL devices only");
        be->set_work_group_size(static_cast<std::size_t>(opt.integer_in("work-group", 32, 256)));
    }

    const DeviceInfo& i = be->info();
    fmt::print("device: {} #{}  {}  ({}; {}, {} compute units; work-group {}); Plummer, N_leaf {}, N_crit {}\n",
               i.backend, i.index, i.name, i.version, i.gpu ? "GPU" : "CPU", i.compute_units, be->work_group_size(),
               BANYAN_N_LEAF, BANYAN_N_CRIT);
    bench::Table table({bench::right("N", 5), bench::right("keys", 7), bench::right("sort", 7), bench::right("move", 7),
                        bench::right("build", 7), bench::right("link", 7), bench::right("groups", 7),
                        bench::right("multip", 7), bench::right("total ms", 9), bench::right("cells", 9),
                        bench::right("depth", 5), bench::right("groups", 8), bench::right("MiB", 7),
                        bench::left("B/part", 0)});
    fmt::print("\n");
    table.print_header();
    std::vector<Row> rows;
    bool ok = true;
    for (int log2 = min_log2; log2 <= max_log2; ++log2) {
        Row r = bench_size(*be, log2, warmup, reps, seed);
        const std::string n = fmt::format("2^{}", log2);
        if (!r.error.empty()) {
            ok = false;
            table.print_note({n, "FAILED"}, r.error);
        } else {
            const TreeTimings& t = r.median;
            const double bytes = double(r.peak_bytes);
            auto ms = [](double v) { return fmt::format("{:.3f}", v); };
            table.print_row({n, ms(t.keys), ms(t.sort), ms(t.move), ms(t.build), ms(t.link), ms(t.groups),
                             ms(t.multipoles), ms(t.total), fmt::format("{}", r.cells), fmt::format("{}", r.depth),
                             fmt::format("{}", r.groups), fmt::format("{:.1f}", bytes / (1 << 20)),
                             fmt::format("{:.0f}", bytes / double(r.n))});
        }
        rows.push_back(std::move(r));
    }
    if (opt.has("json")) {
        fmt::print("\n");
        bench::write_report(opt.str("json"), json_report(be->info(), be->work_group_size(), warmup, reps, rows));
    }
    if (!ok) fmt::print(stderr, "bench tree: some builds failed or gave wrong results\n");
    return ok ? 0 : 1;
}

} // namespace banyan::cli
