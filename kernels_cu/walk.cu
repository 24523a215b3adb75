/**
 * @file walk.cu
 * @brief The tree walk (paper sections 2.2, 3.2, 3.3; driver: core/gravity/forces.cpp): accelerations and potentials of
 *        every group of particles from the octree's cells and particles. The OpenCL twin is kernels_cl/walk.cl,
 *        whose file comment describes the algorithm; this file follows it step for step, so that both backends
 *        build the same interaction lists in the same order. The only difference: the work-group scan uses warp
 *        shuffles here (bn_block_exclusive_serial of kernels_cu/block.cuh: one barrier instead of
 *        log2(BANYAN_WALK_WG) + 1); its integer results are the same. The steps are device functions of the same
 *        names as walk.cl's (walk_accepts, walk_push_children, walk_stage_particles, ...).
 */
#include "backend_cuda/kernel_registry.hpp"
#include "core/device_shared.h"
#include "core/tree_shared.h"
#include "kernels_cu/block.cuh"

#define WALK_WG BANYAN_WALK_WG
#define WALK_LIST BANYAN_WALK_LIST
#define WALK_WARPS (WALK_WG / bn_warp_size)

static_assert(WALK_WG % bn_warp_size == 0, "the walk's work-group: whole warps (device_shared.h checks the rest)");

/* Per-cell data of one walk: mac = (centre of mass, (l / theta + delta)^2), link = (cell_first, cell_count).
 * inv_theta may be +inf (theta = 0: every cell is opened). Block BANYAN_WG; no shared memory. */
__global__ void __launch_bounds__(BANYAN_WG)
    walkPrepare(const bn_f4* cell_com, const bn_f4* cell_quad1, const bn_u32* cell_first, const bn_u32* cell_count,
                bn_u32 ncells, float inv_theta, bn_f4* mac, bn_u2* link)
{
    const bn_u32 c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= ncells) return;
    const bn_f4 com = cell_com[c];
    const bn_f4 q1 = cell_quad1[c];
    const float r = bn_open_radius(q1, inv_theta); /* l / theta + delta */
    mac[c] = make_float4(com.x, com.y, com.z, r * r);
    link[c] = make_uint2(cell_first[c], cell_count[c]);
}
BANYAN_CUDA_KERNEL(walkPrepare);

/* The relative criterion's per-cell factor (see walk.cl). Block BANYAN_WG; no shared memory. */
__global__ void __launch_bounds__(BANYAN_WG)
    walkPrepareRelative(const bn_f4* cell_com, const bn_f4* cell_quad1, bn_u32 ncells, float* rel)
{
    const bn_u32 c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= ncells) return;
    rel[c] = bn_rel_cell(cell_com[c].w, cell_quad1[c].w);
}
BANYAN_CUDA_KERNEL(walkPrepareRelative);

/* One pass over the first `count` (<= WALK_WG) accepted cells of clist (see walk.cl). One barrier. */
__device__ __forceinline__ bn_f4 walk_cell_pass(bn_f4 acc, bn_f4 me, unsigned lid, unsigned sub, unsigned k,
                                                bool active, unsigned count, unsigned fill, float eps2,
                                                const bn_f4* __restrict__ cell_com,
                                                const bn_f4* __restrict__ cell_quad0,
                                                const bn_f4* __restrict__ cell_quad1, bn_u32* clist, bn_f4* cstage)
{
    if (lid < count) {
        const bn_u32 c = clist[lid];
        const bn_f4 q0 = __ldg(&cell_quad0[c]);
        const bn_f4 q1 = __ldg(&cell_quad1[c]);
        cstage[3 * lid] = __ldg(&cell_com[c]);
        cstage[3 * lid + 1] = bn_quad_staged0(q0);
        cstage[3 * lid + 2] = bn_quad_staged1(q0, q1, eps2);
    }
    const bool moves = WALK_WG + lid < fill;
    const bn_u32 rest = moves ? clist[WALK_WG + lid] : 0u;
    __syncthreads();
    if (moves) clist[lid] = rest;
    if (active) {
#pragma unroll 4
        for (unsigned j = sub; j < count; j += k) {
            const bn_f4* e = cstage + 3 * j;
            const bn_f4 s = e[0];
            acc = bn_interact_pc(acc, s.x - me.x, s.y - me.y, s.z - me.z, s.w, e[1], e[2], eps2);
        }
    }
    return acc;
}

