/**
 * @file test_race_check.cpp
 * @brief Every kernel of the program launched at small sizes, results checked against the CPU: the part of the suite
 *        that tests/tools/oclgrind_check.sh runs under Oclgrind (data races, barrier divergence, uninitialised values).
 *
 * Oclgrind interprets every work-item, so the sizes here are the smallest that still reach each code path that
 * matters for races: several work-groups, partial last tiles, the scan's tile-lookup mode, more than one sort pass,
 * a tree several levels deep, a walk whose groups meet cells and particles. Primitives run at work-group size 64 (one
 * AMD wavefront: nothing may rely on a wider lockstep) and 256 (CUDA: 256 only). The full sweeps are in the other
 * parts; this part runs with them on every backend too. tests/tools/oclgrind_check.sh checks that every kernel of the
 * program ran.
 */
#include "tests/support/checks.hpp"
#include "tests/support/harness.hpp"
#include "tests/support/inputs.hpp"

#include "core/device/grid.hpp"
#include "core/device/kernels.hpp"
#include "core/gravity/direct.hpp"
#include "core/parallel/comm.hpp"
#include "core/parallel/domain.hpp"
#include "core/parallel/let.hpp"
#include "core/models/plummer.hpp"
#include "core/simulation/simulation.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

using namespace banyan;

namespace {

/// Work-group sizes of the primitives here: one AMD wavefront and the default (CUDA has the default only).
std::vector<std::size_t> race_wgs()
{
    std::vector<std::size_t> out;
    for (std::size_t wg : test::work_group_sizes())
        if (wg == 64 || wg == BANYAN_WG_DEFAULT) out.push_back(wg);
    return out;
}

std::vector<bn_u32> random_u32(std::size_t n, bn_u32 below)
{
    std::vector<bn_u32> v(n);
    for (auto& x : v)
        x = static_cast<bn_u32>(test::rng()() % below);
    return v;
}

struct WgGuard {
    ~WgGuard() { test::restore_work_group_size(); }
};

} // namespace

TEST_CASE("race check: scans, compaction and split over one tile and several")
{
    auto& be = test::backend();
    WgGuard guard;
    for (std::size_t wg : race_wgs()) {
        be.set_work_group_size(wg);
        // One partial tile, and three tiles (the tile-lookup mode) with a partial last one.
        for (std::size_t n : {std::size_t{300}, 2 * wg * BANYAN_SCAN_ITEMS + 77}) {
            CAPTURE(wg);
            CAPTURE(n);
            const auto host = random_u32(n, 1000);
            std::vector<bn_u32> incl(n), excl(n);
            std::inclusive_scan(host.begin(), host.end(), incl.begin());
            std::exclusive_scan(host.begin(), host.end(), excl.begin(), bn_u32{0});
            const auto in = be.upload<bn_u32>(host, "race.in");
            auto out = be.alloc<bn_u32>(n, "race.out");
            be.inclusive_scan(in, out, n);
            CHECK(out.download() == incl);
            be.exclusive_scan(in, out, n);
            CHECK(out.download() == excl);

            const auto flags_host = random_u32(n, 3); // about a third zero
            std::vector<bn_u32> kept, parted;
            for (std::size_t i = 0; i < n; ++i)
                if (flags_host[i]) kept.push_back(host[i]);
            parted = kept;
            for (std::size_t i = 0; i < n; ++i)
                if (!flags_host[i]) parted.push_back(host[i]);
            const auto flags = be.upload<bn_u32>(flags_host, "race.flags");
            auto count = be.alloc<bn_u32>(1, "race.count");
            be.compact(in, flags, n, out, count);
            CHECK(count.download()[0] == kept.size());
            CHECK(out.download(kept.size()) == kept);
            be.split(in, flags, n, out, count);
            CHECK(count.download()[0] == kept.size());
            CHECK(out.download() == parted);
        }
    }
}

