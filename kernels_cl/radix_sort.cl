/**
 * @file radix_sort.cl
 * @brief Kernels of the stable LSD radix sort of (64-bit key, 32-bit value) pairs (Backend::sort_pairs).
 *
 * One pass sorts by one digit of BANYAN_RADIX_BITS bits, in three steps driven by core/device/radix_sort.cpp:
 *   radixHistogram  counts each tile's digits into hist[digit * groups + group];
 *   (exclusive scan of hist, digit-major, gives each (digit, tile) its first output position);
 *   radixScatter    ranks its tile stably by digit in local memory and writes the pairs out in digit runs.
 * A tile is BANYAN_WG * BANYAN_SORT_ITEMS consecutive pairs; the same tiles are used by both kernels.
 * kernels_cu/radix_sort.cu holds the same kernels for CUDA.
 *
 * Why two 4-bit ranking rounds: on an H200 (NVIDIA OpenCL, 2^24 pairs, BANYAN_WG 256) radixScatter took 0.24 ms
 * per pass this way and 0.33 ms with eight 1-bit split rounds (eight work-group scans instead of two); the whole
 * 63-bit sort took 2.4 ms (2^24) and 0.26 ms (2^20), against CUB's 1.4 ms and 0.19 ms. Neither 4 nor 12 items per
 * work-item, nor work-groups of 64 or 128, did better than 8 items at 256.
 */

#define RADIX_TILE (BANYAN_WG * BANYAN_SORT_ITEMS)
/* Nibble ranking: 16 counters per work-item, packed two 16-bit halves to a word, in 8 lanes. */
#define RADIX_LANES 8
/* One padding word after every 8, so the raking reads (8 consecutive words per work-item) hit distinct banks. */
#define RADIX_PAD(p) ((p) + ((p) >> 3))
#define RADIX_COUNTER_WORDS (RADIX_LANES * BANYAN_WG + BANYAN_WG)

#if RADIX_TILE > 65536
#error "radix sort: a tile must hold at most 65536 pairs (16-bit ranks)"
#endif
#if BANYAN_RADIX_BITS != 8
#error "radix sort: the scatter kernel ranks a digit as two 4-bit nibbles"
#endif
#if BANYAN_SORT_ITEMS % 4 != 0
#error "radix sort: a work-item's items are read from local memory 4 at a time"
#endif

inline bn_u32 radix_digit(bn_u64 key, bn_u32 shift, bn_u32 mask)
{
    return (bn_u32)(key >> shift) & mask;
}

/* Stable rank of every item of the tile by a 4-bit digit nib[i], with the items held in blocked order (work-item t
 * holds tile positions t * ITEMS + i). CUB's BlockRadixRank scheme: each work-item counts its nibbles in its own
 * column of packed 16-bit counters, one work-group scan over all counters (lane-major: digit, then work-item)
 * turns the counts into first positions, and an item's rank is its counter's scanned value plus the number of
 * equal nibbles before it in its own work-item. cnt holds RADIX_COUNTER_WORDS, scan_buf 2 * WG words. */