/* One pass over the first `count` (<= WALK_WG) staged particles, skipping the particle's own entry by position
 * (see walk.cl). Ends with a barrier, after which entries beyond WALK_WG move down to the front. */
__device__ __forceinline__ bn_f4 walk_particle_pass(bn_f4 acc, bn_f4 me, unsigned lid, unsigned slot, unsigned sub,
                                                    unsigned k, bool active, unsigned count, unsigned fill,
                                                    unsigned done, float eps2, bn_f4* pstage, const bn_u32* self_pos)
{
    const bool moves = WALK_WG + lid < fill;
    const bn_f4 rest = moves ? pstage[WALK_WG + lid] : make_float4(0.f, 0.f, 0.f, 0.f);
    if (active) {
        const unsigned self = self_pos[slot] - done; /* huge when absent or in an earlier pass */
        const bool mine = self < count && self >= sub && (self - sub) % k == 0u;
        const unsigned end = mine ? self : count;
#pragma unroll 4
        for (unsigned j = sub; j < end; j += k) {
            const bn_f4 s = pstage[j];
            acc = bn_interact_pp(acc, s.x - me.x, s.y - me.y, s.z - me.z, s.w, eps2);
        }
        if (mine) {
            for (unsigned j = self + k; j < count; j += k) {
                const bn_f4 s = pstage[j];
                acc = bn_interact_pp(acc, s.x - me.x, s.y - me.y, s.z - me.z, s.w, eps2);
            }
        }
    }
    __syncthreads();
    if (moves) pstage[lid] = rest;
    return acc;
}

/* The next group for the block, from the counter next_group (0 before the launch). Every thread calls this: one
 * barrier, after which each reads group_slot; a barrier must separate that read from the next call. */
__device__ __forceinline__ unsigned walk_next_group(unsigned lid, bn_u32* next_group, bn_u32* group_slot)
{
    if (lid == 0) *group_slot = bn_atomic_add_u32(next_group, 1u);
    __syncthreads();
    return *group_slot;
}

/* The first level list: the nroots cells roots[] (the local tree's and the grafted trees' of other ranks; see
 * walk.cl), those beyond WALK_LIST in the spill slice list_g; a list longer than list_max is reported in status. */
__device__ __forceinline__ void walk_load_roots(unsigned lid, const bn_u32* __restrict__ roots, bn_u32 nroots,
                                                unsigned list_max, bn_u32* list, bn_u32* list_g, bn_u32* status)
{
    for (unsigned j = lid; j < nroots && j < list_max; j += WALK_WG) {
        if (j < WALK_LIST)
            list[j] = roots[j];
        else
            list_g[j - WALK_LIST] = roots[j];
    }
    if (lid == 0 && nroots > list_max) bn_atomic_max_u32(status, nroots);
}

/* The relative criterion's scale for a group (see walk.cl): bn_rel_group of the smallest previous acceleration of
 * its n particles (old_a); 0 when alpha = 0. */
__device__ __forceinline__ float walk_group_scale(float alpha, const float* old_a, unsigned n)
{
    float rel_scale = 0.0f;
    if (alpha > 0.0f) {
        float a = old_a[0];
        for (unsigned j = 1; j < n; ++j)
            a = fminf(a, old_a[j]);
        rel_scale = bn_rel_group(alpha, a);
    }
    return rel_scale;
}

/* The opening test (see walk.cl): whether the group of box [glo, ghi] accepts the cell whose mac entry is m (centre
 * of mass, squared opening radius): the squared distance from the box to the centre of mass exceeds the squared
 * radius, with alpha > 0 the larger of m.w and the relative criterion's, rel[cell] * rel_scale. */
__device__ __forceinline__ bool walk_accepts(bn_f4 m, bn_f4 glo, bn_f4 ghi, float alpha, float rel_scale,
                                             const float* __restrict__ rel, unsigned cell)
{
    const float dx = fmaxf(fmaxf(glo.x - m.x, m.x - ghi.x), 0.0f);
    const float dy = fmaxf(fmaxf(glo.y - m.y, m.y - ghi.y), 0.0f);
    const float dz = fmaxf(fmaxf(glo.z - m.z, m.z - ghi.z), 0.0f);
    const float r2 = alpha > 0.0f ? fmaxf(m.w, __ldg(&rel[cell]) * rel_scale) : m.w;
    return dx * dx + dy * dy + dz * dz > r2;
}

