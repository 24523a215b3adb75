/**
 * @file tree_multipoles.cl
 * @brief Cell properties for the walk (paper sections 3.2 and 3.3; driver: Octree::compute_multipoles in
 *        core/tree/octree.cpp): mass, centre of mass and quadrupole of every cell, leaves first from their particles,
 *        then nodes one level at a time from the bottom up, in double precision; then single-precision storage with
 *        what the opening test d > size / theta + offset needs: (delta = |com - centre|, l) for the paper's
 *        criterion, (0, bmax) for bmax (tree_shared.h).
 *
 * Moments while summing: moments[k * stride + c] for k = 0 mass, 1..3 centre of mass, 4..9 Qxx Qyy Qzz Qxy Qxz Qyz
 * (about the centre of mass), 10 bmax. A massless cell takes its geometric centre as centre of mass. Each sum runs
 * in a fixed order (particles or children in index order), so the result does not change from run to run. The CUDA twin is
 * kernels_cu/tree_multipoles.cu.
 */

/* The centre of mass of a massless cell: its geometric centre. */
inline void tree_centre(__global const bn_u64* cell_key, __global const bn_u32* cell_level,
                        __global const bn_f4* frame, uint c, double* out)
{
    const bn_f4 f = frame[0];
    const int level = (int)cell_level[c];
    out[0] = bn_tree_cell_centre(cell_key[c], level, f.x, f.w, 0);
    out[1] = bn_tree_cell_centre(cell_key[c], level, f.y, f.w, 1);
    out[2] = bn_tree_cell_centre(cell_key[c], level, f.z, f.w, 2);
}

/* Moments of every leaf c < ncells from its particles: sums of m and m x, then Q about the centre of mass (a second
 * pass, so nothing cancels). Work-group BANYAN_WG; no local memory. */
__kernel __attribute__((reqd_work_group_size(BANYAN_WG, 1, 1))) void treeMultipoleLeaves(
    __global const bn_f4* pos, __global const bn_u64* cell_key, __global const bn_u32* cell_level,
    __global const bn_u32* cell_first, __global const bn_u32* cell_count, __global const bn_f4* frame,
    bn_u32 ncells, bn_u32 stride, __global double* moments)
{
    const uint c = get_global_id(0);
    if (c >= ncells || !bn_tree_is_leaf(cell_count[c])) return;
    const bn_u32 b = cell_first[c], e = b + bn_tree_count(cell_count[c]);
    double m = 0.0, sx = 0.0, sy = 0.0, sz = 0.0;
    for (bn_u32 i = b; i < e; ++i) {
        const bn_f4 p = pos[i];
        const double w = p.w;
        m += w;
        sx += w * p.x;
        sy += w * p.y;
        sz += w * p.z;
    }
    double com[3];
    if (m > 0.0) {
        com[0] = sx / m, com[1] = sy / m, com[2] = sz / m;
    } else {
        tree_centre(cell_key, cell_level, frame, c, com);
    }
    double q[6] = {0.0, 0.0, 0.0, 0.0, 0.0, 0.0};
    double b2 = 0.0;
    for (bn_u32 i = b; i < e; ++i) {
        const bn_f4 p = pos[i];
        const double w = p.w;
        const double dx = p.x - com[0], dy = p.y - com[1], dz = p.z - com[2];
        q[0] += w * dx * dx, q[1] += w * dy * dy, q[2] += w * dz * dz;
        q[3] += w * dx * dy, q[4] += w * dx * dz, q[5] += w * dy * dz;
        const double d2 = dx * dx + dy * dy + dz * dz;
        b2 = d2 > b2 ? d2 : b2;
    }
    moments[c] = m;
    for (int k = 0; k < 3; ++k) moments[(bn_u64)(k + 1) * stride + c] = com[k];
    for (int k = 0; k < 6; ++k) moments[(bn_u64)(k + 4) * stride + c] = q[k];
    moments[(bn_u64)10 * stride + c] = sqrt(b2);
}

/* Moments of the nodes among cells [begin, end) (one level) from their children, one level below and already
 * done: masses add, centres of mass average, and Q_node = sum of (Q_child + m_child d d^T), d = com_child -
 * com_node (the parallel-axis theorem, no cancellation). `lanes` (1 or 8, uniform) work-items per cell: work-item
 * `slot` of a cell takes child slots slot, slot + lanes, ..., and the cell's first work-item adds up the lanes'
 * sums in slot order. With one work-item per cell it waits on its children's loads one after another: fine when a
 * level has cells enough to hide that, latency-bound on the small levels near the root, where the driver asks for
 * eight. Sums run in a fixed order either way. Work-group BANYAN_WG (a multiple of 8); local memory 7 BANYAN_WG
 * doubles. */
