/**
 * @file cmd_forces.cpp
 * @brief `banyan bench forces`: device time of one force evaluation by the tree on Plummer spheres of 2^min ..
 *        2^max particles at the given opening angles: tree build, multipoles and walk (paper sections 2, 3 and
 *        4.1), particles per second, interactions per particle and the flop rate (23 flops per particle-particle
 *        and 65 per particle-cell interaction, the paper's counts).
 *
 * Each repetition builds the tree from the generator's (unsorted) order, uploaded again outside the timing, then
 * walks it once; every figure is the median over the repetitions of device-event times, after untimed warm-up
 * rounds (program builds, buffer growth and the walk's spill-buffer growth land there). A cheap check of the first
 * and last walk of each row (interactions counted; finite accelerations and negative potentials on a sample of
 * particles) guards against timing a wrong result; the conformance suite checks forces in full.
 */
#include "apps/bench/bench_util.hpp"
#include "apps/cli/cli.hpp"
#include "core/error.hpp"

#include "core/parallel/comm.hpp"
#include "core/parallel/parallel_forces.hpp"
#include "core/parallel/rank_device.hpp"
#include "core/parallel/transport.hpp"
#include "core/gravity/forces.hpp"
#include "core/tree/octree.hpp"
#include "core/models/initial_conditions.hpp"
#include "core/models/plummer.hpp"
#include "core/numbers.hpp"

#include <fmt/format.h>

#include <array>
#include <cmath>
#include <functional>

