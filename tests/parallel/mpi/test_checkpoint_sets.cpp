/**
 * @file test_checkpoint_sets.cpp
 * @brief Checkpoint sets of the releases before slots (rank R's file checkpoint.bin.rankR, no slot): a whole set
 *        continues bit for bit and is replaced by a set in slots at its first checkpoint; a set that a kill between
 *        the ranks' renames left of two steps is completed from the whole files still under their temporary names,
 *        and without them is refused. (Kills of today's sets at every point of their writing:
 *        checkpoint_kills.sh.)
 */
#include "core/error.hpp"
#include "core/parallel/comm.hpp"
#include "core/simulation/checkpoint.hpp"
#include "core/simulation/run.hpp"
#include "core/simulation/run_options.hpp"
#include "tests/parallel/mpi/shared_folder.hpp"
#include "tests/support/harness.hpp"
#include "tests/support/run_files.hpp"

#include <doctest/doctest.h>
#include <fmt/format.h>

#include <set>

namespace banyan {
namespace {

namespace fs = std::filesystem;

RunOptions options(const fs::path& out, double t_end)
{
    RunOptions o;
    o.ic = "plummer";
    o.n = 1000;
    o.seed = 9;
    o.eps = 0.05f;
    o.dt = 1.0 / 64;
    o.t_end = t_end;
    o.log_every = 4;
    o.snapshot_every = 0.125;
    o.checkpoint_every = 0.125;
    o.out = out.string();
    o.format = SnapshotFormat::tipsy;
    return o;
}

/// Runs @p o on every rank from its start to its end.
void run_new(const RunOptions& o)
{
    Run(test::backend(), plan_run({o})).run();
}

/// Continues the run in @p dir on every rank to @p t_end.
void run_on(const fs::path& dir, double t_end)
{
    Run::resume(test::backend(), dir.string(), t_end, {}, RunOutputs::files(dir.string()))->run();
}

/// Rank 0 copies folder @p from to @p to; collective.
void copy_folder(const fs::path& from, const fs::path& to, const Comm& comm)
{
    if (comm.rank() == 0) fs::copy(from, to, fs::copy_options::recursive);
    comm.barrier();
}

/// The names of the rank files in @p dir (checkpoint.bin.rank*), and of those of the set its checkpoint.bin names.
std::set<std::string> rank_files(const fs::path& dir)
{
    std::set<std::string> v;
    for (const auto& e : fs::directory_iterator(dir))
        if (const std::string name = e.path().filename().string(); name.rfind("checkpoint.bin.rank", 0) == 0)
            v.insert(name);
    return v;
}
std::set<std::string> set_files(const fs::path& dir)
{
    const std::string first = (dir / "checkpoint.bin").string();
    const KeyValues kv = read_checkpoint_header(first);
    std::set<std::string> v;
    for (std::uint64_t k = 1; k < (kv.count("ranks") ? u64_of(kv, "ranks", first) : 1); ++k)
        v.insert(fs::path(checkpoint_rank_file(first, k, checkpoint_slot(kv, first))).filename().string());
    return v;
}

/// Turns the checkpoint set in @p dir into one of a release before slots: each rank's file rewritten without its
/// slot under its old name (checkpoint.bin, checkpoint.bin.rankR), the files in slots gone. Collective.
void make_old_set(const fs::path& dir, const Comm& comm)
{
    const std::string first = (dir / "checkpoint.bin").string();
    const std::string slot = checkpoint_slot(read_checkpoint_header(first), first);
    comm.barrier(); // every rank has read the slot before rank 0's file is rewritten
    const std::string now = checkpoint_rank_file(first, static_cast<std::uint64_t>(comm.rank()), slot);
    const Checkpoint c = read_checkpoint(now);
    // The header's lines but the slot and those write_checkpoint adds itself.
    const std::set<std::string> left_out = {"slot",   "format",     "particles", "n_gas", "n_dark",
                                            "n_star", "length_exp", "mass_exp",  "rungs", "file_ids"};
    std::string text;
    for (const auto& [key, value] : c.header)
        if (!left_out.count(key)) text += fmt::format("{}={}\n", key, value);
    write_checkpoint(checkpoint_rank_file(first, static_cast<std::uint64_t>(comm.rank()), {}), text, c.state, c.fields);
    if (comm.rank() != 0) fs::remove(now);
    comm.barrier();
}

} // namespace

TEST_CASE("a checkpoint set of the releases before slots continues bit for bit, and its first checkpoint replaces it")
{
    const Comm& comm = Comm::world();
    const test::SharedFolder dir(comm);
    run_new(options(dir / "straight", 0.25));
    run_new(options(dir / "old", 0.125));
    make_old_set(dir / "old", comm);
    if (comm.parallel()) CHECK(fs::exists(dir / "old" / "checkpoint.bin.rank1"));
    run_on(dir / "old", 0.25);
    comm.barrier();
    CHECK(test::file_bytes(dir / "old" / "energy.csv") == test::file_bytes(dir / "straight" / "energy.csv"));
    CHECK(!test::file_bytes(dir / "old" / "snapshot_00002.tipsy").empty());
    CHECK(test::file_bytes(dir / "old" / "snapshot_00002.tipsy") ==
          test::file_bytes(dir / "straight" / "snapshot_00002.tipsy"));
    // Only the new set's rank files are left (none of the old names).
    CHECK(rank_files(dir / "old") == set_files(dir / "old"));
    CHECK(rank_files(dir / "old") == rank_files(dir / "straight"));
}

TEST_CASE("an old checkpoint set that a kill left of two steps is completed from its files under temporary names")
{
    const Comm& comm = Comm::world();
    if (!comm.parallel()) return; // one rank writes one file: never a set of two steps
    const test::SharedFolder dir(comm);
    run_new(options(dir / "straight", 0.375));
    // The set of step 8 (a), and of step 16 (b, the same run continued).
    run_new(options(dir / "a", 0.125));
    copy_folder(dir / "a", dir / "b", comm);
    run_on(dir / "b", 0.25);
    make_old_set(dir / "a", comm);
    make_old_set(dir / "b", comm);
    // What issue 45's run left: the other ranks renamed their files of step 16, rank 0 was killed with its file of
    // step 16 whole under its temporary name and checkpoint.bin still of step 8.
    const fs::path broken = dir / "broken", tmp = broken / "checkpoint.bin.tmp.4242";
    copy_folder(dir / "b", broken, comm);
    if (comm.rank() == 0) {
        fs::rename(broken / "checkpoint.bin", tmp);
        fs::copy_file(dir / "a" / "checkpoint.bin", broken / "checkpoint.bin");
    }
    comm.barrier();
    // Without that file the set is refused, on every rank.
    const fs::path hopeless = dir / "hopeless";
    copy_folder(broken, hopeless, comm);
    if (comm.rank() == 0) fs::remove(hopeless / "checkpoint.bin.tmp.4242");
    comm.barrier();
    try {
        run_on(hopeless, 0.375);
        FAIL("a set of two steps was continued");
    } catch (const UsageError& e) {
        CHECK(std::string(e.what()).find("are of different steps") != std::string::npos);
    }
    comm.barrier();
    // With it, the run continues from step 16 as the straight run went on.
    run_on(broken, 0.375);
    comm.barrier();
    CHECK(!fs::exists(tmp));
    CHECK(test::file_bytes(broken / "energy.csv") == test::file_bytes(dir / "straight" / "energy.csv"));
    CHECK(!test::file_bytes(broken / "snapshot_00003.tipsy").empty());
    CHECK(test::file_bytes(broken / "snapshot_00003.tipsy") ==
          test::file_bytes(dir / "straight" / "snapshot_00003.tipsy"));
    CHECK(rank_files(broken) == set_files(broken));
}

} // namespace banyan
