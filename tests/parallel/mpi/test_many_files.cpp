/**
 * @file test_many_files.cpp
 * @brief Runs past the 32-bit counts, with a few thousand particles: BANYAN_TEST_ID_BASE puts the particles' ids
 *        across 2^32 (their high words on the device, moved by the balance and the build) and
 *        BANYAN_MAX_FILE_PARTICLES lowers the per-file limit, so that every snapshot is a set of files written by the
 *        ranks at once. The ids survive the balance with their particles; a run's snapshots, energy log and
 *        checkpoints are those of the same run without the knobs, value for value and byte for byte; a restart
 *        continues it byte for byte, on as many ranks and on one.
 *
 * Checks sit between collectives (CHECK, not REQUIRE), so that a failure on one rank never leaves the others waiting.
 */
#include "core/files/snapshot_file.hpp"
#include "core/models/plummer.hpp"
#include "core/parallel/comm.hpp"
#include "core/parallel/domain.hpp"
#include "core/parallel/parallel_files.hpp"
#include "core/simulation/run.hpp"
#include "core/simulation/run_options.hpp"
#include "core/tree/octree.hpp"
#include "tests/parallel/mpi/shared_folder.hpp"
#include "tests/support/harness.hpp"
#include "tests/support/run_files.hpp"
#include "tests/support/scoped_env.hpp"

#include <doctest/doctest.h>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace banyan {
namespace {

namespace fs = std::filesystem;

/// Ids that start below 2^32 and end above it.
constexpr std::uint64_t id_base = (std::uint64_t{1} << 32) - 1000;

/// A merger (its two centres tracked: with high words on the device, found on the host) with block time steps (the
/// rungs travel beside the ids' high words), into @p out to @p t_end, a snapshot and a checkpoint every 1/8.
RunOptions merger_run(const fs::path& out, double t_end)
{
    RunOptions o = test::short_run(out, t_end);
    o.ic = "merger";
    o.n = 2000;
    o.seed = 8;
    o.eps = 0.02;
    o.dt = 1.0 / 16;
    o.steps = "block";
    o.max_rung = 4;
    o.log_every = 1;
    return o;
}

/// Every field of two snapshots, value for value.
void check_same_values(const Snapshot& a, const Snapshot& b)
{
    CHECK(a.time == b.time);
    CHECK(a.n_gas == b.n_gas);
    CHECK(a.n_dark == b.n_dark);
    CHECK(a.n_star == b.n_star);
    CHECK(a.mass == b.mass);
    CHECK(a.pos == b.pos);
    CHECK(a.vel == b.vel);
    CHECK(a.acc == b.acc);
    CHECK(a.phi == b.phi);
    CHECK(a.eps == b.eps);
    CHECK(a.ids == b.ids);
}

/// The files of the snapshot @p name of the run in @p dir: "name.hdf5" alone, or its set's files.
std::vector<fs::path> snapshot_files(const fs::path& dir, const std::string& name)
{
    std::vector<fs::path> out;
    if (fs::exists(dir / (name + ".hdf5"))) out.push_back(dir / (name + ".hdf5"));
    for (int k = 0; fs::exists(dir / fmt::format("{}.{}.hdf5", name, k)); ++k)
        out.push_back(dir / fmt::format("{}.{}.hdf5", name, k));
    return out;
}

} // namespace

