/**
 * @file radix_sort.cu
 * @brief Kernels of the stable LSD radix sort of (64-bit key, 32-bit value) pairs (Backend::sort_pairs).
 *
 * The CUDA twin of kernels_cl/radix_sort.cl: same names, arguments, tiles and results (the driver is
 * core/device/radix_sort.cpp; CudaBackend uses CUB instead while vendor primitives are on). One pass sorts by one
 * digit: radixHistogram counts each tile's digits, the driver scans the histogram, radixScatter ranks each tile stably
 * in shared memory and writes it out in digit runs. The block scan uses warp shuffles here (local memory in
 * OpenCL); a scan has one result, so both give the same ranks.
 */
#include "core/device_shared.h"

#include "backend_cuda/kernel_registry.hpp"
#include "kernels_cu/block.cuh"

namespace {

constexpr unsigned radix_tile = BANYAN_WG * BANYAN_SORT_ITEMS;
constexpr unsigned radix_lanes = 8; // 16 nibble counters per thread, packed two 16-bit halves to a word
constexpr unsigned radix_counter_words = radix_lanes * BANYAN_WG + BANYAN_WG;
static_assert(radix_tile <= 65536, "16-bit ranks");
static_assert(BANYAN_RADIX_BITS == 8, "the scatter kernel ranks a digit as two 4-bit nibbles");
static_assert(BANYAN_SORT_ITEMS % 4 == 0, "a thread's items are read from shared memory 4 at a time");

// One padding word after every 8, so the raking reads (8 consecutive words per thread) hit distinct banks.
__device__ __forceinline__ unsigned radix_pad(unsigned p)
{
    return p + (p >> 3);
}

__device__ __forceinline__ bn_u32 radix_digit(bn_u64 key, bn_u32 shift, bn_u32 mask)
{
    return static_cast<bn_u32>(key >> shift) & mask;
}

// Stable rank of every item of the tile by a 4-bit digit nib[i], items in blocked order (thread t holds tile
// positions t * ITEMS + i): per-thread packed counters, one block scan over all of them (digit-major), plus the
// equal nibbles before the item in its own thread (CUB's BlockRadixRank). See kernels_cl/radix_sort.cl.
__device__ __forceinline__ void radix_rank_nibble(const bn_u32 (&nib)[BANYAN_SORT_ITEMS],
                                                  bn_u32 (&rank)[BANYAN_SORT_ITEMS], bn_u32* cnt, bn_u32* warp_sums)
{
    const unsigned t = threadIdx.x;
#pragma unroll
    for (unsigned l = 0; l < radix_lanes; ++l)
        cnt[radix_pad(l * BANYAN_WG + t)] = 0; // own column only
#pragma unroll
    for (unsigned i = 0; i < BANYAN_SORT_ITEMS; ++i) {
        const unsigned p = radix_pad((nib[i] & 7u) * BANYAN_WG + t);
        const unsigned sh = (nib[i] >> 3) << 4;
        const bn_u32 c = cnt[p];
        rank[i] = (c >> sh) & 0xffffu;
        cnt[p] = c + (1u << sh);
    }
    __syncthreads();
    bn_u32 seg[radix_lanes];
    bn_u32 sum = 0;
#pragma unroll
    for (unsigned k = 0; k < radix_lanes; ++k) {
        seg[k] = cnt[t * (radix_lanes + 1) + k];
        sum += seg[k];
    }
    bn_u32 total;
    bn_u32 run = bn_block_exclusive_serial<bn_u32, BANYAN_WG>(sum, warp_sums, t, total);
    __syncthreads(); // warp_sums may be used again at once
#pragma unroll
    for (unsigned k = 0; k < radix_lanes; ++k) {
        cnt[t * (radix_lanes + 1) + k] = run;
        run += seg[k];
    }
    __syncthreads();
    const bn_u32 low_total = total & 0xffffu; // nibbles 8..15 start after all of 0..7
#pragma unroll
    for (unsigned i = 0; i < BANYAN_SORT_ITEMS; ++i) {
        const bn_u32 c = cnt[radix_pad((nib[i] & 7u) * BANYAN_WG + t)];
        rank[i] += nib[i] < 8 ? (c & 0xffffu) : (c >> 16) + low_total;
    }
}

} // namespace

