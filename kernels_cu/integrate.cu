/**
 * @file integrate.cu
 * @brief Time integration on the device (paper section 3.1): the kick and drift of the shared-time-step leapfrog,
 *        the per-block sums of energy, momentum and angular momentum, and the small kernels that take particles
 *        back to the order of the input for output. Driver: core/simulation/simulation.cpp. Same kernels as
 *        kernels_cl/integrate.cl.
 *
 * Kick and drift use fmaf() for every update, so that each component is rounded once whatever the compiler
 * contracts, and a CPU reference with std::fma reproduces them bit for bit.
 */
#include "backend_cuda/kernel_registry.hpp"
#include "core/device_shared.h"
#include "kernels_cu/block.cuh"

/* First half of a kick-drift-kick step (the predictor of Hut et al. 1995): v += a dt/2, then x += v dt, with the
 * accelerations of the last force evaluation. pos.w (mass) is left as it is; vel.w gets |a| (see integrate.cl).
 * Block BANYAN_WG; no shared memory. */
__global__ void __launch_bounds__(BANYAN_WG)
    integrateKickDrift(bn_f4* pos, bn_f4* vel, const bn_f4* acc, bn_u32 n, float half_dt, float dt)
{
    const bn_u32 i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const bn_f4 a = acc[i];
    bn_f4 v = vel[i];
    bn_f4 x = pos[i];
    v.x = fmaf(a.x, half_dt, v.x);
    v.y = fmaf(a.y, half_dt, v.y);
    v.z = fmaf(a.z, half_dt, v.z);
    x.x = fmaf(v.x, dt, x.x);
    x.y = fmaf(v.y, dt, x.y);
    x.z = fmaf(v.z, dt, x.z);
    v.w = sqrtf(fmaf(a.z, a.z, fmaf(a.y, a.y, a.x * a.x)));
    vel[i] = v;
    pos[i] = x;
}
BANYAN_CUDA_KERNEL(integrateKickDrift);

/* Second half of the step (the corrector): v += a dt/2 with the accelerations at the new positions. Block
 * BANYAN_WG; no shared memory. */
__global__ void __launch_bounds__(BANYAN_WG) integrateKick(bn_f4* vel, const bn_f4* acc, bn_u32 n, float half_dt)
{
    const bn_u32 i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const bn_f4 a = acc[i];
    bn_f4 v = vel[i];
    v.x = fmaf(a.x, half_dt, v.x);
    v.y = fmaf(a.y, half_dt, v.y);
    v.z = fmaf(a.z, half_dt, v.z);
    vel[i] = v;
}
BANYAN_CUDA_KERNEL(integrateKick);

/* Block time steps (see integrate.cl): the opening half kick of the particles that start a step now (rung >= level),
 * each with its own half step half_max 2^-rung, and the drift of every particle by `drift`. With one rung (level 0,
 * rung 0) the same operations as integrateKickDrift. Block BANYAN_WG; no shared memory. */
__global__ void __launch_bounds__(BANYAN_WG)
    integrateBlockKickDrift(bn_f4* pos, bn_f4* vel, const bn_f4* acc, const bn_u32* rung, bn_u32 n, bn_u32 level,
                            float half_max, float drift)
{
    const bn_u32 i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    bn_f4 v = vel[i];
    bn_f4 x = pos[i];
    const bn_u32 k = rung[i];
    if (k >= level) {
        const bn_f4 a = acc[i];
        const float half_k = ldexpf(half_max, -static_cast<int>(k));
        v.x = fmaf(a.x, half_k, v.x);
        v.y = fmaf(a.y, half_k, v.y);
        v.z = fmaf(a.z, half_k, v.z);
        v.w = sqrtf(fmaf(a.z, a.z, fmaf(a.y, a.y, a.x * a.x)));
        vel[i] = v;
    }
    x.x = fmaf(v.x, drift, x.x);
    x.y = fmaf(v.y, drift, x.y);
    x.z = fmaf(v.z, drift, x.z);
    pos[i] = x;
}
BANYAN_CUDA_KERNEL(integrateBlockKickDrift);