/* The queue refill (see walk.cl): an opened node's cnt children, first .. first + cnt - 1, onto the next level's
 * list from position o: below WALK_LIST in shared memory, then in the spill slice; beyond list_max they are left
 * out (the caller reports the length in status). */
__device__ __forceinline__ void walk_push_children(unsigned o, unsigned first, unsigned cnt, unsigned list_max,
                                                   bn_u32* nxt, bn_u32* nxt_g)
{
    for (unsigned j = 0; j < cnt; ++j) {
        const unsigned q = o + j;
        if (q < WALK_LIST)
            nxt[q] = first + j;
        else if (q < list_max)
            nxt_g[q - WALK_LIST] = first + j;
    }
}

/* The opened leaf that holds entry q of the chunk's particle stream: the last of the tl leaves whose start is <= q
 * (binary search). */
__device__ __forceinline__ unsigned walk_leaf_of(unsigned q, const bn_u32* leaf_start, unsigned tl)
{
    unsigned lo = 0, hi = tl - 1;
    while (lo < hi) {
        const unsigned mid = (lo + hi + 1) >> 1;
        if (leaf_start[mid] <= q)
            lo = mid;
        else
            hi = mid - 1;
    }
    return lo;
}

/* Leaf staging (see walk.cl): entries w .. w + take - 1 of the chunk's particle stream onto the particle list after
 * its pfill entries, one thread per entry; a particle of the group notes its place in the group's stream
 * (self_pos). No barrier: the caller's follows. */
__device__ __forceinline__ void walk_stage_particles(unsigned lid, unsigned w, unsigned take, unsigned tl,
                                                     unsigned pfill, unsigned pdone, unsigned gfirst, unsigned n,
                                                     const bn_f4* __restrict__ src, const bn_u32* leaf_first,
                                                     const bn_u32* leaf_start, bn_f4* pstage, bn_u32* self_pos)
{
    for (unsigned s = lid; s < take; s += WALK_WG) {
        const unsigned q = w + s;
        const unsigned lo = walk_leaf_of(q, leaf_start, tl);
        const unsigned p = leaf_first[lo] + (q - leaf_start[lo]);
        pstage[pfill + s] = __ldg(&src[p]);
        if (p - gfirst < n) self_pos[p - gfirst] = pdone + pfill + s; /* grafted: p >= n_local */
    }
}

/* The end of a group for a thread of share 0 (see walk.cl): its particle's k partial sums (pstage[slot + j n]) added
 * in order and written with the particle's counts when count_each != 0: the cells it met (ccount) and the particles,
 * pdone + pfill entries of its particle list less itself if it was among them (self_pos). Returns the latter. */
__device__ __forceinline__ unsigned walk_store_particle(unsigned lid, unsigned slot, unsigned k, unsigned n,
                                                        unsigned gfirst, unsigned pdone, unsigned pfill,
                                                        unsigned ccount, const bn_f4* pstage, const bn_u32* self_pos,
                                                        bn_f4* acc_pot, bn_u32* pp_count, bn_u32* pc_count,
                                                        bn_u32 count_each)
{
    bn_f4 sum = pstage[lid];
    for (unsigned j = 1; j < k; ++j) {
        const bn_f4 o = pstage[lid + j * n];
        sum.x += o.x;
        sum.y += o.y;
        sum.z += o.z;
        sum.w += o.w;
    }
    const unsigned met_self = self_pos[slot] != BANYAN_WALK_NONE ? 1u : 0u;
    const unsigned i = gfirst + slot;
    acc_pot[i] = sum;
    if (count_each) {
        pp_count[i] = pdone + pfill - met_self;
        pc_count[i] = ccount;
    }
    return pdone + pfill - met_self;
}

/* The totals: the block's sums of the threads' counts, one atomic each per block (shuffles within each warp, then
 * thread 0 adds up the warps' sums, sum_pp and sum_pc). Every thread calls this; one barrier. */
