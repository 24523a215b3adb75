/**
 * @file tree_build.cl
 * @brief The cells of the octree from the sorted keys, all levels at once (paper section 2.1, Fig. 1; driver:
 *        Octree::build_cells in core/tree/octree.cpp).
 *
 * A cell of level L is the run of consecutive sorted keys that share their level-L digits; it exists when its parent
 * holds more than N_leaf particles, and it is a leaf when it holds at most N_leaf (or at level 21). Each cell is
 * found from the particle where its run begins (bn_tree_cells_beginning in tree_shared.h, which needs only the
 * keys around it): treeCellStarts counts the cells beginning at every particle and each level's cells, a scan of
 * the counts places them, treeCellList lists them as (level, first particle), a sort by level (stable, so that
 * a level's cells stay in key order) stores them level by level, and treeCellWrite writes each cell. The host waits
 * once, for the level counts. The CUDA twin is kernels_cu/tree_build.cu.
 */

/* begins[j] = the number of cells that begin at sorted particle j, first_level[j] = the level of the first of them
 * (0 when none); level_count[L] += the cells of level L (zeroed by the host), one atomic per level and work-group.
 * Work-group BANYAN_WG; local memory: BANYAN_TREE_LEVELS words. */
__kernel __attribute__((reqd_work_group_size(BANYAN_WG, 1, 1))) void treeCellStarts(
    __global const bn_u64* keys, bn_u32 n, __global bn_u32* begins, __global bn_u32* first_level,
    __global bn_u32* level_count)
{
    __local volatile bn_u32 per_level[BANYAN_TREE_LEVELS];
    const uint lid = get_local_id(0), j = get_global_id(0);
    if (lid < BANYAN_TREE_LEVELS) per_level[lid] = 0u;
    barrier(CLK_LOCAL_MEM_FENCE);
    if (j < n) {
        bn_u32 first = 0u;
        const bn_u32 count = bn_tree_cells_beginning(keys, n, j, &first);
        begins[j] = count;
        first_level[j] = count ? first : 0u;
        for (bn_u32 t = 0; t < count; ++t) atomic_inc(&per_level[first + t]);
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    if (lid < BANYAN_TREE_LEVELS && per_level[lid] != 0u) bn_atomic_add_u32(&level_count[lid], per_level[lid]);
}

/* The cells as (level, first particle) pairs in particle order: those of particle j at offsets[j] .. (the
 * exclusive scan of treeCellStarts' counts; total = all cells). Work-group BANYAN_WG; no local memory. */
__kernel __attribute__((reqd_work_group_size(BANYAN_WG, 1, 1))) void treeCellList(
    __global const bn_u32* offsets, __global const bn_u32* first_level, bn_u32 n, bn_u32 total,
    __global bn_u64* cell_levels, __global bn_u32* cell_starts)
{
    const uint j = get_global_id(0);
    if (j >= n) return;
    const bn_u32 o = offsets[j];
    const bn_u32 count = (j + 1 < n ? offsets[j + 1] : total) - o;
    for (bn_u32 t = 0; t < count; ++t) {
        cell_levels[o + t] = first_level[j] + t;
        cell_starts[o + t] = j;
    }
}

/* Cell c < total from its (level, first particle), stored level by level: key (masked), level, particle range;
 * a leaf gets first particle and count | LEAF_BIT, a node 0 and 0 (treeLink fills them).
 * Work-group BANYAN_WG; no local memory. */
__kernel __attribute__((reqd_work_group_size(BANYAN_WG, 1, 1))) void treeCellWrite(
    __global const bn_u64* keys, bn_u32 n, __global const bn_u64* cell_levels, __global const bn_u32* cell_starts,
    bn_u32 total, __global bn_u64* cell_key, __global bn_u32* cell_level, __global bn_u32* cell_first,
    __global bn_u32* cell_count, __global bn_u32* cell_pbegin, __global bn_u32* cell_pcount)
{
    const uint c = get_global_id(0);
    if (c >= total) return;
    const int level = (int)cell_levels[c];
    const bn_u32 j = cell_starts[c];
    const bn_u32 count = bn_tree_run_end(keys, j, n, level) - j;
    const bool leaf = count <= BANYAN_N_LEAF || level == BANYAN_MAX_DEPTH;
    cell_key[c] = bn_tree_cell_key(keys[j], level);
    cell_level[c] = (bn_u32)level;
    cell_pbegin[c] = j;
    cell_pcount[c] = count;
    cell_first[c] = leaf ? j : 0u;
    cell_count[c] = leaf ? (count | BANYAN_TREE_LEAF_BIT) : 0u;
}
