/**
 * @file tree_groups.cl
 * @brief Groups of particles that walk the tree together (paper section 2.2; driver: Octree::make_groups in
 *        core/tree/octree.cpp).
 *
 * A group is a pack of consecutive sibling cells that each hold at most N_crit particles while their parent holds
 * more, but at most BANYAN_PACK_PARENT, N_crit at most in all (a cell alone under a heavier parent; the root, when it
 * has at most N_crit), or a piece of N_crit particles of a leaf that has more (only at the maximal depth;
 * tree_shared.h has the details). Groups tile the particles in
 * order: treeGroupFlags marks the first particle of each, a compaction of the particle indices lists them by
 * increasing first particle, and treeGroupBoxes sizes them and takes their bounding boxes. The CUDA twin is
 * kernels_cu/tree_groups.cu.
 */

/* flags[first particle of each group] = 1 (flags must be 0 beforehand). Distinct groups have distinct first
 * particles, so no two work-items write the same flag. Work-group BANYAN_WG; no local memory. */
__kernel __attribute__((reqd_work_group_size(BANYAN_WG, 1, 1))) void treeGroupFlags(
    __global const bn_u32* cell_parent, __global const bn_u32* cell_first, __global const bn_u32* cell_count,
    __global const bn_u32* cell_pbegin, __global const bn_u32* cell_pcount, bn_u32 ncells, __global bn_u32* flags)
{
    const uint c = get_global_id(0);
    if (c >= ncells) return;
    const bn_u32 count = cell_pcount[c];
    const bn_u32 first = cell_pbegin[c];
    if (count <= BANYAN_N_CRIT) {
        if (c == 0) {
            flags[first] = 1u;
        } else {
            const bn_u32 p = cell_parent[c];
            if (cell_pcount[p] > BANYAN_N_CRIT && bn_tree_group_begins(cell_first, cell_pcount, p, c))
                flags[first] = 1u;
        }
    } else if (bn_tree_is_leaf(cell_count[c])) {
        for (bn_u32 k = 0; k < count; k += BANYAN_N_CRIT) flags[first + k] = 1u;
    }
}

/* For group g < ngroups (first particles from the compaction): its particle count (up to the next group's first
 * particle, or n) and the componentwise min and max of its positions. Work-group BANYAN_WG; no local memory. */
__kernel __attribute__((reqd_work_group_size(BANYAN_WG, 1, 1))) void treeGroupBoxes(
    __global const bn_f4* pos, __global const bn_u32* group_first, bn_u32 ngroups, bn_u32 n,
    __global bn_u32* group_count, __global bn_f4* group_lo, __global bn_f4* group_hi)
{
    const uint g = get_global_id(0);
    if (g >= ngroups) return;
    const bn_u32 b = group_first[g];
    const bn_u32 e = g + 1 < ngroups ? group_first[g + 1] : n;
    bn_f4 p = pos[b];
    float4 lo = (float4)(p.x, p.y, p.z, 0.0f), hi = lo;
    for (bn_u32 i = b + 1; i < e; ++i) {
        p = pos[i];
        lo.x = fmin(lo.x, p.x), lo.y = fmin(lo.y, p.y), lo.z = fmin(lo.z, p.z);
        hi.x = fmax(hi.x, p.x), hi.y = fmax(hi.y, p.y), hi.z = fmax(hi.z, p.z);
    }
    group_count[g] = e - b;
    group_lo[g] = lo;
    group_hi[g] = hi;
}
