/**
 * @file test_tree.cpp
 * @brief The Plummer generator, the Morton-key helpers of tree_shared.h, the CPU reference tree, and the device
 *        tree (core/octree) compared against the reference: keys, permutation, cells, links, groups exactly;
 *        multipoles within 1e-6 relative.
 */
#include "tests/support/checks.hpp"
#include "tests/support/harness.hpp"
#include "tests/support/reference_tree.hpp"

#include "core/tree/octree.hpp"
#include "core/tree/workspace.hpp"
#include "core/models/plummer.hpp"
#include "tests/support/inputs.hpp"
#include "core/tree_shared.h"

#include <doctest/doctest.h>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <numbers>
#include <string>

using namespace banyan;
using test::cube_input;
using test::plummer_input;
using test::uniform01;

namespace {

// ---- Inputs ---------------------------------------------------------------------------------------------------

/// Two Plummer spheres 1e-3 in size, 2e3 apart: the tree goes down to the maximal depth.
std::vector<bn_f4> clusters_input(std::size_t n, std::uint64_t seed)
{
    const test::Cluster clusters[] = {{1e-3f, {-1000.0f, -500.0f, 0.0f}}, {1e-3f, {1000.0f, 500.0f, 0.0f}}};
    return test::plummer_clusters(n, seed, clusters);
}

/// Every particle at one point (a valid tree must still come out).
std::vector<bn_f4> point_input(std::size_t n, std::uint64_t)
{
    return std::vector<bn_f4>(n, bn_f4{0.3f, -0.2f, 0.1f, n ? 1.0f / static_cast<float>(n) : 0.0f});
}

/// Particles on a lattice of spacing 1/16 in [0, 4]^3: coordinates fall exactly on cell boundaries, often twice.
std::vector<bn_f4> lattice_input(std::size_t n, std::uint64_t seed)
{
    std::mt19937_64 g(seed);
    std::vector<bn_f4> p(n);
    for (auto& q : p) {
        q.x = static_cast<float>(g() % 65) / 16.0f;
        q.y = static_cast<float>(g() % 65) / 16.0f;
        q.z = static_cast<float>(g() % 65) / 16.0f;
        q.w = 1.0f;
    }
    return p;
}

/// A Plummer sphere drawn without a cut-off, as a user's script draws one (r = (u^(-2/3) - 1)^(-1/2), u uniform in
/// (0, 1)): a dense core, and far outliers that make the root's octants hold the core and sparse outer cells.
std::vector<bn_f4> uncut_plummer_input(std::size_t n, std::uint64_t seed)
{
    std::mt19937_64 g(seed);
    std::vector<bn_f4> p(n);
    for (auto& q : p) {
        const double r = 1 / std::sqrt(std::pow(uniform01(g), -2.0 / 3) - 1);
        const double z = 2 * uniform01(g) - 1, a = 2 * std::numbers::pi * uniform01(g), s = std::sqrt(1 - z * z);
        q = bn_f4{static_cast<float>(r * s * std::cos(a)), static_cast<float>(r * s * std::sin(a)),
                  static_cast<float>(r * z), 1.0f / static_cast<float>(n)};
    }
    return p;
}

struct Input {
    const char* name;
    std::function<std::vector<bn_f4>(std::size_t, std::uint64_t)> make;
};
const std::vector<Input>& inputs()
{
    static const std::vector<Input> list{{"plummer", plummer_input},   {"cube", cube_input},
                                         {"clusters", clusters_input}, {"point", point_input},
                                         {"lattice", lattice_input},   {"uncut plummer", uncut_plummer_input}};
    return list;
}

// ---- Tree invariants (the reference and the device alike) ---------------------------------------------------

/// Checks every structural promise of tree_shared.h on @p t built from @p input; returns the first broken one.
std::string tree_invariants(const test::RefTree& t, const std::vector<bn_f4>& input)
{
    const std::size_t n = input.size();
    if (t.keys.size() != n || t.ids.size() != n || t.pos.size() != n) return "particle arrays have the wrong size";
    std::vector<bool> seen(n, false);
    for (std::size_t i = 0; i < n; ++i) {
        if (i && t.keys[i - 1] > t.keys[i]) return fmt::format("keys decrease at {}", i);
        if (t.keys[i] >> BANYAN_TREE_KEY_BITS) return fmt::format("key {} has bit 63 set", i);
        const bn_u32 id = t.ids[i];
        if (id >= n || seen[id]) return fmt::format("ids[{}] = {} is not a permutation", i, id);
        seen[id] = true;
        const bn_f4 a = t.pos[i], b = input[id];
        if (a.x != b.x || a.y != b.y || a.z != b.z || a.w != b.w) return fmt::format("pos[{}] is not input[{}]", i, id);
    }
    const std::size_t nc = t.cells();
    if (n == 0) return nc == 0 ? "" : "cells for no particles";
    if (nc == 0) return "no cells";
    if (t.level_begin.size() != BANYAN_TREE_LEVELS + 1 || t.level_begin[0] != 0 || t.level_begin.back() != nc)
        return "level_begin is wrong";
    if (t.cell_parent[0] != BANYAN_TREE_NO_PARENT || t.cell_pbegin[0] != 0 || t.cell_pcount[0] != n ||
        t.cell_key[0] != 0 || t.cell_level[0] != 0)
        return "the root is wrong";
    std::size_t in_leaves = 0;
    for (std::size_t c = 0; c < nc; ++c) {
        const int level = static_cast<int>(t.cell_level[c]);
        if (c < t.level_begin[level] || c >= t.level_begin[level + 1]) return fmt::format("cell {}: level", c);
        if (c && t.cell_level[c - 1] == t.cell_level[c] && t.cell_key[c - 1] >= t.cell_key[c])
            return fmt::format("cell {}: keys not increasing within the level", c);
        if (bn_tree_cell_key(t.cell_key[c], level) != t.cell_key[c]) return fmt::format("cell {}: low key bits", c);
        const bn_u32 b = t.cell_pbegin[c], cnt = t.cell_pcount[c];
        if (cnt == 0 || b + cnt > n) return fmt::format("cell {}: particle range", c);
        if (bn_tree_cell_key(t.keys[b], level) != t.cell_key[c] ||
            bn_tree_cell_key(t.keys[b + cnt - 1], level) != t.cell_key[c])
            return fmt::format("cell {}: particles outside the cell", c);
        if ((b > 0 && bn_tree_cell_key(t.keys[b - 1], level) == t.cell_key[c]) ||
            (b + cnt < n && bn_tree_cell_key(t.keys[b + cnt], level) == t.cell_key[c]))
            return fmt::format("cell {}: particles of the cell left out", c);
        const bool leaf = bn_tree_is_leaf(t.cell_count[c]);
        if (leaf != (cnt <= BANYAN_N_LEAF || level == BANYAN_MAX_DEPTH)) return fmt::format("cell {}: leaf flag", c);
        if (leaf) {
            if (t.cell_first[c] != b || bn_tree_count(t.cell_count[c]) != cnt)
                return fmt::format("cell {}: leaf range", c);
            in_leaves += cnt;
            continue;
        }
        const bn_u32 f = t.cell_first[c], k = t.cell_count[c];
        if (k < 1 || k > 8 || f + k > nc) return fmt::format("cell {}: children {} + {}", c, f, k);
        bn_u32 next = b;
        for (bn_u32 ch = f; ch < f + k; ++ch) {
            if (t.cell_parent[ch] != c) return fmt::format("cell {}: child {} has parent {}", c, ch, t.cell_parent[ch]);
            if (t.cell_level[ch] != t.cell_level[c] + 1) return fmt::format("cell {}: child level", c);
            if (t.cell_pbegin[ch] != next) return fmt::format("cell {}: children do not tile it", c);
            next += t.cell_pcount[ch];
        }
        if (next != b + cnt) return fmt::format("cell {}: children do not cover it", c);
    }
    for (std::size_t c = 1; c < nc; ++c) {
        const bn_u32 p = t.cell_parent[c];
        if (p >= nc || bn_tree_is_leaf(t.cell_count[p]) || c < t.cell_first[p] ||
            c >= t.cell_first[p] + t.cell_count[p])
            return fmt::format("cell {}: parent {} does not list it", c, p);
    }
    if (in_leaves != n) return fmt::format("{} particles in leaves, not {}", in_leaves, n);
    // Groups tile [0, n) in order with 1..N_crit particles.
    bn_u32 next = 0;
    for (std::size_t g = 0; g < t.group_first.size(); ++g) {
        const bn_u32 b = t.group_first[g], cnt = t.group_count[g];
        if (b != next || cnt < 1 || cnt > BANYAN_N_CRIT) return fmt::format("group {}: range {} + {}", g, b, cnt);
        next += cnt;
        bn_f4 lo = t.pos[b], hi = t.pos[b];
        for (bn_u32 i = b; i < b + cnt; ++i) {
            lo.x = std::min(lo.x, t.pos[i].x), lo.y = std::min(lo.y, t.pos[i].y), lo.z = std::min(lo.z, t.pos[i].z);
            hi.x = std::max(hi.x, t.pos[i].x), hi.y = std::max(hi.y, t.pos[i].y), hi.z = std::max(hi.z, t.pos[i].z);
        }
        const bn_f4 gl = t.group_lo[g], gh = t.group_hi[g];
        if (gl.x != lo.x || gl.y != lo.y || gl.z != lo.z || gh.x != hi.x || gh.y != hi.y || gh.z != hi.z)
            return fmt::format("group {}: bounding box", g);
    }
    if (next != n) return "groups do not cover every particle";
    return {};
}

double direct_potential_energy(const std::vector<bn_f4>& p)
{
    double w = 0;
    for (std::size_t i = 0; i < p.size(); ++i)
        for (std::size_t j = i + 1; j < p.size(); ++j) {
            const double dx = double(p[i].x) - p[j].x, dy = double(p[i].y) - p[j].y, dz = double(p[i].z) - p[j].z;
            w -= double(p[i].w) * p[j].w / std::sqrt(dx * dx + dy * dy + dz * dz);
        }
    return w;
}

} // namespace

