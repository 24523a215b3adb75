/**
 * @file block.cuh
 * @brief Block-level building blocks of the CUDA kernels: sums, prefix sums and tree reductions over a block of
 *        threads, and the padded tile of the scan and compaction. Their one home in kernels_cu/ (issue 32); the
 *        OpenCL twins, under the same names where both languages have one, are in kernels_cl/block.cl.
 *
 * Where the twins differ: CUDA exchanges values within a warp by shuffles (__shfl_*_sync over all bn_warp_size lanes),
 * OpenCL only through local memory with a barrier between steps, since OpenCL guarantees no sub-group width (AMD runs
 * 64). Integer sums wrap modulo 2^32 or 2^64, so every order of addition gives the same integers; the floating-point
 * trees pair the same items in the same order on both sides, so those agree bit for bit too. No helper ends with a
 * barrier unless it says so: the caller decides when its scratch memory may be used again.
 */
#pragma once

#include "core/device_shared.h"

/* The threads of a warp: the one warp width the CUDA kernels assume, named here only (the lanes of every shuffle,
 * the warps of a block, the last steps of a reduction done in one warp). The OpenCL kernels assume none. */
constexpr int bn_warp_size = 32;

/* Lanes of every __shfl_*_sync: the whole warp takes part (one bit per lane). */
#define BN_FULL_MASK 0xffffffffu
static_assert(bn_warp_size == 32, "BN_FULL_MASK names 32 lanes");

/* Whole warps, and at most a warp of them (the scans below scan the warp sums in one warp). */
static_assert(BANYAN_WG % bn_warp_size == 0 && BANYAN_WG <= bn_warp_size * bn_warp_size,
              "whole warps, at most bn_warp_size of them");

/* Warps of a BANYAN_WG block: the words of scratch that bn_block_sum_u32 and bn_block_exclusive_u32 take. */
constexpr unsigned bn_block_warps = BANYAN_WG / bn_warp_size;

/* ---- The tile of the scan and compaction (kernels_cu/scan.cu, compact.cu) ------------------------------------ */
/* A tile is BANYAN_WG * BANYAN_SCAN_ITEMS items. One padding word per 32 (the banks of shared memory, not the
 * warp) keeps both the striped (coalesced) and the blocked (one thread's consecutive items) accesses to the shared
 * tile free of bank conflicts. */
constexpr unsigned bn_scan_tile = BANYAN_WG * BANYAN_SCAN_ITEMS;
__device__ __forceinline__ unsigned bn_tile_pad(unsigned i)
{
    return i + (i >> 5);
}
constexpr unsigned bn_scan_tile_words = bn_scan_tile + bn_scan_tile / 32;

/* ---- Sums and prefix sums of one value per thread --------------------------------------------------------- */

/* Sum of v over the block, returned to every thread: a butterfly of shuffles in each warp, then every thread adds
 * the warp sums. sums: bn_block_warps words of shared memory, not used by another call without a barrier between
 * (scan and compact give each call its own). One barrier. */
__device__ __forceinline__ bn_u32 bn_block_sum_u32(bn_u32 v, bn_u32* sums)
{
    for (int o = bn_warp_size / 2; o > 0; o >>= 1)
        v += __shfl_xor_sync(BN_FULL_MASK, v, o);
    if (threadIdx.x % bn_warp_size == 0) sums[threadIdx.x / bn_warp_size] = v;
    __syncthreads();
    bn_u32 total = 0;
    for (unsigned w = 0; w < bn_block_warps; ++w)
        total += sums[w];
    return total;
}

/* Exclusive prefix sum of v over the block; total gets the block's sum. Each warp scans by shuffles, then warp 0
 * scans the warp sums the same way. warp_sums: bn_block_warps words of shared memory. Two barriers. */
__device__ __forceinline__ bn_u32 bn_block_exclusive_u32(bn_u32 v, bn_u32* warp_sums, bn_u32& total)
{
    const unsigned lane = threadIdx.x % bn_warp_size, warp = threadIdx.x / bn_warp_size;
    bn_u32 x = v;
    for (int o = 1; o < bn_warp_size; o <<= 1) {
        const bn_u32 y = __shfl_up_sync(BN_FULL_MASK, x, o);
        if (lane >= static_cast<unsigned>(o)) x += y;
    }
    if (lane == bn_warp_size - 1) warp_sums[warp] = x;
    __syncthreads();
    if (warp == 0) {
        bn_u32 w = lane < bn_block_warps ? warp_sums[lane] : 0u;
        for (int o = 1; o < bn_warp_size; o <<= 1) {
            const bn_u32 y = __shfl_up_sync(BN_FULL_MASK, w, o);
            if (lane >= static_cast<unsigned>(o)) w += y;
        }
        if (lane < bn_block_warps) warp_sums[lane] = w; // inclusive scan of the warp sums
    }
    __syncthreads();
    total = warp_sums[bn_block_warps - 1];
    return (warp ? warp_sums[warp - 1] : 0u) + x - v;
}

