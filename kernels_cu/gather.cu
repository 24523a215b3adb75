/**
 * @file gather.cu
 * @brief out[i] = in[perm[i]] for elements of 4, 8 and 16 bytes (driver: Backend::gather, core/device/backend.hpp).
 *
 * The CUDA twin of kernels_cl/gather.cl. Elements move as unsigned integers, so every bit pattern arrives
 * unchanged; perm may repeat or skip indices. One element per thread: writes coalesced, reads as ordered as perm.
 */
#include "core/device_shared.h"

#include "backend_cuda/kernel_registry.hpp"

/// Block BANYAN_WG; no shared memory. out must not alias in or perm.
__global__ void __launch_bounds__(BANYAN_WG)
    gather32(const bn_u32* __restrict__ in, const bn_u32* __restrict__ perm, bn_u32 n, bn_u32* __restrict__ out)
{
    const unsigned i = blockIdx.x * BANYAN_WG + threadIdx.x;
    if (i < n) out[i] = in[perm[i]];
}
BANYAN_CUDA_KERNEL(gather32);

/// Block BANYAN_WG; no shared memory.
__global__ void __launch_bounds__(BANYAN_WG)
    gather64(const bn_u64* __restrict__ in, const bn_u32* __restrict__ perm, bn_u32 n, bn_u64* __restrict__ out)
{
    const unsigned i = blockIdx.x * BANYAN_WG + threadIdx.x;
    if (i < n) out[i] = in[perm[i]];
}
BANYAN_CUDA_KERNEL(gather64);

/// Block BANYAN_WG; no shared memory.
__global__ void __launch_bounds__(BANYAN_WG)
    gather128(const uint4* __restrict__ in, const bn_u32* __restrict__ perm, bn_u32 n, uint4* __restrict__ out)
{
    const unsigned i = blockIdx.x * BANYAN_WG + threadIdx.x;
    if (i < n) out[i] = in[perm[i]];
}
BANYAN_CUDA_KERNEL(gather128);