TEST_CASE("race check: bounds, sums, gathers and a radix sort of 64-bit keys")
{
    auto& be = test::backend();
    WgGuard guard;
    const std::size_t n = 1000;
    for (std::size_t wg : race_wgs()) {
        be.set_work_group_size(wg);
        CAPTURE(wg);
        const auto pos_host = test::cube_input(n, 5);
        const auto pos = be.upload<bn_f4>(pos_host, "race.pos");
        auto bounds = be.alloc<bn_f4>(2, "race.bounds");
        be.reduce_bounds(pos, n, bounds);
        const auto b = bounds.download();
        float lo[4] = {pos_host[0].x, pos_host[0].y, pos_host[0].z, pos_host[0].w}, hi[4];
        std::copy(lo, lo + 4, hi);
        for (const bn_f4& p : pos_host) {
            const float c[4] = {p.x, p.y, p.z, p.w};
            for (int k = 0; k < 4; ++k)
                lo[k] = std::min(lo[k], c[k]), hi[k] = std::max(hi[k], c[k]);
        }
        CHECK(std::memcmp(&b[0], lo, sizeof lo) == 0);
        CHECK(std::memcmp(&b[1], hi, sizeof hi) == 0);

        std::vector<double> values(n);
        for (std::size_t i = 0; i < n; ++i)
            values[i] = static_cast<double>(i % 17) - 3; // integers: the sum is exact
        const auto dv = be.upload<double>(values, "race.values");
        auto sum = be.alloc<double>(1, "race.sum");
        be.reduce_sum(dv, n, sum);
        CHECK(sum.download()[0] == std::accumulate(values.begin(), values.end(), 0.0));

        std::vector<bn_u32> perm(n);
        std::iota(perm.begin(), perm.end(), 0u);
        std::shuffle(perm.begin(), perm.end(), test::rng());
        const auto dperm = be.upload<bn_u32>(perm, "race.perm");
        auto check_gather = [&](const auto& host) {
            using T = typename std::decay_t<decltype(host)>::value_type;
            const auto in = be.upload<T>(host, "race.gather.in");
            auto out = be.alloc<T>(n, "race.gather.out");
            be.gather(in, dperm, n, out);
            const auto got = out.download();
            std::size_t bad = 0;
            for (std::size_t i = 0; i < n; ++i)
                bad += std::memcmp(&got[i], &host[perm[i]], sizeof(T)) != 0;
            CHECK(bad == 0);
        };
        check_gather(random_u32(n, 0xFFFFFFFFu));
        check_gather(std::vector<double>(values));
        check_gather(pos_host);

        // Random 63-bit keys, few distinct in the low digit (ties keep their order): eight passes of 8 bits.
        std::vector<bn_u64> keys(n);
        for (auto& k : keys)
            k = (test::rng()() >> 1) & ~bn_u64{0xF0};
        std::vector<bn_u32> idx(n);
        std::iota(idx.begin(), idx.end(), 0u);
        std::vector<bn_u32> order = idx;
        std::stable_sort(order.begin(), order.end(), [&](bn_u32 a, bn_u32 c) { return keys[a] < keys[c]; });
        CHECK(test::sorted_on_device(be, keys, idx, 0, 63).values == order);
    }
}

TEST_CASE("race check: 32- and 64-bit atomics")
{
    auto& be = test::backend();
    WgGuard guard;
    for (std::size_t wg : race_wgs())
        test::check_atomics(be, wg, 1000);
}

TEST_CASE("race check: tree build, links, groups and multipoles against the CPU reference")
{
    auto& be = test::backend();
    Octree tree(be);
    const auto pos = test::plummer_input(2000, 11);
    std::vector<bn_f4> vel(pos.size());
    for (std::size_t i = 0; i < vel.size(); ++i)
        vel[i] = bn_f4{pos[i].y, -pos[i].x, 0.5f * pos[i].z, 0.0f};
    const test::RefTree got = test::check_tree_against_reference(pos, vel, tree);
    CHECK(got.depth() >= 4); // deep enough that every level kernel ran more than once
}

