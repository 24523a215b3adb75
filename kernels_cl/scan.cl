/**
 * @file scan.cl
 * @brief Prefix sums of unsigned 32-bit integers, reduce-then-scan (driver: core/device/primitives.cpp).
 *
 * A tile is BANYAN_WG * BANYAN_SCAN_ITEMS items, one tile per work-group. One tile: scanDownsweep alone. More:
 * scanReduce writes one sum per tile, then scanDownsweep scans each tile and adds its tile's offset; while the tile
 * sums fit one tile each group adds up the sums before it itself (BANYAN_SCAN_LOOKUP), beyond that the driver scans
 * the sums first with the same kernels (one level more per tile-size shrink). No work-group ever waits for another
 * (OpenCL gives no forward-progress guarantee between work-groups). Sums wrap modulo 2^32, so every order of
 * addition gives the same result.
 */

/* partials[group] = sum (or, with BANYAN_SCAN_NONZERO, count of nonzero items) of the group's tile of in[0..n).
 * Work-group BANYAN_WG; striped (coalesced) loads; local memory BANYAN_WG words. */
__kernel __attribute__((reqd_work_group_size(BANYAN_WG, 1, 1))) void scanReduce(__global const bn_u32* in, bn_u32 n,
                                                                               __global bn_u32* partials,
                                                                               bn_u32 mode)
{
    __local bn_u32 s[BANYAN_WG];
    const uint lid = get_local_id(0);
    const uint start = get_group_id(0) * BN_SCAN_TILE;
    bn_u32 sum = 0;
    for (uint k = 0; k < BANYAN_SCAN_ITEMS; ++k) {
        const uint i = start + k * BANYAN_WG + lid;
        if (i < n) {
            const bn_u32 x = in[i];
            sum += (mode & BANYAN_SCAN_NONZERO) ? (x != 0 ? 1u : 0u) : x;
        }
    }
    sum = bn_block_sum_u32(sum, s);
    if (lid == 0) partials[get_group_id(0)] = sum;
}

/* out = exclusive or inclusive scan of in[0..n) tile by tile, plus offsets[group] when BANYAN_SCAN_OFFSETS is set;
 * with BANYAN_SCAN_LOOKUP the group's offset is the sum of offsets[0..group) instead, which the group adds up itself
 * (two launches in all instead of three while the tile sums fit one tile: fewer launches for the tree build's many
 * small scans); with BANYAN_SCAN_TOTAL the last tile's group writes the grand total to total[0]. out may be in: a
 * group reads its whole tile before writing it and touches no other tile. Each work-item scans BANYAN_SCAN_ITEMS
 * consecutive items serially, then the work-group scans the per-item totals. Work-group BANYAN_WG; local memory:
 * the padded tile (BN_SCAN_TILE + BN_SCAN_TILE/32 words) and 2 * BANYAN_WG words for the work-group scan. */
__kernel __attribute__((reqd_work_group_size(BANYAN_WG, 1, 1))) void scanDownsweep(__global const bn_u32* in,
                                                                                  __global bn_u32* out, bn_u32 n,
                                                                                  __global const bn_u32* offsets,
                                                                                  __global bn_u32* total,
                                                                                  bn_u32 mode)
{
    __local bn_u32 tile[BN_SCAN_TILE_WORDS];
    __local bn_u32 s[2 * BANYAN_WG];
    const uint lid = get_local_id(0);
    /* Tiles in reverse order of the first pass, so that the tiles it read last, likely still in the cache, are read
     * first. */
    const uint group = get_num_groups(0) - 1 - get_group_id(0);
    const uint start = group * BN_SCAN_TILE;

    for (uint k = 0; k < BANYAN_SCAN_ITEMS; ++k) {
        const uint j = k * BANYAN_WG + lid;
        tile[BN_TILE_PAD(j)] = start + j < n ? in[start + j] : 0u;
    }
    barrier(CLK_LOCAL_MEM_FENCE);

    bn_u32 x[BANYAN_SCAN_ITEMS];
    bn_u32 mine = 0;
    for (uint k = 0; k < BANYAN_SCAN_ITEMS; ++k) {
        x[k] = tile[BN_TILE_PAD(lid * BANYAN_SCAN_ITEMS + k)];
        mine += x[k];
    }
    bn_u32 tile_total;
    bn_u32 run = bn_block_exclusive_u32(mine, s, &tile_total);
    bn_u32 base = (mode & BANYAN_SCAN_OFFSETS) ? offsets[group] : 0u;
    if (mode & BANYAN_SCAN_LOOKUP) {
        bn_u32 before = 0;
        for (uint i = lid; i < group; i += BANYAN_WG) before += offsets[i];
        base = bn_block_sum_u32(before, s); /* uniform branch: every work-item of the group takes it */
    }
    run += base;
    const bn_u32 incl = (mode & BANYAN_SCAN_INCLUSIVE) ? 1u : 0u;
    for (uint k = 0; k < BANYAN_SCAN_ITEMS; ++k) {
        const bn_u32 next = run + x[k];
        tile[BN_TILE_PAD(lid * BANYAN_SCAN_ITEMS + k)] = incl ? next : run; /* only this item's own slots */
        run = next;
    }
    barrier(CLK_LOCAL_MEM_FENCE);

    for (uint k = 0; k < BANYAN_SCAN_ITEMS; ++k) {
        const uint j = k * BANYAN_WG + lid;
        if (start + j < n) out[start + j] = tile[BN_TILE_PAD(j)];
    }
    if ((mode & BANYAN_SCAN_TOTAL) && lid == 0 && group == get_num_groups(0) - 1) total[0] = base + tile_total;
}
