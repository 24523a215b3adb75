/**
 * @file direct.cu
 * @brief Direct O(N^2) summation of accelerations and potentials, single and double precision (the reference for
 *        the tree walk). Same kernels as kernels_cl/direct.cl.
 */
#include "backend_cuda/kernel_registry.hpp"
#include "core/device_shared.h"

/* One thread per target: particles first .. first + count - 1 (a rank's share of a run over several; 0 and n for
 * all), from all n, into acc_pot[0 .. count - 1]. Sources pass through shared memory in tiles of BANYAN_WG. Block
 * BANYAN_WG; shared BANYAN_WG float4. The self-pair is skipped by index. */
__global__ void __launch_bounds__(BANYAN_WG)
    directForces(const bn_f4* pos_mass, bn_u32 n, bn_u32 first, bn_u32 count, float eps2, bn_f4* acc_pot)
{
    __shared__ bn_f4 tile[BANYAN_WG];
    const bn_u32 t = blockIdx.x * blockDim.x + threadIdx.x;
    const bn_u32 i = first + t;
    const bn_u32 lid = threadIdx.x;
    const bn_f4 me = t < count ? pos_mass[i] : make_float4(0.f, 0.f, 0.f, 0.f);
    bn_f4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
    for (bn_u32 base = 0; base < n; base += BANYAN_WG) {
        const bn_u32 j = base + lid;
        tile[lid] = j < n ? pos_mass[j] : make_float4(0.f, 0.f, 0.f, 0.f);
        __syncthreads();
        const bn_u32 in_tile = min(static_cast<bn_u32>(BANYAN_WG), n - base);
        for (bn_u32 k = 0; k < in_tile; ++k) {
            const bn_f4 s = tile[k];
            if (base + k != i) acc = bn_interact_pp(acc, s.x - me.x, s.y - me.y, s.z - me.z, s.w, eps2);
        }
        __syncthreads();
    }
    if (t < count) acc_pot[t] = acc;
}
BANYAN_CUDA_KERNEL(directForces);

/* Forces on a few listed particles from all n, in two passes (the same as kernels_cl/direct.cl, which says more):
 * directListedPartial, block g: the sources of slice g / blocks through shared memory, the m listed particles of
 * block g % blocks, each with BANYAN_WG / m lanes (threads) that take every lanes-th source in increasing order; the
 * lanes' sums added in lane order into partial[s * count + k]. Block BANYAN_WG; shared BANYAN_WG float4 twice. */
__global__ void __launch_bounds__(BANYAN_WG)
    directListedPartial(const bn_f4* pos_mass, bn_u32 n, const bn_u32* list, bn_u32 count, float eps2, bn_f4* partial)
{
    __shared__ bn_f4 tile[BANYAN_WG];
    __shared__ bn_f4 lane_sum[BANYAN_WG];
    const bn_u32 lid = threadIdx.x;
    const bn_u32 per_block = BANYAN_WG / BANYAN_DIRECT_LANES;
    const bn_u32 blocks = (count + per_block - 1) / per_block;
    const bn_u32 s = blockIdx.x / blocks;
    const bn_u32 first = (blockIdx.x % blocks) * per_block;
    const bn_u32 m = min(per_block, count - first);
    const bn_u32 lanes = BANYAN_WG / m;
    const bn_u32 lane = lid / m;
    const bool busy = lane < lanes;
    const bn_u32 k = first + lid % m;
    const bn_u32 i = list[k];
    const bn_f4 me = pos_mass[i];
    const bn_u32 begin = s * BANYAN_DIRECT_SLICE, end = min(begin + BANYAN_DIRECT_SLICE, n);
    bn_f4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
    for (bn_u32 base = begin; base < end; base += BANYAN_WG) {
        tile[lid] = base + lid < end ? pos_mass[base + lid] : make_float4(0.f, 0.f, 0.f, 0.f);
        __syncthreads();
        const bn_u32 in_tile = busy ? min(static_cast<bn_u32>(BANYAN_WG), end - base) : 0;
        for (bn_u32 t = lane; t < in_tile; t += lanes) {
            const bn_f4 src = tile[t];
            if (base + t != i) acc = bn_interact_pp(acc, src.x - me.x, src.y - me.y, src.z - me.z, src.w, eps2);
        }
        __syncthreads();
    }
    lane_sum[lid] = acc;
    __syncthreads();
    if (lid < m) {
        bn_f4 sum = lane_sum[lid];
        for (bn_u32 l = 1; l < lanes; ++l) {
            const bn_f4 p = lane_sum[l * m + lid];
            sum = make_float4(sum.x + p.x, sum.y + p.y, sum.z + p.z, sum.w + p.w);
        }
        partial[s * count + k] = sum;
    }
}
BANYAN_CUDA_KERNEL(directListedPartial);

/* The second pass: block k adds the slices' partial pulls on list[k] into acc_pot[list[k]], its threads taking
 * every BANYAN_WG-th slice, then adding pairwise in shared memory in kernels_cl/direct.cl's order. Block BANYAN_WG;
 * shared BANYAN_WG float4. */