TEST_CASE("race check: direct summation in single and double precision, all targets and some")
{
    auto& be = test::backend();
    const std::size_t n = 600;
    const auto pos = test::plummer_input(n, 12);
    const auto dpos = be.upload<bn_f4>(pos, "race.direct.pos");
    auto f32 = be.alloc<bn_f4>(n, "race.direct.f32");
    auto f64 = be.alloc<double>(4 * n, "race.direct.f64");
    direct_forces(be, dpos, n, 0.01f, f32);
    direct_forces_f64(be, dpos, n, 0.01, f64);
    const std::vector<bn_u32> targets{0, 7, 299, 599};
    const auto dt = be.upload<bn_u32>(targets, "race.direct.targets");
    auto f64t = be.alloc<double>(4 * targets.size(), "race.direct.f64t");
    direct_forces_f64_targets(be, dpos, n, dt, targets.size(), 0.01, f64t);
    const auto a32 = f32.download();
    const auto a64 = f64.download(), a64t = f64t.download();
    double worst = 0;
    for (std::size_t i = 0; i < n; ++i) {
        const double ax = a64[4 * i], ay = a64[4 * i + 1], az = a64[4 * i + 2];
        const double d = std::hypot(a32[i].x - ax, a32[i].y - ay, a32[i].z - az) / std::hypot(ax, ay, az);
        worst = std::max(worst, d);
    }
    CHECK(worst < 1e-4);
    for (std::size_t t = 0; t < targets.size(); ++t)
        for (int k = 0; k < 4; ++k)
            CHECK(a64t[4 * t + k] == a64[4 * targets[t] + k]);
}

TEST_CASE("race check: direct sums on listed particles (block steps' substeps of few active particles)")
{
    // Under Oclgrind without its uninitialised-value check, which crashes interpreting directListedPartial as it
    // does walkForces (tests/tools/oclgrind_check.sh).
    auto& be = test::backend();
    const std::size_t n = 600;
    const auto pos = test::plummer_input(n, 12);
    const auto dpos = be.upload<bn_f4>(pos, "race.direct.pos");
    // A few listed: those entries anew, the others untouched.
    const std::vector<bn_u32> listed{599, 3, 250};
    const auto dl = be.upload<bn_u32>(listed, "race.direct.listed");
    std::vector<bn_f4> marked(n, bn_f4{7.0f, 7.0f, 7.0f, 7.0f});
    auto f32l = be.upload<bn_f4>(marked, "race.direct.f32l");
    Buffer<bn_f4> partial;
    direct_forces_listed(be, dpos, n, dl, listed.size(), 0.01f, partial, f32l);
    const auto a32l = f32l.download();
    auto f64l = be.alloc<double>(4 * listed.size(), "race.direct.f64l");
    direct_forces_f64_targets(be, dpos, n, dl, listed.size(), 0.01, f64l);
    const auto r = f64l.download();
    for (std::size_t i = 0; i < n; ++i) {
        const auto at = std::find(listed.begin(), listed.end(), i);
        if (at == listed.end()) {
            CHECK(a32l[i].x == 7.0f);
            continue;
        }
        const std::size_t t = static_cast<std::size_t>(at - listed.begin());
        const double ax = r[4 * t], ay = r[4 * t + 1], az = r[4 * t + 2], phi = r[4 * t + 3];
        CHECK(std::hypot(a32l[i].x - ax, a32l[i].y - ay, a32l[i].z - az) / std::hypot(ax, ay, az) < 1e-5);
        CHECK(std::abs(a32l[i].w - phi) / std::abs(phi) < 1e-5);
    }
    // The listed kernels over several slices of sources and several work-groups of listed particles.
    const std::size_t n2 = 2 * BANYAN_DIRECT_SLICE + 100;
    const auto pos2 = test::plummer_input(n2, 13);
    const auto dpos2 = be.upload<bn_f4>(pos2, "race.direct.pos2");
    std::vector<bn_u32> many;
    for (std::size_t i = 0; i < n2; i += 15)
        many.push_back(static_cast<bn_u32>(n2 - 1 - i));
    REQUIRE(many.size() > BANYAN_WG_MAX);
    const auto dmany = be.upload<bn_u32>(many, "race.direct.many");
    auto f32m = be.alloc<bn_f4>(n2, "race.direct.f32m");
    direct_forces_listed(be, dpos2, n2, dmany, many.size(), 0.01f, partial, f32m);
    auto f64m = be.alloc<double>(4 * many.size(), "race.direct.f64m");
    direct_forces_f64_targets(be, dpos2, n2, dmany, many.size(), 0.01, f64m);
    const auto am = f32m.download();
    const auto rm = f64m.download();
    double worst_listed = 0;
    for (std::size_t t = 0; t < many.size(); ++t) {
        const double ax = rm[4 * t], ay = rm[4 * t + 1], az = rm[4 * t + 2];
        const bn_f4 a = am[many[t]];
        worst_listed = std::max(worst_listed, std::hypot(a.x - ax, a.y - ay, a.z - az) / std::hypot(ax, ay, az));
        worst_listed = std::max(worst_listed, std::abs(a.w - rm[4 * t + 3]) / std::abs(rm[4 * t + 3]));
    }
    CHECK(worst_listed < 1e-5);
}

