/**
 * @file tree_link.cl
 * @brief Links the cells (paper section 2.1, Fig. 2; driver: Octree::link_cells in core/tree/octree.cpp).
 *
 * One work-item per cell finds its parent and, for a node, its first child by binary search among the cells of
 * the level above and below (each level is sorted by key, tree_shared.h), and counts itself into its parent's
 * child count with an atomic add. A sum does not depend on the order in which the atomics land, so the same input
 * gives the same tree on every run and backend. The CUDA twin is kernels_cu/tree_link.cu.
 */

/* Index of the first cell in [lo, hi) whose key is >= key (hi when none). */
inline bn_u32 tree_lower_bound(__global const bn_u64* cell_key, bn_u32 lo, bn_u32 hi, bn_u64 key)
{
    while (lo < hi) {
        const bn_u32 mid = lo + (hi - lo) / 2;
        if (cell_key[mid] < key) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

/* For cell c < ncells: cell_parent[c], cell_count[parent] += 1 (atomic), and for a node cell_first[c] = its first
 * child. Nodes' cell_count must be 0 beforehand (treeCellWrite writes it). level_count: the cells of each of the
 * BANYAN_TREE_LEVELS levels. Work-group BANYAN_WG; no local memory. */
__kernel __attribute__((reqd_work_group_size(BANYAN_WG, 1, 1))) void treeLink(
    __global const bn_u64* cell_key, __global const bn_u32* cell_level, __global const bn_u32* cell_pcount,
    __global const bn_u32* level_count, bn_u32 ncells, __global bn_u32* cell_first, __global bn_u32* cell_count,
    __global bn_u32* cell_parent)
{
    const uint c = get_global_id(0);
    if (c >= ncells) return;
    const int level = (int)cell_level[c];
    const bn_u64 key = cell_key[c];
    bn_u32 begin[4]; /* levels level - 1 .. level + 2 */
    bn_tree_level_begins(level_count, level, begin);
    if (level == 0) {
        cell_parent[c] = BANYAN_TREE_NO_PARENT;
    } else {
        const bn_u32 p = tree_lower_bound(cell_key, begin[0], begin[1],
                                          bn_tree_cell_key(key, level - 1));
        cell_parent[c] = p;
        bn_atomic_add_u32(&cell_count[p], 1u);
    }
    const bool leaf = cell_pcount[c] <= BANYAN_N_LEAF || level == BANYAN_MAX_DEPTH;
    if (!leaf) cell_first[c] = tree_lower_bound(cell_key, begin[2], begin[3], key);
}
