/**
 * @file tree_shared.h
 * @brief The octree's conventions, shared by host C++, CUDA and OpenCL C: the frame that maps positions to
 *        integer coordinates, 63-bit Morton keys, the order in which cells are stored and the layout of every tree
 *        array (paper sections 2.1, 3.2, 3.3 and appendix B).
 *
 * It includes core/device_shared.h (types, N_leaf, N_crit, the maximal depth), never the other way round; every
 * OpenCL program starts with it, device_shared.h pasted in place of its include (cmake/EmbedCl.cmake). It must stay
 * valid OpenCL C 1.2, CUDA C++ and C++20 at once.
 *
 * Frame. The cube has its low corner at lo = (min x, min y, min z) of the particles and side 2^e, e the smallest
 * integer with 2^e > the largest of the three extents (max - min), clamped to [-100, 127]; all particles at one
 * point give side 2^-100. A power of two makes the scale exact: grid coordinate u = (x - lo) * 2^(21 - e) has one
 * rounding (the subtraction), so host, CUDA and OpenCL compute the same keys bit for bit, and the largest
 * coordinate maps strictly below 2^21. Coordinates are truncated to [0, 2^21 - 1].
 *
 * Keys. key = sum over bits b < 21 of x_b << (3b + 2) | y_b << (3b + 1) | z_b << 3b (Morton / Z order, x the most
 * significant of each octant digit): 63 bits. A cell of level L (root 0, deepest BANYAN_MAX_DEPTH = 21) is named by
 * the key of its low corner: cell_key = key with the low 3 (21 - L) bits cleared (bn_tree_cell_key); its octant
 * digit below its parent is (key >> 3 (21 - L)) & 7. A cell of level L spans 2^(21 - L) grid units, size
 * l = side * 2^-L.
 *
 * Particle order. Particles are sorted by key, stably: equal keys keep their previous order (on the first build,
 * the caller's order). particle_id[i] is the caller's index of the particle now at position i.
 *
 * Cell order. Cells are stored level by level, root first (index 0), and within a level by increasing cell_key
 * (breadth-first, the order the walk visits them). Level L holds cells [level_begin[L], level_begin[L + 1]). The
 * children of a node are consecutive, at the next level, in octant order; a cell holds the consecutive particles
 * [cell_pbegin, cell_pbegin + cell_pcount) of its whole subtree. A cell with at most N_leaf particles, or any cell
 * of level 21, is a leaf; every other cell is a node with 1..8 children. No cell is empty.
 *
 * Cell arrays (structure of arrays, index = cell):
 *   cell_key    bn_u64  key of the cell's low corner (low bits cleared)
 *   cell_level  bn_u32  0..21
 *   cell_parent bn_u32  index of the parent; BANYAN_TREE_NO_PARENT for the root
 *   cell_first  bn_u32  node: index of the first child; leaf: index of the first particle
 *   cell_count  bn_u32  node: number of children (1..8); leaf: number of particles | BANYAN_TREE_LEAF_BIT
 *   cell_pbegin bn_u32  first particle of the subtree
 *   cell_pcount bn_u32  number of particles in the subtree
 *   cell_com    bn_f4   (centre of mass x, y, z, mass)
 *   cell_quad0  bn_f4   (Qxx, Qyy, Qzz, Qxy)
 *   cell_quad1  bn_f4   (Qxz, Qyz, offset, size): the rest of Q, then what the opening test d > size / theta + offset
 *                       needs: (delta, l) for the paper's criterion, (0, bmax) for bmax (BANYAN_OPEN_* below)
 *   cell_centre bn_f4   (geometric centre x, y, z, l)
 * Q_ij = sum over the cell's particles of m (x_i - com_i)(x_j - com_j): the second moment about the centre of mass
 * (not trace-free; the walk stages 3 Q_ij - delta_ij tr Q, bn_quad_staged0/1). delta = |com - geometric centre|;
 * bmax = the largest distance from com to a particle of the cell (leaves: exact; nodes: the smaller of the largest
 * child's |com_child - com| + bmax_child and the distance from com to the cell's farthest corner).
 * Multipoles are accumulated in double precision and stored in single (section 3.2).
 *
 * Groups (for the walk, section 2.2). A cell with at most N_crit particles whose parent has more (or the root, when
 * N <= N_crit) is a group cell. Where the parent holds at most BANYAN_PACK_PARENT = 8 N_crit particles, consecutive
 * sibling group cells are packed into one group while it holds at most N_crit particles (greedily, in octant order;
 * a sibling with more than N_crit ends the pack, bn_tree_group_begins): the paper's groups are the cells alone,
 * which average 20 particles on a Plummer sphere (2^20), a third of N_crit, so each interaction list served few
 * particles. The bound on the parent keeps a pack small: siblings of a heavy parent (the root's sparse octants
 * around a dense core) would make one group whose box holds the core, and its walk would open every cell of it
 * (a galaxy's or a Hernquist sphere's extended halo made its walk 8 to 14 times slower). A leaf with more than N_crit
 * particles (only possible at level 21) gives groups of N_crit consecutive particles and one with the rest. Every
 * particle is in exactly one group; groups are stored by increasing first particle and tile [0, N): group_first
 * bn_u32, group_count bn_u32 (1..N_crit), group_lo bn_f4 / group_hi bn_f4: the componentwise min and max of the
 * group's positions (w = 0).
 */
