/**
 * @file walk.cl
 * @brief The tree walk (paper sections 2.2, 3.2, 3.3; driver: core/gravity/forces.cpp): accelerations and potentials of
 *        every group of particles from the octree's cells and particles. The CUDA twin is kernels_cu/walk.cu.
 *
 * One work-group of BANYAN_WALK_WG work-items walks one group (<= N_crit particles) at a time, breadth-first: the
 * cells of the current level are tested in chunks of BANYAN_WALK_WG (one per work-item) with the opening test
 * d > l / theta + delta, d the distance from the group's bounding box to the cell's centre of mass. Accepted cells
 * go to the cell list, opened leaves put their particles on the particle list, opened nodes put their children on
 * the next-level list; positions in the lists come from one work-group scan per chunk. The lists are staged in
 * local memory and evaluated in passes of BANYAN_WALK_WG entries as soon as they hold that many (Nyland et al.);
 * what is left is evaluated at the end. The level lists keep BANYAN_WALK_LIST entries in local memory and the rest
 * in the work-group's slice of a global spill buffer; a list longer than both is reported in status[0] (the host
 * then walks again with a larger spill buffer), so no interaction is ever lost silently.
 *
 * When a group has n particles, k = BANYAN_WALK_WG / n work-items share each particle: work-item lid serves
 * particle lid % n and takes every k-th entry of each pass, starting at lid / n (so that neighbouring work-items
 * mostly read the same staged entry); the k partial sums are added at the end in a fixed order. A particle meets
 * itself on the particle list once at most (its leaf is opened once); that entry is skipped by position, so that
 * potentials match direct summation. Work-groups are persistent: each takes the next group from an atomic counter
 * until none is left (no work-group ever waits for another). Nothing here assumes a warp or sub-group: every
 * exchange through local memory is separated by a barrier.
 *
 * The kernel reads as its steps, each a function of the same name in both languages: walk_next_group (the
 * persistent work-groups' counter), walk_load_roots (the first level list), walk_group_scale (the relative
 * criterion's scale), walk_accepts (the opening test), walk_push_children (the queue refill: an opened node's
 * children onto the next level's list), walk_stage_particles (leaf staging: the opened leaves' particles onto the
 * particle list), walk_cell_pass and walk_particle_pass (the interactions), walk_store_particle (a particle's
 * result and counts) and walk_add_totals. Barriers are in the kernel or in functions every work-item calls.
 *
 * Why a cell that holds a particle of the group is never accepted (so r > 0 in bn_interact_pc and a particle's own
 * leaf is always opened): for theta <= 1 (the driver refuses more), d <= |x - com| <= sqrt(3) / 2 l + delta
 * < l / theta + delta for any particle x of the cell.
 */

#define WALK_WG BANYAN_WALK_WG
#define WALK_LIST BANYAN_WALK_LIST

/* Per-cell data of one walk, for the opening test and the traversal: mac = (centre of mass, (l / theta + delta)^2)
 * and link = (cell_first, cell_count), one 16-byte and one 8-byte load per tested cell. inv_theta may be +inf
 * (theta = 0: every cell is opened). Work-group BANYAN_WG; no local memory. */
__kernel __attribute__((reqd_work_group_size(BANYAN_WG, 1, 1))) void walkPrepare(
    __global const bn_f4* cell_com, __global const bn_f4* cell_quad1, __global const bn_u32* cell_first,
    __global const bn_u32* cell_count, bn_u32 ncells, float inv_theta, __global bn_f4* mac, __global bn_u2* link)
{
    const uint c = get_global_id(0);
    if (c >= ncells) return;
    const bn_f4 com = cell_com[c];
    const bn_f4 q1 = cell_quad1[c];
    const float r = bn_open_radius(q1, inv_theta); /* l / theta + delta */
    mac[c] = (bn_f4)(com.x, com.y, com.z, r * r);
    link[c] = (uint2)(cell_first[c], cell_count[c]);
}

