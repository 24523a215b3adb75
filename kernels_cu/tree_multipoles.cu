/**
 * @file tree_multipoles.cu
 * @brief Cell properties for the walk (paper sections 3.2 and 3.3; driver: Octree::compute_multipoles in
 *        core/tree/octree.cpp).
 *
 * The CUDA twin of kernels_cl/tree_multipoles.cl, which describes the moments layout: leaves from their particles,
 * then nodes level by level from their children, in double precision; then single-precision storage with what the
 * opening criterion needs.
 */
#include "core/device_shared.h"
#include "core/tree_shared.h"

#include "backend_cuda/kernel_registry.hpp"

namespace {

/// The centre of mass of a massless cell: its geometric centre.
__device__ __forceinline__ void tree_centre(const bn_u64* __restrict__ cell_key, const bn_u32* __restrict__ cell_level,
                                            const bn_f4* __restrict__ frame, unsigned c, double* out)
{
    const bn_f4 f = frame[0];
    const int level = static_cast<int>(cell_level[c]);
    out[0] = bn_tree_cell_centre(cell_key[c], level, f.x, f.w, 0);
    out[1] = bn_tree_cell_centre(cell_key[c], level, f.y, f.w, 1);
    out[2] = bn_tree_cell_centre(cell_key[c], level, f.z, f.w, 2);
}

} // namespace

/// Moments of every leaf c < ncells from its particles (m and m x, then Q about the centre of mass).
/// Block BANYAN_WG; no shared memory.
__global__ void __launch_bounds__(BANYAN_WG)
    treeMultipoleLeaves(const bn_f4* __restrict__ pos, const bn_u64* __restrict__ cell_key,
                        const bn_u32* __restrict__ cell_level, const bn_u32* __restrict__ cell_first,
                        const bn_u32* __restrict__ cell_count, const bn_f4* __restrict__ frame, bn_u32 ncells,
                        bn_u32 stride, double* __restrict__ moments)
{
    const unsigned c = blockIdx.x * BANYAN_WG + threadIdx.x;
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
    for (int k = 0; k < 3; ++k)
        moments[(bn_u64)(k + 1) * stride + c] = com[k];
    for (int k = 0; k < 6; ++k)
        moments[(bn_u64)(k + 4) * stride + c] = q[k];
    moments[(bn_u64)10 * stride + c] = sqrt(b2);
}
BANYAN_CUDA_KERNEL(treeMultipoleLeaves);

/// Moments of the nodes among cells [begin, end) from their children (parallel-axis theorem), `lanes` (1 or 8)
/// threads per cell (see tree_multipoles.cl). Block BANYAN_WG; shared memory 7 BANYAN_WG doubles.
__global__ void __launch_bounds__(BANYAN_WG)
    treeMultipoleNodes(const bn_u64* __restrict__ cell_key, const bn_u32* __restrict__ cell_level,
                       const bn_u32* __restrict__ cell_first, const bn_u32* __restrict__ cell_count,
                       const bn_f4* __restrict__ frame, bn_u32 begin, bn_u32 end, bn_u32 stride, bn_u32 lanes,
                       double* moments)
{
    static_assert(BANYAN_WG % 8 == 0, "up to eight threads per cell");
    __shared__ double part[7 * BANYAN_WG];
    const unsigned lid = threadIdx.x;
    const unsigned slot = lid % lanes, lead = lid - slot; // the cell's threads are lead .. lead + lanes - 1
    const unsigned c = begin + static_cast<unsigned>((static_cast<bn_u64>(blockIdx.x) * BANYAN_WG + lid) / lanes);
    const bool node = c < end && !bn_tree_is_leaf(cell_count[c]);
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
    __syncthreads();
    m = 0.0, sx = 0.0, sy = 0.0, sz = 0.0;
    for (unsigned k = lead; k < lead + lanes; ++k) {
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
    double t[7] = {0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0}; // Q sums, then the farthest reach of a child
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
    __syncthreads(); // everyone has read the first sums
    for (int k = 0; k < 7; ++k)
        part[7 * lid + k] = t[k];
    __syncthreads();
    if (!node || slot != 0u) return;
    double q[6] = {0.0, 0.0, 0.0, 0.0, 0.0, 0.0};
    double bmax = 0.0;
    for (unsigned k = lead; k < lead + lanes; ++k) {
        for (int i = 0; i < 6; ++i)
            q[i] += part[7 * k + i];
        bmax = part[7 * k + 6] > bmax ? part[7 * k + 6] : bmax;
    }
    moments[c] = m;
    for (int k = 0; k < 3; ++k)
        moments[(bn_u64)(k + 1) * stride + c] = com[k];
    for (int k = 0; k < 6; ++k)
        moments[(bn_u64)(k + 4) * stride + c] = q[k];
    const double corner = bn_tree_corner_distance(cell_key[c], static_cast<int>(cell_level[c]), frame[0], com);
    moments[(bn_u64)10 * stride + c] = bmax < corner ? bmax : corner;
}

BANYAN_CUDA_KERNEL(treeMultipoleNodes);

/// Rounds the moments of cell c < ncells to single precision with its geometry (layout in tree_shared.h).
/// Block BANYAN_WG; no shared memory.
__global__ void __launch_bounds__(BANYAN_WG)
    treeMultipoleStore(const double* __restrict__ moments, const bn_u64* __restrict__ cell_key,
                       const bn_u32* __restrict__ cell_level, const bn_f4* __restrict__ frame, bn_u32 ncells,
                       bn_u32 stride, bn_f4* __restrict__ cell_com, bn_f4* __restrict__ cell_quad0,
                       bn_f4* __restrict__ cell_quad1, bn_u32 criterion)
{
    const unsigned c = blockIdx.x * BANYAN_WG + threadIdx.x;
    if (c >= ncells) return;
    double centre[3];
    tree_centre(cell_key, cell_level, frame, c, centre);
    const double cx = moments[(bn_u64)stride + c], cy = moments[(bn_u64)2 * stride + c],
                 cz = moments[(bn_u64)3 * stride + c];
    const double dx = cx - centre[0], dy = cy - centre[1], dz = cz - centre[2];
    const float delta = static_cast<float>(sqrt(dx * dx + dy * dy + dz * dz));
    const float l = frame[0].w * bn_tree_pow2(-static_cast<int>(cell_level[c]));
    cell_com[c] = make_float4(static_cast<float>(cx), static_cast<float>(cy), static_cast<float>(cz),
                              static_cast<float>(moments[c]));
    const auto m = [&](int k) { return static_cast<float>(moments[(bn_u64)k * stride + c]); };
    cell_quad0[c] = make_float4(m(4), m(5), m(6), m(7));
    cell_quad1[c] = make_float4(m(8), m(9), bn_open_offset(criterion, delta),
                                bn_open_size(criterion, l, moments[(bn_u64)10 * stride + c], cx, cy, cz));
}
BANYAN_CUDA_KERNEL(treeMultipoleStore);