TEST_CASE("race check: leapfrog steps with direct forces, energies, results in input order, tracked particles")
{
    auto& be = test::backend();
    test::check_one_step(be, 300, true, 22);

    SimulationOptions o;
    o.direct = true;
    Simulation sim(be, o);
    const Particles p = plummer(500, 23);
    sim.start(p.pos, p.vel, 0.0);
    sim.step();
    const Energies e = sim.energies();
    const SimulationState s = sim.save();
    double kinetic = 0;
    for (std::size_t i = 0; i < s.vel.size(); ++i) {
        const bn_f4& v = s.vel[i];
        kinetic += 0.5 * s.pos[i].w * (double(v.x) * v.x + double(v.y) * v.y + double(v.z) * v.z);
    }
    CHECK(e.kinetic == doctest::Approx(kinetic).epsilon(1e-12));
    CHECK(e.potential < 0);
    std::vector<bn_f4> in_pos, in_vel, in_acc;
    CHECK(sim.input_order(in_pos, in_vel, in_acc) == 0);
    std::size_t bad = 0;
    for (std::size_t i = 0; i < s.pos.size(); ++i)
        bad += std::memcmp(&in_pos[s.ids[i]], &s.pos[i], sizeof(bn_f4)) != 0;
    CHECK(bad == 0);
    const auto tracked = sim.track(3, 400);
    CHECK(std::memcmp(&tracked[0], &in_pos[3], sizeof(bn_f4)) == 0);
    CHECK(std::memcmp(&tracked[1], &in_pos[400], sizeof(bn_f4)) == 0);
}

namespace {

/// One block step of a small run (a Plummer sphere of 160 whose inner particles ask for shorter steps than dt =
/// 1/8, forces by direct sums) with the rung rule @p rule: its kernels under the race checkers, with the rungs spread.
/// Checks every particle counted on a rung, more than one rung used, and a finite energy; returns the statistics.
BlockStats block_race_run(Backend& be, RungRule rule)
{
    SimulationOptions o;
    o.direct = true;
    o.block = true;
    o.eps = 0.01f;
    o.dt = 1.0 / 8;
    o.max_rung = 8;
    o.rung_rule = rule;
    Simulation sim(be, o);
    Particles p = plummer(160, 24);
    sim.start(p.pos, p.vel, 0.0);
    sim.step();
    const BlockStats b = sim.block_stats();
    std::uint64_t total = 0;
    for (const auto r : b.rungs)
        total += r;
    CHECK(total == 160);
    CHECK(b.deepest >= 1);
    CHECK(std::isfinite(sim.energies().total()));
    return b;
}

} // namespace

TEST_CASE("race check: block time steps' kicks, drift and rung histogram")
{
    // Every particle's kick and rung against the CPU in tests/simulation/test_block_steps.cpp; here a small run's.
    CHECK(block_race_run(test::backend(), RungRule::gadget).substeps >= 2);
}