__device__ __forceinline__ void walk_add_totals(unsigned lid, bn_u64 my_pp, bn_u64 my_pc, bn_u64* sum_pp,
                                                bn_u64* sum_pc, bn_u64* totals)
{
#pragma unroll
    for (unsigned off = bn_warp_size / 2; off > 0; off >>= 1) {
        my_pp += __shfl_down_sync(BN_FULL_MASK, my_pp, off);
        my_pc += __shfl_down_sync(BN_FULL_MASK, my_pc, off);
    }
    if (lid % bn_warp_size == 0) {
        sum_pp[lid / bn_warp_size] = my_pp;
        sum_pc[lid / bn_warp_size] = my_pc;
    }
    __syncthreads();
    if (lid == 0) {
        bn_u64 pp = 0, pc = 0;
        for (unsigned w = 0; w < WALK_WARPS; ++w) {
            pp += sum_pp[w];
            pc += sum_pc[w];
        }
        if (pp) bn_atomic_add_u64(totals, pp);
        if (pc) bn_atomic_add_u64(totals + 1, pc);
    }
}

/* The walk (see walk.cl). Block BANYAN_WALK_WG; shared memory about 21 KiB (BANYAN_WALK_WG 128, BANYAN_WALK_LIST
 * 1024): the two level lists, the staged cells and particles, the chunk's opened leaves and the scan. Launch
 * bounds ask for 1024 resident threads per multiprocessor (at most 64 registers): without them ptxas spills. */