// ---- Plummer spheres ------------------------------------------------------------------------------------------

TEST_CASE("plummer: N-body units, virial equilibrium, zero momentum, cut-off, reproducible")
{
    const std::size_t n = 4096;
    const Particles s = plummer(n, 20261122);
    REQUIRE(s.pos.size() == n);
    REQUIRE(s.vel.size() == n);
    double mass = 0, kin = 0, cx[3] = {0, 0, 0}, cv[3] = {0, 0, 0}, rmax = 0;
    std::vector<double> r(n);
    for (std::size_t i = 0; i < n; ++i) {
        const bn_f4 p = s.pos[i], v = s.vel[i];
        CHECK(p.w == doctest::Approx(1.0 / n).epsilon(1e-7));
        CHECK(v.w == 0.0f);
        mass += p.w;
        kin += 0.5 * p.w * (double(v.x) * v.x + double(v.y) * v.y + double(v.z) * v.z);
        cx[0] += p.w * double(p.x), cx[1] += p.w * double(p.y), cx[2] += p.w * double(p.z);
        cv[0] += p.w * double(v.x), cv[1] += p.w * double(v.y), cv[2] += p.w * double(v.z);
        r[i] = std::sqrt(double(p.x) * p.x + double(p.y) * p.y + double(p.z) * p.z);
        rmax = std::max(rmax, r[i]);
    }
    CHECK(mass == doctest::Approx(1.0).epsilon(1e-6));
    for (int k = 0; k < 3; ++k) {
        CHECK(std::abs(cx[k]) < 1e-6);
        CHECK(std::abs(cv[k]) < 1e-6);
    }
    const double pot = direct_potential_energy(s.pos);
    const double virial = 2 * kin / -pot;
    INFO("T = " << kin << ", W = " << pot << ", 2T/|W| = " << virial);
    CHECK(virial == doctest::Approx(1.0).epsilon(0.08)); // statistical: about 0.02 at N = 4096
    CHECK(kin + pot == doctest::Approx(-0.25).epsilon(0.08));
    CHECK(rmax <= 22.8042468 * 3 * std::numbers::pi / 16 + 0.05);
    std::nth_element(r.begin(), r.begin() + n / 2, r.end());
    CHECK(r[n / 2] == doctest::Approx(0.769).epsilon(0.08)); // half-mass radius of the Plummer sphere

    const Particles again = plummer(n, 20261122);
    const Particles other = plummer(n, 20261123);
    CHECK(std::memcmp(again.pos.data(), s.pos.data(), n * sizeof(bn_f4)) == 0);
    CHECK(std::memcmp(again.vel.data(), s.vel.data(), n * sizeof(bn_f4)) == 0);
    CHECK(std::memcmp(other.pos.data(), s.pos.data(), n * sizeof(bn_f4)) != 0);

    CHECK(plummer(0, 1).pos.empty());
    const Particles one = plummer(1, 1);
    CHECK((one.pos[0].x == 0.0f && one.pos[0].y == 0.0f && one.pos[0].z == 0.0f && one.pos[0].w == 1.0f));
    PlummerOptions tight;
    tight.cutoff = 1.0;
    for (const bn_f4& p : plummer(2000, 3, tight).pos)
        CHECK(std::sqrt(double(p.x) * p.x + double(p.y) * p.y + double(p.z) * p.z) <= 3 * std::numbers::pi / 16 + 0.05);
}

