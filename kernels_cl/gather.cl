/**
 * @file gather.cl
 * @brief out[i] = in[perm[i]] for elements of 4, 8 and 16 bytes (driver: Backend::gather, core/device/backend.hpp).
 *
 * The elements are moved as unsigned integers, so every bit pattern (NaNs included) arrives unchanged. perm may
 * repeat or skip indices. One element per work-item: the writes are coalesced, the reads as ordered as perm is.
 */

/* Work-group BANYAN_WG; no local memory. out must not alias in or perm. */
__kernel __attribute__((reqd_work_group_size(BANYAN_WG, 1, 1))) void gather32(__global const uint* in,
                                                                             __global const bn_u32* perm, bn_u32 n,
                                                                             __global uint* out)
{
    const uint i = get_global_id(0);
    if (i < n) out[i] = in[perm[i]];
}

/* Work-group BANYAN_WG; no local memory. */
__kernel __attribute__((reqd_work_group_size(BANYAN_WG, 1, 1))) void gather64(__global const ulong* in,
                                                                             __global const bn_u32* perm, bn_u32 n,
                                                                             __global ulong* out)
{
    const uint i = get_global_id(0);
    if (i < n) out[i] = in[perm[i]];
}

/* Work-group BANYAN_WG; no local memory. */
__kernel __attribute__((reqd_work_group_size(BANYAN_WG, 1, 1))) void gather128(__global const uint4* in,
                                                                              __global const bn_u32* perm, bn_u32 n,
                                                                              __global uint4* out)
{
    const uint i = get_global_id(0);
    if (i < n) out[i] = in[perm[i]];
}