/* Exclusive prefix sum over a block of WG threads of one value of type T (bn_u32 or bn_u64) per thread; total gets
 * the sum of all. Each warp scans by shuffles, then every thread adds up the warp totals before its own and all of
 * them (WG / bn_warp_size broadcast reads of shared memory) instead of warp 0 scanning them as bn_block_exclusive_u32
 * does: one barrier instead of two. The radix sort's ranking (BANYAN_WG, bn_u32, with a barrier after each call) and
 * the walk (BANYAN_WALK_WG, bn_u64 packed counts) use this form, scan and compact the other; both are kept as they
 * were, so that no kernel's machine code changes (which form is faster in the other's place has not been
 * measured). The OpenCL twins are bn_block_exclusive_swap_u32 and bn_walk_exclusive_u64 (kernels_cl/block.cl).
 * warp_totals: WG / bn_warp_size values of shared memory; two calls must be separated by a barrier. */
template <class T, unsigned WG>
__device__ __forceinline__ T bn_block_exclusive_serial(T v, T* warp_totals, unsigned lid, T& total)
{
    static_assert(WG % bn_warp_size == 0 && WG <= 1024, "whole warps, at most 1024 threads");
    const unsigned lane = lid % bn_warp_size, warp = lid / bn_warp_size;
    T x = v;
#pragma unroll
    for (unsigned off = 1; off < bn_warp_size; off <<= 1) {
        const T y = __shfl_up_sync(BN_FULL_MASK, x, off);
        if (lane >= off) x += y;
    }
    if (lane == bn_warp_size - 1) warp_totals[warp] = x;
    __syncthreads();
    T before = 0, all = 0;
#pragma unroll
    for (unsigned w = 0; w < WG / bn_warp_size; ++w) {
        const T t = warp_totals[w];
        before += w < warp ? t : T(0);
        all += t;
    }
    total = all;
    return before + x - v;
}

/* ---- Tree reductions through shared memory (reduce.cu, integrate.cu, parallel.cu) -------------------------- */
/* The fixed tree of the reductions whose results must not depend on the backend: strides BANYAN_WG / 2, / 4, ...
 * down to LAST, each step combining item lid with item lid + stride, the same pairs as the twins of the same names
 * in kernels_cl/block.cl (which go down to 1). With LAST = bn_warp_size the caller finishes in one warp by shuffles
 * down (reduce.cu), which pair the same items; with LAST = 1 the result is in item 0. Each starts with a barrier (the
 * caller has stored its items) and ends with one. They are statement macros, not templates, so that each kernel's
 * code stays what it was with the tree written out in it (as a template, nvcc flipped the polarity of the
 * integrate kernels' lid < stride branches). lid is the caller's threadIdx.x. */

/* Componentwise min and max of float4 values (NaNs are ignored: fminf / fmaxf). */
__device__ __forceinline__ float4 bn_min4(float4 a, float4 b)
{
    return make_float4(fminf(a.x, b.x), fminf(a.y, b.y), fminf(a.z, b.z), fminf(a.w, b.w));
}
__device__ __forceinline__ float4 bn_max4(float4 a, float4 b)
{
    return make_float4(fmaxf(a.x, b.x), fmaxf(a.y, b.y), fmaxf(a.z, b.z), fmaxf(a.w, b.w));
}

/* Sums of TERMS interleaved arrays of BANYAN_WG values each, s[k * BANYAN_WG + lid] for k < TERMS, in place. */
#define BN_BLOCK_TREE_SUM(s, lid, TERMS, LAST)                                                                         \
    do {                                                                                                               \
        __syncthreads();                                                                                               \
        for (unsigned stride_ = BANYAN_WG / 2; stride_ > (LAST)-1; stride_ >>= 1) {                                    \
            if ((lid) < stride_) {                                                                                     \
                _Pragma("unroll") for (int k_ = 0; k_ < (TERMS); ++k_)(s)[k_ * BANYAN_WG + (lid)] +=                   \
                    (s)[k_ * BANYAN_WG + (lid) + stride_];                                                             \
            }                                                                                                          \
            __syncthreads();                                                                                           \
        }                                                                                                              \
    } while (0)

/* Componentwise min of smin[0 .. BANYAN_WG) and max of smax[0 .. BANYAN_WG), in place. */
#define BN_BLOCK_TREE_BOUNDS(smin, smax, lid, LAST)                                                                    \
    do {                                                                                                               \
        __syncthreads();                                                                                               \
        for (unsigned stride_ = BANYAN_WG / 2; stride_ > (LAST)-1; stride_ >>= 1) {                                    \
            if ((lid) < stride_) {                                                                                     \
                (smin)[lid] = bn_min4((smin)[lid], (smin)[(lid) + stride_]);                                           \
                (smax)[lid] = bn_max4((smax)[lid], (smax)[(lid) + stride_]);                                           \
            }                                                                                                          \
            __syncthreads();                                                                                           \
        }                                                                                                              \
    } while (0)