// ---- Keys ---------------------------------------------------------------------------------------------------

TEST_CASE("tree keys: dilation, contraction and Morton order match the bit-by-bit reference")
{
    auto& g = test::rng();
    for (int i = 0; i < 20000; ++i) {
        const bn_u32 x = static_cast<bn_u32>(g()) & 0x1FFFFF, y = static_cast<bn_u32>(g()) & 0x1FFFFF,
                     z = static_cast<bn_u32>(g()) & 0x1FFFFF;
        const bn_u64 k = bn_tree_morton(x, y, z);
        REQUIRE(k == test::reference_morton(x, y, z));
        REQUIRE(bn_tree_contract(k >> 2) == x);
        REQUIRE(bn_tree_contract(k >> 1) == y);
        REQUIRE(bn_tree_contract(k) == z);
    }
    CHECK(bn_tree_morton(0x1FFFFF, 0x1FFFFF, 0x1FFFFF) == (bn_u64{1} << 63) - 1);
    CHECK(bn_tree_morton(1, 0, 0) == 4);
    CHECK(bn_tree_cell_key(~bn_u64{0} >> 1, 0) == 0);
    CHECK(bn_tree_cell_key(~bn_u64{0} >> 1, 21) == ~bn_u64{0} >> 1);
    CHECK(bn_tree_cell_key(~bn_u64{0} >> 1, 1) == bn_u64{7} << 60);
}