#ifndef BANYAN_TREE_SHARED_H
#define BANYAN_TREE_SHARED_H

#include "device_shared.h"

#define BANYAN_TREE_LEVELS (BANYAN_MAX_DEPTH + 1)   /* levels 0 .. 21 */
#define BANYAN_TREE_KEY_BITS (3 * BANYAN_MAX_DEPTH) /* 63 */
#define BANYAN_TREE_GRID (1u << BANYAN_MAX_DEPTH)   /* 2^21 grid points per axis */
#define BANYAN_TREE_LEAF_BIT 0x80000000u            /* in cell_count: this cell is a leaf */
#define BANYAN_TREE_NO_PARENT 0xFFFFFFFFu           /* cell_parent of the root */
#define BANYAN_TREE_MIN_EXP (-100)                  /* the side of the cube is 2^e, e in [-100, 127] */
#define BANYAN_TREE_MAX_EXP 127
#define BANYAN_PACK_PARENT (8u * BANYAN_N_CRIT) /* sibling group cells pack under parents of at most this many */

#if defined(BANYAN_LANG_OPENCL)
#define BN_TREE_U64(c) c##UL
#else
#define BN_TREE_U64(c) c##ULL
#endif

#if defined(BANYAN_LANG_HOST)
#include <math.h>
#include <string.h>
#endif

/* Bits of a float and back (IEEE-754 binary32 in all three languages). */
BN_DEVICE bn_u32 bn_tree_float_bits(float f)
{
#if defined(BANYAN_LANG_OPENCL)
    return as_uint(f);
#elif defined(BANYAN_LANG_CUDA)
    return __float_as_uint(f);
#else
    bn_u32 u;
    memcpy(&u, &f, sizeof u);
    return u;
#endif
}

BN_DEVICE float bn_tree_bits_float(bn_u32 u)
{
#if defined(BANYAN_LANG_OPENCL)
    return as_float(u);
#elif defined(BANYAN_LANG_CUDA)
    return __uint_as_float(u);
#else
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
#endif
}

/* 2^e as a float, for -126 <= e <= 127 (exact). */
BN_DEVICE float bn_tree_pow2(int e)
{
    return bn_tree_bits_float((bn_u32)(e + 127) << 23);
}

/* The exponent e of the cube's side 2^e: the smallest e with 2^e > extent, clamped to [MIN_EXP, MAX_EXP]. For a
 * normal float extent = 1.f * 2^(b - 127) with biased exponent b, 2^(b - 127) <= extent < 2^(b - 126). Zero, NaN
 * and subnormal extents give MIN_EXP, infinity MAX_EXP. */
BN_DEVICE int bn_tree_side_exponent(float extent)
{
    if (!(extent > 0.0f)) return BANYAN_TREE_MIN_EXP;
    const int biased = (int)((bn_tree_float_bits(extent) >> 23) & 0xFFu);
    int e = biased == 0 ? BANYAN_TREE_MIN_EXP : biased - 126;
    if (e < BANYAN_TREE_MIN_EXP) e = BANYAN_TREE_MIN_EXP;
    if (e > BANYAN_TREE_MAX_EXP) e = BANYAN_TREE_MAX_EXP;
    return e;
}

/* The frame from the bounding box (lo, hi of reduce_bounds): (lo.x, lo.y, lo.z, side). */
BN_DEVICE int bn_tree_frame_exponent(bn_f4 lo, bn_f4 hi)
{
    float ext = hi.x - lo.x;
    const float ey = hi.y - lo.y, ez = hi.z - lo.z;
    if (ey > ext) ext = ey;
    if (ez > ext) ext = ez;
    return bn_tree_side_exponent(ext);
}

