/**
 * @file reduce.cl
 * @brief Reductions: componentwise bounds of float4 items and double-precision sums (driver: core/device/primitives.cpp).
 *
 * Two passes: a grid of groups writes one partial per group, then one group reduces the partials with the same
 * kernel. Each work-item first accumulates its items with a grid stride (coalesced), then the group combines the
 * work-items' values in a fixed tree (stride BANYAN_WG/2 down to 1). The CUDA kernels use the same order, so a
 * sum is the same on both backends for the same n and work-group size.
 */

/* Componentwise min and max over the work-group's items; work-item 0 writes out[2 * group] = min and
 * out[2 * group + 1] = max. pairs = 0: item i is in[i]; pairs = 1: item i is the partial (in[2i], in[2i+1]) of an
 * earlier pass. Work-group BANYAN_WG; local memory 2 * BANYAN_WG float4. NaNs are ignored (fmin / fmax). */
__kernel __attribute__((reqd_work_group_size(BANYAN_WG, 1, 1))) void reduceBounds(__global const bn_f4* in,
                                                                                 bn_u32 n, bn_u32 pairs,
                                                                                 __global bn_f4* out)
{
    __local bn_f4 smin[BANYAN_WG];
    __local bn_f4 smax[BANYAN_WG];
    const uint lid = get_local_id(0);
    bn_f4 lo = (bn_f4)(INFINITY);
    bn_f4 hi = (bn_f4)(-INFINITY);
    for (uint i = get_group_id(0) * BANYAN_WG + lid; i < n; i += get_num_groups(0) * BANYAN_WG) {
        if (pairs) {
            lo = fmin(lo, in[2 * i]);
            hi = fmax(hi, in[2 * i + 1]);
        } else {
            const bn_f4 x = in[i];
            lo = fmin(lo, x);
            hi = fmax(hi, x);
        }
    }
    smin[lid] = lo;
    smax[lid] = hi;
    BN_BLOCK_TREE_BOUNDS(smin, smax, lid);
    if (lid == 0) {
        out[2 * get_group_id(0)] = smin[0];
        out[2 * get_group_id(0) + 1] = smax[0];
    }
}

/* out[group] = sum of the group's items of in[0..n) in double precision (0 for no items). Work-group BANYAN_WG;
 * local memory BANYAN_WG doubles. */
__kernel __attribute__((reqd_work_group_size(BANYAN_WG, 1, 1))) void reduceSum(__global const double* in, bn_u32 n,
                                                                              __global double* out)
{
    __local double s[BANYAN_WG];
    const uint lid = get_local_id(0);
    double sum = 0.0;
    for (uint i = get_group_id(0) * BANYAN_WG + lid; i < n; i += get_num_groups(0) * BANYAN_WG) sum += in[i];
    s[lid] = sum;
    BN_BLOCK_TREE_SUM(s, lid, 1);
    if (lid == 0) out[get_group_id(0)] = s[0];
}