TEST_CASE("tree runs: common levels, run ends and the cells beginning at each key, against counting")
{
    // Sorted keys in a few clumps of equal and near-equal keys, so that runs of every length and level occur.
    auto& g = test::rng();
    for (int round = 0; round < 40; ++round) {
        std::vector<bn_u64> keys;
        const int clumps = 1 + static_cast<int>(g() % 12);
        for (int c = 0; c < clumps; ++c) {
            const bn_u64 base = g() >> 1;
            const int count = static_cast<int>(g() % 60);
            for (int k = 0; k < count; ++k)
                keys.push_back(base ^ (g() & ((bn_u64{1} << (g() % 63)) - 1)));
        }
        if (keys.empty()) keys.push_back(0);
        std::sort(keys.begin(), keys.end());
        const auto n = static_cast<bn_u32>(keys.size());
        auto same = [&](bn_u32 a, bn_u32 b, int level) {
            const int s = bn_tree_level_shift(level);
            return (keys[a] >> s) == (keys[b] >> s);
        };
        auto run = [&](bn_u32 j, int level) { // [begin, end) of j's level-L run, by counting
            bn_u32 b = j, e = j + 1;
            while (b > 0 && same(b - 1, j, level))
                --b;
            while (e < n && same(e, j, level))
                ++e;
            return std::pair{b, e};
        };
        for (bn_u32 j = 0; j < n; ++j) {
            if (j > 0) {
                int deepest = -1;
                for (int l = 0; l <= BANYAN_MAX_DEPTH; ++l)
                    if (same(j - 1, j, l)) deepest = l;
                REQUIRE(bn_tree_common_level(keys[j - 1], keys[j]) == deepest);
            }
            for (int l = 0; l <= BANYAN_MAX_DEPTH; ++l) {
                const auto [b, e] = run(j, l);
                INFO("round " << round << " j " << j << " level " << l);
                REQUIRE(bn_tree_run_end(keys.data(), j, n, l) == e);
                REQUIRE(bn_tree_run_begin(keys.data(), j, l) == b);
                const bn_u32 hi = j + 1 + static_cast<bn_u32>(g() % 5);
                if (hi <= n) REQUIRE(bn_tree_run_end(keys.data(), j, hi, l) == std::min(e, hi));
            }
            // The cells beginning at j, from the definition: a level-L run beginning at j whose parent run holds
            // more than N_leaf keys (the root always), down to the first leaf.
            bn_u32 want_first = 0, want = 0;
            for (int l = 0; l <= BANYAN_MAX_DEPTH; ++l) {
                if (run(j, l).first != j) continue;
                if (l > 0) {
                    const auto [pb, pe] = run(j, l - 1);
                    if (pe - pb <= BANYAN_N_LEAF) break;
                }
                if (want == 0) want_first = static_cast<bn_u32>(l);
                ++want;
                const auto [b, e] = run(j, l);
                if (e - b <= BANYAN_N_LEAF) break;
            }
            bn_u32 first = 99;
            REQUIRE(bn_tree_cells_beginning(keys.data(), n, j, &first) == want);
            if (want) REQUIRE(first == want_first);
        }
    }
}

TEST_CASE("tree frame: the cube's side is the next power of two above the extent")
{
    CHECK(bn_tree_side_exponent(1.0f) == 1);
    CHECK(bn_tree_side_exponent(1.5f) == 1);
    CHECK(bn_tree_side_exponent(0.75f) == 0);
    CHECK(bn_tree_side_exponent(std::nextafter(2.0f, 0.0f)) == 1);
    CHECK(bn_tree_side_exponent(0.0f) == BANYAN_TREE_MIN_EXP);
    CHECK(bn_tree_side_exponent(std::numeric_limits<float>::denorm_min()) == BANYAN_TREE_MIN_EXP);
    CHECK(bn_tree_side_exponent(std::ldexp(1.0f, -110)) == BANYAN_TREE_MIN_EXP);
    CHECK(bn_tree_side_exponent(std::numeric_limits<float>::max()) == BANYAN_TREE_MAX_EXP);
    CHECK(bn_tree_side_exponent(std::numeric_limits<float>::infinity()) == BANYAN_TREE_MAX_EXP);
    CHECK(bn_tree_side_exponent(std::nanf("")) == BANYAN_TREE_MIN_EXP);
    CHECK(bn_tree_pow2(-126) == std::numeric_limits<float>::min());
    CHECK(bn_tree_pow2(21) == 2097152.0f);
    // The largest coordinate stays below the grid's end, the smallest is 0.
    const float lo = -3.7f, hi = 12.9f, inv = bn_tree_pow2(BANYAN_MAX_DEPTH - bn_tree_side_exponent(hi - lo));
    CHECK(bn_tree_grid_coord(hi, lo, inv) < BANYAN_TREE_GRID);
    CHECK(bn_tree_grid_coord(hi, lo, inv) > BANYAN_TREE_GRID / 2);
    CHECK(bn_tree_grid_coord(lo, lo, inv) == 0);
    CHECK(bn_tree_grid_coord(std::nanf(""), lo, inv) == 0);
    CHECK(bn_tree_grid_coord(1e30f, lo, inv) == BANYAN_TREE_GRID - 1);
}

// ---- The CPU reference ----------------------------------------------------------------------------------------

TEST_CASE("reference tree: every promise of tree_shared.h holds on every input")
{
    for (const auto& in : inputs())
        for (std::size_t n : {0, 1, 2, 17, 65, 1000, 20000}) {
            const auto pos = in.make(n, 11 + n);
            const test::RefTree t = test::build_reference_tree(pos);
            INFO(in.name << " N = " << n);
            CHECK(tree_invariants(t, pos) == "");
            if (n == 0) continue;
            // Total mass and centre of mass of the root match a plain sum.
            double m = 0, x = 0;
            for (const auto& p : pos)
                m += p.w, x += double(p.w) * p.x;
            CHECK(t.multipole[0].mass == doctest::Approx(m).epsilon(1e-12));
            CHECK(t.multipole[0].com[0] == doctest::Approx(x / m).epsilon(1e-9).scale(1.0));
            if (std::string(in.name) == "point") CHECK(t.depth() == (n > BANYAN_N_LEAF ? BANYAN_MAX_DEPTH : 0));
            if (std::string(in.name) == "clusters" && n >= 20000) CHECK(t.depth() == BANYAN_MAX_DEPTH);
        }
}

