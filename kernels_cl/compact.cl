/**
 * @file compact.cl
 * @brief Stream compaction and stable split of unsigned 32-bit items by nonzero flags (driver: core/device/primitives.cpp).
 *
 * A tile is BANYAN_WG * BANYAN_SCAN_ITEMS items, as in scan.cl. One tile: compactScatter alone. More: the driver
 * counts the flagged items of each tile (scanReduce in BANYAN_SCAN_NONZERO), then compactScatter runs once; while
 * the tile counts fit one tile each group adds up the counts it needs itself (BANYAN_COMPACT_LOOKUP), beyond that
 * the driver exclusive-scans the counts first (scan.cl, which also writes the grand total, count[0], on the
 * device). Order is kept on both sides of a split: the domain decomposition relies on it.
 */

/* Moves the group's tile of in[0..n): items with flags != 0 to out[offsets[group] + rank among the tile's flagged
 * items]; with BANYAN_COMPACT_SPLIT the others to out[count[0] + unflagged items before them]. count[0] (the number
 * flagged in all) was written by the scan of the tile counts, or, with BANYAN_COMPACT_SINGLE or _LOOKUP, is written
 * here.
 * The tile is reordered in local memory first, so that both the reads and the writes to global memory are
 * coalesced. Work-group BANYAN_WG; local memory: the padded tile (BN_SCAN_TILE + BN_SCAN_TILE/32 words) and
 * 2 * BANYAN_WG words for the work-group scan. out must not alias in or flags. */
__kernel __attribute__((reqd_work_group_size(BANYAN_WG, 1, 1))) void compactScatter(
    __global const bn_u32* in, __global const bn_u32* flags, bn_u32 n, __global const bn_u32* offsets,
    __global bn_u32* out, __global bn_u32* count, bn_u32 mode)
{
    __local bn_u32 tile[BN_SCAN_TILE_WORDS];
    __local bn_u32 s[2 * BANYAN_WG];
    const uint lid = get_local_id(0);
    /* Tiles in reverse order of the counting pass, so that the tiles it read last, likely still in the cache, are read
     * first. */
    const uint group = get_num_groups(0) - 1 - get_group_id(0);
    const uint start = group * BN_SCAN_TILE;
    const uint valid = min((uint)BN_SCAN_TILE, n - start);

    // Flags, striped (coalesced), as 0/1 into the tile; the values are loaded now so their latency overlaps.
    bn_u32 v[BANYAN_SCAN_ITEMS];
    for (uint k = 0; k < BANYAN_SCAN_ITEMS; ++k) {
        const uint j = k * BANYAN_WG + lid;
        const bool ok = j < valid;
        tile[BN_TILE_PAD(j)] = ok && flags[start + j] != 0 ? 1u : 0u;
        v[k] = ok ? in[start + j] : 0u;
    }
    barrier(CLK_LOCAL_MEM_FENCE);

    // Blocked: each work-item ranks its consecutive items, then the work-group scans the per-item counts.
    bn_u32 f[BANYAN_SCAN_ITEMS];
    bn_u32 mine = 0;
    for (uint k = 0; k < BANYAN_SCAN_ITEMS; ++k) {
        f[k] = tile[BN_TILE_PAD(lid * BANYAN_SCAN_ITEMS + k)];
        mine += f[k];
    }
    bn_u32 flagged; /* flagged items in this tile */
    bn_u32 before = bn_block_exclusive_u32(mine, s, &flagged);
    for (uint k = 0; k < BANYAN_SCAN_ITEMS; ++k) {
        const uint j = lid * BANYAN_SCAN_ITEMS + k;
        // Destination within the tile: flagged items first, then the others, order kept in both.
        tile[BN_TILE_PAD(j)] = f[k] ? before : flagged + j - before;
        before += f[k];
    }
    barrier(CLK_LOCAL_MEM_FENCE);

    // Striped again: read each item's destination, then place the item there.
    uint dest[BANYAN_SCAN_ITEMS];
    for (uint k = 0; k < BANYAN_SCAN_ITEMS; ++k) dest[k] = tile[BN_TILE_PAD(k * BANYAN_WG + lid)];
    barrier(CLK_LOCAL_MEM_FENCE);
    for (uint k = 0; k < BANYAN_SCAN_ITEMS; ++k)
        if (k * BANYAN_WG + lid < valid) tile[BN_TILE_PAD(dest[k])] = v[k];
    barrier(CLK_LOCAL_MEM_FENCE);

    // Flagged items in earlier tiles, and in all tiles (needed by a split, and for count[0]).
    bn_u32 flagged_before, all_flagged;
    if (mode & BANYAN_COMPACT_SINGLE) {
        flagged_before = 0;
        all_flagged = flagged;
    } else if (mode & BANYAN_COMPACT_LOOKUP) { /* uniform branch: every work-item of the group takes it */
        bn_u32 b = 0, a = 0;
        for (uint i = lid; i < get_num_groups(0); i += BANYAN_WG) {
            const bn_u32 c = offsets[i];
            a += c;
            b += i < group ? c : 0u;
        }
        flagged_before = bn_block_sum_u32(b, s);
        all_flagged = bn_block_sum_u32(a, s);
    } else {
        flagged_before = offsets[group];
        all_flagged = (mode & BANYAN_COMPACT_SPLIT) ? count[0] : 0u;
    }
    const bn_u32 unflagged_at = all_flagged + (start - flagged_before);
    const uint limit = (mode & BANYAN_COMPACT_SPLIT) ? valid : flagged;
    for (uint k = 0; k < BANYAN_SCAN_ITEMS; ++k) {
        const uint j = k * BANYAN_WG + lid;
        if (j < limit) out[j < flagged ? flagged_before + j : unflagged_at + (j - flagged)] = tile[BN_TILE_PAD(j)];
    }
    if ((mode & (BANYAN_COMPACT_SINGLE | BANYAN_COMPACT_LOOKUP)) && group == 0 && lid == 0) count[0] = all_flagged;
}