__global__ void __launch_bounds__(BANYAN_WALK_WG, 1024 / BANYAN_WALK_WG)
    walkForces(const bn_f4* __restrict__ pos, const bn_f4* __restrict__ src, const bn_f4* __restrict__ mac,
               const bn_u2* __restrict__ link, const bn_f4* __restrict__ cell_com, const bn_f4* __restrict__ cell_quad0,
               const bn_f4* __restrict__ cell_quad1, const bn_u32* __restrict__ group_first,
               const bn_u32* __restrict__ group_count, const bn_f4* __restrict__ group_lo,
               const bn_f4* __restrict__ group_hi, const bn_u32* __restrict__ group_total, float eps2,
               bn_u32* next_group, bn_u32* spill, bn_u32 spill_cap, bn_u32* status, bn_u64* totals, bn_f4* acc_pot,
               bn_u32* pp_count, bn_u32* pc_count, bn_u32 count_each, const bn_u32* __restrict__ roots, bn_u32 nroots,
               const float* __restrict__ rel, const bn_f4* __restrict__ acc_old, float alpha)
{
    __shared__ bn_u32 list_a[WALK_LIST];
    __shared__ bn_u32 list_b[WALK_LIST];
    __shared__ bn_u32 clist[2 * WALK_WG];
    __shared__ bn_f4 cstage[3 * WALK_WG];
    __shared__ bn_f4 pstage[2 * WALK_WG];
    __shared__ bn_u32 leaf_first[WALK_WG];
    __shared__ bn_u32 leaf_start[WALK_WG];
    __shared__ bn_u32 self_pos[BANYAN_N_CRIT];
    __shared__ float old_a[BANYAN_N_CRIT];
    __shared__ bn_u64 warp_total[WALK_WARPS];
    __shared__ bn_u64 sum_pp[WALK_WARPS], sum_pc[WALK_WARPS];
    __shared__ bn_u32 group_slot;

    const unsigned lid = threadIdx.x;
    bn_u32* const spill_a = spill + static_cast<bn_u64>(blockIdx.x) * 2u * spill_cap;
    bn_u32* const spill_b = spill_a + spill_cap;
    const unsigned list_max = WALK_LIST + spill_cap;
    bn_u64 my_pp = 0, my_pc = 0;
    const bn_u32 ngroups = group_total[0]; /* on the device: see walk.cl */

    unsigned g = walk_next_group(lid, next_group, &group_slot);
    while (g < ngroups) {
        const unsigned gfirst = group_first[g];
        const unsigned n = group_count[g];
        const bn_f4 glo = group_lo[g];
        const bn_f4 ghi = group_hi[g];
        const unsigned k = WALK_WG / n;
        const unsigned sub = lid / n;        /* threads 0..n-1 take share 0 of particles 0..n-1, and so on, so that */
        const unsigned slot = lid - sub * n; /* a warp mostly reads one staged entry at a time (broadcast) */
        const bool active = sub < k;
        const bn_f4 me = active ? pos[gfirst + slot] : make_float4(0.f, 0.f, 0.f, 0.f);
        bn_f4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
        if (lid < n) {
            self_pos[lid] = BANYAN_WALK_NONE;
            if (alpha > 0.0f) old_a[lid] = acc_old[gfirst + lid].w;
        }
        walk_load_roots(lid, roots, nroots, list_max, list_a, spill_a, status);
        bn_u32* cur = list_a;
        bn_u32* nxt = list_b;
        bn_u32* cur_g = spill_a;
        bn_u32* nxt_g = spill_b;
        unsigned ncur = min(nroots, list_max), cfill = 0, pfill = 0, pdone = 0, ccount = 0;
        __syncthreads();
        const float rel_scale = walk_group_scale(alpha, old_a, n);

        while (ncur > 0) {
            unsigned nnext = 0;
            for (unsigned base = 0; base < ncur; base += WALK_WG) {
                /* Test one cell per thread (walk_accepts); v packs accepted cells (bits 0-9), opened leaves (10-19),
                 * children (20-31), particles (32-63). */
                const unsigned i = base + lid;
                bn_u64 v = 0;
                unsigned cell = 0, first = 0, cnt = 0;
                bool accept = false, leaf = false, node = false;
                if (i < ncur) {
                    cell = i < WALK_LIST ? cur[i] : cur_g[i - WALK_LIST];
                    const bn_f4 m = __ldg(&mac[cell]);
                    const uint2 lk = __ldg(&link[cell]);
                    first = lk.x;
                    cnt = bn_tree_count(lk.y);
                    /* A cell sent without its particles is accepted (see walk.cl). */
                    if (walk_accepts(m, glo, ghi, alpha, rel_scale, rel, cell) || lk.y == BANYAN_TREE_LEAF_BIT) {
                        accept = true;
                        v = 1ull;
                    } else if (bn_tree_is_leaf(lk.y)) {
                        leaf = true;
                        v = (1ull << BANYAN_WALK_LEAF_SHIFT) | (static_cast<bn_u64>(cnt) << BANYAN_WALK_PART_SHIFT);
                    } else {
                        node = true;
                        v = static_cast<bn_u64>(cnt) << BANYAN_WALK_NODE_SHIFT;
                    }
                }
                bn_u64 total; // the __syncthreads() below separates this scan from the next
                const bn_u64 ex = bn_block_exclusive_serial<bn_u64, WALK_WG>(v, warp_total, lid, total);
                const unsigned ta = static_cast<unsigned>(total & BANYAN_WALK_COUNT_MASK);
                const unsigned tl = static_cast<unsigned>((total >> BANYAN_WALK_LEAF_SHIFT) & BANYAN_WALK_COUNT_MASK);
                const unsigned tc = static_cast<unsigned>((total >> BANYAN_WALK_NODE_SHIFT) & BANYAN_WALK_NODE_MASK);
                const unsigned tp = static_cast<unsigned>(total >> BANYAN_WALK_PART_SHIFT);
                if (accept) {
                    clist[cfill + static_cast<unsigned>(ex & BANYAN_WALK_COUNT_MASK)] = cell;
                } else if (leaf) {
                    const unsigned o = static_cast<unsigned>((ex >> BANYAN_WALK_LEAF_SHIFT) & BANYAN_WALK_COUNT_MASK);
                    leaf_first[o] = first;
                    leaf_start[o] = static_cast<unsigned>(ex >> BANYAN_WALK_PART_SHIFT);
                } else if (node) {
                    const unsigned o =
                        nnext + static_cast<unsigned>((ex >> BANYAN_WALK_NODE_SHIFT) & BANYAN_WALK_NODE_MASK);
                    walk_push_children(o, first, cnt, list_max, nxt, nxt_g);
                }
                if (lid == 0 && nnext + tc > list_max) bn_atomic_max_u32(status, nnext + tc);
                nnext += tc;
                cfill += ta;
                ccount += ta;
                __syncthreads();

                if (cfill >= WALK_WG) {
                    acc = walk_cell_pass(acc, me, lid, sub, k, active, WALK_WG, cfill, eps2, cell_com, cell_quad0,
                                         cell_quad1, clist, cstage);
                    cfill -= WALK_WG;
                }
                for (unsigned w = 0; w < tp;) {
                    const unsigned take = min(2u * WALK_WG - pfill, tp - w);
                    walk_stage_particles(lid, w, take, tl, pfill, pdone, gfirst, n, src, leaf_first, leaf_start, pstage,
                                         self_pos);
                    __syncthreads();
                    pfill += take;
                    w += take;
                    if (pfill >= WALK_WG) {
                        acc = walk_particle_pass(acc, me, lid, slot, sub, k, active, WALK_WG, pfill, pdone, eps2,
                                                 pstage, self_pos);
                        pfill -= WALK_WG;
                        pdone += WALK_WG;
                    }
                }
            }
            bn_u32* t = cur;
            cur = nxt;
            nxt = t;
            bn_u32* tg = cur_g;
            cur_g = nxt_g;
            nxt_g = tg;
            ncur = min(nnext, list_max);
        }

        __syncthreads();
        if (cfill > 0)
            acc = walk_cell_pass(acc, me, lid, sub, k, active, cfill, cfill, eps2, cell_com, cell_quad0, cell_quad1,
                                 clist, cstage);
        __syncthreads();
        if (pfill > 0)
            acc = walk_particle_pass(acc, me, lid, slot, sub, k, active, pfill, pfill, pdone, eps2, pstage, self_pos);
        pstage[lid] = acc;
        __syncthreads();
        if (active && sub == 0) {
            my_pp += walk_store_particle(lid, slot, k, n, gfirst, pdone, pfill, ccount, pstage, self_pos, acc_pot,
                                         pp_count, pc_count, count_each);
            my_pc += ccount;
        }
        __syncthreads(); /* everyone has read group_slot */
        g = walk_next_group(lid, next_group, &group_slot);
    }

    walk_add_totals(lid, my_pp, my_pc, sum_pp, sum_pc, totals);
}
BANYAN_CUDA_KERNEL(walkForces);