inline void radix_rank_nibble(const bn_u32* nib, bn_u32* rank, __local bn_u32* cnt, __local bn_u32* scan_buf)
{
    const bn_u32 t = get_local_id(0);
#pragma unroll
    for (bn_u32 l = 0; l < RADIX_LANES; ++l)
        cnt[RADIX_PAD(l * BANYAN_WG + t)] = 0; /* own column only */
#pragma unroll
    for (bn_u32 i = 0; i < BANYAN_SORT_ITEMS; ++i) {
        const bn_u32 p = RADIX_PAD((nib[i] & 7u) * BANYAN_WG + t);
        const bn_u32 sh = (nib[i] >> 3) << 4;
        const bn_u32 c = cnt[p];
        rank[i] = (c >> sh) & 0xffffu;
        cnt[p] = c + (1u << sh);
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    /* Raking: work-item t owns linear counters [8t, 8t + 8), padded to [9t, 9t + 8). */
    bn_u32 seg[RADIX_LANES];
    bn_u32 sum = 0;
#pragma unroll
    for (bn_u32 k = 0; k < RADIX_LANES; ++k) {
        seg[k] = cnt[t * (RADIX_LANES + 1) + k];
        sum += seg[k];
    }
    bn_u32 total;
    bn_u32 run = bn_block_exclusive_swap_u32(sum, scan_buf, t, &total);
#pragma unroll
    for (bn_u32 k = 0; k < RADIX_LANES; ++k) {
        cnt[t * (RADIX_LANES + 1) + k] = run;
        run += seg[k];
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    /* The low halves counted nibbles 0..7, the high halves 8..15: the latter start after all of the former. */
    const bn_u32 low_total = total & 0xffffu;
#pragma unroll
    for (bn_u32 i = 0; i < BANYAN_SORT_ITEMS; ++i) {
        const bn_u32 c = cnt[RADIX_PAD((nib[i] & 7u) * BANYAN_WG + t)];
        rank[i] += nib[i] < 8 ? (c & 0xffffu) : (c >> 16) + low_total;
    }
}

/* Counts the digits (key >> shift) & mask of one tile per work-group and writes hist[digit * groups + group]
 * for digit <= mask. Counting order does not matter, so local atomics do it.
 * Work-group BANYAN_WG; local memory 256 words. */
__kernel __attribute__((reqd_work_group_size(BANYAN_WG, 1, 1))) void
radixHistogram(__global const bn_u64* keys, bn_u32 n, bn_u32 shift, bn_u32 mask, __global bn_u32* hist, bn_u32 groups)
{
    __local bn_u32 lcount[BANYAN_RADIX_DIGITS];
    const bn_u32 t = get_local_id(0);
    const bn_u32 g = get_group_id(0);
    for (bn_u32 d = t; d < BANYAN_RADIX_DIGITS; d += BANYAN_WG)
        lcount[d] = 0;
    barrier(CLK_LOCAL_MEM_FENCE);
    const bn_u32 base = g * RADIX_TILE;
    const bn_u32 valid = min((bn_u32)RADIX_TILE, n - base);
    /* All loads first, so they are in flight together, then the counting. */
    bn_u32 digit[BANYAN_SORT_ITEMS];
#pragma unroll
    for (bn_u32 i = 0; i < BANYAN_SORT_ITEMS; ++i) {
        const bn_u32 j = i * BANYAN_WG + t;
        digit[i] = j < valid ? radix_digit(keys[base + j], shift, mask) : BANYAN_RADIX_DIGITS;
    }
#pragma unroll
    for (bn_u32 i = 0; i < BANYAN_SORT_ITEMS; ++i)
        if (digit[i] < BANYAN_RADIX_DIGITS) atomic_inc(&lcount[digit[i]]);
    barrier(CLK_LOCAL_MEM_FENCE);
    for (bn_u32 d = t; d <= mask; d += BANYAN_WG)
        hist[d * groups + g] = lcount[d];
}

/* Moves one tile per work-group to its place in the pass's output: offs[digit * groups + group] (the scanned
 * histogram) is where the group's first pair of that digit goes. The tile is ranked stably by its 8-bit digit in
 * two 4-bit rounds (radix_rank_nibble: low nibble, then high nibble in low-nibble order), the pairs are placed in
 * local memory in digit order, and then written out in tile order, so that each digit's run goes to consecutive
 * addresses (coalesced). Items past n get digit 255: being last in the tile, a stable rank puts them last.
 * Work-group BANYAN_WG; local memory 12 bytes per tile item plus 11 words per work-item and 256 words
 * (36 KiB at BANYAN_WG 256, BANYAN_SORT_ITEMS 8). */
__kernel __attribute__((reqd_work_group_size(BANYAN_WG, 1, 1))) void
radixScatter(__global const bn_u64* keys_in, __global const bn_u32* vals_in, __global bn_u64* keys_out,
             __global bn_u32* vals_out, bn_u32 n, bn_u32 shift, bn_u32 mask, __global const bn_u32* offs, bn_u32 groups)
{
    __local bn_u64 lkeys[RADIX_TILE] __attribute__((aligned(16)));
    __local bn_u32 lvals[RADIX_TILE];
    __local bn_u32 lcnt[RADIX_COUNTER_WORDS];
    __local bn_u32 lscan[2 * BANYAN_WG];
    __local bn_u32 lofs[BANYAN_RADIX_DIGITS];
    /* Used before the keys arrive, so they share lkeys' 8 bytes per item: 4 + 2 + 1. */
    __local bn_u32* lexch = (__local bn_u32*)lkeys;
    __local ushort* lrank = (__local ushort*)(lexch + RADIX_TILE);
    __local uchar* ldigit = (__local uchar*)(lrank + RADIX_TILE);

    const bn_u32 t = get_local_id(0);
    const bn_u32 g = get_group_id(0);
    const bn_u32 base = g * RADIX_TILE;
    const bn_u32 valid = min((bn_u32)RADIX_TILE, n - base);

    for (bn_u32 d = t; d <= mask; d += BANYAN_WG)
        lofs[d] = offs[d * groups + g];

    /* Load striped (coalesced); pass the digits to blocked order through local memory. */
    bn_u64 key[BANYAN_SORT_ITEMS];
    bn_u32 val[BANYAN_SORT_ITEMS];
#pragma unroll
    for (bn_u32 i = 0; i < BANYAN_SORT_ITEMS; ++i) {
        const bn_u32 j = i * BANYAN_WG + t;
        bn_u32 d = 255;
        if (j < valid) {
            key[i] = keys_in[base + j];
            val[i] = vals_in[base + j];
            d = radix_digit(key[i], shift, mask);
        }
        ldigit[j] = (uchar)d;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    /* Blocked reads go 4 items at a time (fewer local accesses, fewer bank conflicts). */
    bn_u32 digit[BANYAN_SORT_ITEMS], nib[BANYAN_SORT_ITEMS], rank[BANYAN_SORT_ITEMS];
#pragma unroll
    for (bn_u32 w = 0; w < BANYAN_SORT_ITEMS / 4; ++w) {
        const uchar4 q = vload4(t * (BANYAN_SORT_ITEMS / 4) + w, ldigit);
        digit[4 * w] = q.x;
        digit[4 * w + 1] = q.y;
        digit[4 * w + 2] = q.z;
        digit[4 * w + 3] = q.w;
    }
#pragma unroll
    for (bn_u32 i = 0; i < BANYAN_SORT_ITEMS; ++i)
        nib[i] = digit[i] & 15u;

    /* Round 1: low nibble. Pass (digit, blocked position) on in round-1 order. */
    radix_rank_nibble(nib, rank, lcnt, lscan);
#pragma unroll
    for (bn_u32 i = 0; i < BANYAN_SORT_ITEMS; ++i)
        lexch[rank[i]] = (digit[i] << 16) | (t * BANYAN_SORT_ITEMS + i);
    barrier(CLK_LOCAL_MEM_FENCE);
    bn_u32 from[BANYAN_SORT_ITEMS];
#pragma unroll
    for (bn_u32 w = 0; w < BANYAN_SORT_ITEMS / 4; ++w) {
        const uint4 q = ((__local const uint4*)lexch)[t * (BANYAN_SORT_ITEMS / 4) + w];
        from[4 * w] = q.x;
        from[4 * w + 1] = q.y;
        from[4 * w + 2] = q.z;
        from[4 * w + 3] = q.w;
    }
#pragma unroll
    for (bn_u32 i = 0; i < BANYAN_SORT_ITEMS; ++i) {
        nib[i] = from[i] >> 20;
        from[i] &= 0xffffu;
    }

    /* Round 2: high nibble, stable over round 1, so the ranks are by the whole digit. */
    radix_rank_nibble(nib, rank, lcnt, lscan);
#pragma unroll
    for (bn_u32 i = 0; i < BANYAN_SORT_ITEMS; ++i)
        lrank[from[i]] = (ushort)rank[i];
    barrier(CLK_LOCAL_MEM_FENCE);
#pragma unroll
    for (bn_u32 i = 0; i < BANYAN_SORT_ITEMS; ++i)
        rank[i] = lrank[i * BANYAN_WG + t];
    barrier(CLK_LOCAL_MEM_FENCE); /* lrank lives inside lkeys */
#pragma unroll
    for (bn_u32 i = 0; i < BANYAN_SORT_ITEMS; ++i) {
        if (i * BANYAN_WG + t < valid) {
            lkeys[rank[i]] = key[i];
            lvals[rank[i]] = val[i];
        }
    }
    barrier(CLK_LOCAL_MEM_FENCE);

    /* Where each digit's run starts in the tile: turn lofs[d] into (output position - tile position). */
#pragma unroll
    for (bn_u32 i = 0; i < BANYAN_SORT_ITEMS; ++i) {
        const bn_u32 j = i * BANYAN_WG + t;
        if (j < valid) {
            const bn_u32 d = radix_digit(lkeys[j], shift, mask);
            if (j == 0 || radix_digit(lkeys[j - 1], shift, mask) != d) lofs[d] -= j;
        }
    }
    barrier(CLK_LOCAL_MEM_FENCE);
#pragma unroll
    for (bn_u32 i = 0; i < BANYAN_SORT_ITEMS; ++i) {
        const bn_u32 j = i * BANYAN_WG + t;
        if (j < valid) {
            const bn_u64 k = lkeys[j];
            const bn_u32 p = lofs[radix_digit(k, shift, mask)] + j;
            keys_out[p] = k;
            vals_out[p] = lvals[j];
        }
    }
}