namespace banyan::cli {

namespace {

std::vector<double> theta_list(const std::string& s)
{
    std::vector<double> out;
    for (const std::string& item : comma_items(s)) {
        const auto v = parse_decimal(item);
        if (!v || !(*v >= 0 && *v <= 1))
            throw UsageError(
                fmt::format("bench forces: --theta expects comma-separated numbers in [0, 1], got '{}'", s));
        out.push_back(*v);
    }
    return out;
}

std::string json_report(const DeviceInfo& info, Opening opening, double alpha, double eps, int warmup, int reps,
                        const std::vector<bench::ForceRow>& rows)
{
    bench::JsonWriter j = bench::begin_report("forces");
    j.key("backend").string(info.backend);
    j.key("device").string(info.name);
    j.key("gpu").boolean(info.gpu);
    j.key("walk_work_group").integer(BANYAN_WALK_WG);
    j.key("opening").string(to_string(opening));
    j.key("alpha").number(alpha);
    j.key("eps").number(eps);
    j.key("warmup").integer(warmup);
    j.key("reps").integer(reps);
    bench::write_results(
        j, rows, [&](const bench::ForceRow& r) { j.key("theta").number(r.theta); },
        [&](const bench::ForceRow& r) {
            j.key("tree_ms").number(r.tree_ms);
            j.key("multipoles_ms").number(r.multipoles_ms);
            j.key("walk_ms").number(r.walk_ms);
            j.key("total_ms").number(r.total_ms);
            j.key("walk_particles_per_s").number(double(r.n) / (r.walk_ms * 1e-3));
            j.key("pp_per_particle").number(r.pp);
            j.key("pc_per_particle").number(r.pc);
            j.key("walk_tflops").number(r.flops() * double(r.n) / (r.walk_ms * 1e-3) * 1e-12);
            j.key("groups").integer(static_cast<long long>(r.groups));
            j.key("peak_device_bytes").integer(static_cast<long long>(r.bytes));
            j.key("bytes_per_particle").number(double(r.bytes) / double(r.n));
            j.key("spill_retries").integer(r.retries);
        });
    return j.finish();
}

/// One row over all ranks: wall times per phase (the rank that took longest), traffic summed over ranks.
struct ParallelRow {
    std::size_t n = 0; ///< all ranks
    double theta = 0;
    double balance = 0, build = 0, let_build = 0, exchange = 0, walk = 0, total = 0;
    double walk_spread = 0; ///< slowest rank's walks over the mean (load balance)
    double moved = 0, let_mb = 0, let_cells = 0, let_particles = 0; ///< per evaluation, all ranks
    double pp = 0, pc = 0;                                          ///< per particle
    std::size_t bytes = 0;                                          ///< peak device memory, largest rank
    /// Inside the phases, slowest rank: boxes, downloads of the trees, messages, upload of what arrived (host
    /// clock); the walk alone (device events).
    double boxes = 0, download = 0, mpi = 0, upload = 0, walk_device = 0;
    double far = 0;       ///< of all ranks' groups, the share walked before the trees arrived (last evaluation)
    double top_cells = 0; ///< top-tree cells received, summed over ranks (last evaluation)
    double spill =
        0; ///< the walk's spill room per work-group and list (entries), largest rank (the level lists' length)
    ParallelPhases phases; ///< each phase's slowest rank and mean (medians over the evaluations)
};

/// The phases' fields of ParallelPhases in the order of the phases table and the JSON keys.
constexpr std::array<std::pair<PhaseSpread ParallelPhases::*, const char*>, 8> phase_fields{{
    {&ParallelPhases::domain, "domain"},
    {&ParallelPhases::build, "build"},
    {&ParallelPhases::let_make, "let_make"},
    {&ParallelPhases::comm, "comm"},
    {&ParallelPhases::gravity, "gravity"},
    {&ParallelPhases::gravity_device, "gravity_device"},
    {&ParallelPhases::wait, "wait"},
    {&ParallelPhases::total, "total"},
}};

/// `bench forces` under mpirun: each rank holds N / P particles (its own Plummer sphere of that many, seed + rank,
/// masses divided by P: together a Plummer sphere of N), decomposed by the first (untimed) evaluation. Every timed
/// evaluation is one ParallelForces::compute from a barrier: balance, build, trees for the others, their exchange,
/// one walk over the local and the grafted trees; wall time on each rank, the largest reported.
ParallelRow bench_parallel(Backend& be, const Comm& comm, std::size_t n, std::uint64_t seed, double theta,
                           Opening opening, float eps, int warmup, int reps, std::size_t top_per_rank,
                           const std::shared_ptr<PeerExchange>& peers)
{
    const std::size_t P = static_cast<std::size_t>(comm.size()), r = static_cast<std::size_t>(comm.rank());
    const std::size_t mine = (r + 1) * n / P - r * n / P;
    Particles p = plummer(mine, seed + 7919 * r);
    for (auto& q : p.pos)
        q.w /= static_cast<float>(P);
    std::vector<std::uint64_t> ids(mine);
    for (std::size_t i = 0; i < mine; ++i)
        ids[i] = r * n / P + i;
    bench::PeakMemory peak(be);
    Octree tree(be);
    tree.set_opening(opening);
    tree.keep_high_ids(n > 0xFFFFFFFFull);
    tree.set_particles(p.pos, {}, ids);
    p = Particles();
    ParallelForces pf(be, comm, Transport::host);
    pf.use_peer_exchange(peers); // opened once for all rows
    pf.let().set_top_per_rank(top_per_rank);
    std::vector<double> cols[12];
    std::vector<double> phase_max[phase_fields.size()], phase_mean[phase_fields.size()];
    double split[3] = {0, 0, 0}; // far groups, groups, top cells of the last evaluation
    double moved = 0, let_bytes = 0, let_cells = 0, let_parts = 0;
    for (int i = 0; i < warmup + reps; ++i) {
        comm.barrier();
        ParallelTimings t;
        pf.compute(tree, static_cast<float>(theta), eps, &t);
        if (i == 0 || i == warmup + reps - 1)
            if (std::string bad = bench::sanity(pf.forces(), tree.size()); !bad.empty())
                throw NumericalError(fmt::format("rank {}: the forces are not valid: {}", r, bad));
        const ParallelPhases ph = phases_over_ranks(comm, t);
        if (i < warmup) continue;
        for (std::size_t k = 0; k < phase_fields.size(); ++k) {
            phase_max[k].push_back((ph.*phase_fields[k].first).max);
            phase_mean[k].push_back((ph.*phase_fields[k].first).mean);
        }
        double v[12] = {t.balance, t.build,        t.let_build,       t.let_exchange, t.walk,          t.total,
                        t.walk,    t.let.boxes_ms, t.let.download_ms, t.let.mpi_ms,   t.let.upload_ms, t.walk_device};
        double mean_walk = v[6];
        comm.max(std::span<double>(v, 12));
        comm.sum(std::span<double>(&mean_walk, 1));
        mean_walk /= static_cast<double>(P);
        for (int k = 0; k < 12; ++k)
            if (k != 6) cols[k].push_back(v[k]);
        cols[6].push_back(mean_walk > 0 ? v[6] / mean_walk : 1.0);
        double traffic[4] = {static_cast<double>(t.balance_stats.sent), static_cast<double>(t.let.bytes_sent),
                             static_cast<double>(t.let.cells_sent), static_cast<double>(t.let.particles_sent)};
        comm.sum(std::span<double>(traffic, 4));
        moved += traffic[0], let_bytes += traffic[1], let_cells += traffic[2], let_parts += traffic[3];
        split[0] = static_cast<double>(t.let.far_groups), split[1] = static_cast<double>(t.let.groups);
        split[2] = static_cast<double>(t.let.top_cells);
    }
    comm.sum(std::span<double>(split, 3));
    ParallelRow row;
    row.n = n;
    row.theta = theta;
    double* out[12] = {&row.balance,     &row.build, &row.let_build, &row.exchange, &row.walk,   &row.total,
                       &row.walk_spread, &row.boxes, &row.download,  &row.mpi,      &row.upload, &row.walk_device};
    for (int k = 0; k < 12; ++k)
        *out[k] = bench::median(cols[k]);
    for (std::size_t k = 0; k < phase_fields.size(); ++k)
        row.phases.*phase_fields[k].first = {bench::median(phase_max[k]), bench::median(phase_mean[k])};
    row.moved = moved / reps, row.let_mb = let_bytes / reps / 1e6, row.let_cells = let_cells / reps;
    row.let_particles = let_parts / reps;
    row.far = split[1] > 0 ? split[0] / split[1] : 0.0, row.top_cells = split[2];
    double inter[2] = {static_cast<double>(pf.forces().totals().pp), static_cast<double>(pf.forces().totals().pc)};
    comm.sum(std::span<double>(inter, 2));
    row.pp = inter[0] / static_cast<double>(n), row.pc = inter[1] / static_cast<double>(n);
    std::uint64_t b = peak.bytes();
    comm.max(std::span<std::uint64_t>(&b, 1));
    row.bytes = b;
    double spill = static_cast<double>(pf.forces().spill_capacity());
    comm.max(std::span<double>(&spill, 1));
    row.spill = spill;
    return row;
}

int run_parallel(const Options& opt, const Comm& comm, Backend& be, const std::vector<double>& thetas, Opening opening,
                 double eps, int warmup, int reps, std::uint64_t seed, Transport transport)
{
    const bool gpu = be.info().gpu;
    const bool per_rank = opt.has("per-rank");
    const auto top_per_rank = static_cast<std::size_t>(opt.integer_in("top-per-rank", 0, 1 << 20));
    const int min_log2 = opt.has("min-log2") ? opt.integer_in("min-log2", 1, 31) : (gpu ? 22 : 12);
    const int max_log2 =
        opt.has("max-log2") ? opt.integer_in("max-log2", min_log2, 31) : std::max(min_log2, gpu ? 24 : 14);
    const bool root = comm.rank() == 0;
    const std::size_t P = static_cast<std::size_t>(comm.size());
    const std::shared_ptr<PeerExchange> peers = open_peer_exchange(be, comm, transport);
    // Every rank's device, in rank order.
    const std::string label = device_label(be.info());
    std::vector<std::size_t> lengths;
    const auto labels = all_gather<char>(comm, std::span<const char>(label.data(), label.size()), &lengths);
    if (root) {
        fmt::print("{} rank{} ({}); Plummer, eps {}, {}; wall time per evaluation, slowest rank\n", P,
                   P == 1 ? "" : "s", Comm::library(), eps,
                   per_rank ? "N per rank (weak scaling)" : "N in all (strong scaling)");
        if (P > 1) fmt::print("{}\n", transport_text(peers.get()));
        std::size_t at = 0;
        for (std::size_t q = 0; q < P; ++q) {
            fmt::print("  rank {}: {}\n", q, std::string(labels.data() + at, lengths[q]));
            at += lengths[q];
        }
    }
    bench::Table table(
        {bench::right("N", 5), bench::right("P", 2), bench::right("theta", 6), bench::right("balance", 8),
         bench::right("build", 8), bench::right("LET", 7), bench::right("exchange", 9), bench::right("walk", 8),
         bench::right("total ms", 9), bench::right("Mpart/s", 8), bench::right("pp", 5), bench::right("pc", 5),
         bench::right("spread", 6), bench::right("moved", 8), bench::right("LET MB", 7), bench::left("B/part", 0)});
    if (root) {
        fmt::print("\n");
        table.print_header();
    }
    bench::JsonWriter j = bench::begin_report("forces_parallel");
    j.key("ranks").integer(static_cast<long long>(P));
    j.key("mpi").string(Comm::library());
    j.key("transport").string(transport_text(peers.get()));
    j.key("backend").string(be.info().backend);
    j.key("device").string(be.info().name);
    j.key("eps").number(eps);
    j.key("warmup").integer(warmup);
    j.key("reps").integer(reps);
    j.key("results").begin_array();
    std::vector<std::pair<std::string, ParallelRow>> done;
    for (int log2 = min_log2; log2 <= max_log2; ++log2) {
        const std::size_t n = (std::size_t{1} << log2) * (per_rank ? P : 1);
        for (double theta : thetas) {
            const ParallelRow r = bench_parallel(be, comm, n, seed + static_cast<std::uint64_t>(log2), theta, opening,
                                                 static_cast<float>(eps), warmup, reps, top_per_rank, peers);
            auto ms = [](double v) { return fmt::format("{:.2f}", v); };
            if (root)
                table.print_row({fmt::format("2^{}", log2), fmt::format("{}", P), fmt::format("{:.2f}", theta),
                                 ms(r.balance), ms(r.build), ms(r.let_build), ms(r.exchange), ms(r.walk), ms(r.total),
                                 bench::figure(bench::mega_per_s(r.n, r.total)), fmt::format("{:.0f}", r.pp),
                                 fmt::format("{:.0f}", r.pc), fmt::format("{:.2f}", r.walk_spread),
                                 fmt::format("{:.0f}", r.moved), fmt::format("{:.1f}", r.let_mb),
                                 fmt::format("{:.1f}", double(r.bytes) * double(P) / double(r.n))});
            done.emplace_back(fmt::format("2^{}", log2), r);
            j.begin_object();
            j.key("n").integer(static_cast<long long>(r.n));
            j.key("n_per_rank").integer(static_cast<long long>(r.n / P));
            j.key("theta").number(r.theta);
            j.key("balance_ms").number(r.balance);
            j.key("build_ms").number(r.build);
            j.key("let_build_ms").number(r.let_build);
            j.key("let_exchange_ms").number(r.exchange);
            j.key("walk_ms").number(r.walk);
            j.key("total_ms").number(r.total);
            j.key("walk_spread").number(r.walk_spread);
            j.key("particles_moved").number(r.moved);
            j.key("let_bytes").number(r.let_mb * 1e6);
            j.key("let_cells").number(r.let_cells);
            j.key("let_particles").number(r.let_particles);
            j.key("pp_per_particle").number(r.pp);
            j.key("pc_per_particle").number(r.pc);
            j.key("peak_device_bytes_max_rank").integer(static_cast<long long>(r.bytes));
            j.key("boxes_ms").number(r.boxes);
            j.key("tree_download_ms").number(r.download);
            j.key("mpi_ms").number(r.mpi);
            j.key("tree_upload_ms").number(r.upload);
            j.key("walk_device_ms").number(r.walk_device);
            j.key("far_group_share").number(r.far);
            j.key("top_cells").number(r.top_cells);
            j.key("spill_entries_max_rank").number(r.spill);
            for (const auto& [field, name] : phase_fields) {
                j.key(fmt::format("{}_ms_max_rank", name)).number((r.phases.*field).max);
                j.key(fmt::format("{}_ms_mean", name)).number((r.phases.*field).mean);
            }
            j.end_object();
        }
    }
    if (root) {
        // Inside the phases: where the host's part of LET and walk goes, and the walks alone on the device.
        bench::Table inside({bench::right("N", 5), bench::right("theta", 6), bench::right("boxes", 7),
                             bench::right("download", 9), bench::right("msgs", 7), bench::right("upload", 7),
                             bench::right("walk dev", 9), bench::right("far %", 6), bench::right("top cells", 10),
                             bench::left("spill", 0)});
        fmt::print("\n");
        inside.print_header();
        for (const auto& [label, r] : done)
            inside.print_row({label, fmt::format("{:.2f}", r.theta), fmt::format("{:.2f}", r.boxes),
                              fmt::format("{:.2f}", r.download), fmt::format("{:.2f}", r.mpi),
                              fmt::format("{:.2f}", r.upload), fmt::format("{:.2f}", r.walk_device),
                              fmt::format("{:.1f}", 100 * r.far), fmt::format("{:.0f}", r.top_cells),
                              fmt::format("{:.0f}", r.spill)});
        // The phases as the original code reports them (docs/parallel.md sets the two side by side).
        std::vector<bench::Table::Column> heads{bench::right("N", 5), bench::right("theta", 6)};
        for (const char* h : {"domain", "build", "LET make", "comm", "gravity", "GPU grav", "wait", "total"})
            heads.push_back(bench::right(h, 14));
        bench::Table phases(heads);
        fmt::print("\nPhases, slowest rank / mean (ms):\n");
        phases.print_header();
        for (const auto& [label, r] : done) {
            std::vector<std::string> cells{label, fmt::format("{:.2f}", r.theta)};
            for (const auto& [field, name] : phase_fields)
                cells.push_back(fmt::format("{:.2f} / {:.2f}", (r.phases.*field).max, (r.phases.*field).mean));
            phases.print_row(cells);
        }
        fmt::print(
            "\nN: {}; balance = decomposition and particle exchange; LET = boxes and trees for the other ranks "
            "(device, then host); exchange = the trees' messages and their upload behind the local tree, while the "
            "far groups walk; walk = the near groups' walk after it (every group walks once, over the local tree "
            "and the others' top trees or received trees); pp, pc = interactions per particle over all ranks' "
            "walks (the trees of other ranks split cells that one tree would take whole: more than on one rank); "
            "spread = slowest rank's walk / mean; moved = particles "
            "that changed rank, LET MB = trees and boxes sent, per evaluation over all ranks; B/part = peak "
            "device memory of the largest rank x P / N. Second table, inside those phases: boxes = this "
            "rank's boxes and their all-gather, download = the trees into host memory (GPU to GPU: into the send "
            "buffer, issued) (both in LET), msgs = the messages (MPI, or GPU to GPU), upload = the trees received "
            "onto the device (GPU to GPU: their links shifted there, issued) (both in exchange); walk dev = the walks "
            "alone "
            "by device events; far % = the groups walked during the exchange; top cells = the other ranks' top "
            "trees received, summed over ranks; spill = the walk's spill room per work-group and level list (entries, "
            "largest rank: it grows when level lists outgrow local memory). Phases: domain = balance; LET make = the "
            "trees for the other ranks made and the received ones grafted; comm = their messages (boxes, sizes, "
            "trees; waiting included); gravity = the walk over the local and received trees (GPU grav: by device "
            "events); wait = a rank's time in comm beyond the least any rank spent there\n",
            per_rank ? "per rank" : "in all");
        if (opt.has("json")) bench::write_report(opt.str("json"), j.finish());
    }
    return 0;
}

} // namespace

int run_bench_forces(const std::vector<std::string>& args)
{
    Options opt("bench forces",
                "Time one force evaluation by the tree (paper sections 2-4) on models (--model plummer, hernquist or\n"
                "disc) of 2^min .. 2^max particles, or on a snapshot of yours (--in FILE: HDF5 or tipsy): tree (keys,\n"
                "sort, move, build, link, groups), multipoles, walk and their total; median device-event times in ms\n"
                "over --reps evaluations from unsorted particles, after --warmup untimed ones. Also: walk\n"
                "particles/s, interactions per particle (pp, pc), the walk's flop rate at 23 flops per pp and 65 per\n"
                "pc interaction, and the peak device memory. Under mpirun: over all ranks.\n\n"
                "examples:\n"
                "  banyan bench forces\n"
                "  banyan bench forces --in snap.hdf5 --theta 0.5,0.75\n"
                "  banyan bench forces --model hernquist --theta 1 --alpha 0.002\n"
                "  mpirun -n 2 banyan bench forces --per-rank --min-log2 24 --max-log2 26");
    opt.device_options();
    opt.value("min-log2", "K", "smallest size, 2^K particles (default: 18 on a GPU, 14 on a CPU device)");
    opt.value("max-log2", "K", "largest size, 2^K particles (default: 24 on a GPU, 16 on a CPU device)");
    opt.value("theta", "T1,T2", "opening angles", "0.5,0.75");
    opt.value("opening", "C", "opening criterion: paper (d > l / theta + delta) or bmax (d > bmax / theta)", "paper");
    opt.value("alpha", "A",
              "the relative criterion on top (M l^3 / d^5 <= alpha |a|, |a| from an untimed walk at "
              "theta 0.5 first, as a simulation has it from its last step); 0: off",
              "0");
    opt.value("eps", "E", "Plummer softening", "0");
    opt.value("reps", "R", "timed evaluations per size and angle; the median is reported", "5");
    opt.value("warmup", "W", "untimed evaluations first; at least 1", "1");
    opt.value("seed", "S", "seed of the Plummer spheres (plus log2 of the size)", "1");
    opt.value("groups-per-unit", "G", "persistent walk work-groups per compute unit (default: 16 GPU, 4 CPU)");
    opt.value("model", "M", "the particles: plummer, hernquist (cuspy) or disc (flattened), N-body units", "plummer");
    opt.value("in", "FILE", "the particles of a snapshot (HDF5 or tipsy) instead of a model: one size, the file's N");
    bench::add_json_option(opt);
    opt.flag("per-rank", "under mpirun: 2^K particles per rank (weak scaling) instead of in all");
    opt.value("transport", "auto|host|device",
              "under mpirun: how the trees go between ranks: GPU to GPU (NCCL under CUDA), through host memory "
              "(MPI), or auto: GPU to GPU where the backend and the ranks' devices allow it (env BANYAN_TRANSPORT)");
    opt.value("top-per-rank", "T",
              "under mpirun: the top trees sent with the boxes hold the cells of more than 1/T of a rank's "
              "particles (let.hpp), and the groups far from them walk while the trees travel; 0: none, every "
              "group walks after the exchange",
              "0");
    if (!opt.parse(args)) return 0;

    const Comm& comm = Comm::world();
    if (opt.has("in")) {
        if (Comm::started()) throw UsageError("bench forces: --in runs on one rank (without mpirun)");
        for (const char* other : {"min-log2", "max-log2", "seed", "per-rank", "model"})
            if (opt.has(other))
                throw UsageError(fmt::format("bench forces: --{} cannot be given with --in (the file sets the "
                                             "particles)",
                                             other));
    }
    const Opening opening = parse_opening(opt.str("opening"), "bench forces: --opening");
    const Transport transport =
        opt.has("transport") ? parse_transport(opt.str("transport"), "bench forces: --transport") : default_transport();
    const std::string model = opt.str("model");
    make_model(model, 1, 1); // refuses an unknown name before any work
    if (model != "plummer" && Comm::started())
        throw UsageError("bench forces: under mpirun the particles are Plummer spheres (no --model)");
    const double alpha = opt.number("alpha");
    if (!(alpha >= 0 && alpha < 1e30))
        throw UsageError(fmt::format("bench forces: --alpha must be >= 0, got {}", alpha));
    if (alpha > 0 && Comm::started())
        throw UsageError("bench forces: --alpha (the relative criterion) runs on one rank");
    auto be = open_device(rank_device(opt.device_request(), comm));
    if (Comm::started()) {
        const std::vector<double> thetas = theta_list(opt.str("theta"));
        const double eps = opt.number("eps");
        if (!(eps >= 0)) throw UsageError(fmt::format("bench forces: --eps must be >= 0, got {}", eps));
        return run_parallel(opt, comm, *be, thetas, opening, eps, opt.integer_in("warmup", 1, 100000),
                            opt.integer_in("reps", 1, 100000), static_cast<std::uint64_t>(opt.integer("seed")),
                            transport);
    }
    const bool gpu = be->info().gpu;
    // Up to 2^31 - 1 particles fit one tree; a size the device cannot hold is reported as such in its row.
    const int min_log2 = opt.has("min-log2") ? opt.integer_in("min-log2", 1, 30) : (gpu ? 18 : 14);
    const int max_log2 =
        opt.has("max-log2") ? opt.integer_in("max-log2", min_log2, 30) : std::max(min_log2, gpu ? 24 : 16);
    const std::vector<double> thetas = theta_list(opt.str("theta"));
    const double eps = opt.number("eps");
    if (!(eps >= 0)) throw UsageError(fmt::format("bench forces: --eps must be >= 0, got {}", eps));
    const int reps = opt.integer_in("reps", 1, 100000);
    const int warmup = opt.integer_in("warmup", 1, 100000);
    const auto seed = static_cast<std::uint64_t>(opt.integer("seed"));

    // --in: the file's particles in internal units, and eps in them (the walk sees the numbers `forces` gives it).
    double eps_walk = eps;
    const std::vector<bn_f4> file =
        opt.has("in") ? bench::file_particles(opt.str("in"), eps_walk) : std::vector<bn_f4>{};
    const DeviceInfo& i = be->info();
    fmt::print("device: {} #{}  {}  ({}; {}, {} compute units); {}, opening {}{}, eps {}, N_leaf {}, N_crit {}, "
               "walk work-group {}\n",
               i.backend, i.index, i.name, i.version, gpu ? "GPU" : "CPU", i.compute_units,
               opt.has("in") ? opt.str("in") : model, to_string(opening),
               alpha > 0 ? fmt::format(" + relative alpha {}", alpha) : "", eps, BANYAN_N_LEAF, BANYAN_N_CRIT,
               BANYAN_WALK_WG);
    bench::Table table({bench::right("N", 5), bench::right("theta", 6), bench::right("tree", 8),
                        bench::right("multip", 8), bench::right("walk", 9), bench::right("total ms", 9),
                        bench::right("Mpart/s", 8), bench::right("pp", 7), bench::right("pc", 7),
                        bench::right("TFLOP/s", 8), bench::right("MiB", 8), bench::left("B/part", 0)});
    fmt::print("\n");
    table.print_header();
    const unsigned groups_per_unit =
        opt.has("groups-per-unit") ? static_cast<unsigned>(opt.integer_in("groups-per-unit", 1, 1024)) : 0u;
    std::vector<bench::ForceRow> rows;
    bool ok = true;
    int retries = 0;
    // One size: the file's particles, or a Plummer sphere of 2^log2 (made only when the device can hold it).
    auto run_size = [&](const std::string& label, std::size_t n, const std::function<std::vector<bn_f4>()>& make) {
        if (std::string why = bench::fit_error(*be, n, false); !why.empty()) {
            table.print_note({label, "", "n/a"}, why);
            for (double theta : thetas) {
                bench::ForceRow r;
                r.n = n, r.theta = theta, r.error = why;
                rows.push_back(std::move(r));
            }
            return;
        }
        const std::vector<bn_f4> pos = make();
        const Buffer<bn_f4> acc_old =
            alpha > 0 ? bench::previous_accelerations(*be, pos, opening, static_cast<float>(eps_walk))
                      : Buffer<bn_f4>{};
        for (double theta : thetas) {
            bench::ForceRow r =
                bench::time_forces(*be, pos, theta, opening, static_cast<float>(alpha), alpha > 0 ? &acc_old : nullptr,
                                   static_cast<float>(eps_walk), warmup, reps, groups_per_unit);
            retries += r.retries;
            const std::string& n = label;
            if (!r.error.empty()) {
                ok = false;
                table.print_note({n, fmt::format("{:.2f}", theta), "FAILED"}, r.error);
            } else {
                auto ms = [](double v) { return fmt::format("{:.3f}", v); };
                table.print_row({n, fmt::format("{:.2f}", theta), ms(r.tree_ms), ms(r.multipoles_ms), ms(r.walk_ms),
                                 ms(r.total_ms), bench::figure(bench::mega_per_s(r.n, r.walk_ms)),
                                 fmt::format("{:.0f}", r.pp), fmt::format("{:.0f}", r.pc),
                                 bench::figure(r.flops() * double(r.n) / (r.walk_ms * 1e-3) * 1e-12),
                                 fmt::format("{:.1f}", double(r.bytes) / (1 << 20)),
                                 fmt::format("{:.1f}", double(r.bytes) / double(r.n))});
            }
            rows.push_back(std::move(r));
        }
    };
    if (opt.has("in"))
        run_size(fmt::format("{}", file.size()), file.size(), [&] { return file; });
    else
        for (int log2 = min_log2; log2 <= max_log2; ++log2)
            run_size(fmt::format("2^{}", log2), std::size_t{1} << log2, [&] {
                return make_model(model, std::size_t{1} << log2, seed + static_cast<std::uint64_t>(log2)).pos;
            });
    fmt::print("\ntree = keys + sort + move + build + link + groups; Mpart/s = N / walk time; TFLOP/s of the walk at "
               "23 flops per pp and 65 per pc interaction\n");
    fmt::print("MiB, B/part: peak device memory of one force evaluation from unsorted particles (everything held at "
               "once, scratch included)\n");
    if (retries) fmt::print("(the walk's spill buffer grew {} times, during warm-ups)\n", retries);
    if (opt.has("json"))
        bench::write_report(opt.str("json"), json_report(be->info(), opening, alpha, eps, warmup, reps, rows));
    if (!ok) fmt::print(stderr, "bench forces: some evaluations failed or gave wrong results\n");
    return ok ? 0 : 1;
}

} // namespace banyan::cli
