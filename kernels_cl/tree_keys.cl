/**
 * @file tree_keys.cl
 * @brief Morton keys of the particles in the tree's frame (paper section 2.1, appendix B; driver: core/tree/octree.cpp).
 *
 * The frame and key conventions are in core/tree_shared.h; the CUDA twin is kernels_cu/tree_keys.cu.
 */

/* out[i] = i for i < n: the identity permutation, the sort's values and the compactions' item indices.
 * Work-group BANYAN_WG; no local memory. */
__kernel __attribute__((reqd_work_group_size(BANYAN_WG, 1, 1))) void treeIota(__global bn_u32* out, bn_u32 n)
{
    const uint i = get_global_id(0);
    if (i < n) out[i] = i;
}

/* keys[i] = Morton key of pos[i] in the cube made from the bounding box (box[0] = min, box[1] = max, from
 * reduce_bounds); work-item 0 also writes frame[0] = (lo.x, lo.y, lo.z, side). Every work-item derives the frame
 * itself from the two box entries (a few integer operations), so no launch or host round trip is spent on it.
 * Work-group BANYAN_WG; no local memory. */
__kernel __attribute__((reqd_work_group_size(BANYAN_WG, 1, 1))) void treeKeys(__global const bn_f4* pos,
                                                                             __global const bn_f4* box, bn_u32 n,
                                                                             __global bn_u64* keys,
                                                                             __global bn_f4* frame)
{
    const uint i = get_global_id(0);
    const bn_f4 lo = box[0];
    const int e = bn_tree_frame_exponent(lo, box[1]);
    if (i == 0) frame[0] = (float4)(lo.x, lo.y, lo.z, bn_tree_pow2(e));
    if (i < n) keys[i] = bn_tree_key(pos[i], lo, bn_tree_pow2(BANYAN_MAX_DEPTH - e));
}