// Counts the digits (key >> shift) & mask of one tile per block into hist[digit * groups + group], digit <= mask.
// Block BANYAN_WG; shared memory 256 words.
__global__ void __launch_bounds__(BANYAN_WG) radixHistogram(const bn_u64* __restrict__ keys, bn_u32 n, bn_u32 shift,
                                                            bn_u32 mask, bn_u32* __restrict__ hist, bn_u32 groups)
{
    __shared__ bn_u32 lcount[BANYAN_RADIX_DIGITS];
    const unsigned t = threadIdx.x, g = blockIdx.x;
    for (unsigned d = t; d < BANYAN_RADIX_DIGITS; d += BANYAN_WG)
        lcount[d] = 0;
    __syncthreads();
    const unsigned base = g * radix_tile;
    const unsigned valid = min(radix_tile, n - base);
    bn_u32 digit[BANYAN_SORT_ITEMS]; // all loads first, so they are in flight together, then the counting
#pragma unroll
    for (unsigned i = 0; i < BANYAN_SORT_ITEMS; ++i) {
        const unsigned j = i * BANYAN_WG + t;
        digit[i] = j < valid ? radix_digit(keys[base + j], shift, mask) : BANYAN_RADIX_DIGITS;
    }
#pragma unroll
    for (unsigned i = 0; i < BANYAN_SORT_ITEMS; ++i)
        if (digit[i] < BANYAN_RADIX_DIGITS) atomicAdd(&lcount[digit[i]], 1u);
    __syncthreads();
    for (unsigned d = t; d <= mask; d += BANYAN_WG)
        hist[d * groups + g] = lcount[d];
}
BANYAN_CUDA_KERNEL(radixHistogram);