TEST_CASE("reference tree: no group's box holds more particles than a parent that packs (no pack around a core)")
{
    // Sparse siblings of a heavy parent packed into one group would span the dense core between them, and that
    // group's walk would open every cell of the core (tree_shared.h, BANYAN_PACK_PARENT).
    for (std::size_t n : {20000, 60000}) {
        const auto pos = uncut_plummer_input(n, 5 + n);
        const test::RefTree t = test::build_reference_tree(pos);
        std::size_t worst = 0, worst_group = 0;
        for (std::size_t g = 0; g < t.group_first.size(); ++g) {
            const bn_f4 lo = t.group_lo[g], hi = t.group_hi[g];
            std::size_t inside = 0;
            for (const bn_f4& q : t.pos)
                inside += q.x >= lo.x && q.x <= hi.x && q.y >= lo.y && q.y <= hi.y && q.z >= lo.z && q.z <= hi.z;
            if (inside > worst) worst = inside, worst_group = g;
        }
        INFO("N = " << n << ": group " << worst_group << " of " << t.group_count[worst_group] << " particles has "
                    << worst << " in its box");
        CHECK(worst <= BANYAN_PACK_PARENT);
    }
}

TEST_CASE("reference tree: a hand-made example")
{
    // 17 particles: 16 at the low corner cube and 1 at the far corner: the root splits into 2 leaves.
    std::vector<bn_f4> pos;
    for (int i = 0; i < 16; ++i)
        pos.push_back(bn_f4{0.01f * i, 0.0f, 0.0f, 1.0f});
    pos.push_back(bn_f4{1.0f, 1.0f, 1.0f, 2.0f});
    const test::RefTree t = test::build_reference_tree(pos);
    REQUIRE(t.cells() == 3);
    CHECK(t.exponent == 1); // extent 1 -> side 2
    CHECK(t.cell_count[0] == 2);
    CHECK(t.cell_first[0] == 1);
    CHECK(t.cell_key[1] == 0);
    CHECK(t.cell_key[2] == bn_u64{7} << 60); // the far corner (1 - 0 = 1 = half the side) is octant 7
    CHECK(t.cell_count[1] == (16 | BANYAN_TREE_LEAF_BIT));
    CHECK(t.cell_count[2] == (1 | BANYAN_TREE_LEAF_BIT));
    CHECK(t.cell_first[2] == 16);
    CHECK(t.ids[16] == 16);
    REQUIRE(t.group_first.size() == 1); // 17 <= N_crit: the root is the only group
    CHECK(t.multipole[0].mass == 18.0);
    CHECK(t.multipole[2].com[0] == 1.0);
    CHECK(t.multipole[2].centre[0] == 1.5);
    CHECK(t.multipole[2].size == 1.0);
    CHECK(t.multipole[0].size == 2.0);
    CHECK(t.multipole[2].delta == doctest::Approx(std::sqrt(0.75)));
}

// ---- The device tree ------------------------------------------------------------------------------------------