TEST_CASE("ids above 2^32 survive the balance and the build with their particles")
{
    const Comm& comm = Comm::world();
    const std::size_t n = 4000, P = static_cast<std::size_t>(comm.size()), r = static_cast<std::size_t>(comm.rank());
    const Particles all = plummer(n, 21);
    const std::size_t a = r * n / P, b = (r + 1) * n / P;
    std::vector<std::uint64_t> ids(b - a);
    for (std::size_t i = a; i < b; ++i)
        ids[i - a] = id_base + i;
    Octree tree(test::backend());
    tree.keep_high_ids(true);
    tree.keep_rungs(true);
    tree.set_particles(std::span<const bn_f4>(all.pos).subspan(a, b - a),
                       std::span<const bn_f4>(all.vel).subspan(a, b - a), ids);
    tree.rungs().fill(3u);
    Decomposition domain(test::backend(), comm);
    domain.set_samples_per_rank(64);
    std::uint64_t moved = 0;
    for (int round = 0; round < 2; ++round) {
        moved += domain.balance(tree, round == 0 ? 0.0 : 1.0 + static_cast<double>(r)).sent;
        tree.build();
    }
    comm.sum(std::span<std::uint64_t>(&moved, 1));
    if (P > 1) CHECK(moved > 0);
    // Every id once, on the rank that holds its particle, with that particle's position, velocity and rung.
    const std::size_t m = tree.size();
    const std::vector<std::uint64_t> mine = tree.download_ids();
    const auto pos = m ? tree.pos().download(m) : std::vector<bn_f4>{};
    const auto vel = m ? tree.vel().download(m) : std::vector<bn_f4>{};
    const auto rungs = m ? tree.rungs().download(m) : std::vector<bn_u32>{};
    std::size_t wrong = 0;
    for (std::size_t i = 0; i < m; ++i) {
        const std::uint64_t k = mine[i] - id_base;
        wrong += mine[i] < id_base || k >= n || pos[i].x != all.pos[k].x || pos[i].w != all.pos[k].w ||
                 vel[i].z != all.vel[k].z || rungs[i] != 3u;
    }
    CHECK(wrong == 0);
    auto every = all_gather<std::uint64_t>(comm, std::span<const std::uint64_t>(mine));
    std::sort(every.begin(), every.end());
    CHECK(every.size() == n);
    CHECK(std::adjacent_find(every.begin(), every.end()) == every.end());
    CHECK((every.empty() || (every.front() == id_base && every.back() == id_base + n - 1)));
}