TEST_CASE("race check: the symmetric rung rule's prediction and probe")
{
    // Against the CPU to the bit in tests/simulation/test_block_steps.cpp; here the kernels alone (the run below
    // sums its probes with the listed direct sums, which Oclgrind checks without its uninitialised-value check).
    auto& be = test::backend();
    const std::size_t n = 300;
    std::vector<bn_f4> acc(n);
    std::vector<bn_u32> rungs(n);
    for (std::size_t i = 0; i < n; ++i) {
        const float scale = std::ldexp(1.0f, static_cast<int>(i % 13) - 4);
        acc[i] = bn_f4{scale, -0.5f * scale, 0.25f, 0.0f};
        rungs[i] = static_cast<bn_u32>(i % 5);
    }
    const auto pos = be.upload<bn_f4>(test::plummer_input(n, 31), "race.probe.pos");
    const auto vel = be.upload<bn_f4>(std::vector<bn_f4>(n, bn_f4{0.1f, 0.2f, -0.3f, 0.0f}), "race.probe.vel");
    const auto a = be.upload<bn_f4>(acc, "race.probe.acc");
    auto rung = be.upload<bn_u32>(rungs, "race.probe.rung");
    auto pending = be.alloc<bn_u32>(n, "race.probe.pending");
    auto predicted = be.alloc<bn_f4>(n, "race.probe.predicted");
    auto hist = be.alloc<bn_u32>(BANYAN_RUNG_BINS, "race.probe.hist");
    std::vector<double> sums(BANYAN_ENERGY_TERMS, 0.0); // the energy sums: the centre of mass moves at (0.5, 0, -0.25)
    sums[2] = 1.0, sums[4] = -0.5, sums[8] = 2.0;
    const auto totals = be.upload<double>(sums, "race.probe.totals");
    hist.fill(0u);
    const double dt = 0.125, c = 2 * 0.025 * 0.01;
    be.launch(kernels::integrateBlockPredict, grid_for(be, n), pos, vel, a, rung, to_u32(n), bn_u32{2}, 0.125f, totals,
              dt * dt, c * c, bn_u32{1}, pending, predicted);
    be.launch(kernels::integrateBlockProbe, grid_for(be, n), a, rung, pending, to_u32(n), dt * dt, c * c, bn_u32{6},
              bn_u32{0}, hist);
    be.launch(kernels::integrateBlockPredict, grid_for(be, n), pos, vel, a, rung, to_u32(n), bn_u32{2}, 0.125f, totals,
              dt * dt, c * c, bn_u32{0}, pending, predicted);
    hist.fill(0u);
    be.launch(kernels::integrateBlockProbe, grid_for(be, n), a, rung, pending, to_u32(n), dt * dt, c * c, bn_u32{6},
              bn_u32{1}, hist);
    const auto h = hist.download();
    std::uint64_t total = 0;
    for (const auto k : h)
        total += k;
    CHECK(total == n);
    const auto left = pending.download();
    CHECK(std::count(left.begin(), left.end(), 1u) == 0); // the last probe leaves none pending
    const auto r = rung.download();
    std::size_t deeper = 0;
    for (std::size_t i = 0; i < n; ++i)
        deeper += r[i] > rungs[i];
    CHECK(deeper > 0);
}

TEST_CASE("race check: direct sums on listed particles in the symmetric rung rule's probes")
{
    // The block-step run above with the symmetric rule: each substep's probe lists the active particles and sums
    // their field at the predicted positions directly. Named for tests/tools/oclgrind_check.sh's pass without the
    // uninitialised-value check, which crashes interpreting directListedPartial.
    block_race_run(test::backend(), RungRule::symmetric);
}

// The cases below run the tree walk; their names start "race check: walk" because tests/tools/oclgrind_check.sh runs
// them without Oclgrind's uninitialised-value check, which crashes inside Oclgrind on walkForces (see there).

TEST_CASE("race check: walk against the CPU walk")
{
    auto& be = test::backend();
    const std::size_t n = 2000;
    const auto pos = test::plummer_input(n, 12);
    Octree tree(be);
    TreeForces forces(be);
    forces.set_count_each(true);
    tree.set_particles(pos);
    tree.build();
    forces.poison(tree);
    forces.compute(tree, 0.75f, 0.01f);
    test::check_walk_against_cpu(tree, forces, 0.75f, 0.01f);
    CHECK(forces.totals().pc > 0); // the walk met cells, not only particles

    auto acc = be.alloc<bn_f4>(n, "race.walk.acc");
    auto pp = be.alloc<bn_u32>(n, "race.walk.pp");
    auto pc = be.alloc<bn_u32>(n, "race.walk.pc");
    forces.to_input_order(tree, acc, &pp, &pc);
    const auto ids = tree.ids().download(n);
    const auto tree_acc = forces.acc().download(n), got = acc.download();
    const auto tree_pp = forces.pp_counts().download(n), got_pp = pp.download();
    std::size_t bad = 0;
    for (std::size_t i = 0; i < n; ++i)
        bad += std::memcmp(&got[ids[i]], &tree_acc[i], sizeof(bn_f4)) != 0 || got_pp[ids[i]] != tree_pp[i];
    CHECK(bad == 0);

    // The relative criterion (walkPrepareRelative and the walk's alpha path) over bmax cells, from these
    // accelerations: the particles are in key order already, so the rebuild keeps their order.
    std::vector<bn_f4> old = tree_acc;
    for (auto& a : old)
        a.w = std::sqrt(a.x * a.x + a.y * a.y + a.z * a.z);
    const auto old_dev = be.upload<bn_f4>(old, "race.walk.acc_old");
    tree.set_opening(Opening::bmax);
    tree.build();
    REQUIRE(tree.ids().download(n) == ids);
    forces.set_previous_accelerations(&old_dev);
    forces.poison(tree);
    forces.compute(tree, {1.0f, 0.004f, Opening::bmax}, 0.0f);
    test::check_walk_against_cpu(tree, forces, 1.0f, 0.0f, 0.004f, old);
    forces.set_previous_accelerations(nullptr);
}

