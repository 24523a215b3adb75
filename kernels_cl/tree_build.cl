/**
 * @file tree_build.cl
 * @brief One level of the level-by-level tree construction (paper section 2.1, Fig. 1; driver:
 *        Octree::build_levels in core/tree/octree.cpp).
 *
 * The driver keeps a key-sorted list of particle indices ("active"). At level L, treeLevelFlags marks the live
 * entries where the masked key changes, a compaction of the entry indices by those flags lists where each cell
 * starts (and counts the cells), and treeLevelCells writes the cells (leaves: at most N_leaf particles, or level
 * 21), counts the particles and leaves they make, and marks the leaves' entries retired
 * (BANYAN_TREE_RETIRED_BIT). Retired entries are skipped by every later level and removed from the list only once
 * they are a quarter of it, so that a level that retires few particles does not pay for a compaction of all.
 * A retired entry never shares a masked key with a live one (it lies in a leaf, which no node overlaps), so each
 * cell is a run of consecutive live entries, possibly followed by retired ones before the next cell starts.
 * The CUDA twin is kernels_cu/tree_build.cu.
 */

/* flags[j] = 1 where live entry j starts a cell of the level: its key shifted right by @p shift (the level's
 * mask) differs from that of entry j - 1, or entry j - 1 is retired (or j = 0). Retired entries get 0.
 * Work-item 0 also zeroes counters[1] and counters[2], which treeLevelCells adds to.
 * Work-group BANYAN_WG; no local memory. */
__kernel __attribute__((reqd_work_group_size(BANYAN_WG, 1, 1))) void treeLevelFlags(
    __global const bn_u64* keys, __global const bn_u32* active, bn_u32 n, bn_u32 shift, __global bn_u32* flags,
    __global bn_u32* counters)
{
    const uint j = get_global_id(0);
    if (j == 0) {
        counters[1] = 0;
        counters[2] = 0;
    }
    if (j >= n) return;
    const bn_u32 a = active[j];
    bn_u32 start = 0;
    if (!(a & BANYAN_TREE_RETIRED_BIT)) {
        start = 1;
        if (j > 0) {
            const bn_u32 b = active[j - 1];
            start = (b & BANYAN_TREE_RETIRED_BIT) || (keys[b] >> shift) != (keys[a] >> shift) ? 1u : 0u;
        }
    }
    flags[j] = start;
}

/* Whether list entry j is a live particle of the cell whose masked key is @p cell. */
inline bool tree_in_cell(__global const bn_u64* keys, __global const bn_u32* active, bn_u32 j, bn_u32 shift,
                         bn_u64 cell)
{
    const bn_u32 a = active[j];
    return !(a & BANYAN_TREE_RETIRED_BIT) && (keys[a] >> shift) == cell;
}