TEST_CASE("a run with ids across 2^32 and snapshots split into files: the values and bytes of the run without")
{
    const Comm& comm = Comm::world();
    const test::SharedFolder dir(comm);
    const double t_end = 0.375;
    Run(test::backend(), plan_run({merger_run(dir / "plain", t_end)})).run();
    // One rank's run, for the particles the snapshots start from.
    if (const auto one = comm.first(1))
        Run(test::backend(), plan_run({merger_run(dir / "one", 0.125)}, *one), {}, *one).run();
    comm.barrier();
    {
        // 2000 particles in files of at most 700: each rank's rows in files of their own.
        const test::ScopedEnv limit("BANYAN_MAX_FILE_PARTICLES", "700");
        const test::ScopedEnv base("BANYAN_TEST_ID_BASE", std::to_string(id_base));
        Run(test::backend(), plan_run({merger_run(dir / "knobs", t_end)})).run();
        // Stopped at 0.125 and continued, on as many ranks.
        Run(test::backend(), plan_run({merger_run(dir / "split", 0.125)})).run();
        Run::resume(test::backend(), (dir / "split").string(), t_end)->run();
    }
    comm.barrier();
    const std::size_t P = static_cast<std::size_t>(comm.size());
    const std::size_t files = P * ((2000 / P + (2000 % P ? 1 : 0) + 699) / 700); // hdf5_file_starts' m per rank
    for (int k = 0; k <= 3; ++k) {
        const std::string name = fmt::format("snapshot_{:05}", k);
        CAPTURE(name);
        const auto plain = snapshot_files(dir / "plain", name), split = snapshot_files(dir / "knobs", name);
        CHECK(plain.size() == 1);
        CHECK(split.size() == files);
        for (const fs::path& f : split)
            CHECK(f.filename().string() != name + ".hdf5");
        // The same values, read by the snapshot's name.
        const Snapshot a = read_snapshot((dir / "plain" / (name + ".hdf5")).string());
        const Snapshot b = read_snapshot((dir / "knobs" / (name + ".hdf5")).string());
        CHECK(b.size() == 2000);
        check_same_values(a, b);
        // Stopped and continued: the same values; after the restart the same files, byte for byte (before it the
        // run's options, in /Parameters, had another end).
        const auto again = snapshot_files(dir / "split", name);
        CHECK(again.size() == split.size());
        check_same_values(read_snapshot((dir / "split" / (name + ".hdf5")).string()), b);
        for (std::size_t j = 0; k >= 2 && j < std::min(again.size(), split.size()); ++j)
            CHECK(test::file_bytes(again[j]) == test::file_bytes(split[j]));
    }
    // The first snapshot holds the particles one rank's run starts from.
    {
        const Snapshot one = read_snapshot((dir / "one" / "snapshot_00000.hdf5").string());
        const Snapshot b = read_snapshot((dir / "knobs" / "snapshot_00000.hdf5").string());
        CHECK(one.pos == b.pos);
        CHECK(one.vel == b.vel);
        CHECK(one.mass == b.mass);
        CHECK(one.ids == b.ids);
    }
    // The log (with the tracked centres' distance) and the checkpoints hold no trace of the knobs: the input indices.
    const std::string log = test::file_bytes(dir / "plain" / "energy.csv");
    CHECK(!log.empty());
    CHECK(test::file_bytes(dir / "knobs" / "energy.csv") == log);
    CHECK(test::file_bytes(dir / "split" / "energy.csv") == log);
    for (const char* run : {"knobs", "split"}) {
        CAPTURE(run);
        std::size_t checkpoint_files = 0;
        for (const auto& e : fs::directory_iterator(dir / "plain")) {
            const std::string f = e.path().filename().string();
            if (f.rfind("checkpoint.bin", 0) != 0) continue;
            ++checkpoint_files;
            CAPTURE(f);
            CHECK(test::file_bytes(e.path()) == test::file_bytes(dir / run / f));
        }
        CHECK(checkpoint_files == P);
    }
}

TEST_CASE("a run with ids across 2^32 continues on one rank from the checkpoint of all")
{
    const Comm& world = Comm::world();
    const test::SharedFolder dir(world);
    const test::ScopedEnv limit("BANYAN_MAX_FILE_PARTICLES", "700");
    const test::ScopedEnv base("BANYAN_TEST_ID_BASE", std::to_string(id_base));
    Run(test::backend(), plan_run({merger_run(dir / "run", 0.125)})).run();
    world.barrier();
    const Snapshot saved = read_snapshot((dir / "run" / "snapshot_00001.hdf5").string());
    if (const auto one = world.first(1)) {
        auto run = Run::resume(test::backend(), (dir / "run").string(), 0.25, {},
                               RunOutputs::files((dir / "run").string()), *one);
        // The particles as saved, each under its input index.
        RankParticles now;
        run->simulation().rank_particles(now);
        REQUIRE(now.ids.size() == saved.size());
        std::size_t wrong = 0;
        for (std::size_t i = 0; i < now.ids.size(); ++i) {
            const std::uint64_t k = now.ids[i];
            wrong += k >= saved.size() || now.pos[i].x != saved.pos[3 * k] || now.vel[i].y != saved.vel[3 * k + 1] ||
                     now.pos[i].w != saved.mass[k];
        }
        CHECK(wrong == 0);
        run->run();
        CHECK(std::fabs(run->last_record().max_de) < 1e-3);
    }
    world.barrier();
    const Snapshot end = read_snapshot((dir / "run" / "snapshot_00002.hdf5").string());
    CHECK(end.size() == 2000);
    CHECK(end.mass == saved.mass);
    // One rank holds 2000 particles: files of at most 700 are 3.
    CHECK(snapshot_files(dir / "run", "snapshot_00002").size() == 3);
}

} // namespace banyan
