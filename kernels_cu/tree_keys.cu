/**
 * @file tree_keys.cu
 * @brief Morton keys of the particles in the tree's frame (paper section 2.1, appendix B; driver:
 * core/tree/octree.cpp).
 *
 * The CUDA twin of kernels_cl/tree_keys.cl; conventions in core/tree_shared.h.
 */
#include "core/device_shared.h"
#include "core/tree_shared.h"

#include "backend_cuda/kernel_registry.hpp"

/// out[i] = i for i < n. Block BANYAN_WG; no shared memory.
__global__ void __launch_bounds__(BANYAN_WG) treeIota(bn_u32* __restrict__ out, bn_u32 n)
{
    const unsigned i = blockIdx.x * BANYAN_WG + threadIdx.x;
    if (i < n) out[i] = i;
}
BANYAN_CUDA_KERNEL(treeIota);

/// keys[i] = Morton key of pos[i] in the cube made from box[0] (min) and box[1] (max); thread 0 also writes
/// frame[0] = (lo.x, lo.y, lo.z, side). Block BANYAN_WG; no shared memory.
__global__ void __launch_bounds__(BANYAN_WG) treeKeys(const bn_f4* __restrict__ pos, const bn_f4* __restrict__ box,
                                                      bn_u32 n, bn_u64* __restrict__ keys, bn_f4* __restrict__ frame)
{
    const unsigned i = blockIdx.x * BANYAN_WG + threadIdx.x;
    const bn_f4 lo = box[0];
    const int e = bn_tree_frame_exponent(lo, box[1]);
    if (i == 0) frame[0] = make_float4(lo.x, lo.y, lo.z, bn_tree_pow2(e));
    if (i < n) keys[i] = bn_tree_key(pos[i], lo, bn_tree_pow2(BANYAN_MAX_DEPTH - e));
}
BANYAN_CUDA_KERNEL(treeKeys);