TEST_CASE("race check: local essential tree and the decomposition on one rank")
{
    // 1200 particles in two halves: b's tree for a's boxes (letGroupBoxes, letOpened, letSelect, letGather).
    auto& be = test::backend();
    test::LetHalves h(be, 1200, 41, 0.75f);
    auto& [all, ta, tb, let, na] = h;
    const RemoteTrees& r = let.remote();
    REQUIRE(r.cells > 0);
    REQUIRE(r.roots.size() == 1);
    // Grafted behind a's cells and particles, in a's arrays: the root is b's root, with b's mass; every particle sent
    // is one of b's; links stay inside the received tree.
    const std::size_t c0 = r.cell_base, p0 = r.particle_base, ce = c0 + r.cells, pe = p0 + r.particles;
    CHECK(c0 == ta.cells());
    CHECK(p0 == na);
    CHECK(r.roots[0] == c0 + r.top_cells); // behind b's top tree, whose root is b's too
    const auto com = ta.cell_com().download(ce), b_root = tb.cell_com().download(1);
    CHECK(com[c0].w == b_root[0].w);
    const auto first = ta.cell_first().download(ce), count = ta.cell_count().download(ce);
    const auto pos = ta.pos().download(std::max<std::size_t>(pe, 1));
    std::size_t bad = 0, sent = 0;
    for (std::size_t c = c0; c < ce; ++c) {
        const bn_u32 k = bn_tree_count(count[c]);
        if (bn_tree_is_leaf(count[c]))
            bad += (k && first[c] < p0) || first[c] + k > pe, sent += k;
        else
            bad += first[c] <= c || first[c] + k > ce || k == 0 || k > 8;
    }
    CHECK(bad == 0);
    CHECK(sent == r.particles);
    for (std::size_t i = p0; i < pe; ++i)
        bad += std::find_if(all.begin() + static_cast<long>(na), all.end(),
                            [&](const bn_f4& p) { return std::memcmp(&p, &pos[i], sizeof p) == 0; }) == all.end();
    CHECK(bad == 0);
    // The decomposition on one rank (domainStay, split): nothing moves.
    Decomposition d(be, Comm::world());
    const std::size_t before = ta.size();
    CHECK(d.balance(ta, 0.0).sent == 0);
    CHECK(ta.size() == before);
}

TEST_CASE("race check: the links of a received tree shifted on the device (letShiftLinks)")
{
    // A tree received GPU to GPU lands where it is grafted; its cells' first indices are then shifted there: a
    // leaf's by the particles before it, any other cell's by the cells before it. Against the same shift on the CPU,
    // over a range that starts and ends inside a work-group.
    auto& be = test::backend();
    const bn_u32 n = 700, first = 37, end = 611, cell_shift = 1000, particle_shift = 5000;
    std::vector<bn_u32> links(n), counts(n);
    for (bn_u32 c = 0; c < n; ++c)
        links[c] = static_cast<bn_u32>(test::rng()() % 100000), counts[c] = static_cast<bn_u32>(test::rng()());
    auto d_links = be.upload<bn_u32>(links, "test.first");
    auto d_counts = be.upload<bn_u32>(counts, "test.count");
    be.launch(kernels::letShiftLinks, grid_for(be, end - first), d_links, d_counts, first, end, cell_shift,
              particle_shift);
    std::vector<bn_u32> want = links;
    std::size_t leaves = 0;
    for (bn_u32 c = first; c < end; ++c) {
        const bool leaf = bn_tree_is_leaf(counts[c]);
        want[c] += leaf ? particle_shift : cell_shift, leaves += leaf;
    }
    REQUIRE(leaves > 0);
    REQUIRE(leaves < end - first); // both kinds of cell occur
    CHECK(d_links.download() == want);
}