namespace {

/// The device tree, downloaded into the reference's layout (multipoles apart).
test::RefTree download(const Octree& t)
{
    test::RefTree d;
    const std::size_t n = t.size(), nc = t.cells(), ng = t.groups();
    d.keys = t.keys().download(n);
    d.ids = t.ids().download(n);
    d.pos = const_cast<Octree&>(t).pos().download(n);
    if (auto& v = const_cast<Octree&>(t).vel()) d.vel = v.download(n); // a tree without velocities keeps none
    d.level_begin.assign(t.level_begin().begin(), t.level_begin().end());
    if (n) {
        const bn_f4 f = t.frame().at(0);
        d.lo = {f.x, f.y, f.z};
        std::frexp(f.w, &d.exponent);
        d.exponent -= 1; // side = 0.5 * 2^E = 2^(E - 1)
    }
    d.cell_key = t.cell_key().download(nc);
    d.cell_level = t.cell_level().download(nc);
    d.cell_parent = t.cell_parent().download(nc);
    d.cell_first = t.cell_first().download(nc);
    d.cell_count = t.cell_count().download(nc);
    d.cell_pbegin = t.cell_pbegin().download(nc);
    d.cell_pcount = t.cell_pcount().download(nc);
    d.group_first = t.group_first().download(ng);
    d.group_count = t.group_count().download(ng);
    d.group_lo = t.group_lo().download(ng);
    d.group_hi = t.group_hi().download(ng);
    return d;
}

template <class T> std::string first_difference(const std::vector<T>& want, const std::vector<T>& got, const char* what)
{
    if (want.size() != got.size()) return fmt::format("{}: {} entries, expected {}", what, got.size(), want.size());
    for (std::size_t i = 0; i < want.size(); ++i)
        if (std::memcmp(&want[i], &got[i], sizeof(T)) != 0)
            return fmt::format("{}[{}] differs (of {})", what, i, want.size());
    return {};
}

/// The arrays of bn_u32 of a tree, with their names.
using U32Array = std::vector<bn_u32> test::RefTree::*;
constexpr std::pair<U32Array, const char*> u32_arrays[] = {
    {&test::RefTree::level_begin, "level_begin"}, {&test::RefTree::cell_level, "cell_level"},
    {&test::RefTree::cell_parent, "cell_parent"}, {&test::RefTree::cell_first, "cell_first"},
    {&test::RefTree::cell_count, "cell_count"},   {&test::RefTree::cell_pbegin, "cell_pbegin"},
    {&test::RefTree::cell_pcount, "cell_pcount"}, {&test::RefTree::group_first, "group_first"},
    {&test::RefTree::group_count, "group_count"}};

/// Everything but the multipoles, exactly (bit for bit).
std::string compare_exact(const test::RefTree& want, const test::RefTree& got)
{
    std::string e;
    auto check = [&](std::string s) {
        if (e.empty() && !s.empty()) e = std::move(s);
    };
    if (!want.keys.empty()) {
        if (want.exponent != got.exponent) check(fmt::format("frame exponent {} vs {}", got.exponent, want.exponent));
        if (want.lo != got.lo) check("frame corner");
    }
    check(first_difference(want.keys, got.keys, "keys"));
    check(first_difference(want.ids, got.ids, "ids (permutation)"));
    check(first_difference(want.pos, got.pos, "pos"));
    if (!want.vel.empty()) check(first_difference(want.vel, got.vel, "vel"));
    check(first_difference(want.cell_key, got.cell_key, "cell_key"));
    for (const auto& [array, name] : u32_arrays)
        check(first_difference(want.*array, got.*array, name));
    check(first_difference(want.group_lo, got.group_lo, "group_lo"));
    check(first_difference(want.group_hi, got.group_hi, "group_hi"));
    return e;
}

/// Multipoles against the double-precision reference: relative 1e-6 of each value's natural scale.
std::string compare_multipoles(const test::RefTree& want, const Octree& t)
{
    const std::size_t nc = t.cells();
    const auto com = t.cell_com().download(nc), q0 = t.cell_quad0().download(nc), q1 = t.cell_quad1().download(nc);
    constexpr double rel = 1e-6;
    for (std::size_t c = 0; c < nc; ++c) {
        const test::RefMultipole& m = want.multipole[c];
        const double l = m.size;
        auto bad = [&](const char* what, double got, double expect, double tol) -> std::string {
            if (std::abs(got - expect) <= tol) return {};
            return fmt::format("cell {} (level {}, {} particles): {} = {:.9g}, reference {:.9g} (tolerance {:.3g})", c,
                               want.cell_level[c], want.cell_pcount[c], what, got, expect, tol);
        };
        std::string e;
        auto check = [&](std::string s) {
            if (e.empty() && !s.empty()) e = std::move(s);
        };
        check(bad("mass", com[c].w, m.mass, rel * m.mass));
        const double cscale = std::max({std::abs(m.com[0]), std::abs(m.com[1]), std::abs(m.com[2]), l});
        check(bad("com.x", com[c].x, m.com[0], rel * cscale));
        check(bad("com.y", com[c].y, m.com[1], rel * cscale));
        check(bad("com.z", com[c].z, m.com[2], rel * cscale));
        const double qscale = rel * (m.quad[0] + m.quad[1] + m.quad[2]) + 1e-12 * m.mass * l * l;
        const float got_q[6] = {q0[c].x, q0[c].y, q0[c].z, q0[c].w, q1[c].x, q1[c].y};
        const char* names[6] = {"Qxx", "Qyy", "Qzz", "Qxy", "Qxz", "Qyz"};
        for (int k = 0; k < 6; ++k)
            check(bad(names[k], got_q[k], m.quad[k], qscale));
        if (t.opening() == Opening::paper) {
            check(bad("delta", q1[c].z, m.delta, rel * (m.delta + l)));
            check(bad("l", q1[c].w, l, 0.0));
        } else {
            // bmax: never below the exact value (a group holding a particle of the cell must open it), exact up to
            // the stored widening for a leaf, and for a node at most the distance to the cell's farthest corner.
            check(bad("offset", q1[c].z, 0.0, 0.0));
            const double widen = 1e-5 * m.bmax + 4e-6 * cscale;
            double corner = 0;
            for (int a = 0; a < 3; ++a)
                corner += std::pow(std::abs(m.com[a] - m.centre[a]) + l / 2, 2);
            const double upper = bn_tree_is_leaf(want.cell_count[c]) ? m.bmax : std::sqrt(corner);
            if (!(q1[c].w >= m.bmax && q1[c].w <= upper + widen))
                check(fmt::format("cell {} ({} particles): bmax {:.9g}, exact {:.9g}, at most {:.9g}", c,
                                  want.cell_pcount[c], q1[c].w, m.bmax, upper + widen));
        }
        if (!e.empty()) return e;
    }
    return {};
}

} // namespace

/// Builds on the device and compares everything with the reference; returns the device tree's download.
test::RefTree test::check_tree_against_reference(const std::vector<bn_f4>& pos, const std::vector<bn_f4>& vel,
                                                 Octree& tree)
{
    tree.set_particles(pos, vel);
    tree.poison();
    tree.build();
    const test::RefTree want = test::build_reference_tree(pos, vel);
    const test::RefTree got = download(tree);
    CHECK(compare_exact(want, got) == "");
    CHECK(tree_invariants(got, pos) == "");
    CHECK(tree.depth() == want.depth());
    CHECK(compare_multipoles(want, tree) == "");
    return got;
}

