/**
 * @file block.cl
 * @brief Work-group building blocks of the OpenCL kernels: sums, prefix sums and tree reductions over a work-group,
 *        and the padded tile of the scan and compaction. Their one home in kernels_cl/ (issue 32); the CUDA twins,
 *        under the same names where both languages have one, are in kernels_cu/block.cuh.
 *
 * cmake/EmbedCl.cmake pastes this file into the program right after core/device_shared.h, before every other file
 * of kernels_cl/, which use it. Every exchange goes through local memory with a barrier between steps: nothing here
 * assumes a sub-group width (AMD runs 64, NVIDIA 32, CPUs vary) or that a sub-group runs in step. OpenCL C 1.2 has
 * no templates: the scan needed for two element types is a macro that defines one function per type
 * (BN_DEFINE_BLOCK_EXCLUSIVE_SWAP), and the trees are statement macros, which leave each kernel's code as it was
 * with the tree written out in it (as functions, clang pairs and orders their local loads differently). Integer
 * sums wrap modulo 2^32 or 2^64; the floating-point trees pair the same items in the same order as the CUDA
 * kernels, so both backends give the same bits.
 */

/* ---- The tile of the scan and compaction (scan.cl, compact.cl) ---------------------------------------------- */
/* A tile is BANYAN_WG * BANYAN_SCAN_ITEMS items, one per work-group. One padding word per 32 keeps both the
 * striped (coalesced) and the blocked (one work-item's consecutive items) accesses to the local tile free of bank
 * conflicts. */
#define BN_SCAN_TILE (BANYAN_WG * BANYAN_SCAN_ITEMS)
#define BN_TILE_PAD(i) ((i) + ((i) >> 5))
#define BN_SCAN_TILE_WORDS BN_TILE_PAD(BN_SCAN_TILE)

/* ---- Tree reductions (reduce.cl, integrate.cl, parallel.cl, bn_block_sum_u32) ------------------------------- */
/* The fixed tree of every work-group reduction: strides BANYAN_WG / 2, / 4, ... 1, each step combining item lid with
 * item lid + stride (the same pairs as kernels_cu/block.cuh), so that sums depend only on the work-group size. Each
 * starts with a barrier (the caller has stored its items) and ends with one; the result is in item 0. lid is the
 * caller's get_local_id(0). */

/* Sums of TERMS interleaved arrays of BANYAN_WG values each, s[k * BANYAN_WG + lid] for k < TERMS, in place. */
#define BN_BLOCK_TREE_SUM(s, lid, TERMS)                                                                           \
    do {                                                                                                           \
        barrier(CLK_LOCAL_MEM_FENCE);                                                                              \
        for (uint stride_ = BANYAN_WG / 2; stride_ > 0; stride_ >>= 1) {                                           \
            if ((lid) < stride_)                                                                                   \
                for (int k_ = 0; k_ < (TERMS); ++k_)                                                               \
                    (s)[k_ * BANYAN_WG + (lid)] += (s)[k_ * BANYAN_WG + (lid) + stride_];                          \
            barrier(CLK_LOCAL_MEM_FENCE);                                                                          \
        }                                                                                                          \
    } while (0)

/* Componentwise min of smin[0 .. BANYAN_WG) and max of smax[0 .. BANYAN_WG), in place (NaNs are ignored: fmin /
 * fmax). */
#define BN_BLOCK_TREE_BOUNDS(smin, smax, lid)                                                                      \
    do {                                                                                                           \
        barrier(CLK_LOCAL_MEM_FENCE);                                                                              \
        for (uint stride_ = BANYAN_WG / 2; stride_ > 0; stride_ >>= 1) {                                           \
            if ((lid) < stride_) {                                                                                 \
                (smin)[lid] = fmin((smin)[lid], (smin)[(lid) + stride_]);                                          \
                (smax)[lid] = fmax((smax)[lid], (smax)[(lid) + stride_]);                                          \
            }                                                                                                      \
            barrier(CLK_LOCAL_MEM_FENCE);                                                                          \
        }                                                                                                          \
    } while (0)