TEST_CASE("race check: the runs of groups of the boxes' cells, in place (letBoxRuns)")
{
    // Cells given as (first particle, particles) become the groups they hold: std::lower_bound of their first and
    // end particles among the groups' ascending first particles. Cells at the ends, between groups, empty, and past
    // the last group; more than one work-group of cells.
    auto& be = test::backend();
    std::vector<bn_u32> group_first{0};
    while (group_first.size() < 900)
        group_first.push_back(group_first.back() + 1 + static_cast<bn_u32>(test::rng()() % 64));
    const bn_u32 total = group_first.back() + 40;
    std::vector<bn_u32> cells;
    for (int i = 0; i < 613; ++i) {
        const bn_u32 first = static_cast<bn_u32>(test::rng()() % total);
        const bn_u32 n = i % 7 == 0 ? 0u : static_cast<bn_u32>(test::rng()() % (total - first + 1));
        cells.push_back(i % 11 == 0 ? group_first[static_cast<std::size_t>(i) % group_first.size()] : first);
        cells.push_back(i % 11 == 0 ? 0u : n);
    }
    cells.insert(cells.end(), {0u, total, total, 0u});
    const bn_u32 ncells = static_cast<bn_u32>(cells.size() / 2);
    auto d_first = be.upload<bn_u32>(group_first, "test.group_first");
    auto d_runs = be.upload<bn_u32>(cells, "test.runs");
    be.launch(kernels::letBoxRuns, grid_for(be, ncells), d_first, static_cast<bn_u32>(group_first.size()), ncells,
              d_runs);
    std::vector<bn_u32> want(cells.size());
    for (std::size_t i = 0; i < ncells; ++i) {
        const auto at = [&](bn_u32 v) {
            return static_cast<bn_u32>(std::lower_bound(group_first.begin(), group_first.end(), v) -
                                       group_first.begin());
        };
        want[2 * i] = at(cells[2 * i]);
        want[2 * i + 1] = at(cells[2 * i] + cells[2 * i + 1]);
    }
    REQUIRE(want[want.size() - 1] == group_first.size()); // a cell past the last group
    CHECK(d_runs.download() == want);
}

TEST_CASE("race check: walk of another rank's tree")
{
    // The forces of b's tree, grafted behind a's (walkForces with two roots), on a's particles: the whole.
    auto& be = test::backend();
    test::LetHalves h(be, 1200, 41, 0.75f);
    auto& [all, ta, tb, let, na] = h;
    TreeForces f(be);
    f.begin(ta, 0.75f, 0.02f, &let.remote());
    f.end(ta);
    auto out = be.alloc<bn_f4>(na, "race.let.acc");
    f.to_input_order(ta, out);
    const auto acc = out.download(na);
    auto p = be.upload<bn_f4>(all, "race.let.pos");
    auto ref = be.alloc<bn_f4>(all.size(), "race.let.ref");
    direct_forces(be, p, all.size(), 0.02f, ref);
    const auto d = ref.download(all.size());
    std::vector<double> e(na);
    for (std::size_t i = 0; i < na; ++i) {
        const double dx = acc[i].x - d[i].x, dy = acc[i].y - d[i].y, dz = acc[i].z - d[i].z;
        e[i] = std::sqrt((dx * dx + dy * dy + dz * dz) /
                         (double(d[i].x) * d[i].x + double(d[i].y) * d[i].y + double(d[i].z) * d[i].z));
    }
    std::sort(e.begin(), e.end());
    CHECK(e[na / 2] < 5e-3); // theta 0.75 at N = 1200: a median of about 1e-3
    CHECK(e.back() < 0.1);
}

TEST_CASE("race check: walk in a leapfrog step with tree forces")
{
    test::check_one_step(test::backend(), 1000, false, 21);
}

TEST_CASE("race check: walk over the active groups of block time steps")
{
    const std::size_t n = 1500;
    test::ActiveWalks walks(test::backend(), n, 25, 0.75f, 0.01f);
    std::vector<bn_u32> r(n, 0u);
    for (std::size_t i = 0; i < n; i += 97)
        r[i] = 2;
    const auto part = walks.active(r, 1);
    std::size_t bad = 0;
    for (std::size_t i = 0; i < n; i += 97)
        bad += std::memcmp(&part[i], &walks.whole[i], sizeof(bn_f4)) != 0;
    CHECK(bad == 0);
    CHECK(walks.forces.walked_groups() > 0);
    CHECK(walks.forces.walked_groups() < walks.tree.groups());
}