/* Block time steps (see integrate.cl): the closing half kick of the active particles (rung >= level; only when
 * kick != 0) with the half step of the rung they had, then their new rung max(bn_block_rung(a), level), and the
 * histogram of every particle's rung added into hist (BANYAN_RUNG_BINS counters, the last for rungs beyond
 * max_rung). Block BANYAN_WG; shared memory BANYAN_RUNG_BINS words. */
__global__ void __launch_bounds__(BANYAN_WG)
    integrateBlockKick(bn_f4* vel, const bn_f4* acc, bn_u32* rung, bn_u32 n, bn_u32 level, float half_max, bn_u32 kick,
                       double dt2_max, double c2, bn_u32 max_rung, bn_u32* hist)
{
    __shared__ bn_u32 local_hist[BANYAN_RUNG_BINS];
    const bn_u32 lid = threadIdx.x;
    for (bn_u32 b = lid; b < BANYAN_RUNG_BINS; b += BANYAN_WG)
        local_hist[b] = 0u;
    __syncthreads();
    const bn_u32 i = blockIdx.x * BANYAN_WG + lid;
    if (i < n) {
        bn_u32 k = rung[i];
        if (k >= level) {
            const bn_f4 a = acc[i];
            if (kick) {
                const float half_k = ldexpf(half_max, -static_cast<int>(k));
                bn_f4 v = vel[i];
                v.x = fmaf(a.x, half_k, v.x);
                v.y = fmaf(a.y, half_k, v.y);
                v.z = fmaf(a.z, half_k, v.z);
                vel[i] = v;
            }
            k = max(bn_block_rung(a.x, a.y, a.z, dt2_max, c2, max_rung), level);
            rung[i] = k;
        }
        atomicAdd(&local_hist[min(k, max_rung + 1u)], 1u);
    }
    __syncthreads();
    for (bn_u32 b = lid; b < BANYAN_RUNG_BINS; b += BANYAN_WG)
        if (local_hist[b]) atomicAdd(&hist[b], local_hist[b]);
}
BANYAN_CUDA_KERNEL(integrateBlockKick);

/* The time-symmetric rung choice (see integrate.cl): where each pending particle would be at the end of a step of
 * its rung, x + (v - u) h + a h^2 / 2 with h = full_max 2^-rung (its velocity synchronised, after the closing kick:
 * the drift of the step's opening kick and drift; u the centre of mass's velocity from the energy totals), into
 * predicted; the others' positions unchanged. first != 0 marks the pending particles first: those of rung >= level
 * whose end could ask for a deeper rung (bn_block_probe_needed). Block BANYAN_WG; no shared memory. */
__global__ void __launch_bounds__(BANYAN_WG)
    integrateBlockPredict(const bn_f4* pos, const bn_f4* vel, const bn_f4* acc, const bn_u32* rung, bn_u32 n,
                          bn_u32 level, float full_max, const double* totals, double dt2_max, double c2, bn_u32 first,
                          bn_u32* pending, bn_f4* predicted)
{
    const bn_u32 i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    bn_f4 x = pos[i];
    const bn_u32 k = rung[i];
    const bn_f4 a = acc[i];
    const bn_u32 p = first ? (k >= level ? bn_block_probe_needed(a.x, a.y, a.z, dt2_max, c2, k) : 0u) : pending[i];
    if (first) pending[i] = p;
    if (p) {
        const bn_f4 v = vel[i];
        const float ux = static_cast<float>(totals[2] / totals[8]), uy = static_cast<float>(totals[3] / totals[8]);
        const float uz = static_cast<float>(totals[4] / totals[8]);
        const float h = ldexpf(full_max, -static_cast<int>(k));
        const float h2 = 0.5f * h * h;
        x.x = fmaf(a.x, h2, fmaf(v.x - ux, h, x.x));
        x.y = fmaf(a.y, h2, fmaf(v.y - uy, h, x.y));
        x.z = fmaf(a.z, h2, fmaf(v.z - uz, h, x.z));
    }
    predicted[i] = x;
}
BANYAN_CUDA_KERNEL(integrateBlockPredict);