namespace {

std::vector<bn_f4> velocities(std::size_t n, std::uint64_t seed)
{
    std::mt19937_64 g(seed);
    std::vector<bn_f4> v(n);
    for (auto& x : v)
        x = bn_f4{static_cast<float>(uniform01(g)), static_cast<float>(uniform01(g)), static_cast<float>(uniform01(g)),
                  static_cast<float>(g() % 1000)};
    return v;
}

std::vector<std::size_t> tree_sizes()
{
    // 2^16 on every device, 2^22 on a GPU; BANYAN_TEST_MAX_LOG2 lowers both (for compute-sanitizer runs).
    std::vector<std::size_t> s{0, 1, 2, 17, 1000};
    const std::size_t big = test::on_gpu() ? std::size_t{1} << 22 : std::size_t{1} << 16;
    for (std::size_t n : {std::size_t{1} << 16, big})
        if (n <= test::max_size() && n != s.back()) s.push_back(n);
    return s;
}

} // namespace

TEST_CASE("tree on the device: every input and size, against the CPU reference")
{
    auto& be = test::backend();
    for (bool vendor : test::vendor_modes()) {
        be.set_vendor_primitives(vendor);
        Octree tree(be);
        for (const auto& in : inputs())
            for (std::size_t n : tree_sizes()) {
                if (!vendor && n > (std::size_t{1} << 16)) continue;
                INFO(in.name << " N = " << n << (vendor ? "" : ", own primitives"));
                const auto pos = in.make(n, 100 + n);
                test::check_tree_against_reference(pos, velocities(n, n), tree);
            }
    }
    be.set_vendor_primitives(true);
}

TEST_CASE("tree on the device: more cells than the arrays start with (they grow)")
{
    auto& be = test::backend();
    // Clumps of N_leaf + 1 particles, N_leaf at one point and one a hair away: each clump is a chain of nodes
    // down to the level that separates them, so the tree has several cells per particle, far beyond the N / 4
    // the cell arrays start with.
    const std::size_t clumps = 300, n = clumps * (BANYAN_N_LEAF + 1);
    std::mt19937_64 g(3);
    std::uniform_real_distribution<float> u(0.0f, 1.0f);
    std::vector<bn_f4> pos;
    for (std::size_t c = 0; c < clumps; ++c) {
        const bn_f4 at{u(g), u(g), u(g), 1.0f};
        for (int k = 0; k < BANYAN_N_LEAF; ++k)
            pos.push_back(at);
        pos.push_back({at.x + 1e-5f, at.y, at.z, 1.0f});
    }
    Octree tree(be);
    test::check_tree_against_reference(pos, {}, tree);
    CHECK(tree.cells() > n / 4 + 64);
    // Built again with the grown arrays: the same tree.
    const std::size_t cells = tree.cells();
    test::check_tree_against_reference(pos, {}, tree);
    CHECK(tree.cells() == cells);
}

TEST_CASE("tree on the device: the bmax criterion's cell sizes")
{
    auto& be = test::backend();
    Octree tree(be);
    tree.set_opening(Opening::bmax);
    for (const auto& in : inputs())
        for (std::size_t n : {std::size_t{17}, std::size_t{1000}, std::size_t{1} << 16}) {
            INFO(in.name << " N = " << n);
            test::check_tree_against_reference(in.make(n, 5 + n), {}, tree);
        }
}

TEST_CASE("tree on the device: other work-group sizes")
{
    auto& be = test::backend();
    for (std::size_t wg : test::work_group_sizes()) {
        if (wg == BANYAN_WG_DEFAULT) continue;
        be.set_work_group_size(wg);
        Octree tree(be);
        for (const auto& in : inputs())
            for (std::size_t n : {std::size_t{17}, std::size_t{1000}, std::size_t{1} << 16}) {
                INFO(in.name << " N = " << n << " work-group " << wg);
                test::check_tree_against_reference(in.make(n, 7 + n), {}, tree);
            }
    }
    test::restore_work_group_size();
}

TEST_CASE("tree on the device: the same input gives the same tree, and a rebuild keeps it")
{
    auto& be = test::backend();
    const std::size_t n = test::on_gpu() ? std::size_t{1} << 20 : std::size_t{1} << 15;
    const auto s = plummer(n, 5);
    Octree a(be), b(be);
    a.set_particles(s.pos, s.vel);
    b.set_particles(s.pos, s.vel);
    a.build();
    b.build();
    const auto ta = download(a), tb = download(b);
    CHECK(compare_exact(ta, tb) == "");
    CHECK(first_difference(a.cell_com().download(a.cells()), b.cell_com().download(b.cells()), "cell_com") == "");
    CHECK(first_difference(a.cell_quad0().download(a.cells()), b.cell_quad0().download(b.cells()), "quad0") == "");
    CHECK(first_difference(a.cell_quad1().download(a.cells()), b.cell_quad1().download(b.cells()), "quad1") == "");

    // Rebuilding from the sorted particles: identity permutation, the same ids and tree.
    a.build();
    const auto again = download(a);
    CHECK(compare_exact(ta, again) == "");
}