/* The relative criterion's per-cell factor (bn_rel_cell of its mass and size; the walk then takes, with alpha > 0,
 * the larger of the geometric radius and the relative one, bn_rel_group of the smallest acc_old[i].w = previous
 * |a| of the group's particles). Work-group BANYAN_WG. */
__kernel __attribute__((reqd_work_group_size(BANYAN_WG, 1, 1))) void walkPrepareRelative(
    __global const bn_f4* cell_com, __global const bn_f4* cell_quad1, bn_u32 ncells, __global float* rel)
{
    const uint c = get_global_id(0);
    if (c >= ncells) return;
    rel[c] = bn_rel_cell(cell_com[c].w, cell_quad1[c].w);
}

/* One pass over the first `count` (<= WALK_WG) accepted cells of clist (clist holds `fill` in all): each work-item
 * stages one cell as three consecutive float4 of cstage (centre of mass and mass, then the quadrupole as
 * bn_quad_staged0/1 give it), then every work-item adds the cells of its share to its particle. Entries beyond
 * WALK_WG move down to the front. One barrier; the caller's next barrier comes before cstage or clist change. */
inline bn_f4 walk_cell_pass(bn_f4 acc, bn_f4 me, uint lid, uint sub, uint k, int active, uint count, uint fill,
                            float eps2, __global const bn_f4* cell_com, __global const bn_f4* cell_quad0,
                            __global const bn_f4* cell_quad1, __local bn_u32* clist, __local bn_f4* cstage)
{
    if (lid < count) {
        const bn_u32 c = clist[lid];
        const bn_f4 q0 = cell_quad0[c];
        const bn_f4 q1 = cell_quad1[c];
        cstage[3 * lid] = cell_com[c];
        cstage[3 * lid + 1] = bn_quad_staged0(q0);
        cstage[3 * lid + 2] = bn_quad_staged1(q0, q1, eps2);
    }
    const int moves = WALK_WG + lid < fill;
    const bn_u32 rest = moves ? clist[WALK_WG + lid] : 0u;
    barrier(CLK_LOCAL_MEM_FENCE);
    if (moves) clist[lid] = rest;
    if (active) {
        for (uint j = sub; j < count; j += k) {
            __local const bn_f4* e = cstage + 3 * j;
            const bn_f4 s = e[0];
            acc = bn_interact_pc(acc, s.x - me.x, s.y - me.y, s.z - me.z, s.w, e[1], e[2], eps2);
        }
    }
    return acc;
}

/* One pass over the first `count` (<= WALK_WG) staged particles (pstage holds `fill`; its entry j is number
 * done + j of the group's particle stream). The particle's own entry, if in this pass, is skipped by position
 * (self_pos). Ends with a barrier, after which entries beyond WALK_WG move down to the front. */
