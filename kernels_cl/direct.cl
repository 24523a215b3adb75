/**
 * @file direct.cl
 * @brief Direct O(N^2) summation of accelerations and potentials, single and double precision (the reference for
 *        the tree walk). Same kernels as kernels_cu/direct.cu.
 */

/* One work-item per target: particles first .. first + count - 1 (a rank's share of a run over several; 0 and n
 * for all), from all n, into acc_pot[0 .. count - 1]. Sources pass through local memory in tiles of BANYAN_WG (the
 * classic shared-memory N-body loop). Work-group BANYAN_WG; local memory BANYAN_WG float4. The self-pair is skipped
 * by index. pos_mass: x, y, z, m per particle. acc_pot: ax, ay, az, potential per target. */
__kernel __attribute__((reqd_work_group_size(BANYAN_WG, 1, 1)))
void directForces(__global const bn_f4* pos_mass, bn_u32 n, bn_u32 first, bn_u32 count, float eps2,
                  __global bn_f4* acc_pot)
{
    __local bn_f4 tile[BANYAN_WG];
    const bn_u32 t = (bn_u32)get_global_id(0);
    const bn_u32 i = first + t;
    const bn_u32 lid = (bn_u32)get_local_id(0);
    const bn_f4 me = t < count ? pos_mass[i] : (bn_f4)(0.0f);
    bn_f4 acc = (bn_f4)(0.0f);
    for (bn_u32 base = 0; base < n; base += BANYAN_WG) {
        const bn_u32 j = base + lid;
        tile[lid] = j < n ? pos_mass[j] : (bn_f4)(0.0f);
        barrier(CLK_LOCAL_MEM_FENCE);
        const bn_u32 in_tile = min((bn_u32)BANYAN_WG, n - base);
        for (bn_u32 k = 0; k < in_tile; ++k) {
            const bn_f4 s = tile[k];
            if (base + k != i) acc = bn_interact_pp(acc, s.x - me.x, s.y - me.y, s.z - me.z, s.w, eps2);
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (t < count) acc_pot[t] = acc;
}

/* Forces on a few listed particles from all n (block time steps: a substep with few active particles, which then
 * needs no tree), in two passes that keep the device busy however few the particles. directListedPartial: work-group
 * g takes the sources of slice s = g / blocks (BANYAN_DIRECT_SLICE of them, staged through local memory) and the m
 * listed particles of block g % blocks (up to BANYAN_WG / BANYAN_DIRECT_LANES of them), each with
 * lanes = BANYAN_WG / m work-items, work-item t taking particle t % m and every lanes-th source of each tile from
 * t / m on. Each work-item adds its sources in increasing index order; the lanes' sums are then added in lane order
 * into partial[s * count + k]. Work-group BANYAN_WG; local BANYAN_WG float4 twice. The self-pair is skipped by
 * index. */
__kernel __attribute__((reqd_work_group_size(BANYAN_WG, 1, 1)))
void directListedPartial(__global const bn_f4* pos_mass, bn_u32 n, __global const bn_u32* list, bn_u32 count,
                         float eps2, __global bn_f4* partial)
{
    __local bn_f4 tile[BANYAN_WG];
    __local bn_f4 lane_sum[BANYAN_WG];
    const bn_u32 lid = (bn_u32)get_local_id(0);
    const bn_u32 per_block = BANYAN_WG / BANYAN_DIRECT_LANES;
    const bn_u32 blocks = (count + per_block - 1) / per_block;
    const bn_u32 s = (bn_u32)get_group_id(0) / blocks;
    const bn_u32 first = ((bn_u32)get_group_id(0) % blocks) * per_block;
    const bn_u32 m = min(per_block, count - first);
    const bn_u32 lanes = BANYAN_WG / m;
    const bn_u32 lane = lid / m;
    const bool busy = lane < lanes;
    const bn_u32 k = first + lid % m;
    const bn_u32 i = list[k];
    const bn_f4 me = pos_mass[i];
    const bn_u32 begin = s * BANYAN_DIRECT_SLICE, end = min(begin + BANYAN_DIRECT_SLICE, n);
    bn_f4 acc = (bn_f4)(0.0f);
    for (bn_u32 base = begin; base < end; base += BANYAN_WG) {
        tile[lid] = base + lid < end ? pos_mass[base + lid] : (bn_f4)(0.0f);
        barrier(CLK_LOCAL_MEM_FENCE);
        const bn_u32 in_tile = busy ? min((bn_u32)BANYAN_WG, end - base) : 0;
        for (bn_u32 t = lane; t < in_tile; t += lanes) {
            const bn_f4 src = tile[t];
            if (base + t != i) acc = bn_interact_pp(acc, src.x - me.x, src.y - me.y, src.z - me.z, src.w, eps2);
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    lane_sum[lid] = acc;
    barrier(CLK_LOCAL_MEM_FENCE);
    if (lid < m) {
        bn_f4 sum = lane_sum[lid];
        for (bn_u32 l = 1; l < lanes; ++l)
            sum += lane_sum[l * m + lid];
        partial[s * count + k] = sum;
    }
}

/* The second pass: work-group k adds the slices' partial pulls on list[k] (slices of them) and writes the sum to
 * acc_pot[list[k]]; its work-items take every BANYAN_WG-th slice, then add their sums pairwise in local memory (any
 * work-group size; the same order on every backend at the same size). Work-group BANYAN_WG; local BANYAN_WG float4. */
__kernel __attribute__((reqd_work_group_size(BANYAN_WG, 1, 1)))
void directListedSum(__global const bn_f4* partial, bn_u32 slices, __global const bn_u32* list, bn_u32 count,
                     __global bn_f4* acc_pot)
{
    __local bn_f4 part[BANYAN_WG];
    const bn_u32 lid = (bn_u32)get_local_id(0);
    const bn_u32 k = (bn_u32)get_group_id(0);
    bn_f4 acc = (bn_f4)(0.0f);
    for (bn_u32 s = lid; s < slices; s += BANYAN_WG)
        acc += partial[s * count + k];
    part[lid] = acc;
    barrier(CLK_LOCAL_MEM_FENCE);
    bn_u32 stride = 1;
    while (stride < BANYAN_WG)
        stride <<= 1;
    for (stride >>= 1; stride > 0; stride >>= 1) {
        if (lid < stride && lid + stride < BANYAN_WG) part[lid] += part[lid + stride];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (lid == 0) acc_pot[list[k]] = part[0];
}

/* The double-precision sum of both F64 kernels: (ax, ay, az, phi) on a target at `me` from all n particles but the
 * one with index `self`. Every work-item of the group calls it (it stages sources through `tile`, BANYAN_WG float4,
 * between barriers). */
double4 direct_sum_f64(__global const bn_f4* pos_mass, bn_u32 n, bn_f4 me, bn_u32 self, double eps2,
                       __local bn_f4* tile)
{
    const bn_u32 lid = (bn_u32)get_local_id(0);
    double4 acc = (double4)(0.0);
    for (bn_u32 base = 0; base < n; base += BANYAN_WG) {
        const bn_u32 j = base + lid;
        tile[lid] = j < n ? pos_mass[j] : (bn_f4)(0.0f);
        barrier(CLK_LOCAL_MEM_FENCE);
        const bn_u32 count = min((bn_u32)BANYAN_WG, n - base);
        for (bn_u32 k = 0; k < count; ++k) {
            const bn_f4 s = tile[k];
            const double dx = (double)s.x - me.x, dy = (double)s.y - me.y, dz = (double)s.z - me.z;
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
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    return acc;
}

/* As directForces, with differences, distances and sums in double precision (positions are read as stored, in
 * float). acc_pot holds 4 doubles per particle: ax, ay, az, potential. Work-group BANYAN_WG; local BANYAN_WG float4. */
__kernel __attribute__((reqd_work_group_size(BANYAN_WG, 1, 1)))
void directForcesF64(__global const bn_f4* pos_mass, bn_u32 n, double eps2, __global double* acc_pot)
{
    __local bn_f4 tile[BANYAN_WG];
    const bn_u32 i = (bn_u32)get_global_id(0);
    const double4 acc = direct_sum_f64(pos_mass, n, i < n ? pos_mass[i] : (bn_f4)(0.0f), i, eps2, tile);
    if (i < n) vstore4(acc, i, acc_pot);
}

/* As directForcesF64 for the targets listed in targets[0, ntargets) only (a sample, for accuracy measurements at
 * large N): acc_pot[4 t ..] gets the forces on particle targets[t] from all n particles but itself. Work-group
 * BANYAN_WG; local BANYAN_WG float4. */
__kernel __attribute__((reqd_work_group_size(BANYAN_WG, 1, 1)))
void directForcesF64Targets(__global const bn_f4* pos_mass, bn_u32 n, __global const bn_u32* targets, bn_u32 ntargets,
                            double eps2, __global double* acc_pot)
{
    __local bn_f4 tile[BANYAN_WG];
    const bn_u32 t = (bn_u32)get_global_id(0);
    const bn_u32 i = t < ntargets ? targets[t] : 0xFFFFFFFFu;
    const double4 acc = direct_sum_f64(pos_mass, n, t < ntargets ? pos_mass[i] : (bn_f4)(0.0f), i, eps2, tile);
    if (t < ntargets) vstore4(acc, t, acc_pot);
}
