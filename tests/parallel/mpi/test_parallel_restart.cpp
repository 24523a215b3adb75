/**
 * @file test_parallel_restart.cpp
 * @brief A checkpoint written by P ranks continues on any other number of ranks (1 included): the same particles
 *        (ids, masses, positions, velocities exactly), every particle's fields, and energy kept as the straight run
 *        keeps it. Each number of ranks up to the launched one runs on the first ranks (Comm::first).
 */
#include "core/error.hpp"
#include "core/files/snapshot_file.hpp"
#include "core/files/snapshot.hpp"
#include "core/parallel/comm.hpp"
#include "core/parallel/parallel_files.hpp"
#include "core/simulation/checkpoint.hpp"
#include "core/simulation/run.hpp"
#include "core/simulation/run_options.hpp"
#include "tests/support/harness.hpp"
#include "tests/support/run_files.hpp"
#include "tests/support/inputs.hpp"
#include "tests/parallel/mpi/shared_folder.hpp"

#include <doctest/doctest.h>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <set>

namespace banyan {
namespace {

namespace fs = std::filesystem;

/// Every rank's particles of @p sim, in id order, on every rank: (pos, vel) per id.
std::vector<std::array<bn_f4, 2>> all_particles(Simulation& sim)
{
    RankParticles mine;
    sim.rank_particles(mine);
    std::vector<std::array<bn_f4, 2>> out(sim.total_size());
    const auto ids = all_gather<std::uint64_t>(sim.comm(), std::span<const std::uint64_t>(mine.ids));
    const auto pos = all_gather<bn_f4>(sim.comm(), std::span<const bn_f4>(mine.pos));
    const auto vel = all_gather<bn_f4>(sim.comm(), std::span<const bn_f4>(mine.vel));
    for (std::size_t i = 0; i < ids.size(); ++i)
        out.at(ids[i]) = {pos[i], vel[i]};
    return out;
}

/// Runs @p o to t = 0.125 on each number of ranks P of @p from (1 .. world), and continues each run to t = 0.25 on
/// each number of ranks P' of @p to other than P: the particles right after the restart are the saved ones exactly,
/// energy is kept, and the end snapshot holds @p in's fields (or, without @p in, every particle's softening o.eps).
/// Collective over the world.
void check_restarts(const RunOptions& o, const Snapshot* in, const fs::path& dir, std::vector<int> from,
                    std::vector<int> to)
{
    const Comm& world = Comm::world();
    for (auto* v : {&from, &to}) {
        std::sort(v->begin(), v->end());
        v->erase(std::unique(v->begin(), v->end()), v->end());
    }
    for (int P : from) {
        CAPTURE(P);
        const fs::path first = dir / fmt::format("on{}", P);
        if (const auto comm = world.first(P)) {
            RunOptions a = o;
            a.out = first.string();
            a.t_end = 0.125;
            Run(test::backend(), plan_run({a}, *comm), {}, *comm).run();
        }
        world.barrier();
        // The particles as the P ranks left them, in input order.
        const Snapshot saved = read_snapshot((first / "snapshot_00001.tipsy").string());
        for (int P2 : to) {
            if (P2 == P) continue; // on as many ranks: bit for bit (test_parallel_run.cpp)
            CAPTURE(P2);
            const fs::path then = dir / fmt::format("on{}then{}", P, P2);
            if (world.rank() == 0) fs::copy(first, then, fs::copy_options::recursive);
            world.barrier();
            if (const auto comm = world.first(P2)) {
                auto run =
                    Run::resume(test::backend(), then.string(), 0.25, {}, RunOutputs::files(then.string()), *comm);
                // Ids, masses, positions and velocities exactly as saved (the snapshot holds the device's state
                // in the input's units, as these are).
                const auto now = all_particles(run->simulation());
                REQUIRE(now.size() == saved.size());
                std::size_t differ = 0;
                for (std::size_t i = 0; i < now.size(); ++i) {
                    const auto& [p, v] = now[i];
                    differ += p.x != saved.pos[3 * i] || p.y != saved.pos[3 * i + 1] || p.z != saved.pos[3 * i + 2] ||
                              p.w != saved.mass[i] || v.x != saved.vel[3 * i] || v.y != saved.vel[3 * i + 1] ||
                              v.z != saved.vel[3 * i + 2];
                }
                CHECK(differ == 0);
                run->run();
                const double max_de = run->last_record().max_de;
                MESSAGE(fmt::format("{} ranks then {}: max |dE/E| {:.3e}, deepest rung {}", P, P2, max_de,
                                    run->simulation().block_stats().deepest));
                CHECK(std::fabs(max_de) < 2e-4);
            }
            world.barrier();
            // Every particle's fields; the set of P files gone with the first checkpoint on P2, whose set alone is
            // left.
            const Snapshot end = read_snapshot((then / "snapshot_00002.tipsy").string());
            CHECK(end.mass == saved.mass);
            if (in)
                test::check_gas_and_stars(end, *in);
            else
                CHECK(end.eps == std::vector<float>(end.size(), static_cast<float>(o.eps)));
            const std::string slot = checkpoint_slot(read_checkpoint_header((then / "checkpoint.bin").string()), "");
            std::set<std::string> left, set;
            for (const auto& e : fs::directory_iterator(then))
                if (e.path().filename().string().rfind("checkpoint.bin.rank", 0) == 0) left.insert(e.path().string());
            for (int k = 1; k < P2; ++k)
                set.insert(checkpoint_rank_file((then / "checkpoint.bin").string(), k, slot));
            CHECK(left == set);
            world.barrier();
        }
    }
}

/// 1 .. the launched ranks.
std::vector<int> every_count()
{
    std::vector<int> v;
    for (int p = 1; p <= Comm::world().size(); ++p)
        v.push_back(p);
    return v;
}

RunOptions restart_options()
{
    // Block time steps, so that the rungs travel too.
    RunOptions o;
    o.ic = "plummer";
    o.n = 2000;
    o.seed = 11;
    o.eps = 0.05;
    o.dt = 1.0 / 16;
    o.steps = "block";
    o.max_rung = 4;
    o.log_every = 1;
    o.snapshot_every = 0.125;
    o.checkpoint_every = 0.125;
    o.format = SnapshotFormat::tipsy;
    return o;
}

} // namespace

TEST_CASE("a checkpoint of P ranks continues on any other number of ranks with the same particles and fields")
{
    const Comm& world = Comm::world();
    const test::SharedFolder dir(world);
    // A Plummer sphere whose first 300 particles are gas and last 200 stars, each with fields of its own: file k of
    // a checkpoint holds the fields of rows [k N / P, (k + 1) N / P) of the input, which a restart cuts anew.
    RunOptions o = restart_options();
    Snapshot in = initial_conditions(o);
    test::make_gas_and_stars(in, 300, 200, static_cast<float>(o.eps));
    const fs::path file = dir / "in.tipsy";
    if (world.rank() == 0) write_snapshot(file.string(), in, SnapshotFormat::tipsy, {});
    world.barrier();
    o.ic = "file";
    o.in = file.string();
    check_restarts(o, &in, dir, every_count(), every_count());
}

TEST_CASE("a generated run continues from all ranks on one, and from one on all")
{
    // Over ranks a generated run's checkpoints hold no fields (every particle has the run's softening): on one rank
    // they are made for the snapshots; from one rank each takes its rows of them.
    const Comm& world = Comm::world();
    const test::SharedFolder dir(world);
    check_restarts(restart_options(), nullptr, dir, {1, world.size()}, {1, world.size()});
    world.barrier();
    // A set of rank files with one missing is refused, naming it.
    if (world.size() > 1 && world.rank() == 0) {
        const fs::path broken = dir / "broken";
        fs::copy(dir / fmt::format("on{}", world.size()), broken, fs::copy_options::recursive);
        const std::string first = (broken / "checkpoint.bin").string();
        const std::string rank1 = checkpoint_rank_file(first, 1, checkpoint_slot(read_checkpoint_header(first), ""));
        fs::remove(rank1);
        const auto one = world.first(1);
        try {
            Run::resume(test::backend(), broken.string(), 0.25, {}, RunOutputs::files(broken.string()), *one);
            FAIL("a checkpoint without one of its rank files was continued");
        } catch (const UsageError& e) {
            CHECK(std::string(e.what()).find(rank1 + " is missing") != std::string::npos);
        }
    } else if (world.size() > 1) {
        world.first(1);
    }
}

TEST_CASE("a rank file of another run among a checkpoint's files is refused at once, naming it")
{
    // Two runs of the same size and steps, of other seeds; a rank file of the second put among the first's was read
    // until the particles' ids collided.
    const Comm& world = Comm::world();
    const fs::path dir = test::shared_temp_folder(world);
    REQUIRE(!dir.empty());
    for (const std::uint64_t seed : {11, 12}) {
        RunOptions o = restart_options();
        o.seed = seed;
        o.t_end = 0.125;
        o.out = (dir / fmt::format("seed{}", seed)).string();
        Run(test::backend(), plan_run({o}, world), {}, world).run();
    }
    world.barrier();
    // Rank 1's file of the set (both runs wrote as many checkpoints: their sets are in the same slot).
    const fs::path run = dir / "seed11";
    const std::string first = (run / "checkpoint.bin").string();
    const fs::path odd = checkpoint_rank_file(first, 1, checkpoint_slot(read_checkpoint_header(first), first));
    if (world.size() > 1) {
        if (world.rank() == 0)
            fs::copy_file(dir / "seed12" / odd.filename(), odd, fs::copy_options::overwrite_existing);
        world.barrier();
        const std::string says =
            fmt::format("{} and {} are of different runs", odd.string(), (run / "checkpoint.bin").string());
        // On as many ranks as wrote it (each reads its own file) and cut anew on one (which reads them all).
        CHECK_THROWS_WITH_AS(
            Run::resume(test::backend(), run.string(), 0.25, {}, RunOutputs::files(run.string()), world),
            doctest::Contains(says.c_str()), UsageError);
        if (const auto one = world.first(1))
            CHECK_THROWS_WITH_AS(
                Run::resume(test::backend(), run.string(), 0.25, {}, RunOutputs::files(run.string()), *one),
                doctest::Contains(says.c_str()), UsageError);
    }
    // The run's own files continue.
    world.barrier();
    if (world.rank() == 0) fs::copy(dir / "seed12", dir / "copy", fs::copy_options::recursive);
    world.barrier();
    const std::string copy = (dir / "copy").string();
    CHECK_NOTHROW(Run::resume(test::backend(), copy, 0.25, {}, RunOutputs::files(copy), world));
    world.barrier();
    if (world.rank() == 0) fs::remove_all(dir);
}

TEST_CASE("an HDF5 input's particle ids are in every snapshot, over P ranks and after a restart on another number")
{
    const Comm& world = Comm::world();
    const test::SharedFolder dir(world);
    RunOptions o = restart_options();
    o.format = SnapshotFormat::hdf5;
    Snapshot in = initial_conditions(o);
    in.n_gas = 100, in.n_star = 50, in.n_dark = o.n - 150;
    in.gas_rho.assign(100, 1.f), in.gas_temp.assign(100, 1e4f), in.gas_metals.assign(100, 0.02f);
    in.star_metals.assign(50, 0.01f), in.star_tform.assign(50, -1.f);
    for (std::size_t i = 0; i < o.n; ++i)
        in.ids.push_back(5'000'000'000ull + 13 * (o.n - i)); // beyond 32 bits, descending
    const fs::path file = dir / "in.hdf5";
    if (world.rank() == 0) write_snapshot(file.string(), in, SnapshotFormat::hdf5, {});
    world.barrier();
    o.ic = "file";
    o.in = file.string();
    o.out = (dir / "run").string();
    o.t_end = 0.125;
    Run(test::backend(), plan_run({o})).run();
    world.barrier();
    // Continued on one rank (from one: on all ranks).
    const int P2 = world.size() > 1 ? 1 : world.size();
    if (const auto comm = world.first(P2))
        Run::resume(test::backend(), o.out, 0.25, {}, RunOutputs::files(o.out), *comm)->run();
    world.barrier();
    for (const char* name : {"snapshot_00000.hdf5", "snapshot_00001.hdf5", "snapshot_00002.hdf5"}) {
        CAPTURE(name);
        CHECK(read_snapshot((dir / "run" / name).string()).ids == in.ids);
    }
}

} // namespace banyan