__kernel __attribute__((reqd_work_group_size(BANYAN_WG, 1, 1))) void treeMultipoleNodes(
    __global const bn_u64* cell_key, __global const bn_u32* cell_level, __global const bn_u32* cell_first,
    __global const bn_u32* cell_count, __global const bn_f4* frame, bn_u32 begin, bn_u32 end, bn_u32 stride,
    bn_u32 lanes, __global double* moments)
{
    __local double part[7 * BANYAN_WG];
    const uint lid = get_local_id(0);
    const uint slot = lid % lanes, lead = lid - slot; /* the cell's work-items are lead .. lead + lanes - 1 */
    const uint c = begin + get_global_id(0) / lanes;
    const int node = c < end && !bn_tree_is_leaf(cell_count[c]);
    const bn_u32 first = node ? cell_first[c] : 0u, nch = node ? cell_count[c] : 0u;
    double m = 0.0, sx = 0.0, sy = 0.0, sz = 0.0;
    for (bn_u32 k = slot; k < nch; k += lanes) {
        const bn_u32 ch = first + k;
        const double w = moments[ch];
        m += w;
        sx += w * moments[(bn_u64)stride + ch];
        sy += w * moments[(bn_u64)2 * stride + ch];
        sz += w * moments[(bn_u64)3 * stride + ch];
    }
    part[4 * lid] = m, part[4 * lid + 1] = sx, part[4 * lid + 2] = sy, part[4 * lid + 3] = sz;
    barrier(CLK_LOCAL_MEM_FENCE);
    m = 0.0, sx = 0.0, sy = 0.0, sz = 0.0;
    for (uint k = lead; k < lead + lanes; ++k) {
        m += part[4 * k];
        sx += part[4 * k + 1];
        sy += part[4 * k + 2];
        sz += part[4 * k + 3];
    }
    double com[3] = {0.0, 0.0, 0.0};
    if (node) {
        if (m > 0.0) {
            com[0] = sx / m, com[1] = sy / m, com[2] = sz / m;
        } else {
            tree_centre(cell_key, cell_level, frame, c, com);
        }
    }
    double t[7] = {0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0}; /* Q sums, then the farthest reach of a child */
    for (bn_u32 k = slot; k < nch; k += lanes) {
        const bn_u32 ch = first + k;
        const double w = moments[ch];
        const double dx = moments[(bn_u64)stride + ch] - com[0], dy = moments[(bn_u64)2 * stride + ch] - com[1],
                     dz = moments[(bn_u64)3 * stride + ch] - com[2];
        t[0] += moments[(bn_u64)4 * stride + ch] + w * dx * dx;
        t[1] += moments[(bn_u64)5 * stride + ch] + w * dy * dy;
        t[2] += moments[(bn_u64)6 * stride + ch] + w * dz * dz;
        t[3] += moments[(bn_u64)7 * stride + ch] + w * dx * dy;
        t[4] += moments[(bn_u64)8 * stride + ch] + w * dx * dz;
        t[5] += moments[(bn_u64)9 * stride + ch] + w * dy * dz;
        const double reach = sqrt(dx * dx + dy * dy + dz * dz) + moments[(bn_u64)10 * stride + ch];
        t[6] = reach > t[6] ? reach : t[6];
    }
    barrier(CLK_LOCAL_MEM_FENCE); /* everyone has read the first sums */
    for (int k = 0; k < 7; ++k) part[7 * lid + k] = t[k];
    barrier(CLK_LOCAL_MEM_FENCE);
    if (!node || slot != 0u) return;
    double q[6] = {0.0, 0.0, 0.0, 0.0, 0.0, 0.0};
    double bmax = 0.0;
    for (uint k = lead; k < lead + lanes; ++k) {
        for (int i = 0; i < 6; ++i) q[i] += part[7 * k + i];
        bmax = part[7 * k + 6] > bmax ? part[7 * k + 6] : bmax;
    }
    moments[c] = m;
    for (int k = 0; k < 3; ++k) moments[(bn_u64)(k + 1) * stride + c] = com[k];
    for (int k = 0; k < 6; ++k) moments[(bn_u64)(k + 4) * stride + c] = q[k];
    const double corner = bn_tree_corner_distance(cell_key[c], (int)cell_level[c], frame[0], com);
    moments[(bn_u64)10 * stride + c] = bmax < corner ? bmax : corner;
}

/* Rounds the moments of cell c < ncells to single precision, with its geometry: cell_com = (com, mass),
 * cell_quad0 = (Qxx, Qyy, Qzz, Qxy), cell_quad1 = (Qxz, Qyz, offset, size) of the criterion (bn_open_*). The
 * geometric centre is not stored: it follows from cell_key and cell_level (bn_tree_cell_centre).
 * Work-group BANYAN_WG; no local memory. */
__kernel __attribute__((reqd_work_group_size(BANYAN_WG, 1, 1))) void treeMultipoleStore(
    __global const double* moments, __global const bn_u64* cell_key, __global const bn_u32* cell_level,
    __global const bn_f4* frame, bn_u32 ncells, bn_u32 stride, __global bn_f4* cell_com,
    __global bn_f4* cell_quad0, __global bn_f4* cell_quad1, bn_u32 criterion)
{
    const uint c = get_global_id(0);
    if (c >= ncells) return;
    double centre[3];
    tree_centre(cell_key, cell_level, frame, c, centre);
    const double cx = moments[(bn_u64)stride + c], cy = moments[(bn_u64)2 * stride + c],
                 cz = moments[(bn_u64)3 * stride + c];
    const double dx = cx - centre[0], dy = cy - centre[1], dz = cz - centre[2];
    const float delta = (float)sqrt(dx * dx + dy * dy + dz * dz);
    const float l = frame[0].w * bn_tree_pow2(-(int)cell_level[c]);
    cell_com[c] = (float4)((float)cx, (float)cy, (float)cz, (float)moments[c]);
    cell_quad0[c] = (float4)((float)moments[(bn_u64)4 * stride + c], (float)moments[(bn_u64)5 * stride + c],
                             (float)moments[(bn_u64)6 * stride + c], (float)moments[(bn_u64)7 * stride + c]);
    cell_quad1[c] = (float4)((float)moments[(bn_u64)8 * stride + c], (float)moments[(bn_u64)9 * stride + c],
                             bn_open_offset(criterion, delta),
                             bn_open_size(criterion, l, moments[(bn_u64)10 * stride + c], cx, cy, cz));
}