/* Sum of v over the work-group; every work-item must call it. s: BANYAN_WG words of local memory. */
inline bn_u32 tree_wg_sum(bn_u32 v, __local bn_u32* s)
{
    const uint lid = get_local_id(0);
    s[lid] = v;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (uint h = BANYAN_WG / 2; h > 0; h >>= 1) {
        if (lid < h) s[lid] += s[lid + h];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    const bn_u32 total = s[0];
    barrier(CLK_LOCAL_MEM_FENCE);
    return total;
}

/* Writes nothing when offset + counters[0] > capacity (the host grows the cell arrays and runs the level again).
 * Otherwise writes cell c < counters[0] (the compaction's count) of the level at index offset + c: key (masked), level,
 * particle range; a leaf gets first particle and count | LEAF_BIT, a node 0 and 0 (treeLink fills them). The cell
 * runs from starts[c] to the next cell's start, or, when the list holds retired entries (@p clean = 0), to the
 * end of its live run, found by a galloping then binary search. A leaf above the deepest level marks its entries
 * retired (its particles are consecutive: entry start + k holds particle first + k). counters[1] += particles
 * taken by leaves, counters[2] += leaves, one atomic each per work-group. The grid covers a bound on the cell count
 * known to the host (the count itself stays on the device); work-items past it only join the sums.
 * Work-group BANYAN_WG; local memory: BANYAN_WG words. */
__kernel __attribute__((reqd_work_group_size(BANYAN_WG, 1, 1))) void treeLevelCells(
    __global const bn_u64* keys, __global bn_u32* active, __global const bn_u32* starts, bn_u32 n, bn_u32 clean,
    __global bn_u32* counters, bn_u32 level, bn_u32 offset, __global bn_u64* cell_key, __global bn_u32* cell_level,
    __global bn_u32* cell_first, __global bn_u32* cell_count, __global bn_u32* cell_pbegin,
    __global bn_u32* cell_pcount, bn_u32 capacity)
{
    __local bn_u32 s[BANYAN_WG];
    const uint c = get_global_id(0);
    const bn_u32 cells = counters[0];
    /* The level does not fit the cell arrays: write nothing (the host grows them and runs the level again). Every
     * work-item of every work-group returns here, so the barriers below are never divergent. */
    if (cells > capacity - offset) return;
    bn_u32 retired = 0, leaves = 0;
    if (c < cells) {
        const bn_u32 j0 = starts[c];
        const bn_u32 upper = c + 1 < cells ? starts[c + 1] : n;
        const bn_u32 first = active[j0];
        const bn_u32 shift = 3u * (BANYAN_MAX_DEPTH - level);
        bn_u32 end = upper;
        if (!clean) {
            const bn_u64 cell = keys[first] >> shift;
            bn_u32 lo = j0 + 1, hi = upper, step = 1;
            while (lo < hi) {
                const bn_u32 probe = min(lo + step - 1, hi - 1);
                if (!tree_in_cell(keys, active, probe, shift, cell)) {
                    hi = probe;
                    break;
                }
                lo = probe + 1;
                step <<= 1;
            }
            while (lo < hi) {
                const bn_u32 mid = lo + (hi - lo) / 2;
                if (tree_in_cell(keys, active, mid, shift, cell)) lo = mid + 1;
                else hi = mid;
            }
            end = lo;
        }
        const bn_u32 count = end - j0;
        const bool leaf = count <= BANYAN_N_LEAF || level == BANYAN_MAX_DEPTH;
        const uint o = offset + c;
        cell_key[o] = bn_tree_cell_key(keys[first], (int)level);
        cell_level[o] = level;
        cell_pbegin[o] = first;
        cell_pcount[o] = count;
        cell_first[o] = leaf ? first : 0u;
        cell_count[o] = leaf ? (count | BANYAN_TREE_LEAF_BIT) : 0u;
        if (leaf) {
            retired = count;
            leaves = 1;
            if (level < BANYAN_MAX_DEPTH)
                for (bn_u32 k = 0; k < count; ++k) active[j0 + k] = (first + k) | BANYAN_TREE_RETIRED_BIT;
        }
    }
    const bn_u32 sum = tree_wg_sum(retired, s);
    const bn_u32 nleaves = tree_wg_sum(leaves, s);
    if (get_local_id(0) == 0 && sum != 0) {
        bn_atomic_add_u32(&counters[1], sum);
        bn_atomic_add_u32(&counters[2], nleaves);
    }
}

/* live[j] = 1 for a live entry, 0 for a retired one: the flags of the compaction that drops retired entries.
 * Work-group BANYAN_WG; no local memory. */
__kernel __attribute__((reqd_work_group_size(BANYAN_WG, 1, 1))) void treeLevelLive(__global const bn_u32* active,
                                                                                  bn_u32 n, __global bn_u32* live)
{
    const uint j = get_global_id(0);
    if (j < n) live[j] = (active[j] & BANYAN_TREE_RETIRED_BIT) ? 0u : 1u;
}