/* The time-symmetric rung choice (see integrate.cl): a pending particle whose acceleration at its predicted end
 * (acc) asks for no deeper rung than its own keeps it and is done; otherwise it goes one rung deeper and, unless
 * last, stays pending for the next probe. Every particle's rung is counted into hist as integrateBlockKick does.
 * Block BANYAN_WG; shared memory BANYAN_RUNG_BINS words. */
__global__ void __launch_bounds__(BANYAN_WG)
    integrateBlockProbe(const bn_f4* acc, bn_u32* rung, bn_u32* pending, bn_u32 n, double dt2_max, double c2,
                        bn_u32 max_rung, bn_u32 last, bn_u32* hist)
{
    __shared__ bn_u32 local_hist[BANYAN_RUNG_BINS];
    const bn_u32 lid = threadIdx.x;
    for (bn_u32 b = lid; b < BANYAN_RUNG_BINS; b += BANYAN_WG)
        local_hist[b] = 0u;
    __syncthreads();
    const bn_u32 i = blockIdx.x * BANYAN_WG + lid;
    if (i < n) {
        bn_u32 k = rung[i];
        if (pending[i]) {
            const bn_f4 a = acc[i];
            if (bn_block_rung(a.x, a.y, a.z, dt2_max, c2, max_rung) <= k) {
                pending[i] = 0u;
            } else {
                k = min(k + 1u, max_rung + 1u);
                rung[i] = k;
                if (last) pending[i] = 0u;
            }
        }
        atomicAdd(&local_hist[min(k, max_rung + 1u)], 1u);
    }
    __syncthreads();
    for (bn_u32 b = lid; b < BANYAN_RUNG_BINS; b += BANYAN_WG)
        if (local_hist[b]) atomicAdd(&hist[b], local_hist[b]);
}
BANYAN_CUDA_KERNEL(integrateBlockProbe);

/* The BANYAN_ENERGY_TERMS terms of one particle, in double precision: kinetic energy m v^2 / 2, potential energy
 * m phi / 2 (each pair counted from both ends), momentum m v, angular momentum m x cross v, mass m. */
__device__ __forceinline__ void integrate_energy_terms(bn_f4 p, bn_f4 v, float phi, double* t)
{
    const double m = p.w;
    const double x = p.x, y = p.y, z = p.z;
    const double vx = v.x, vy = v.y, vz = v.z;
    t[0] = 0.5 * m * (vx * vx + vy * vy + vz * vz);
    t[1] = 0.5 * m * static_cast<double>(phi);
    t[2] = m * vx;
    t[3] = m * vy;
    t[4] = m * vz;
    t[5] = m * (y * vz - z * vy);
    t[6] = m * (z * vx - x * vz);
    t[7] = m * (x * vy - y * vx);
    t[8] = m;
}

/* Per-block sums of the energy terms of particles [0, n): partials[BANYAN_ENERGY_TERMS * block + k]. Each thread
 * accumulates its particles with a grid stride, then the block adds the threads' sums in a fixed tree (stride
 * BANYAN_WG/2 down to 1), the order of the OpenCL kernel: the sums depend only on n and the grid. Block BANYAN_WG;
 * shared memory BANYAN_ENERGY_TERMS * BANYAN_WG doubles. */
