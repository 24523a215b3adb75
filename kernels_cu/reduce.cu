/**
 * @file reduce.cu
 * @brief Reductions: componentwise bounds of float4 items and double-precision sums (driver:
 * core/device/primitives.cpp).
 *
 * The CUDA twin of kernels_cl/reduce.cl. Two passes: a grid of blocks writes one partial per block, then one
 * block reduces the partials with the same kernel. Each thread accumulates its items with a grid stride, then the
 * block combines the threads' values in the same tree as OpenCL's (stride BANYAN_WG/2 down to 1; the last five
 * steps by shuffles, which pair lane i with lane i + stride just as the shared-memory steps do), so a sum is
 * identical on both backends for the same n.
 */
#include "core/device_shared.h"

#include "backend_cuda/kernel_registry.hpp"
#include "kernels_cu/block.cuh"

namespace {

static_assert(BANYAN_WG % bn_warp_size == 0 && BANYAN_WG >= 2 * bn_warp_size,
              "the tree below needs whole warps and two of them");

__device__ __forceinline__ float4 shfl_down4(float4 v, int o)
{
    return make_float4(__shfl_down_sync(BN_FULL_MASK, v.x, o), __shfl_down_sync(BN_FULL_MASK, v.y, o),
                       __shfl_down_sync(BN_FULL_MASK, v.z, o), __shfl_down_sync(BN_FULL_MASK, v.w, o));
}

} // namespace

/// Componentwise min and max over the block's items; thread 0 writes out[2 * block] = min, out[2 * block + 1] =
/// max. pairs = 0: item i is in[i]; pairs = 1: item i is the partial (in[2i], in[2i+1]) of an earlier pass.
/// Block BANYAN_WG; shared memory 2 * BANYAN_WG float4. NaNs are ignored (fminf / fmaxf).
__global__ void __launch_bounds__(BANYAN_WG) reduceBounds(const bn_f4* in, bn_u32 n, bn_u32 pairs, bn_f4* out)
{
    __shared__ float4 smin[BANYAN_WG];
    __shared__ float4 smax[BANYAN_WG];
    const unsigned tid = threadIdx.x;
    float4 lo = make_float4(INFINITY, INFINITY, INFINITY, INFINITY);
    float4 hi = make_float4(-INFINITY, -INFINITY, -INFINITY, -INFINITY);
    for (unsigned i = blockIdx.x * BANYAN_WG + tid; i < n; i += gridDim.x * BANYAN_WG) {
        if (pairs) {
            lo = bn_min4(lo, in[2 * i]);
            hi = bn_max4(hi, in[2 * i + 1]);
        } else {
            const float4 x = in[i];
            lo = bn_min4(lo, x);
            hi = bn_max4(hi, x);
        }
    }
    smin[tid] = lo;
    smax[tid] = hi;
    BN_BLOCK_TREE_BOUNDS(smin, smax, tid, bn_warp_size);
    if (tid < bn_warp_size) {
        lo = smin[tid];
        hi = smax[tid];
        for (int o = bn_warp_size / 2; o > 0; o >>= 1) {
            lo = bn_min4(lo, shfl_down4(lo, o));
            hi = bn_max4(hi, shfl_down4(hi, o));
        }
        if (tid == 0) {
            out[2 * blockIdx.x] = lo;
            out[2 * blockIdx.x + 1] = hi;
        }
    }
}
BANYAN_CUDA_KERNEL(reduceBounds);

/// out[block] = sum of the block's items of in[0..n) in double precision (0 for no items).
/// Block BANYAN_WG; shared memory BANYAN_WG doubles.
__global__ void __launch_bounds__(BANYAN_WG) reduceSum(const double* in, bn_u32 n, double* out)
{
    __shared__ double s[BANYAN_WG];
    const unsigned tid = threadIdx.x;
    double sum = 0.0;
    for (unsigned i = blockIdx.x * BANYAN_WG + tid; i < n; i += gridDim.x * BANYAN_WG)
        sum += in[i];
    s[tid] = sum;
    BN_BLOCK_TREE_SUM(s, tid, 1, bn_warp_size);
    if (tid < bn_warp_size) {
        sum = s[tid];
        for (int o = bn_warp_size / 2; o > 0; o >>= 1)
            sum += __shfl_down_sync(BN_FULL_MASK, sum, o);
        if (tid == 0) out[blockIdx.x] = sum;
    }
}
BANYAN_CUDA_KERNEL(reduceSum);