TEST_CASE("tree on the device: particles moved on the device, then rebuilt")
{
    auto& be = test::backend();
    const std::size_t n = std::size_t{1} << 14;
    const Particles s = plummer(n, 9);
    Octree tree(be);
    tree.set_particles(s.pos, s.vel);
    tree.build();
    // A drift step, as an integrator would take it: x += v dt, on the particles in tree order.
    auto pos = tree.pos().download(n);
    const auto vel = tree.vel().download(n);
    const auto ids_before = tree.ids().download(n);
    for (std::size_t i = 0; i < n; ++i) {
        pos[i].x += 0.05f * vel[i].x, pos[i].y += 0.05f * vel[i].y, pos[i].z += 0.05f * vel[i].z;
    }
    tree.pos().upload(pos);
    tree.poison();
    tree.build();
    // The reference starts from the tree order of before; the device's ids still name the caller's particles.
    const test::RefTree want = test::build_reference_tree(pos, vel);
    test::RefTree got = download(tree);
    const auto ids_after = got.ids;
    std::vector<bn_u32> where_before(n);
    for (std::size_t i = 0; i < n; ++i)
        where_before[ids_before[i]] = static_cast<bn_u32>(i);
    for (std::size_t i = 0; i < n; ++i)
        got.ids[i] = where_before[ids_after[i]];
    CHECK(compare_exact(want, got) == "");
    CHECK(compare_multipoles(want, tree) == "");
    for (std::size_t i = 0; i < n; ++i)
        REQUIRE(got.pos[i].w == s.pos[ids_after[i]].w);
}

TEST_CASE("tree on the device: ids of 2^32 and more keep both words through the build and a resize")
{
    // Over ranks an id is the input index, which passes 2^32 in runs of more particles: its high word moves with it
    // (Octree::keep_high_ids); without it such ids are refused, never cut to their low words.
    auto& be = test::backend();
    const std::size_t n = 5000;
    const Particles s = plummer(n, 12);
    std::vector<std::uint64_t> ids(n);
    for (std::size_t i = 0; i < n; ++i)
        ids[i] = (std::uint64_t{1} << 32) - 2500 + 7 * i; // both sides of 2^32, with low words that repeat none
    Octree tree(be);
    CHECK_THROWS_AS(tree.set_particles(s.pos, s.vel, ids), std::logic_error);
    tree.keep_high_ids(true);
    tree.set_particles(s.pos, s.vel, ids);
    tree.build();
    auto check = [&](std::size_t m) {
        const auto pos = tree.pos().download(m);
        const auto got = tree.download_ids();
        REQUIRE(got.size() == m);
        std::size_t wrong = 0;
        std::vector<std::uint64_t> sorted(got);
        std::sort(sorted.begin(), sorted.end());
        for (std::size_t i = 0; i < m; ++i) {
            const std::uint64_t k = (got[i] - ids[0]) / 7; // the particle the id was given to
            wrong += k >= n || ids[k] != got[i] || pos[i].x != s.pos[k].x || pos[i].w != s.pos[k].w;
        }
        CHECK(wrong == 0);
        CHECK(std::adjacent_find(sorted.begin(), sorted.end()) == sorted.end());
    };
    check(n);
    // A resize that grows the arrays keeps the first particles' ids, high words included.
    tree.resize_keep(3 * n);
    tree.resize_keep(n);
    check(n);
}

TEST_CASE("tree on the device: the workspace grows keeping what it is asked to keep")
{
    // The local essential trees' selection (let.cpp) grows the workspace for a large tree to send while its
    // per-cell scratch, at the front, must survive.
    auto& be = test::backend();
    Octree tree(be);
    tree.set_particles(plummer(4096, 3).pos);
    tree.build();
    auto& ws = tree.workspace(0);
    const std::size_t before = ws.size(), keep = before / 2 + 3; // a size that is no multiple of anything
    std::vector<unsigned char> pattern(before);
    for (std::size_t i = 0; i < before; ++i)
        pattern[i] = static_cast<unsigned char>(i * 7 + 1);
    ws.upload(std::span<const unsigned char>(pattern));
    CHECK(tree.workspace(before, keep).size() == before); // large enough: as it is
    auto& grown = tree.workspace(3 * before, keep);
    REQUIRE(grown.size() >= 3 * before);
    const auto after = grown.download(keep);
    CHECK(std::equal(after.begin(), after.end(), pattern.begin()));
}

TEST_SUITE("static")
{
    TEST_CASE("workspace layouts refuse overlapping and unaligned regions")
    {
        WorkspaceLayout sort("the sort", 1024, 256);
        const auto keys = sort.slots<bn_u64>("keys A", 0, 256); // slots 0-1
        sort.slots<bn_u32>("values A", 2, 256);
        CHECK(sort.end() == 3 * 1024);
        CHECK(keys.offset == 0);
        // Keys B over slots 1-2 would overwrite keys A's second half and values A.
        CHECK_THROWS_WITH_AS(sort.slots<bn_u64>("keys B", 1, 256),
                             doctest::Contains("region 'keys B' (bytes 1024 to 3072) overlaps 'keys A'"),
                             std::logic_error);
        const auto behind = sort.next<float>("behind", 10);
        CHECK(behind.offset == 3 * 1024);
        CHECK(sort.end() == 3 * 1024 + 256);
        WorkspaceLayout odd("odd", 1000, 256);
        CHECK_THROWS_WITH_AS(odd.slots<bn_u32>("second", 1, 1), doctest::Contains("not aligned to 256"),
                             std::logic_error);
    }
}
