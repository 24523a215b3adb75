/**
 * @file test_parallel.cpp
 * @brief The pieces of a run over several ranks, in one process (core/parallel/): the local essential tree of one
 *        half of a system for the other half, grafted behind that half's tree and walked once (TreeForces::begin
 *        with RemoteTrees), against direct summation and one
 *        tree of both halves; and the decomposition on one rank. The multi-rank tests are tests/parallel/mpi/.
 */
#include "core/gravity/forces.hpp"
#include "core/parallel/comm.hpp"
#include "core/parallel/domain.hpp"
#include "core/parallel/let.hpp"
#include "core/models/plummer.hpp"
#include "core/tree/octree.hpp"
#include "tests/support/checks.hpp"
#include "tests/support/harness.hpp"

#include <doctest/doctest.h>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

namespace banyan {
namespace {

using test::backend;

/// Sorted relative errors of @p acc (for targets @p first .. first + acc.size() - 1 of @p all) against direct
/// summation.
std::vector<double> errors_against_direct(const std::vector<bn_f4>& all, std::size_t first,
                                          const std::vector<bn_f4>& acc, double eps)
{
    Backend& be = backend();
    auto p = be.upload<bn_f4>(all, "test.pos");
    std::vector<bn_u32> t(acc.size());
    std::iota(t.begin(), t.end(), static_cast<bn_u32>(first));
    auto targets = be.upload<bn_u32>(t, "test.targets");
    auto ref = be.alloc<double>(4 * t.size(), "test.ref");
    direct_forces_f64_targets(be, p, all.size(), targets, t.size(), eps, ref);
    const auto r = ref.download(4 * t.size());
    std::vector<double> e(t.size());
    for (std::size_t i = 0; i < t.size(); ++i) {
        const double dx = acc[i].x - r[4 * i], dy = acc[i].y - r[4 * i + 1], dz = acc[i].z - r[4 * i + 2];
        const double a = std::sqrt(r[4 * i] * r[4 * i] + r[4 * i + 1] * r[4 * i + 1] + r[4 * i + 2] * r[4 * i + 2]);
        e[i] = std::sqrt(dx * dx + dy * dy + dz * dz) / a;
    }
    std::sort(e.begin(), e.end());
    return e;
}

} // namespace

test::LetHalves::LetHalves(Backend& be, std::size_t n, std::uint64_t seed, float theta)
    : all(plummer(n, seed).pos), ta(be), tb(be), let(be, Comm::world())
{
    std::stable_partition(all.begin(), all.end(), [](const bn_f4& p) { return p.x < 0.1f; });
    na = static_cast<std::size_t>(std::find_if(all.begin(), all.end(), [](const bn_f4& p) { return p.x >= 0.1f; }) -
                                  all.begin());
    ta.set_particles(std::span<const bn_f4>(all.data(), na));
    tb.set_particles(std::span<const bn_f4>(all.data() + na, n - na));
    ta.build();
    tb.build();
    let.set_top_per_rank(256);
    auto boxes_b = let.boxes_message(tb, theta);       // for its top tree
    const auto boxes_a = let.boxes_message(ta, theta); // last: a's boxes stay on the device for graft_tops
    HostBytes tree_b;
    let.tree_for(tb, theta, boxes_a, tree_b);
    std::uint64_t head[2]; // the size of the tree to come, as build() exchanges it
    std::memcpy(head, tree_b.data(), sizeof head);
    const std::size_t box_offsets[2] = {0, boxes_b.size()};
    let.graft_tops(ta, theta, boxes_b, box_offsets, 1, head[0], head[1]);
    const std::size_t offsets[2] = {0, tree_b.size()};
    let.receive(ta, tree_b, offsets);
}

TEST_CASE("a local essential tree of one half, walked for the other half, gives the forces of the whole")
{
    const std::size_t n = 20000; // halves of 10000: large enough that the tree sent is pruned
    for (const float theta : {0.5f, 0.75f}) {
        // Halves by x: a's particles are the targets, b sends its tree.
        test::LetHalves h(backend(), n, 31, theta);
        auto& [all, ta, tb, let, na] = h;
        const std::size_t nb = n - na;
        RemoteTrees& r = let.remote();
        // Pruned: part of b's cells and particles, not all of them (received, behind b's top tree).
        CHECK(r.cells > r.top_cells);
        CHECK(r.cells - r.top_cells < tb.cells());
        CHECK(r.particles - r.top_particles < nb);
        REQUIRE(r.split);
        CHECK(r.cell_base == ta.cells());
        CHECK(r.particle_base == na);
        TreeForces f(backend());
        f.set_count_each(true);
        f.compute(ta, theta, 0.01f);
        const auto local_pc = f.pc_counts().download(na);
        // The far groups walk a's root and b's top root first, the near ones a's root and the received root after
        // (walk_received, which end() calls): the results of every group walking the latter, to the bit.
        f.begin(ta, theta, 0.01f, &r);
        f.end(ta);
        const auto pc = f.pc_counts().download(na);
        const InteractionTotals split_totals = f.totals();
        auto out = backend().alloc<bn_f4>(na, "test.acc");
        f.to_input_order(ta, out);
        const auto split_acc = out.download(na);
        const auto far = r.far.download(ta.groups());
        const auto nfar = static_cast<std::size_t>(std::count(far.begin(), far.end(), 1u));
        INFO(fmt::format("theta {}: {} of {} groups far", theta, nfar, ta.groups()));
        CHECK(nfar > 0);
        CHECK(nfar < ta.groups());
        {
            // letTopOpened and letFarGroups against the CPU: b's top tree opens at least every cell of b with more
            // than max(N_CRIT, n_b / 256) particles (top_per_rank 256), and no far group may open a cell
            // it left home (bn_let_opens on the group's own box, inside the fine box the kernel tested).
            const std::size_t c0 = r.cell_base, c1 = c0 + r.top_cells, ng = ta.groups();
            const auto com = ta.cell_com().download(c1), q1 = ta.cell_quad1().download(c1);
            const auto count = ta.cell_count().download(c1);
            const auto pcount = tb.cell_pcount().download(tb.cells());
            const auto big = std::count_if(pcount.begin(), pcount.end(), [&](bn_u32 k) {
                return k > std::max<std::size_t>(BANYAN_N_CRIT, nb / 256);
            });
            const auto opened = std::count_if(count.begin() + static_cast<long>(c0), count.end(),
                                              [](bn_u32 k) { return k != BANYAN_TREE_LEAF_BIT; });
            CHECK(opened >= big);
            const auto lo = ta.group_lo().download(ng), hi = ta.group_hi().download(ng);
            std::size_t wrong = 0;
            for (std::size_t g = 0; g < ng; ++g)
                for (std::size_t c = c0; c < c1 && far[g]; ++c)
                    wrong += count[c] == BANYAN_TREE_LEAF_BIT &&
                             bn_let_opens(com[c], q1[c], 1.0f / theta, 0.0f, 0.0f, lo[g], hi[g]);
            CHECK(wrong == 0);
        }
        r.split = false;
        f.begin(ta, theta, 0.01f, &r);
        f.end(ta);
        CHECK(f.totals().pp == split_totals.pp);
        CHECK(f.totals().pc == split_totals.pc);
        // Results in a's input order, for the particles of a.
        f.to_input_order(ta, out);
        const auto acc = out.download(na);
        CHECK(std::memcmp(acc.data(), split_acc.data(), na * sizeof(bn_f4)) == 0);
        const auto mine = errors_against_direct(all, 0, acc, 0.01);
        const auto whole = tree_forces(backend(), all, theta, 0.01f);
        const std::vector<bn_f4> one(whole.acc.begin(), whole.acc.begin() + static_cast<long>(na));
        const auto ref = errors_against_direct(all, 0, one, 0.01);
        INFO(fmt::format("theta {}: {} + {} particles, LET {} of {} cells, {} particles; median {:.3e} (one tree "
                         "{:.3e}), 99% {:.3e} ({:.3e})",
                         theta, na, nb, r.cells, tb.cells(), r.particles, mine[mine.size() / 2], ref[ref.size() / 2],
                         mine[mine.size() * 99 / 100], ref[ref.size() * 99 / 100]));
        CHECK(mine[mine.size() / 2] <= 1.25 * ref[ref.size() / 2]);
        CHECK(mine[mine.size() * 99 / 100] <= 1.5 * ref[ref.size() * 99 / 100]);
        CHECK(mine.back() <= 2.5 * ref.back());
        // Interactions: every particle meets at least the received root besides what the local tree gave it.
        std::size_t fewer = 0;
        for (std::size_t i = 0; i < na; ++i)
            fewer += pc[i] <= local_pc[i];
        CHECK(fewer == 0);
    }
}

TEST_CASE("the decomposition on one rank keeps every particle")
{
    const auto p = plummer(3000, 8).pos;
    Octree tree(backend());
    std::vector<bn_f4> vel(p.size(), bn_f4{1, 2, 3, 0});
    tree.set_particles(p, vel);
    Decomposition d(backend(), Comm::world());
    if (Comm::world().parallel()) return; // this suite runs on one rank; tests/parallel/mpi/ has the others
    const BalanceStats s = d.balance(tree, 0.0);
    CHECK(s.sent == 0);
    CHECK(s.received == 0);
    REQUIRE(tree.size() == p.size());
    const auto ids = tree.ids().download(p.size());
    const auto pos = tree.pos().download(p.size());
    for (std::size_t i = 0; i < ids.size(); ++i) {
        CHECK(ids[i] < p.size());
        if (ids[i] < p.size()) CHECK(pos[i].x == p[ids[i]].x);
    }
}

} // namespace banyan