/* Grid coordinate of x along one axis: (x - lo) * inv truncated to [0, 2^21 - 1], inv = 2^(21 - e). NaN gives 0. */
BN_DEVICE bn_u32 bn_tree_grid_coord(float x, float lo, float inv)
{
    const float u = (x - lo) * inv;
    if (!(u > 0.0f)) return 0u;
    if (u >= (float)BANYAN_TREE_GRID) return BANYAN_TREE_GRID - 1u;
    return (bn_u32)u;
}

/* Spreads the low 21 bits of v to every third bit: bit b goes to bit 3b. */
BN_DEVICE bn_u64 bn_tree_dilate(bn_u32 v)
{
    bn_u64 x = (bn_u64)(v & 0x1FFFFFu);
    x = (x | (x << 32)) & BN_TREE_U64(0x001F00000000FFFF);
    x = (x | (x << 16)) & BN_TREE_U64(0x001F0000FF0000FF);
    x = (x | (x << 8)) & BN_TREE_U64(0x100F00F00F00F00F);
    x = (x | (x << 4)) & BN_TREE_U64(0x10C30C30C30C30C3);
    x = (x | (x << 2)) & BN_TREE_U64(0x1249249249249249);
    return x;
}

/* The inverse of bn_tree_dilate: gathers every third bit (bits 0, 3, 6, ...) into the low 21 bits. */
BN_DEVICE bn_u32 bn_tree_contract(bn_u64 x)
{
    x &= BN_TREE_U64(0x1249249249249249);
    x = (x ^ (x >> 2)) & BN_TREE_U64(0x10C30C30C30C30C3);
    x = (x ^ (x >> 4)) & BN_TREE_U64(0x100F00F00F00F00F);
    x = (x ^ (x >> 8)) & BN_TREE_U64(0x001F0000FF0000FF);
    x = (x ^ (x >> 16)) & BN_TREE_U64(0x001F00000000FFFF);
    x = (x ^ (x >> 32)) & BN_TREE_U64(0x00000000001FFFFF);
    return (bn_u32)x;
}

/* The 63-bit Morton key of grid coordinates (ix, iy, iz). */
BN_DEVICE bn_u64 bn_tree_morton(bn_u32 ix, bn_u32 iy, bn_u32 iz)
{
    return (bn_tree_dilate(ix) << 2) | (bn_tree_dilate(iy) << 1) | bn_tree_dilate(iz);
}

/* The key of a particle at p in the frame (lo, inv = 2^(21 - e)). */
BN_DEVICE bn_u64 bn_tree_key(bn_f4 p, bn_f4 lo, float inv)
{
    return bn_tree_morton(bn_tree_grid_coord(p.x, lo.x, inv), bn_tree_grid_coord(p.y, lo.y, inv),
                          bn_tree_grid_coord(p.z, lo.z, inv));
}

/* Number of low key bits below a cell of level L. */
BN_DEVICE int bn_tree_level_shift(int level)
{
    return 3 * (BANYAN_MAX_DEPTH - level);
}

/* The key of the level-L cell that holds @p key: its low 3 (21 - L) bits cleared. */
BN_DEVICE bn_u64 bn_tree_cell_key(bn_u64 key, int level)
{
    const int s = bn_tree_level_shift(level); /* at most 63: the root's key is 0 */
    return (key >> s) << s;
}

/* The level of the deepest cell that holds both keys a and b: 0 .. 20 when they differ, 21 when they are equal. */
BN_DEVICE int bn_tree_common_level(bn_u64 a, bn_u64 b)
{
    const bn_u64 x = a ^ b;
    if (x == 0) return BANYAN_MAX_DEPTH;
#if defined(BANYAN_LANG_OPENCL)
    const int high = 63 - (int)clz(x); /* the highest bit in which they differ, 0 .. 62 */
#elif defined(BANYAN_LANG_CUDA)
    const int high = 63 - __clzll((long long)x);
#else
    const int high = 63 - __builtin_clzll(x);
#endif
    /* Level L keeps the key bits from 3 (21 - L) up: both keys agree there while 3 (21 - L) > high. */
    return BANYAN_MAX_DEPTH - 1 - high / 3;
}