// Moves one tile per block to its place in the pass's output (offs = the scanned histogram): ranks the tile
// stably by its 8-bit digit in two nibble rounds, places the pairs in shared memory in digit order, and writes
// them out in tile order, so each digit's run is contiguous. Items past n get digit 255 and rank last.
// Block BANYAN_WG; shared memory 12 bytes per tile item + 9 words per thread + 256 words + a word per warp (34 KiB).
__global__ void __launch_bounds__(BANYAN_WG)
    radixScatter(const bn_u64* __restrict__ keys_in, const bn_u32* __restrict__ vals_in, bn_u64* __restrict__ keys_out,
                 bn_u32* __restrict__ vals_out, bn_u32 n, bn_u32 shift, bn_u32 mask, const bn_u32* __restrict__ offs,
                 bn_u32 groups)
{
    __shared__ __align__(16) bn_u64 lkeys[radix_tile];
    __shared__ bn_u32 lvals[radix_tile];
    __shared__ bn_u32 lcnt[radix_counter_words];
    __shared__ bn_u32 lwarp[bn_block_warps];
    __shared__ bn_u32 lofs[BANYAN_RADIX_DIGITS];
    // Used before the keys arrive, so they share lkeys' 8 bytes per item: 4 + 2 + 1.
    bn_u32* lexch = reinterpret_cast<bn_u32*>(lkeys);
    unsigned short* lrank = reinterpret_cast<unsigned short*>(lexch + radix_tile);
    unsigned char* ldigit = reinterpret_cast<unsigned char*>(lrank + radix_tile);

    const unsigned t = threadIdx.x, g = blockIdx.x;
    const unsigned base = g * radix_tile;
    const unsigned valid = min(radix_tile, n - base);

    for (unsigned d = t; d <= mask; d += BANYAN_WG)
        lofs[d] = offs[d * groups + g];

    bn_u64 key[BANYAN_SORT_ITEMS];
    bn_u32 val[BANYAN_SORT_ITEMS];
#pragma unroll
    for (unsigned i = 0; i < BANYAN_SORT_ITEMS; ++i) {
        const unsigned j = i * BANYAN_WG + t;
        unsigned d = 255;
        if (j < valid) {
            key[i] = keys_in[base + j];
            val[i] = vals_in[base + j];
            d = radix_digit(key[i], shift, mask);
        }
        ldigit[j] = static_cast<unsigned char>(d);
    }
    __syncthreads();
    // Blocked reads go 4 items at a time (fewer shared accesses, fewer bank conflicts).
    bn_u32 digit[BANYAN_SORT_ITEMS], nib[BANYAN_SORT_ITEMS], rank[BANYAN_SORT_ITEMS];
#pragma unroll
    for (unsigned w = 0; w < BANYAN_SORT_ITEMS / 4; ++w) {
        const uchar4 q = reinterpret_cast<const uchar4*>(ldigit)[t * (BANYAN_SORT_ITEMS / 4) + w];
        digit[4 * w] = q.x;
        digit[4 * w + 1] = q.y;
        digit[4 * w + 2] = q.z;
        digit[4 * w + 3] = q.w;
    }
#pragma unroll
    for (unsigned i = 0; i < BANYAN_SORT_ITEMS; ++i)
        nib[i] = digit[i] & 15u;

    radix_rank_nibble(nib, rank, lcnt, lwarp); // round 1: low nibble
#pragma unroll
    for (unsigned i = 0; i < BANYAN_SORT_ITEMS; ++i)
        lexch[rank[i]] = (digit[i] << 16) | (t * BANYAN_SORT_ITEMS + i);
    __syncthreads();
    bn_u32 from[BANYAN_SORT_ITEMS];
#pragma unroll
    for (unsigned w = 0; w < BANYAN_SORT_ITEMS / 4; ++w) {
        const uint4 q = reinterpret_cast<const uint4*>(lexch)[t * (BANYAN_SORT_ITEMS / 4) + w];
        from[4 * w] = q.x;
        from[4 * w + 1] = q.y;
        from[4 * w + 2] = q.z;
        from[4 * w + 3] = q.w;
    }
#pragma unroll
    for (unsigned i = 0; i < BANYAN_SORT_ITEMS; ++i) {
        nib[i] = from[i] >> 20;
        from[i] &= 0xffffu;
    }

    radix_rank_nibble(nib, rank, lcnt, lwarp); // round 2: high nibble, stable over round 1
#pragma unroll
    for (unsigned i = 0; i < BANYAN_SORT_ITEMS; ++i)
        lrank[from[i]] = static_cast<unsigned short>(rank[i]);
    __syncthreads();
#pragma unroll
    for (unsigned i = 0; i < BANYAN_SORT_ITEMS; ++i)
        rank[i] = lrank[i * BANYAN_WG + t];
    __syncthreads(); // lrank lives inside lkeys
#pragma unroll
    for (unsigned i = 0; i < BANYAN_SORT_ITEMS; ++i) {
        if (i * BANYAN_WG + t < valid) {
            lkeys[rank[i]] = key[i];
            lvals[rank[i]] = val[i];
        }
    }
    __syncthreads();

#pragma unroll
    for (unsigned i = 0; i < BANYAN_SORT_ITEMS; ++i) {
        const unsigned j = i * BANYAN_WG + t;
        if (j < valid) {
            const bn_u32 d = radix_digit(lkeys[j], shift, mask);
            if (j == 0 || radix_digit(lkeys[j - 1], shift, mask) != d) lofs[d] -= j;
        }
    }
    __syncthreads();
#pragma unroll
    for (unsigned i = 0; i < BANYAN_SORT_ITEMS; ++i) {
        const unsigned j = i * BANYAN_WG + t;
        if (j < valid) {
            const bn_u64 k = lkeys[j];
            const bn_u32 p = lofs[radix_digit(k, shift, mask)] + j;
            keys_out[p] = k;
            vals_out[p] = lvals[j];
        }
    }
}
BANYAN_CUDA_KERNEL(radixScatter);
