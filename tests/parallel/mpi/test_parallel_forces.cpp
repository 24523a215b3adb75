/**
 * @file test_parallel_forces.cpp
 * @brief Tree forces over P ranks (core/parallel/): against one rank's tree and double-precision direct summation,
 *        with particles crossing domains, ranks left without particles and more ranks than particles.
 *
 * Every rank makes the same particles and starts with the slice [r N / P, (r + 1) N / P) (ids = global indices);
 * results are gathered in global order on every rank and checked there. Checks sit between collectives (CHECK, not
 * REQUIRE), so that a failure on one rank never leaves the others waiting.
 */
#include "core/gravity/forces.hpp"
#include "core/parallel/comm.hpp"
#include "core/parallel/domain.hpp"
#include "core/parallel/parallel_forces.hpp"
#include "core/models/plummer.hpp"
#include "core/tree/octree.hpp"
#include "tests/support/harness.hpp"
#include "tests/parallel/mpi/force_errors.hpp"

#include <doctest/doctest.h>
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <vector>

namespace banyan {
namespace {

using test::backend;
using test::quantile;

/// This rank's slice of @p all with global ids.
void slice(const std::vector<bn_f4>& all, const Comm& comm, std::vector<bn_f4>& pos, std::vector<std::uint64_t>& ids)
{
    const std::size_t n = all.size(), P = static_cast<std::size_t>(comm.size()),
                      r = static_cast<std::size_t>(comm.rank());
    const std::size_t a = r * n / P, b = (r + 1) * n / P;
    pos.assign(all.begin() + static_cast<long>(a), all.begin() + static_cast<long>(b));
    ids.resize(b - a);
    std::iota(ids.begin(), ids.end(), std::uint64_t{a});
}

/// @p tree holds this rank's slice of @p all (ids = global indices).
void set_slice(Octree& tree, const std::vector<bn_f4>& all, const Comm& comm)
{
    std::vector<bn_f4> pos;
    std::vector<std::uint64_t> ids;
    slice(all, comm, pos, ids);
    tree.set_particles(pos, {}, ids);
}

/// The results of every rank in global order (collective); counts[id] = how often id was seen.
std::vector<bn_f4> gather_global(const Comm& comm, Octree& tree, const TreeForces& f, std::size_t n,
                                 std::vector<int>& seen)
{
    const std::size_t m = tree.size();
    std::vector<bn_f4> acc = m ? f.acc().download(m) : std::vector<bn_f4>{};
    std::vector<bn_u32> ids = m ? tree.ids().download(m) : std::vector<bn_u32>{};
    const auto all_acc = all_gather<bn_f4>(comm, acc);
    const auto all_ids = all_gather<bn_u32>(comm, ids);
    std::vector<bn_f4> out(n, bn_f4{NAN, NAN, NAN, NAN});
    seen.assign(n, 0);
    for (std::size_t i = 0; i < all_ids.size(); ++i) {
        if (all_ids[i] >= n) continue;
        ++seen[all_ids[i]];
        out[all_ids[i]] = all_acc[i];
    }
    return out;
}

/// gather_global of @p f's accelerations, with the check that every particle came back exactly once.
std::vector<bn_f4> gather_each_once(const Comm& comm, Octree& tree, const TreeForces& f, std::size_t n)
{
    std::vector<int> seen;
    auto acc = gather_global(comm, tree, f, n, seen);
    CHECK(std::all_of(seen.begin(), seen.end(), [](int s) { return s == 1; }));
    return acc;
}

/// Errors over ranks (@p mine) against one rank's (@p one), sorted. Same opening test, other cells: each rank's tree
/// covers its own particles only, so particle by particle the errors differ from one rank's either way (the medians
/// measured come out 10-20 % lower). Tolerances: the median within 25 %, the 99th percentile within 50 %, the worst
/// (one particle, next to a cell the cut split) within a factor 3 (2.64 measured: 6000 Plummer particles, theta 0.5,
/// 2 ranks).
void check_like_one_rank(const std::vector<double>& mine, const std::vector<double>& one)
{
    CHECK(quantile(mine, 0.5) <= 1.25 * quantile(one, 0.5) + 1e-7);
    CHECK(quantile(mine, 0.99) <= 1.5 * quantile(one, 0.99) + 1e-7);
    CHECK(mine.back() <= 3.0 * one.back() + 1e-6);
}

/// Forces of @p all over the ranks (theta 0.75): every particle once, errors no worse than one rank's.
ParallelTimings check_against_one_rank(const std::vector<bn_f4>& all, float theta, float eps, ParallelForces& pf,
                                       Octree& tree, bool from_slices)
{
    const Comm& comm = Comm::world();
    const std::size_t n = all.size();
    if (from_slices) set_slice(tree, all, comm);
    ParallelTimings t;
    pf.compute(tree, theta, eps, &t);
    const auto acc = gather_each_once(comm, tree, pf.forces(), n);
    const auto mine = test::force_errors(all, acc, eps);
    const auto one = test::force_errors(all, tree_forces(backend(), all, theta, eps).acc, eps);
    const std::string what =
        fmt::format("P = {}, n = {}: median {:.3e} (one rank {:.3e}), 99% {:.3e} ({:.3e}), max {:.3e} ({:.3e}); "
                    "moved {}, LET cells {} particles {}",
                    comm.size(), n, quantile(mine, 0.5), quantile(one, 0.5), quantile(mine, 0.99), quantile(one, 0.99),
                    mine.back(), one.back(), t.balance_stats.sent, t.let.cells_sent, t.let.particles_sent);
    INFO(what);
    if (std::getenv("BANYAN_TEST_VERBOSE")) fmt::print("rank {}: {}\n", comm.rank(), what);
    check_like_one_rank(mine, one);
    return t;
}

} // namespace

TEST_CASE("tree forces over P ranks match one rank's and direct summation")
{
    const Comm& comm = Comm::world();
    const std::size_t n = std::min<std::size_t>(test::max_size() / 64, 6000);
    const auto p = plummer(n, 1234).pos;
    for (const float theta : {0.5f, 0.75f}) {
        Octree tree(backend());
        ParallelForces pf(backend(), comm);
        check_against_one_rank(p, theta, 0.01f, pf, tree, true);
        // Again on the same ranks: the decomposition now weighs the measured work.
        check_against_one_rank(p, theta, 0.01f, pf, tree, false);
    }
}

TEST_CASE("over P ranks every tree is built in the decomposition's frame, and the walks do one rank's work")
{
    // A rank's tree built in its own bounding box has cells astride the other ranks' ranges: a thin slice of its
    // particles along a range's face, a few particles across a large cell, becomes a group whose wide box opens
    // every cell near it. Measured here (2^15 particles): 50 % more particle-particle interactions than one rank
    // on 2 to 4 ranks that way, 0.1-0.3 % in the common frame, whose cells are the one-rank tree's, cut only
    // where a rank's range ends.
    const Comm& comm = Comm::world();
    const std::size_t n = std::min<std::size_t>(test::max_size() / 4, 1u << 15);
    const auto all = plummer(n, 4321).pos;
    Octree tree(backend());
    set_slice(tree, all, comm);
    ParallelForces pf(backend(), comm);
    pf.compute(tree, 0.75f, 0.01f);
    if (comm.parallel()) CHECK(tree.built_in_frame_box() == (tree.size() > 0));
    // The same frame on every rank.
    const auto frame = tree.frame().download(1);
    const auto frames = all_gather<bn_f4>(comm, frame);
    for (const auto& f : frames)
        CHECK(std::memcmp(&f, &frames.front(), sizeof f) == 0);
    std::array<std::uint64_t, 2> mine{pf.forces().totals().pp, pf.forces().totals().pc};
    comm.sum(std::span<std::uint64_t>(mine));
    // One rank's tree of all particles in the same frame.
    std::array<float, 3> lo{all[0].x, all[0].y, all[0].z}, hi = lo;
    for (const auto& p : all)
        for (int k = 0; k < 3; ++k) {
            lo[k] = std::min(lo[k], (&p.x)[k]);
            hi[k] = std::max(hi[k], (&p.x)[k]);
        }
    Octree whole(backend());
    whole.set_particles(all);
    if (comm.parallel()) whole.set_frame_box(common_frame_box(lo, hi)); // one rank keeps its own box
    whole.build();
    TreeForces walk(backend());
    walk.compute(whole, 0.75f, 0.01f);
    const auto one = walk.totals();
    const double pp = static_cast<double>(mine[0]) / static_cast<double>(one.pp);
    const double pc = static_cast<double>(mine[1]) / static_cast<double>(one.pc);
    INFO(fmt::format("P = {}, n = {}: interactions against one rank's: pp {:.4f}, pc {:.4f}", comm.size(), n, pp, pc));
    if (std::getenv("BANYAN_TEST_VERBOSE")) fmt::print("rank {}: pp {:.4f} pc {:.4f}\n", comm.rank(), pp, pc);
    CHECK(pp <= 1.02);
    CHECK(pc <= 1.02);
}

TEST_CASE("the relative criterion over P ranks: the trees sent are cut for the receivers' smallest |a|")
{
    // Theta 1 and a small alpha: the relative test decides nearly everything. A tree cut by the geometric test
    // alone would accept cells that the receiving groups open, and the errors would be those of theta 1 (about
    // 30 times larger, measured) instead of one rank's.
    const Comm& comm = Comm::world();
    // 20000: at 5000 each rank's tree is sent nearly whole, and a tree cut without alpha passes too.
    const std::size_t n = std::min<std::size_t>(test::max_size(), 20000);
    const float eps = 0.01f;
    const OpeningCriterion criterion{1.0f, 2.5e-4f};
    const auto all = plummer(n, 4321).pos;
    // The previous |a| of every particle (as a simulation keeps in vel.w): double-precision direct sums.
    std::vector<bn_f4> vel(n, bn_f4{0, 0, 0, 0});
    {
        auto p = backend().upload<bn_f4>(all, "test.pos");
        std::vector<bn_u32> t(n);
        std::iota(t.begin(), t.end(), 0u);
        auto targets = backend().upload<bn_u32>(t, "test.targets");
        auto ref = backend().alloc<double>(4 * n, "test.ref");
        direct_forces_f64_targets(backend(), p, n, targets, n, eps, ref);
        const auto r = ref.download(4 * n);
        for (std::size_t i = 0; i < n; ++i)
            vel[i].w = static_cast<float>(
                std::sqrt(r[4 * i] * r[4 * i] + r[4 * i + 1] * r[4 * i + 1] + r[4 * i + 2] * r[4 * i + 2]));
    }
    // One rank: the whole set.
    Octree one(backend());
    one.set_particles(all, vel);
    one.build();
    TreeForces f1(backend());
    f1.set_previous_accelerations(&one.vel());
    f1.compute(one, criterion, eps);
    auto out = backend().alloc<bn_f4>(n, "test.acc");
    f1.to_input_order(one, out);
    const auto e1 = test::force_errors(all, out.download(n), eps);
    // P ranks, twice (the second decomposed by the measured work).
    std::vector<bn_f4> pos;
    std::vector<std::uint64_t> ids;
    slice(all, comm, pos, ids);
    const std::vector<bn_f4> my_vel(vel.begin() + static_cast<long>(ids.front()),
                                    vel.begin() + static_cast<long>(ids.front() + ids.size()));
    Octree tree(backend());
    tree.set_particles(pos, my_vel, ids);
    ParallelForces pf(backend(), comm);
    pf.forces().set_previous_accelerations(&tree.vel());
    for (int round = 0; round < 2; ++round) {
        ParallelTimings t;
        pf.compute(tree, criterion, eps, &t);
        const auto acc = gather_each_once(comm, tree, pf.forces(), n);
        const auto e = test::force_errors(all, acc, eps);
        // The previous |a| travelled with its particle: vel.w is still that particle's.
        const std::size_t m = tree.size();
        std::size_t wrong = 0;
        if (m) {
            const auto v = tree.vel().download(m);
            const auto id = tree.ids().download(m);
            for (std::size_t i = 0; i < m; ++i)
                wrong += v[i].w != vel[id[i]].w;
        }
        CHECK(wrong == 0);
        const std::string what =
            fmt::format("P = {}, round {}: median {:.3e} (one rank {:.3e}), 99% {:.3e} ({:.3e}), "
                        "max {:.3e} ({:.3e}); LET cells {} particles {}",
                        comm.size(), round, quantile(e, 0.5), quantile(e1, 0.5), quantile(e, 0.99), quantile(e1, 0.99),
                        e.back(), e1.back(), t.let.cells_sent, t.let.particles_sent);
        INFO(what);
        if (std::getenv("BANYAN_TEST_VERBOSE")) fmt::print("rank {}: {}\n", comm.rank(), what);
        check_like_one_rank(e, e1);
        // The criterion holds over ranks as on one: errors of the order of alpha.
        CHECK(quantile(e, 0.99) < 10 * criterion.alpha);
    }
}

TEST_CASE("the far groups, walked while the trees travel, get bit for bit the forces of the walk after them")
{
    // The same particles on the same ranks twice: with the top trees (the far groups walk the local and the top
    // roots before the exchange, the near ones the graft after it) and without (every group walks the graft after
    // the exchange). A far group meets exactly the cells of the received trees in the top trees, in the same order.
    const Comm& comm = Comm::world();
    const std::size_t n = std::min<std::size_t>(test::max_size(), 20000);
    const auto all = plummer(n, 2468).pos;
    std::vector<bn_f4> pos;
    std::vector<std::uint64_t> ids;
    slice(all, comm, pos, ids);
    for (const float theta : {0.5f, 0.75f}) {
        std::vector<bn_f4> acc[2];
        InteractionTotals totals[2];
        std::uint64_t counts[2] = {0, 0}; // far groups and groups, summed over ranks
        for (int split = 0; split < 2; ++split) {
            Octree tree(backend());
            tree.set_particles(pos, {}, ids);
            ParallelForces pf(backend(), comm);
            pf.let().set_top_per_rank(split ? 256 : 0);
            ParallelTimings t;
            pf.compute(tree, theta, 0.01f, &t);
            acc[split] = gather_each_once(comm, tree, pf.forces(), n);
            totals[split] = pf.forces().totals();
            if (split) counts[0] = t.let.far_groups, counts[1] = t.let.groups;
        }
        comm.sum(std::span<std::uint64_t>(counts));
        INFO(fmt::format("P = {}, theta {}: {} of {} groups far", comm.size(), theta, counts[0], counts[1]));
        CHECK(std::memcmp(acc[0].data(), acc[1].data(), n * sizeof(bn_f4)) == 0);
        CHECK(totals[0].pp == totals[1].pp);
        CHECK(totals[0].pc == totals[1].pc);
        // Both kinds of group were walked (a test of the split, not of one side of it).
        if (comm.parallel()) {
            CHECK(counts[0] > 0);
            CHECK(counts[0] < counts[1]);
        }
    }
}

TEST_CASE("theta 0 over P ranks is direct summation")
{
    const Comm& comm = Comm::world();
    const std::size_t n = 1500;
    const auto all = plummer(n, 77).pos;
    Octree tree(backend());
    set_slice(tree, all, comm);
    ParallelForces pf(backend(), comm);
    pf.compute(tree, 0.0f, 0.02f);
    std::vector<int> seen;
    const auto acc = gather_global(comm, tree, pf.forces(), n, seen);
    const auto e = test::force_errors(all, acc, 0.02);
    CHECK(e.back() < 2e-5);
    // Every pair once: N (N - 1) particle interactions over all ranks, no cell accepted.
    std::uint64_t totals[2] = {pf.forces().totals().pp, pf.forces().totals().pc};
    comm.sum(std::span<std::uint64_t>(totals, 2));
    CHECK(totals[0] == std::uint64_t{n} * (n - 1));
    CHECK(totals[1] == 0);
}

TEST_CASE("the field at other points over P ranks (the block-step probe): cells sent without particles taken whole")
{
    // The symmetric rung rule's probe (Simulation::probe_rungs) walks, over ranks, the trees the other ranks cut for
    // this substep's boxes, with this rank's group boxes widened to the predicted positions: the walk may ask to
    // open a cell its sender sent without particles, and must then take it whole rather than lose its mass. Here,
    // as in the probe, theta 1 over trees cut for the force walk's 0.75, with the sinks 0.2 from their particles
    // (a tenth of the Plummer sphere's half-mass radius; a probe's moves are a step's). Measured on PoCL, 4000
    // particles: median error 3.6e-4 on 1 rank, 3.3e-4 to 3.6e-4 on 2 to 4; 99th percentile 3.8e-3 on 1, 8.9e-3
    // to 1.2e-2 on 2 to 4 (a sink next to a cell taken whole: the worst 0.2 to 0.87); with such cells opened
    // instead, their mass lost, median 1.5e-2 and 99th percentile 0.53 on 3 ranks.
    const Comm& comm = Comm::world();
    const std::size_t n = std::min<std::size_t>(test::max_size() / 64, 4000);
    const float eps = 0.01f;
    const auto all = plummer(n, 99).pos;
    Octree tree(backend());
    set_slice(tree, all, comm);
    ParallelForces pf(backend(), comm);
    pf.compute(tree, 0.75f, eps);
    const std::size_t m = tree.size();
    const auto pos = m ? tree.pos().download(m) : std::vector<bn_f4>{};
    const auto ids = m ? tree.ids().download(m) : std::vector<bn_u32>{};
    // A displacement of 0.2 in a direction that depends on the particle alone (the same on any number of ranks).
    auto sink_of = [](bn_f4 p, std::uint64_t id) {
        const double u = std::cos(1.3 * double(id)), w = std::sin(2.1 * double(id)), z = std::cos(0.7 * double(id));
        const double l = std::sqrt(u * u + w * w + z * z) + 1e-12;
        return bn_f4{p.x + float(0.2 * u / l), p.y + float(0.2 * w / l), p.z + float(0.2 * z / l), p.w};
    };
    std::vector<bn_f4> sinks(m);
    for (std::size_t i = 0; i < m; ++i)
        sinks[i] = sink_of(pos[i], ids[i]);
    auto sinks_dev = backend().upload<bn_f4>(sinks.empty() ? std::vector<bn_f4>(1) : sinks, "test.sinks");
    TreeForces probe(backend());
    if (m) {
        tree.fit_group_boxes(sinks_dev);
        probe.set_sinks(&sinks_dev);
    }
    probe.begin(tree, 1.0f, eps, comm.parallel() ? &pf.let().remote() : nullptr);
    probe.end(tree);
    const auto acc = gather_each_once(comm, tree, probe, n);
    // The field at each sink from every particle but its own, in double on the host.
    std::vector<double> err(n);
    for (std::size_t i = 0; i < n; ++i) {
        const bn_f4 s = sink_of(all[i], i);
        double a[3] = {0, 0, 0};
        for (std::size_t j = 0; j < n; ++j) {
            if (j == i) continue;
            const double d[3] = {double(all[j].x) - s.x, double(all[j].y) - s.y, double(all[j].z) - s.z};
            const double r2 = d[0] * d[0] + d[1] * d[1] + d[2] * d[2] + double(eps) * eps;
            const double f = all[j].w / (r2 * std::sqrt(r2));
            for (int k = 0; k < 3; ++k)
                a[k] += f * d[k];
        }
        const double dx = acc[i].x - a[0], dy = acc[i].y - a[1], dz = acc[i].z - a[2];
        err[i] = std::sqrt((dx * dx + dy * dy + dz * dz) / (a[0] * a[0] + a[1] * a[1] + a[2] * a[2]));
        if (!std::isfinite(err[i])) err[i] = 1e30;
    }
    std::sort(err.begin(), err.end());
    const std::string what = fmt::format("P = {}: median {:.3e}, 99% {:.3e}, max {:.3e}", comm.size(),
                                         quantile(err, 0.5), quantile(err, 0.99), err.back());
    INFO(what);
    if (std::getenv("BANYAN_TEST_VERBOSE")) fmt::print("rank {}: {}\n", comm.rank(), what);
    CHECK(quantile(err, 0.5) < 1e-3);
    CHECK(quantile(err, 0.99) < 3e-2);
    CHECK(err.back() < 2.0); // finite: every sink got a field
}

TEST_CASE("particles that cross domains every time")
{
    // A Plummer sphere turned by 40 degrees about z before each evaluation: particles change rank every time.
    const Comm& comm = Comm::world();
    const std::size_t n = 4000;
    auto all = plummer(n, 99).pos;
    Octree tree(backend());
    ParallelForces pf(backend(), comm);
    const double c = std::cos(0.7), s = std::sin(0.7);
    for (int turn = 0; turn < 4; ++turn) {
        const ParallelTimings t = check_against_one_rank(all, 0.75f, 0.01f, pf, tree, turn == 0);
        std::uint64_t sent = t.balance_stats.sent;
        comm.sum(std::span<std::uint64_t>(&sent, 1));
        if (comm.size() > 1) CHECK(sent > 0);
        for (auto& q : all) {
            const double x = q.x, y = q.y;
            q.x = static_cast<float>(c * x - s * y);
            q.y = static_cast<float>(s * x + c * y);
        }
        // The tree holds this rank's particles: turn them the same way (by id, from the turned set).
        const std::size_t m = tree.size();
        if (m) {
            const auto ids = tree.ids().download(m);
            std::vector<bn_f4> mine(m);
            for (std::size_t i = 0; i < m; ++i)
                mine[i] = all[ids[i]];
            tree.pos().upload(std::span<const bn_f4>(mine));
        }
    }
}

TEST_CASE("ranks without particles, and more ranks than particles")
{
    const Comm& comm = Comm::world();
    // Two clumps of particles at two points each: two distinct keys, so at most two ranks hold any.
    std::vector<bn_f4> all;
    for (int i = 0; i < 24; ++i)
        all.push_back(bn_f4{i % 2 ? 1.0f : -1.0f, 0.25f, 0.0f, 1.0f / 24});
    for (const std::size_t n : {all.size(), std::size_t{1}, std::size_t{2}, std::size_t{3}}) {
        std::vector<bn_f4> p(all.begin(), all.begin() + static_cast<long>(n));
        if (n <= 3)
            for (std::size_t i = 0; i < n; ++i)
                p[i] = bn_f4{0.1f * static_cast<float>(i), -0.3f + 0.07f * static_cast<float>(i * i), 0.2f, 0.5f};
        Octree tree(backend());
        ParallelForces pf(backend(), comm);
        check_against_one_rank(p, 0.75f, 0.05f, pf, tree, true);
        std::uint64_t holding = tree.size() > 0 ? 1 : 0;
        comm.sum(std::span<std::uint64_t>(&holding, 1));
        CHECK(holding <= (n == all.size() ? 2 : n)); // one key goes to one rank
        CHECK(holding >= 1);
    }
}

TEST_CASE("the phases over ranks: the slowest rank, the mean, and the waiting in the messages")
{
    // Rank r reports phase times that grow with r, and r + 1 ms in the messages: the slowest is rank P-1's, the mean
    // the average, and each rank waited its time there beyond rank 0's (1 ms), the last nothing beyond the least.
    const Comm& comm = Comm::world();
    const double r = comm.rank(), P = comm.size();
    ParallelTimings t;
    t.balance = 1 + r, t.build = 10 + r, t.let_make = 100 + r, t.comm = 1 + r, t.walk = 1000 + 2 * r;
    t.walk_device = 900 + r, t.total = 2000 + 3 * r;
    const ParallelPhases p = phases_over_ranks(comm, t);
    CHECK(p.domain.max == P);
    CHECK(p.domain.mean == doctest::Approx(1 + (P - 1) / 2));
    CHECK(p.build.max == 10 + P - 1);
    CHECK(p.let_make.mean == doctest::Approx(100 + (P - 1) / 2));
    CHECK(p.gravity.max == 1000 + 2 * (P - 1));
    CHECK(p.gravity_device.max == 900 + P - 1);
    CHECK(p.total.mean == doctest::Approx(2000 + 3 * (P - 1) / 2));
    CHECK(p.comm.max == P);
    CHECK(p.wait.max == P - 1);
    CHECK(p.wait.mean == doctest::Approx((P - 1) / 2));
    // Sums over steps: what since() takes back out.
    ParallelTimings sum = t;
    sum += t;
    CHECK(sum.since(t).walk == t.walk);
    CHECK(sum.comm == 2 * t.comm);
}

} // namespace banyan