/* Runs of sorted keys. The particles of a cell of level L are the consecutive sorted keys that agree in their bits
 * from 3 (21 - L) up (the cell's run). The tree build finds run ends by galloping, then binary search: O(log r)
 * reads for a run of r keys. */

/* The end of the level-L run that holds index j, searched no further than @p hi (j < hi <= the number of keys): the
 * first index in (j, hi) outside the run, or hi. */
BN_DEVICE bn_u32 bn_tree_run_end(BN_GLOBAL const bn_u64* keys, bn_u32 j, bn_u32 hi, int level)
{
    const int s = bn_tree_level_shift(level);
    const bn_u64 cell = keys[j] >> s;
    bn_u32 lo = j + 1, step = 1; /* [j, lo) is in the run; hi is outside it or the bound */
    while (lo < hi) {
        const bn_u32 probe = lo + step - 1 < hi - 1 ? lo + step - 1 : hi - 1;
        if ((keys[probe] >> s) != cell) {
            hi = probe;
            break;
        }
        lo = probe + 1;
        step <<= 1;
    }
    while (lo < hi) {
        const bn_u32 mid = lo + (hi - lo) / 2;
        if ((keys[mid] >> s) == cell)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* The beginning of the level-L run that holds index j: the first index b <= j with all of b .. j in the run. */
BN_DEVICE bn_u32 bn_tree_run_begin(BN_GLOBAL const bn_u64* keys, bn_u32 j, int level)
{
    const int s = bn_tree_level_shift(level);
    const bn_u64 cell = keys[j] >> s;
    bn_u32 lo = 0, hi = j, step = 1; /* [hi, j] is in the run; the beginning is in [lo, hi] */
    /* (No probe = max(hi - step, 0): compilers turn that into a saturating subtraction Oclgrind cannot run.) */
    while (step <= hi - lo) {
        const bn_u32 probe = hi - step;
        if ((keys[probe] >> s) != cell) {
            lo = probe + 1;
            break;
        }
        hi = probe;
        step <<= 1;
    }
    while (lo < hi) {
        const bn_u32 mid = lo + (hi - lo) / 2;
        if ((keys[mid] >> s) == cell)
            hi = mid;
        else
            lo = mid + 1;
    }
    return hi;
}

/* The cells that begin at sorted particle j of n (paper section 2.1). A cell of level L exists when its parent
 * holds more than N_leaf particles (the root always); it is a leaf when it holds at most N_leaf, or at level 21.
 * Particle j begins the cells of every level deeper than bn_tree_common_level(key[j - 1], key[j]) = p; the first
 * of them exists when the level-p cell (which holds j - 1 and j) has more than N_leaf particles, and then so does
 * each deeper one down to the first leaf. Returns how many cells begin at j (0 .. 22), of levels *first on.
 * Every search stays within N_leaf + 1 keys of j: the latency of a walk over a big cell's run, from the few
 * particles that begin big cells, set the kernel's time. */
BN_DEVICE bn_u32 bn_tree_cells_beginning(BN_GLOBAL const bn_u64* keys, bn_u32 n, bn_u32 j, bn_u32* first)
{
    int level = 0;
    if (j > 0) {
        const int p = bn_tree_common_level(keys[j - 1], keys[j]);
        if (p == BANYAN_MAX_DEPTH) return 0u;
        /* Whether the level-p run holds more than N_leaf keys. It does when key j - N_leaf - 1 is in it (it then
         * holds j - N_leaf - 1 .. j); else it begins at most N_leaf keys before j, and the searches for its
         * beginning and (no further than N_leaf past that) its end stay short. (No max(j - N_leaf, 0) bound for
         * the search: compilers turn that into a saturating subtraction Oclgrind cannot run.) */
        const int s = bn_tree_level_shift(p);
        if (!(j > BANYAN_N_LEAF && (keys[j - BANYAN_N_LEAF - 1u] >> s) == (keys[j] >> s))) {
            const bn_u32 b = bn_tree_run_begin(keys, j, p);
            const bn_u32 bound = b + BANYAN_N_LEAF + 1u < n ? b + BANYAN_N_LEAF + 1u : n;
            if (bn_tree_run_end(keys, j, bound, p) - b <= BANYAN_N_LEAF) return 0u;
        }
        level = p + 1;
    }
    *first = (bn_u32)level;
    /* The level-L run beginning at j holds more than N_leaf keys exactly when key j + N_leaf shares its level-L cell,
     * that is for L <= q = bn_tree_common_level(key[j], key[j + N_leaf]): the cells go down to level q + 1, the
     * first leaf (level 21 at most). */
    int last = level;
    if (j + BANYAN_N_LEAF < n) {
        const int q = bn_tree_common_level(keys[j], keys[j + BANYAN_N_LEAF]);
        const int leaf = q + 1 < BANYAN_MAX_DEPTH ? q + 1 : BANYAN_MAX_DEPTH;
        last = leaf > level ? leaf : level;
    }
    return (bn_u32)(last - level + 1);
}

/* The first cells of levels level - 1 .. level + 2 in the level-ordered cell arrays (begin[0 .. 3]; 0 for a level
 * below the root), summed from the cells per level (treeCellStarts' level_count), so that no offsets need to go up
 * from the host. */
BN_DEVICE void bn_tree_level_begins(BN_GLOBAL const bn_u32* level_count, int level, bn_u32* begin)
{
    bn_u32 sum = 0;
    begin[0] = 0;
    for (int l = 0; l <= level + 2; ++l) {
        if (l >= level - 1) begin[l - level + 1] = sum;
        if (l < BANYAN_TREE_LEVELS) sum += level_count[l];
    }
}

/* Geometric centre of a cell along one axis (0 = x, 1 = y, 2 = z), in double precision: its low corner plus half
 * its span, in grid units, times the grid spacing side * 2^-21. Every step is exact but the final addition. */
BN_DEVICE double bn_tree_cell_centre(bn_u64 cell_key, int level, float lo, float side, int axis)
{
    const bn_u32 corner = bn_tree_contract(cell_key >> (2 - axis));
    const double span = (double)(1u << (BANYAN_MAX_DEPTH - level));
    return (double)lo + ((double)corner + 0.5 * span) * ((double)side * (1.0 / (double)BANYAN_TREE_GRID));
}

/* Distance from (com[0], com[1], com[2]) to the farthest corner of the cell (cell_key, level) in the frame f = (lo,
 * side): a bound on how far the cell's particles can lie from its centre of mass. */
BN_DEVICE double bn_tree_corner_distance(bn_u64 cell_key, int level, bn_f4 f, const double* com)
{
    const double h = 0.5 * (double)f.w * (double)(1u << (BANYAN_MAX_DEPTH - level)) * (1.0 / (double)BANYAN_TREE_GRID);
    const double ex = fabs(com[0] - bn_tree_cell_centre(cell_key, level, f.x, f.w, 0)) + h;
    const double ey = fabs(com[1] - bn_tree_cell_centre(cell_key, level, f.y, f.w, 1)) + h;
    const double ez = fabs(com[2] - bn_tree_cell_centre(cell_key, level, f.z, f.w, 2)) + h;
    return sqrt(ex * ex + ey * ey + ez * ez);
}

/* Opening criteria: a cell is accepted for a group when the distance d from the group's box to the cell's centre of
 * mass exceeds size / theta + offset, with (offset, size) = cell_quad1.zw.
 *   BANYAN_OPEN_PAPER  size l (the cell's side), offset delta = |com - geometric centre| (paper section 2.2)
 *   BANYAN_OPEN_BMAX   size bmax (the largest distance from com to a particle of the cell), offset 0 */
#define BANYAN_OPEN_PAPER 0u
#define BANYAN_OPEN_BMAX 1u

/* The opening radius of a cell, size / theta + offset from quad1 = cell_quad1 (.., .., offset, size): l / theta +
 * delta for the paper's criterion, bmax / theta for bmax. A group is accepted when its distance to the cell's
 * centre of mass exceeds it. The one formula for the walk (walkPrepare), the local essential trees (bn_let_opens,
 * letTopOpened) and the host (core/parallel/let.cpp): one multiply-add, which CUDA and OpenCL may fuse as they
 * did when each site spelt it out. inv_theta may be +inf (theta = 0: every cell is opened). */
BN_DEVICE float bn_open_radius(bn_f4 q1, float inv_theta)
{
    return q1.w * inv_theta + q1.z;
}

/* cell_quad1.z (offset) for the criterion. */
BN_DEVICE float bn_open_offset(bn_u32 criterion, float delta)
{
    return criterion == BANYAN_OPEN_BMAX ? 0.0f : delta;
}

/* cell_quad1.w (size) for the criterion. bmax is widened by a few units in the last place of the centre of mass's
 * coordinates, so that a group holding one of the cell's particles never accepts the cell, whatever the rounding
 * of com and of the distance (theta <= 1). */
BN_DEVICE float bn_open_size(bn_u32 criterion, float l, double bmax, double cx, double cy, double cz)
{
    if (criterion != BANYAN_OPEN_BMAX) return l;
    double a = fabs(cx) > fabs(cy) ? fabs(cx) : fabs(cy);
    a = fabs(cz) > a ? fabs(cz) : a;
    return (float)(bmax * (1.0 + 1.0 / 1048576.0) + a * (1.0 / 524288.0));
}

BN_DEVICE int bn_tree_is_leaf(bn_u32 cell_count)
{
    return (cell_count & BANYAN_TREE_LEAF_BIT) != 0u;
}
BN_DEVICE bn_u32 bn_tree_count(bn_u32 cell_count)
{
    return cell_count & ~BANYAN_TREE_LEAF_BIT;
}

/* Whether group cell c (at most N_crit particles, its parent p more) begins a group: every one does when p holds
 * more than BANYAN_PACK_PARENT particles; otherwise the packing of p's children in order, a child with more than
 * N_crit particles ending the pack before it, a child that would take the pack past N_crit beginning the next. */
BN_DEVICE int bn_tree_group_begins(BN_GLOBAL const bn_u32* cell_first, BN_GLOBAL const bn_u32* cell_pcount, bn_u32 p,
                                   bn_u32 c)
{
    if (cell_pcount[p] > BANYAN_PACK_PARENT) return 1;
    bn_u32 pack = 0; /* particles in the open pack */
    int begins = 0;
    for (bn_u32 ch = cell_first[p]; ch <= c; ++ch) {
        const bn_u32 k = cell_pcount[ch];
        if (k > BANYAN_N_CRIT) {
            pack = 0;
        } else if (pack == 0 || pack + k > BANYAN_N_CRIT) {
            pack = k;
            begins = 1;
        } else {
            pack += k;
            begins = 0;
        }
    }
    return begins;
}

/* The first index i in [0, n) with a[i] >= v in the ascending a (n when there is none): std::lower_bound, by
 * bisection (letBoxRuns). */
BN_DEVICE bn_u32 bn_lower_bound_u32(BN_GLOBAL const bn_u32* a, bn_u32 n, bn_u32 v)
{
    bn_u32 lo = 0u, hi = n;
    while (lo < hi) {
        const bn_u32 mid = lo + (hi - lo) / 2u;
        if (a[mid] < v)
            lo = mid + 1u;
        else
            hi = mid;
    }
    return lo;
}

/* Local essential trees (core/parallel/let.hpp, kernels letOpened): whether a group whose bounding box lies inside
 * [lo, hi] may open the cell with centre of mass com and quad1 = (.., .., delta, l). The walk accepts a cell when the
 * squared distance from the group's box to com exceeds (l / theta + delta)^2; a group inside the box is no closer
 * than the box, so only a box that fails the test can hold a group that opens the cell. The relative margin of
 * 1e-4 covers any difference in rounding between this test and the walk's: a cell this calls closed is accepted by
 * every group in the box. With alpha > 0 the relative criterion's radius counts too (the walk takes the larger),
 * rel = bn_rel_cell of the cell and lo.w the smallest previous |a| in the box (letGroupBoxes): no group in the box
 * has a smaller one, so none has a larger radius. */
BN_DEVICE int bn_let_opens(bn_f4 com, bn_f4 q1, float inv_theta, float rel, float alpha, bn_f4 lo, bn_f4 hi)
{
    const float r = bn_open_radius(q1, inv_theta);
    float r2 = r * r;
    if (alpha > 0.0f) {
        const float r2_rel = rel * bn_rel_group(alpha, lo.w);
        r2 = r2_rel > r2 ? r2_rel : r2; /* as the walk's fmaxf: a NaN (0 * inf) keeps the geometric radius */
    }
    float dx = lo.x - com.x > com.x - hi.x ? lo.x - com.x : com.x - hi.x;
    float dy = lo.y - com.y > com.y - hi.y ? lo.y - com.y : com.y - hi.y;
    float dz = lo.z - com.z > com.z - hi.z ? lo.z - com.z : com.z - hi.z;
    dx = dx > 0.0f ? dx : 0.0f;
    dy = dy > 0.0f ? dy : 0.0f;
    dz = dz > 0.0f ? dz : 0.0f;
    return dx * dx + dy * dy + dz * dz <= r2 * 1.0001f;
}

#endif /* BANYAN_TREE_SHARED_H */