/* ---- Sums and prefix sums of one value per work-item -------------------------------------------------------- */

/* Sum of v over the work-group, returned to every work-item. s: BANYAN_WG words of local memory. Starts and ends
 * with a barrier, so s may be used again right after. */
inline bn_u32 bn_block_sum_u32(bn_u32 v, __local bn_u32* s)
{
    const uint lid = get_local_id(0);
    s[lid] = v;
    BN_BLOCK_TREE_SUM(s, lid, 1);
    const bn_u32 total = s[0];
    barrier(CLK_LOCAL_MEM_FENCE);
    return total;
}

/* Two spellings of one scan: the exclusive prefix sum of one value per work-item, Hillis-Steele, double-buffered in
 * 2 WG values of local memory (one barrier per step, log2(WG) + 1 in all), with *total the sum of all. They differ
 * only in how they address the two halves, and each is kept for the kernels that were written with it: on clang's
 * AMDGPU and NVPTX back ends either one in the other's place changes those kernels' code (the pointer swap adds 29
 * address instructions to compactScatter's PTX; the index form changes radixScatter). The CUDA twins are
 * bn_block_exclusive_u32 (scan, compact) and bn_block_exclusive_serial (radix sort, walk). */

/* Over BANYAN_WG work-items, the halves chosen by an index (scan.cl, compact.cl). Ends with a barrier, so s may be
 * used again at once. */
inline bn_u32 bn_block_exclusive_u32(bn_u32 v, __local bn_u32* s, bn_u32* total)
{
    const uint lid = get_local_id(0);
    uint cur = 0;
    s[lid] = v;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (uint offset = 1; offset < BANYAN_WG; offset <<= 1) {
        const uint nxt = cur ^ BANYAN_WG;
        bn_u32 x = s[cur + lid];
        if (lid >= offset) x += s[cur + lid - offset];
        s[nxt + lid] = x;
        cur = nxt;
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    const bn_u32 inclusive = s[cur + lid];
    *total = s[cur + BANYAN_WG - 1];
    barrier(CLK_LOCAL_MEM_FENCE);
    return inclusive - v;
}

/* NAME(v, buf, lid, total): over WG work-items of values of type T, the halves swapped as pointers. END is what
 * follows the last reads of buf: a barrier, or nothing where the caller has one between two calls. */
#define BN_DEFINE_BLOCK_EXCLUSIVE_SWAP(NAME, T, WG, END)                                                           \
    inline T NAME(T v, __local T* buf, uint lid, T* total)                                                         \
    {                                                                                                              \
        __local T* src = buf;                                                                                      \
        __local T* dst = buf + (WG);                                                                               \
        src[lid] = v;                                                                                              \
        barrier(CLK_LOCAL_MEM_FENCE);                                                                              \
        for (uint off = 1; off < (WG); off <<= 1) {                                                                \
            T x = src[lid];                                                                                        \
            if (lid >= off) x += src[lid - off];                                                                   \
            dst[lid] = x;                                                                                          \
            barrier(CLK_LOCAL_MEM_FENCE);                                                                          \
            __local T* t = src;                                                                                    \
            src = dst;                                                                                             \
            dst = t;                                                                                               \
        }                                                                                                          \
        *total = src[(WG)-1];                                                                                      \
        const T inclusive = src[lid];                                                                              \
        END                                                                                                        \
        return inclusive - v;                                                                                      \
    }

/* Over BANYAN_WG work-items, 32-bit (radix_sort.cl's ranking). Ends with a barrier, so buf may be used again at
 * once. */
BN_DEFINE_BLOCK_EXCLUSIVE_SWAP(bn_block_exclusive_swap_u32, bn_u32, BANYAN_WG, barrier(CLK_LOCAL_MEM_FENCE);)
/* Over BANYAN_WALK_WG work-items, 64-bit: the walk's packed counts (walk.cl). No barrier at the end: the walk has
 * one between two calls. */
BN_DEFINE_BLOCK_EXCLUSIVE_SWAP(bn_walk_exclusive_u64, bn_u64, BANYAN_WALK_WG, )