__global__ void __launch_bounds__(BANYAN_WG)
    integrateEnergyPartials(const bn_f4* pos, const bn_f4* vel, const bn_f4* acc, bn_u32 n, double* partials)
{
    __shared__ double s[BANYAN_ENERGY_TERMS * BANYAN_WG];
    const bn_u32 lid = threadIdx.x;
    double sum[BANYAN_ENERGY_TERMS];
    double t[BANYAN_ENERGY_TERMS];
#pragma unroll
    for (int k = 0; k < BANYAN_ENERGY_TERMS; ++k)
        sum[k] = 0.0;
    for (bn_u32 i = blockIdx.x * BANYAN_WG + lid; i < n; i += gridDim.x * BANYAN_WG) {
        integrate_energy_terms(pos[i], vel[i], acc[i].w, t);
#pragma unroll
        for (int k = 0; k < BANYAN_ENERGY_TERMS; ++k)
            sum[k] += t[k];
    }
#pragma unroll
    for (int k = 0; k < BANYAN_ENERGY_TERMS; ++k)
        s[k * BANYAN_WG + lid] = sum[k];
    BN_BLOCK_TREE_SUM(s, lid, BANYAN_ENERGY_TERMS, 1);
    if (lid < BANYAN_ENERGY_TERMS) partials[BANYAN_ENERGY_TERMS * blockIdx.x + lid] = s[lid * BANYAN_WG];
}
BANYAN_CUDA_KERNEL(integrateEnergyPartials);

/* The totals of the per-block partials: out[k] = sum over blocks of partials[BANYAN_ENERGY_TERMS * g + k], in a
 * fixed order. Launched as one block. Block BANYAN_WG; shared memory BANYAN_ENERGY_TERMS * BANYAN_WG doubles. */
__global__ void __launch_bounds__(BANYAN_WG) integrateEnergyTotals(const double* partials, bn_u32 groups, double* out)
{
    __shared__ double s[BANYAN_ENERGY_TERMS * BANYAN_WG];
    const bn_u32 lid = threadIdx.x;
    double sum[BANYAN_ENERGY_TERMS];
#pragma unroll
    for (int k = 0; k < BANYAN_ENERGY_TERMS; ++k)
        sum[k] = 0.0;
    for (bn_u32 g = lid; g < groups; g += BANYAN_WG) {
#pragma unroll
        for (int k = 0; k < BANYAN_ENERGY_TERMS; ++k)
            sum[k] += partials[BANYAN_ENERGY_TERMS * g + k];
    }
#pragma unroll
    for (int k = 0; k < BANYAN_ENERGY_TERMS; ++k)
        s[k * BANYAN_WG + lid] = sum[k];
    BN_BLOCK_TREE_SUM(s, lid, BANYAN_ENERGY_TERMS, 1);
    if (lid < BANYAN_ENERGY_TERMS) out[lid] = s[lid * BANYAN_WG];
}
BANYAN_CUDA_KERNEL(integrateEnergyTotals);

/* Particles from device (tree) order back to the order of the input, for snapshots, one chunk of ids at a time:
 * out[ids[i] - first] = in[i] for the particles with first <= ids[i] < first + count, for positions, velocities and
 * accelerations with potentials. Block BANYAN_WG; no shared memory. */
__global__ void __launch_bounds__(BANYAN_WG)
    integrateToInputOrder(const bn_f4* pos, const bn_f4* vel, const bn_f4* acc, const bn_u32* ids, bn_u32 n,
                          bn_u32 first, bn_u32 count, bn_f4* pos_out, bn_f4* vel_out, bn_f4* acc_out)
{
    const bn_u32 i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const bn_u32 j = ids[i] - first; /* huge (wrapped) below first */
    if (j >= count) return;
    pos_out[j] = pos[i];
    vel_out[j] = vel[i];
    acc_out[j] = acc[i];
}
BANYAN_CUDA_KERNEL(integrateToInputOrder);

/* Positions of two particles picked by id (the central particles of a merger): out[0] = pos of id_a, out[1] = pos
 * of id_b; entries of ids that are absent stay as they were. Block BANYAN_WG; no shared memory. */
__global__ void __launch_bounds__(BANYAN_WG)
    integrateTrack(const bn_f4* pos, const bn_u32* ids, bn_u32 n, bn_u32 id_a, bn_u32 id_b, bn_f4* out)
{
    const bn_u32 i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const bn_u32 id = ids[i];
    if (id == id_a) out[0] = pos[i];
    if (id == id_b) out[1] = pos[i];
}
BANYAN_CUDA_KERNEL(integrateTrack);