__global__ void __launch_bounds__(BANYAN_WG)
    directListedSum(const bn_f4* partial, bn_u32 slices, const bn_u32* list, bn_u32 count, bn_f4* acc_pot)
{
    __shared__ bn_f4 part[BANYAN_WG];
    const bn_u32 lid = threadIdx.x;
    const bn_u32 k = blockIdx.x;
    bn_f4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
    for (bn_u32 s = lid; s < slices; s += BANYAN_WG) {
        const bn_f4 p = partial[s * count + k];
        acc = make_float4(acc.x + p.x, acc.y + p.y, acc.z + p.z, acc.w + p.w);
    }
    part[lid] = acc;
    __syncthreads();
    bn_u32 stride = 1;
    while (stride < BANYAN_WG)
        stride <<= 1;
    for (stride >>= 1; stride > 0; stride >>= 1) {
        if (lid < stride && lid + stride < BANYAN_WG) {
            const bn_f4 a = part[lid], b = part[lid + stride];
            part[lid] = make_float4(a.x + b.x, a.y + b.y, a.z + b.z, a.w + b.w);
        }
        __syncthreads();
    }
    if (lid == 0) acc_pot[list[k]] = part[0];
}
BANYAN_CUDA_KERNEL(directListedSum);

/* The double-precision sum of both F64 kernels: (ax, ay, az, phi) on a target at `me` from all n particles but the
 * one with index `self`. Every thread of the block calls it (it stages sources through `tile`, BANYAN_WG float4,
 * between barriers). */
struct DirectSumF64 {
    double x, y, z, w; // ax, ay, az, phi (CUDA 13 deprecates double4)
};

__device__ DirectSumF64 direct_sum_f64(const bn_f4* pos_mass, bn_u32 n, bn_f4 me, bn_u32 self, double eps2, bn_f4* tile)
{
    const bn_u32 lid = threadIdx.x;
    DirectSumF64 acc{0.0, 0.0, 0.0, 0.0};
    for (bn_u32 base = 0; base < n; base += BANYAN_WG) {
        const bn_u32 j = base + lid;
        tile[lid] = j < n ? pos_mass[j] : make_float4(0.f, 0.f, 0.f, 0.f);
        __syncthreads();
        const bn_u32 count = min(static_cast<bn_u32>(BANYAN_WG), n - base);
        for (bn_u32 k = 0; k < count; ++k) {
            const bn_f4 s = tile[k];
            const double dx = double(s.x) - me.x, dy = double(s.y) - me.y, dz = double(s.z) - me.z;
            const double r2 = dx * dx + dy * dy + dz * dz + eps2;
            if (base + k == self || r2 == 0.0) continue;
            const double rinv = 1.0 / sqrt(r2);
            const double mrinv = s.w * rinv;
            const double mrinv3 = mrinv * rinv * rinv;
            acc.x += mrinv3 * dx;
            acc.y += mrinv3 * dy;
            acc.z += mrinv3 * dz;
            acc.w -= mrinv;
        }
        __syncthreads();
    }
    return acc;
}

__device__ void store_f64(double* out, const DirectSumF64& a)
{
    out[0] = a.x;
    out[1] = a.y;
    out[2] = a.z;
    out[3] = a.w;
}

/* As directForces in double precision; acc_pot holds 4 doubles per particle. Block BANYAN_WG; shared BANYAN_WG
 * float4. */
__global__ void __launch_bounds__(BANYAN_WG)
    directForcesF64(const bn_f4* pos_mass, bn_u32 n, double eps2, double* acc_pot)
{
    __shared__ bn_f4 tile[BANYAN_WG];
    const bn_u32 i = blockIdx.x * blockDim.x + threadIdx.x;
    const DirectSumF64 acc =
        direct_sum_f64(pos_mass, n, i < n ? pos_mass[i] : make_float4(0.f, 0.f, 0.f, 0.f), i, eps2, tile);
    if (i < n) store_f64(acc_pot + 4 * i, acc);
}
BANYAN_CUDA_KERNEL(directForcesF64);

/* As directForcesF64 for the targets listed in targets[0, ntargets) only (a sample, for accuracy measurements at
 * large N): acc_pot[4 t ..] gets the forces on particle targets[t] from all n particles but itself. Block BANYAN_WG;
 * shared BANYAN_WG float4. */
__global__ void __launch_bounds__(BANYAN_WG)
    directForcesF64Targets(const bn_f4* pos_mass, bn_u32 n, const bn_u32* targets, bn_u32 ntargets, double eps2,
                           double* acc_pot)
{
    __shared__ bn_f4 tile[BANYAN_WG];
    const bn_u32 t = blockIdx.x * blockDim.x + threadIdx.x;
    const bn_u32 i = t < ntargets ? targets[t] : 0xFFFFFFFFu;
    const DirectSumF64 acc =
        direct_sum_f64(pos_mass, n, t < ntargets ? pos_mass[i] : make_float4(0.f, 0.f, 0.f, 0.f), i, eps2, tile);
    if (t < ntargets) store_f64(acc_pot + 4 * t, acc);
}
BANYAN_CUDA_KERNEL(directForcesF64Targets);
