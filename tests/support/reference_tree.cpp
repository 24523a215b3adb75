/**
 * @file reference_tree.cpp
 * @brief The CPU reference octree: recursive subdivision of the key-sorted particles, then storage order.
 */
#include "tests/support/reference_tree.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <stdexcept>

namespace banyan::test {

namespace {

/// A cell while the tree is built depth first.
struct Node {
    bn_u64 key;
    int level;
    bn_u32 begin, count;
    bool leaf;
    std::vector<std::size_t> children; ///< indices into the build list
    std::size_t parent;
};

constexpr std::size_t npos = static_cast<std::size_t>(-1);

/// Side exponent from the largest extent, by frexp: extent = f 2^E with f in [0.5, 1), so 2^E > extent.
int side_exponent(float extent)
{
    int e;
    if (!(extent > 0.0f))
        e = BANYAN_TREE_MIN_EXP;
    else if (std::isinf(extent))
        e = BANYAN_TREE_MAX_EXP;
    else if (extent < std::numeric_limits<float>::min())
        e = BANYAN_TREE_MIN_EXP; // subnormal
    else
        std::frexp(extent, &e);
    return std::clamp(e, BANYAN_TREE_MIN_EXP, BANYAN_TREE_MAX_EXP);
}

bn_u32 grid(float x, float lo, float inv)
{
    const float u = (x - lo) * inv;
    if (!(u > 0.0f)) return 0;
    if (u >= 2097152.0f) return 2097151;
    return static_cast<bn_u32>(u);
}

/// Recursive subdivision of particles [begin, begin + count), which share the key bits above @p level.
void subdivide(std::vector<Node>& nodes, const std::vector<bn_u64>& keys, std::size_t self)
{
    const Node n = nodes[self];
    if (n.count <= BANYAN_N_LEAF || n.level == BANYAN_MAX_DEPTH) {
        nodes[self].leaf = true;
        return;
    }
    const int child_level = n.level + 1;
    const int shift = 3 * (BANYAN_MAX_DEPTH - child_level);
    bn_u32 i = n.begin;
    const bn_u32 end = n.begin + n.count;
    while (i < end) {
        const bn_u64 digit = (keys[i] >> shift) & 7;
        bn_u32 j = i;
        while (j < end && ((keys[j] >> shift) & 7) == digit)
            ++j;
        Node c{n.key | (digit << shift), child_level, i, j - i, false, {}, self};
        nodes.push_back(c);
        const std::size_t ci = nodes.size() - 1;
        nodes[self].children.push_back(ci);
        subdivide(nodes, keys, ci);
        i = j;
    }
}

} // namespace

bn_u64 reference_morton(bn_u32 ix, bn_u32 iy, bn_u32 iz)
{
    bn_u64 key = 0;
    for (int b = 0; b < BANYAN_MAX_DEPTH; ++b) {
        key |= static_cast<bn_u64>((ix >> b) & 1u) << (3 * b + 2);
        key |= static_cast<bn_u64>((iy >> b) & 1u) << (3 * b + 1);
        key |= static_cast<bn_u64>((iz >> b) & 1u) << (3 * b);
    }
    return key;
}

int RefTree::depth() const
{
    return cell_level.empty() ? -1 : static_cast<int>(cell_level.back());
}

RefTree build_reference_tree(std::span<const bn_f4> pos, std::span<const bn_f4> vel)
{
    if (!vel.empty() && vel.size() != pos.size()) throw std::invalid_argument("pos and vel differ in size");
    const std::size_t n = pos.size();
    RefTree t;
    t.level_begin.assign(BANYAN_TREE_LEVELS + 1, 0);
    if (n == 0) return t;

    // Frame: bounding box, then the power-of-two cube.
    float lo[3], hi[3];
    for (int k = 0; k < 3; ++k) {
        lo[k] = std::numeric_limits<float>::infinity();
        hi[k] = -std::numeric_limits<float>::infinity();
    }
    for (const bn_f4& p : pos) {
        const float c[3] = {p.x, p.y, p.z};
        for (int k = 0; k < 3; ++k) {
            lo[k] = std::min(lo[k], c[k]);
            hi[k] = std::max(hi[k], c[k]);
        }
    }
    float extent = 0;
    for (int k = 0; k < 3; ++k)
        extent = std::max(extent, hi[k] - lo[k]);
    t.exponent = side_exponent(extent);
    const float inv = std::ldexp(1.0f, BANYAN_MAX_DEPTH - t.exponent);
    for (int k = 0; k < 3; ++k)
        t.lo[k] = lo[k];

    // Keys, then a stable sort of the particles by key.
    std::vector<bn_u64> key(n);
    for (std::size_t i = 0; i < n; ++i)
        key[i] = reference_morton(grid(pos[i].x, lo[0], inv), grid(pos[i].y, lo[1], inv), grid(pos[i].z, lo[2], inv));
    t.ids.resize(n);
    std::iota(t.ids.begin(), t.ids.end(), 0u);
    std::stable_sort(t.ids.begin(), t.ids.end(), [&](bn_u32 a, bn_u32 b) { return key[a] < key[b]; });
    t.keys.resize(n);
    t.pos.resize(n);
    if (!vel.empty()) t.vel.resize(n);
    for (std::size_t i = 0; i < n; ++i) {
        t.keys[i] = key[t.ids[i]];
        t.pos[i] = pos[t.ids[i]];
        if (!vel.empty()) t.vel[i] = vel[t.ids[i]];
    }

    // Tree by recursive subdivision.
    std::vector<Node> nodes;
    nodes.push_back(Node{0, 0, 0, static_cast<bn_u32>(n), false, {}, npos});
    subdivide(nodes, t.keys, 0);

    // Storage order: by level, then key.
    std::vector<std::size_t> order(nodes.size());
    std::iota(order.begin(), order.end(), std::size_t{0});
    std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
        return nodes[a].level != nodes[b].level ? nodes[a].level < nodes[b].level : nodes[a].key < nodes[b].key;
    });
    std::vector<bn_u32> where(nodes.size());
    for (std::size_t i = 0; i < order.size(); ++i)
        where[order[i]] = static_cast<bn_u32>(i);

    const std::size_t nc = nodes.size();
    t.cell_key.resize(nc);
    t.cell_level.resize(nc);
    t.cell_parent.resize(nc);
    t.cell_first.resize(nc);
    t.cell_count.resize(nc);
    t.cell_pbegin.resize(nc);
    t.cell_pcount.resize(nc);
    for (std::size_t i = 0; i < nc; ++i) {
        const Node& c = nodes[order[i]];
        t.cell_key[i] = c.key;
        t.cell_level[i] = static_cast<bn_u32>(c.level);
        t.cell_parent[i] = c.parent == npos ? BANYAN_TREE_NO_PARENT : where[c.parent];
        t.cell_pbegin[i] = c.begin;
        t.cell_pcount[i] = c.count;
        if (c.leaf) {
            t.cell_first[i] = c.begin;
            t.cell_count[i] = c.count | BANYAN_TREE_LEAF_BIT;
        } else {
            bn_u32 first = std::numeric_limits<bn_u32>::max();
            for (std::size_t ch : c.children)
                first = std::min(first, where[ch]);
            for (std::size_t k = 0; k < c.children.size(); ++k)
                if (where[c.children[k]] != first + k) throw std::logic_error("reference: children not contiguous");
            t.cell_first[i] = first;
            t.cell_count[i] = static_cast<bn_u32>(c.children.size());
        }
        ++t.level_begin[static_cast<std::size_t>(c.level) + 1];
    }
    for (std::size_t l = 1; l < t.level_begin.size(); ++l)
        t.level_begin[l] += t.level_begin[l - 1];

    // Groups, depth first in key order, so they come out by increasing first particle.
    auto add_group = [&](bn_u32 first, bn_u32 count) {
        bn_f4 gl{std::numeric_limits<float>::infinity(), std::numeric_limits<float>::infinity(),
                 std::numeric_limits<float>::infinity(), 0.0f};
        bn_f4 gh{-gl.x, -gl.y, -gl.z, 0.0f};
        for (bn_u32 i = first; i < first + count; ++i) {
            gl.x = std::min(gl.x, t.pos[i].x);
            gl.y = std::min(gl.y, t.pos[i].y);
            gl.z = std::min(gl.z, t.pos[i].z);
            gh.x = std::max(gh.x, t.pos[i].x);
            gh.y = std::max(gh.y, t.pos[i].y);
            gh.z = std::max(gh.z, t.pos[i].z);
        }
        t.group_first.push_back(first);
        t.group_count.push_back(count);
        t.group_lo.push_back(gl);
        t.group_hi.push_back(gh);
    };
    auto groups = [&](auto&& self, std::size_t c) -> void {
        const Node& node = nodes[c];
        if (node.count <= BANYAN_N_CRIT) {
            add_group(node.begin, node.count);
        } else if (node.leaf) {
            for (bn_u32 b = 0; b < node.count; b += BANYAN_N_CRIT)
                add_group(node.begin + b, std::min<bn_u32>(BANYAN_N_CRIT, node.count - b));
        } else {
            // Consecutive children of at most N_crit particles packed while the pack holds at most N_crit, under a
            // parent of at most BANYAN_PACK_PARENT particles; each child alone under a heavier one.
            const bool packs = node.count <= BANYAN_PACK_PARENT;
            bn_u32 pack_first = 0, pack = 0;
            auto close = [&] {
                if (pack) add_group(pack_first, pack);
                pack = 0;
            };
            for (std::size_t ch : node.children) {
                const Node& k = nodes[ch];
                if (k.count > BANYAN_N_CRIT) {
                    close();
                    self(self, ch);
                    continue;
                }
                if (!packs || pack + k.count > BANYAN_N_CRIT) close();
                if (pack == 0) pack_first = k.begin;
                pack += k.count;
            }
            close();
        }
    };
    groups(groups, 0);

    // Multipoles, directly from the particles of each cell, in double precision.
    const double side = std::ldexp(1.0, t.exponent);
    t.multipole.resize(nc);
    for (std::size_t i = 0; i < nc; ++i) {
        RefMultipole& m = t.multipole[i];
        const bn_u32 b = t.cell_pbegin[i], e = b + t.cell_pcount[i];
        // Geometry from the cell key: low corner in grid units plus half the cell's span.
        const int level = static_cast<int>(t.cell_level[i]);
        const double span = std::ldexp(1.0, BANYAN_MAX_DEPTH - level); // grid units
        const bn_u64 k = t.cell_key[i];
        bn_u32 g[3] = {0, 0, 0};
        for (int bit = 0; bit < BANYAN_MAX_DEPTH; ++bit) {
            g[0] |= static_cast<bn_u32>((k >> (3 * bit + 2)) & 1u) << bit;
            g[1] |= static_cast<bn_u32>((k >> (3 * bit + 1)) & 1u) << bit;
            g[2] |= static_cast<bn_u32>((k >> (3 * bit)) & 1u) << bit;
        }
        const double unit = std::ldexp(side, -BANYAN_MAX_DEPTH);
        for (int a = 0; a < 3; ++a)
            m.centre[a] = static_cast<double>(t.lo[a]) + (g[a] + 0.5 * span) * unit;

        double sx = 0, sy = 0, sz = 0;
        for (bn_u32 p = b; p < e; ++p) {
            const double w = t.pos[p].w;
            m.mass += w;
            sx += w * t.pos[p].x;
            sy += w * t.pos[p].y;
            sz += w * t.pos[p].z;
        }
        if (m.mass > 0)
            m.com = {sx / m.mass, sy / m.mass, sz / m.mass};
        else
            m.com = m.centre; // a massless cell: its geometric centre
        for (bn_u32 p = b; p < e; ++p) {
            const double w = t.pos[p].w;
            const double d[3] = {t.pos[p].x - m.com[0], t.pos[p].y - m.com[1], t.pos[p].z - m.com[2]};
            m.quad[0] += w * d[0] * d[0];
            m.quad[1] += w * d[1] * d[1];
            m.quad[2] += w * d[2] * d[2];
            m.quad[3] += w * d[0] * d[1];
            m.quad[4] += w * d[0] * d[2];
            m.quad[5] += w * d[1] * d[2];
            m.bmax = std::max(m.bmax, std::sqrt(d[0] * d[0] + d[1] * d[1] + d[2] * d[2]));
        }
        double d2 = 0;
        for (int a = 0; a < 3; ++a)
            d2 += (m.com[a] - m.centre[a]) * (m.com[a] - m.centre[a]);
        m.size = std::ldexp(side, -level);
        m.delta = std::sqrt(d2);
    }
    return t;
}

} // namespace banyan::test