/* Block time steps: flags[g] = 1 when group g holds a particle with rung >= level (see walk.cl). Block BANYAN_WG; no
 * shared memory. */
__global__ void __launch_bounds__(BANYAN_WG)
    walkGroupFlags(const bn_u32* group_first, const bn_u32* group_count, const bn_u32* rung, bn_u32 ngroups,
                   bn_u32 level, bn_u32* flags)
{
    const bn_u32 g = blockIdx.x * blockDim.x + threadIdx.x;
    if (g >= ngroups) return;
    const bn_u32 first = group_first[g], end = first + group_count[g];
    bn_u32 active = 0u;
    for (bn_u32 i = first; i < end; ++i)
        active |= rung[i] >= level ? 1u : 0u;
    flags[g] = active;
}
BANYAN_CUDA_KERNEL(walkGroupFlags);

/* The listed groups' data copied to the front of the out_ arrays (see walk.cl). Block BANYAN_WG; no shared memory. */
__global__ void __launch_bounds__(BANYAN_WG)
    walkGroupGather(const bn_u32* list, const bn_u32* total, const bn_u32* group_first, const bn_u32* group_count,
                    const bn_f4* group_lo, const bn_f4* group_hi, bn_u32 ngroups, bn_u32* out_first, bn_u32* out_count,
                    bn_f4* out_lo, bn_f4* out_hi)
{
    const bn_u32 j = blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= ngroups || j >= total[0]) return;
    const bn_u32 g = list[j];
    out_first[j] = group_first[g];
    out_count[j] = group_count[g];
    out_lo[j] = group_lo[g];
    out_hi[j] = group_hi[g];
}
BANYAN_CUDA_KERNEL(walkGroupGather);

/* Results from tree order back to the caller's order: out[ids[i]] = in[i], the counts only when with_counts != 0
 * (otherwise their four buffers are not touched). Block BANYAN_WG; no shared memory. */
__global__ void __launch_bounds__(BANYAN_WG)
    walkScatter(const bn_f4* acc_pot, const bn_u32* pp_count, const bn_u32* pc_count, const bn_u32* ids, bn_u32 n,
                bn_f4* acc_out, bn_u32* pp_out, bn_u32* pc_out, bn_u32 with_counts)
{
    const bn_u32 i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const bn_u32 j = ids[i];
    acc_out[j] = acc_pot[i];
    if (with_counts) {
        pp_out[j] = pp_count[i];
        pc_out[j] = pc_count[i];
    }
}
BANYAN_CUDA_KERNEL(walkScatter);