inline bn_f4 walk_particle_pass(bn_f4 acc, bn_f4 me, uint lid, uint slot, uint sub, uint k, int active, uint count,
                                uint fill, uint done, float eps2, __local bn_f4* pstage, __local bn_u32* self_pos)
{
    const int moves = WALK_WG + lid < fill;
    const bn_f4 rest = moves ? pstage[WALK_WG + lid] : (bn_f4)(0.0f);
    if (active) {
        const uint self = self_pos[slot] - done; /* huge when absent or in an earlier pass */
        const int mine = self < count && self >= sub && (self - sub) % k == 0u;
        const uint end = mine ? self : count;
        for (uint j = sub; j < end; j += k) {
            const bn_f4 s = pstage[j];
            acc = bn_interact_pp(acc, s.x - me.x, s.y - me.y, s.z - me.z, s.w, eps2);
        }
        if (mine) {
            for (uint j = self + k; j < count; j += k) {
                const bn_f4 s = pstage[j];
                acc = bn_interact_pp(acc, s.x - me.x, s.y - me.y, s.z - me.z, s.w, eps2);
            }
        }
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    if (moves) pstage[lid] = rest;
    return acc;
}

/* The next group for the work-group, from the counter next_group (0 before the launch). Every work-item calls
 * this: one barrier, after which each reads group_slot; a barrier must separate that read from the next call. */
inline uint walk_next_group(uint lid, __global bn_u32* next_group, __local bn_u32* group_slot)
{
    if (lid == 0) *group_slot = bn_atomic_add_u32(next_group, 1u);
    barrier(CLK_LOCAL_MEM_FENCE);
    return *group_slot;
}

/* The first level list: the nroots cells roots[] (the local tree's root and the roots of the grafted trees), those
 * beyond WALK_LIST in the spill slice list_g (hence the global fence of the caller's barrier); a list longer than
 * list_max is reported in status. */
inline void walk_load_roots(uint lid, __global const bn_u32* roots, bn_u32 nroots, uint list_max,
                            __local bn_u32* list, __global bn_u32* list_g, __global bn_u32* status)
{
    for (uint j = lid; j < nroots && j < list_max; j += WALK_WG) {
        if (j < WALK_LIST)
            list[j] = roots[j];
        else
            list_g[j - WALK_LIST] = roots[j];
    }
    if (lid == 0 && nroots > list_max) bn_atomic_max_u32(status, nroots);
}

/* The relative criterion's scale for a group: bn_rel_group of the smallest previous acceleration of its n particles
 * (old_a); 0 when alpha = 0. */
inline float walk_group_scale(float alpha, __local const float* old_a, uint n)
{
    float rel_scale = 0.0f;
    if (alpha > 0.0f) {
        float a = old_a[0];
        for (uint j = 1; j < n; ++j) a = fmin(a, old_a[j]);
        rel_scale = bn_rel_group(alpha, a);
    }
    return rel_scale;
}

/* The opening test: whether the group of box [glo, ghi] accepts the cell whose mac entry is m (centre of mass,
 * squared opening radius), i.e. the squared distance d^2 from the box to the centre of mass exceeds the squared
 * radius: m.w = (l / theta + delta)^2, with alpha > 0 the larger of it and the relative criterion's,
 * rel[cell] * rel_scale. */
inline int walk_accepts(bn_f4 m, bn_f4 glo, bn_f4 ghi, float alpha, float rel_scale,
                        __global const float* rel, uint cell)
{
    const float dx = fmax(fmax(glo.x - m.x, m.x - ghi.x), 0.0f);
    const float dy = fmax(fmax(glo.y - m.y, m.y - ghi.y), 0.0f);
    const float dz = fmax(fmax(glo.z - m.z, m.z - ghi.z), 0.0f);
    const float r2 = alpha > 0.0f ? fmax(m.w, rel[cell] * rel_scale) : m.w;
    return dx * dx + dy * dy + dz * dz > r2;
}

/* The queue refill: an opened node's cnt children, first .. first + cnt - 1, onto the next level's list from
 * position o: below WALK_LIST in local memory, then in the spill slice; beyond list_max they are left out (the
 * caller reports the length in status). */
inline void walk_push_children(uint o, uint first, uint cnt, uint list_max, __local bn_u32* nxt,
                               __global bn_u32* nxt_g)
{
    for (uint j = 0; j < cnt; ++j) {
        const uint q = o + j;
        if (q < WALK_LIST) nxt[q] = first + j;
        else if (q < list_max) nxt_g[q - WALK_LIST] = first + j;
    }
}

/* The opened leaf that holds entry q of the chunk's particle stream: the last of the tl leaves whose start is <= q
 * (binary search). */
inline uint walk_leaf_of(uint q, __local const bn_u32* leaf_start, uint tl)
{
    uint lo = 0, hi = tl - 1;
    while (lo < hi) {
        const uint mid = (lo + hi + 1) >> 1;
        if (leaf_start[mid] <= q) lo = mid;
        else hi = mid - 1;
    }
    return lo;
}

/* Leaf staging: entries w .. w + take - 1 of the chunk's particle stream (the opened leaves' particles, in order)
 * onto the particle list after its pfill entries, one work-item per entry; a particle of the group notes its place
 * in the group's stream (self_pos, for walk_particle_pass). No barrier: the caller's follows. */
inline void walk_stage_particles(uint lid, uint w, uint take, uint tl, uint pfill, uint pdone, uint gfirst, uint n,
                                 __global const bn_f4* src, __local const bn_u32* leaf_first,
                                 __local const bn_u32* leaf_start, __local bn_f4* pstage, __local bn_u32* self_pos)
{
    for (uint s = lid; s < take; s += WALK_WG) {
        const uint q = w + s;
        const uint lo = walk_leaf_of(q, leaf_start, tl);
        const uint p = leaf_first[lo] + (q - leaf_start[lo]);
        pstage[pfill + s] = src[p];
        if (p - gfirst < n) self_pos[p - gfirst] = pdone + pfill + s;
    }
}

/* The end of a group for a work-item of share 0: its particle's k partial sums (pstage[slot + j n]) added in order
 * and written with the particle's counts when count_each != 0: the cells it met (ccount) and the particles,
 * pdone + pfill entries of its particle list less itself if it was among them (self_pos). Returns the latter. */
inline uint walk_store_particle(uint lid, uint slot, uint k, uint n, uint gfirst, uint pdone, uint pfill, uint ccount,
                                __local const bn_f4* pstage, __local const bn_u32* self_pos,
                                __global bn_f4* acc_pot, __global bn_u32* pp_count, __global bn_u32* pc_count,
                                bn_u32 count_each)
{
    bn_f4 sum = pstage[lid];
    for (uint j = 1; j < k; ++j) sum += pstage[lid + j * n];
    const uint met_self = self_pos[slot] != BANYAN_WALK_NONE ? 1u : 0u;
    const uint i = gfirst + slot;
    acc_pot[i] = sum;
    if (count_each) {
        pp_count[i] = pdone + pfill - met_self;
        pc_count[i] = ccount;
    }
    return pdone + pfill - met_self;
}

/* The totals: the work-group's sums of the work-items' counts, one atomic each per work-group (through local
 * memory, work-item 0 adding them up in order). Every work-item calls this; one barrier. */
inline void walk_add_totals(uint lid, ulong my_pp, ulong my_pc, __local ulong* scan_buf, __global bn_u64* totals)
{
    scan_buf[lid] = my_pp;
    scan_buf[WALK_WG + lid] = my_pc;
    barrier(CLK_LOCAL_MEM_FENCE);
    if (lid == 0) {
        ulong pp = 0, pc = 0;
        for (uint j = 0; j < WALK_WG; ++j) {
            pp += scan_buf[j];
            pc += scan_buf[WALK_WG + j];
        }
        if (pp) bn_atomic_add_u64(totals, pp);
        if (pc) bn_atomic_add_u64(totals + 1, pc);
    }
}

/* The walk (see the file comment). Groups come from *next_group (0 before the launch). Per particle i of the tree
 * order: acc_pot[i] = (ax, ay, az, phi) and, when count_each != 0, pp_count[i] / pc_count[i] = particles / cells it
 * interacted with (otherwise those two are not touched and may be one-element buffers). totals
 * gets the sums of both counts over all particles; status[0] the length a level list needed when it outgrew
 * WALK_LIST + spill_cap (0 beforehand). spill holds 2 spill_cap entries per work-group.
 * The groups' particles (the targets) are in pos; the walk's first level list holds the nroots cells roots[] and
 * opened leaves index src. On one rank: one root (0), src the same buffer as pos. Over ranks: the local tree's root
 * and the roots of the other ranks' local essential trees, grafted behind the local tree's cells and particles in
 * the same arrays (core/gravity/forces.hpp, RemoteTrees), so each group walks once over all trees; a grafted
 * particle lies beyond every local index, so it is never taken for the target itself.
 * alpha > 0: the relative criterion on top of the geometric test (bn_rel_cell in device_shared.h), with rel the
 * per-cell factors of walkPrepareRelative and acc_old[i].w the previous |a| of particle i (tree order); with
 * alpha = 0 neither is read.
 * Work-group BANYAN_WALK_WG; local memory about 22 KiB (BANYAN_WALK_WG 128, BANYAN_WALK_LIST 1024): the two level
 * lists, the staged cells and particles, the chunk's opened leaves and the scan. */
__kernel __attribute__((reqd_work_group_size(BANYAN_WALK_WG, 1, 1))) void walkForces(
    __global const bn_f4* restrict pos, __global const bn_f4* restrict src, __global const bn_f4* restrict mac,
    __global const bn_u2* restrict link,
    __global const bn_f4* restrict cell_com, __global const bn_f4* restrict cell_quad0,
    __global const bn_f4* restrict cell_quad1, __global const bn_u32* restrict group_first,
    __global const bn_u32* restrict group_count, __global const bn_f4* restrict group_lo,
    __global const bn_f4* restrict group_hi, __global const bn_u32* restrict group_total, float eps2,
    __global bn_u32* next_group,
    __global bn_u32* spill, bn_u32 spill_cap, __global bn_u32* status, __global bn_u64* totals,
    __global bn_f4* acc_pot, __global bn_u32* pp_count, __global bn_u32* pc_count, bn_u32 count_each,
    __global const bn_u32* restrict roots, bn_u32 nroots, __global const float* restrict rel,
    __global const bn_f4* restrict acc_old, float alpha)
{
    __local bn_u32 list_a[WALK_LIST];
    __local bn_u32 list_b[WALK_LIST];
    __local bn_u32 clist[2 * WALK_WG];
    __local bn_f4 cstage[3 * WALK_WG];
    __local bn_f4 pstage[2 * WALK_WG];
    __local bn_u32 leaf_first[WALK_WG];
    __local bn_u32 leaf_start[WALK_WG];
    __local bn_u32 self_pos[BANYAN_N_CRIT];
    __local float old_a[BANYAN_N_CRIT];
    __local ulong scan_buf[2 * WALK_WG];
    __local bn_u32 group_slot;

    const uint lid = get_local_id(0);
    __global bn_u32* const spill_a = spill + (ulong)get_group_id(0) * 2u * spill_cap;
    __global bn_u32* const spill_b = spill_a + spill_cap;
    const uint list_max = WALK_LIST + spill_cap;
    ulong my_pp = 0, my_pc = 0; /* this work-item's share of the totals */
    const uint ngroups = group_total[0]; /* on the device: a walk over the active groups needs no host round trip */

    /* The loop over groups tests at its top only (PoCL 3.1 miscompiles an exit after a barrier mid-loop). */
    uint g = walk_next_group(lid, next_group, &group_slot);
    while (g < ngroups) {
        const uint gfirst = group_first[g];
        const uint n = group_count[g];
        const bn_f4 glo = group_lo[g];
        const bn_f4 ghi = group_hi[g];
        const uint k = WALK_WG / n;
        const uint sub = lid / n; /* work-items 0..n-1 take share 0 of particles 0..n-1, and so on, so that */
        const uint slot = lid - sub * n; /* a warp or wavefront mostly reads one staged entry at a time */
        const int active = sub < k;
        const bn_f4 me = active ? pos[gfirst + slot] : (bn_f4)(0.0f);
        bn_f4 acc = (bn_f4)(0.0f);
        if (lid < n) {
            self_pos[lid] = BANYAN_WALK_NONE;
            if (alpha > 0.0f) old_a[lid] = acc_old[gfirst + lid].w;
        }
        walk_load_roots(lid, roots, nroots, list_max, list_a, spill_a, status);
        __local bn_u32* cur = list_a;
        __local bn_u32* nxt = list_b;
        __global bn_u32* cur_g = spill_a;
        __global bn_u32* nxt_g = spill_b;
        uint ncur = min(nroots, list_max), cfill = 0, pfill = 0, pdone = 0, ccount = 0;
        barrier(CLK_LOCAL_MEM_FENCE | CLK_GLOBAL_MEM_FENCE);
        const float rel_scale = walk_group_scale(alpha, old_a, n);

        while (ncur > 0) {
            uint nnext = 0;
            for (uint base = 0; base < ncur; base += WALK_WG) {
                /* Test one cell per work-item (walk_accepts). v packs what it adds: accepted cells (bits 0-9),
                 * opened leaves (10-19), children (20-31), particles (32-63). */
                const uint i = base + lid;
                ulong v = 0;
                uint cell = 0, first = 0, cnt = 0;
                int accept = 0, leaf = 0, node = 0;
                if (i < ncur) {
                    cell = i < WALK_LIST ? cur[i] : cur_g[i - WALK_LIST];
                    const bn_f4 m = mac[cell];
                    const uint2 lk = link[cell];
                    first = lk.x;
                    cnt = bn_tree_count(lk.y);
                    /* A cell that came from another rank without its particles (a leaf of none) is accepted:
                     * its multipoles are all there is. The force walk accepts it anyway (its sender tested this
                     * rank's boxes); a probe at predicted positions, in wider boxes, may not (Simulation). */
                    if (walk_accepts(m, glo, ghi, alpha, rel_scale, rel, cell) || lk.y == BANYAN_TREE_LEAF_BIT) {
                        accept = 1;
                        v = 1ul;
                    } else if (bn_tree_is_leaf(lk.y)) {
                        leaf = 1;
                        v = (1ul << BANYAN_WALK_LEAF_SHIFT) | ((ulong)cnt << BANYAN_WALK_PART_SHIFT);
                    } else {
                        node = 1;
                        v = (ulong)cnt << BANYAN_WALK_NODE_SHIFT;
                    }
                }
                ulong total;
                const ulong ex = bn_walk_exclusive_u64(v, scan_buf, lid, &total);
                const uint ta = (uint)(total & BANYAN_WALK_COUNT_MASK);
                const uint tl = (uint)((total >> BANYAN_WALK_LEAF_SHIFT) & BANYAN_WALK_COUNT_MASK);
                const uint tc = (uint)((total >> BANYAN_WALK_NODE_SHIFT) & BANYAN_WALK_NODE_MASK);
                const uint tp = (uint)(total >> BANYAN_WALK_PART_SHIFT);
                if (accept) {
                    clist[cfill + (uint)(ex & BANYAN_WALK_COUNT_MASK)] = cell;
                } else if (leaf) {
                    const uint o = (uint)((ex >> BANYAN_WALK_LEAF_SHIFT) & BANYAN_WALK_COUNT_MASK);
                    leaf_first[o] = first;
                    leaf_start[o] = (uint)(ex >> BANYAN_WALK_PART_SHIFT);
                } else if (node) {
                    const uint o = nnext + (uint)((ex >> BANYAN_WALK_NODE_SHIFT) & BANYAN_WALK_NODE_MASK);
                    walk_push_children(o, first, cnt, list_max, nxt, nxt_g);
                }
                if (lid == 0 && nnext + tc > list_max) bn_atomic_max_u32(status, nnext + tc);
                nnext += tc;
                cfill += ta;
                ccount += ta;
                barrier(CLK_LOCAL_MEM_FENCE | CLK_GLOBAL_MEM_FENCE);

                if (cfill >= WALK_WG) {
                    acc = walk_cell_pass(acc, me, lid, sub, k, active, WALK_WG, cfill, eps2, cell_com, cell_quad0,
                                         cell_quad1, clist, cstage);
                    cfill -= WALK_WG;
                }
                /* The opened leaves' particles, tp in all, onto the particle list in windows that fit it. */
                for (uint w = 0; w < tp;) {
                    const uint take = min(2u * WALK_WG - pfill, tp - w);
                    walk_stage_particles(lid, w, take, tl, pfill, pdone, gfirst, n, src, leaf_first, leaf_start,
                                         pstage, self_pos);
                    barrier(CLK_LOCAL_MEM_FENCE);
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
            __local bn_u32* t = cur;
            cur = nxt;
            nxt = t;
            __global bn_u32* tg = cur_g;
            cur_g = nxt_g;
            nxt_g = tg;
            ncur = min(nnext, list_max);
        }

        /* What is left on both lists, then the k partial sums of each particle, in order. */
        barrier(CLK_LOCAL_MEM_FENCE);
        if (cfill > 0)
            acc = walk_cell_pass(acc, me, lid, sub, k, active, cfill, cfill, eps2, cell_com, cell_quad0, cell_quad1,
                                 clist, cstage);
        barrier(CLK_LOCAL_MEM_FENCE);
        if (pfill > 0)
            acc = walk_particle_pass(acc, me, lid, slot, sub, k, active, pfill, pfill, pdone, eps2, pstage,
                                     self_pos);
        pstage[lid] = acc;
        barrier(CLK_LOCAL_MEM_FENCE);
        if (active && sub == 0) {
            my_pp += walk_store_particle(lid, slot, k, n, gfirst, pdone, pfill, ccount, pstage, self_pos, acc_pot,
                                         pp_count, pc_count, count_each);
            my_pc += ccount;
        }
        barrier(CLK_LOCAL_MEM_FENCE); /* everyone has read group_slot */
        g = walk_next_group(lid, next_group, &group_slot);
    }

    walk_add_totals(lid, my_pp, my_pc, scan_buf, totals);
}

/* Block time steps: flags[g] = 1 when group g holds a particle whose step ends now (rung >= level), else 0; the
 * driver compacts the flagged groups' indices (Backend::compact) and walkGroupGather copies their data, so that the
 * walk runs over the active groups only. Work-group BANYAN_WG; no local memory. */
__kernel __attribute__((reqd_work_group_size(BANYAN_WG, 1, 1))) void walkGroupFlags(
    __global const bn_u32* group_first, __global const bn_u32* group_count, __global const bn_u32* rung,
    bn_u32 ngroups, bn_u32 level, __global bn_u32* flags)
{
    const uint g = get_global_id(0);
    if (g >= ngroups) return;
    const uint first = group_first[g], end = first + group_count[g];
    uint active = 0u;
    for (uint i = first; i < end; ++i) active |= rung[i] >= level ? 1u : 0u;
    flags[g] = active;
}

/* The groups listed in list[0 .. total[0]) (indices, as the compaction of walkGroupFlags left them, in increasing
 * order) copied to the front of the out_ arrays, the walk's group arrays for a walk over them. ngroups bounds the
 * launch (all groups); work-items beyond total[0] do nothing. Work-group BANYAN_WG; no local memory. */
__kernel __attribute__((reqd_work_group_size(BANYAN_WG, 1, 1))) void walkGroupGather(
    __global const bn_u32* list, __global const bn_u32* total, __global const bn_u32* group_first,
    __global const bn_u32* group_count, __global const bn_f4* group_lo, __global const bn_f4* group_hi,
    bn_u32 ngroups, __global bn_u32* out_first, __global bn_u32* out_count, __global bn_f4* out_lo,
    __global bn_f4* out_hi)
{
    const uint j = get_global_id(0);
    if (j >= ngroups || j >= total[0]) return;
    const uint g = list[j];
    out_first[j] = group_first[g];
    out_count[j] = group_count[g];
    out_lo[j] = group_lo[g];
    out_hi[j] = group_hi[g];
}

/* Results from tree order back to the caller's order: out[ids[i]] = in[i] for the accelerations, and for both counts
 * when with_counts != 0 (otherwise their four buffers are not touched). Work-group BANYAN_WG; no local memory. */
__kernel __attribute__((reqd_work_group_size(BANYAN_WG, 1, 1))) void walkScatter(
    __global const bn_f4* acc_pot, __global const bn_u32* pp_count, __global const bn_u32* pc_count,
    __global const bn_u32* ids, bn_u32 n, __global bn_f4* acc_out, __global bn_u32* pp_out, __global bn_u32* pc_out,
    bn_u32 with_counts)
{
    const uint i = get_global_id(0);
    if (i >= n) return;
    const bn_u32 j = ids[i];
    acc_out[j] = acc_pot[i];
    if (with_counts) {
        pp_out[j] = pp_count[i];
        pc_out[j] = pc_count[i];
    }
}
