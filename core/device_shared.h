/**
 * @file device_shared.h
 * @brief Constants, types and small device helpers shared by host C++, CUDA and OpenCL C.
 *
 * This one header is included by core/ (host), by every .cu file of kernels_cu and is prepended to every
 * OpenCL program built from kernels_cl, so that host and both kernel languages agree on sizes, layouts and meanings.
 * It must stay valid C (OpenCL C 1.2), C++20 and CUDA C++ at once: macros, typedefs and inline functions only.
 * It includes nothing of banyan's: the octree's conventions are in tree_shared.h, which includes this header (a
 * file that needs them includes tree_shared.h itself; the OpenCL program starts with tree_shared.h, this header
 * pasted in its place: cmake/EmbedCl.cmake).
 */
#ifndef BANYAN_DEVICE_SHARED_H
#define BANYAN_DEVICE_SHARED_H

/* ---- Which language is reading this ----------------------------------------------------------------- */
/* __OPENCL_C_VERSION__ is what every OpenCL C compiler defines (from -cl-std); __OPENCL_VERSION__ names the device's
 * version and is set by runtimes, but clang alone (AMD's compiler, offline) does not define it. */
#if defined(__OPENCL_C_VERSION__) || defined(__OPENCL_VERSION__)
#define BANYAN_LANG_OPENCL 1
#elif defined(__CUDACC__)
#define BANYAN_LANG_CUDA 1
#else
#define BANYAN_LANG_HOST 1
#endif

/* ---- Fixed-width types with one spelling in all three languages -------------------------------------- */
#if defined(BANYAN_LANG_OPENCL)
typedef uint bn_u32;
typedef int bn_i32;
typedef ulong bn_u64;
typedef float4 bn_f4;
typedef uint2 bn_u2;
#else
typedef unsigned int bn_u32;
typedef int bn_i32;
typedef unsigned long long bn_u64; /* CUDA's 64-bit atomics take unsigned long long */
#if defined(BANYAN_LANG_CUDA)
typedef float4 bn_f4;
typedef uint2 bn_u2;
#else
/* Host mirror of float4: 16 bytes, 16-aligned, as in CUDA and OpenCL (never use float3: 12 vs 16 bytes). */
struct alignas(16) bn_f4 {
    float x, y, z, w;
};
/* Host mirror of uint2: two 32-bit unsigned integers, 8 bytes, 8-aligned, as in CUDA and OpenCL. */
struct alignas(8) bn_u2 {
    bn_u32 x, y;
};
#endif
#endif

/* ---- Work-group sizes and tiles of the parallel primitives -------------------------------------------- */
/* Default work-group size of every primitive kernel. OpenCL programs may be rebuilt with -DBANYAN_WG=32..256
 * (the conformance suite does, so nothing depends on a warp of 32); CUDA always uses the default. */
#define BANYAN_WG_DEFAULT 256
#ifndef BANYAN_WG
#define BANYAN_WG BANYAN_WG_DEFAULT
#endif
#define BANYAN_WG_MAX 256

/* Sources per slice of the direct sum on listed particles (directListedPartial): a fixed number, so that each
 * partial sum, and so the result, is the same on every backend and work-group size. */
#define BANYAN_DIRECT_SLICE 2048u
/* ... and at least this many work-items per listed particle (a work-group takes BANYAN_WG / BANYAN_DIRECT_LANES of
 * them at most), so that a few hundred of them still keep every work-item busy. */
#define BANYAN_DIRECT_LANES 4u

/* Items per work-item in scan / compact / split tiles: a tile is BANYAN_WG * BANYAN_SCAN_ITEMS items. */
#define BANYAN_SCAN_ITEMS 8
/* Radix sort: digit width and keys per work-item in one tile of the histogram and scatter kernels. */
#define BANYAN_RADIX_BITS 8
#define BANYAN_RADIX_DIGITS (1 << BANYAN_RADIX_BITS)
#define BANYAN_SORT_ITEMS 8
/* Reductions: items per work-item in the first pass. */
#define BANYAN_REDUCE_ITEMS 8

/* Mode bits of the scan kernels scanReduce / scanDownsweep (kernels_cu/scan.cu, kernels_cl/scan.cl), set by the
 * drivers of core/device/primitives.cpp. */
#define BANYAN_SCAN_INCLUSIVE 1u /* downsweep: inclusive instead of exclusive */
#define BANYAN_SCAN_OFFSETS 2u   /* downsweep: add offsets[group] (a multi-tile level) */
#define BANYAN_SCAN_TOTAL 4u     /* downsweep: the last tile's group writes the grand total to total[0] */
#define BANYAN_SCAN_NONZERO 8u   /* reduce: count items != 0 instead of summing them (compact / split) */
#define BANYAN_SCAN_LOOKUP 16u   /* downsweep: offsets holds raw tile sums; each group adds up those before it */
/* Mode bits of compactScatter (kernels_cu/compact.cu, kernels_cl/compact.cl). */
#define BANYAN_COMPACT_SPLIT 1u  /* also write the unflagged items, after all flagged ones */
#define BANYAN_COMPACT_SINGLE 2u /* one tile only: no offsets; the group writes count[0] itself */
/* BANYAN_COMPACT_LOOKUP: offsets holds raw tile counts: each group adds up what it needs; tile 0 writes count[0].
 * Two launches in all while the tile counts fit one tile. */
#define BANYAN_COMPACT_LOOKUP 4u

/* ---- Tree constants (paper section 2.1) ------------------------------------------------------------- */
#define BANYAN_N_LEAF 16    /* a cell with at most this many particles is a leaf */
#define BANYAN_N_CRIT 64    /* a group for the walk has at most this many particles */
#define BANYAN_MAX_DEPTH 21 /* 63-bit Morton key: 21 levels of 3 bits */

/* ---- Device-side atomics with one meaning in both kernel languages ------------------------------------
 * All return the value held before the operation. 32-bit: add, min, max, cas on global unsigned ints.
 * 64-bit: add, min, max, cas on global unsigned longs (OpenCL needs cl_khr_int64_base/extended_atomics). */
#if defined(BANYAN_LANG_OPENCL)
#pragma OPENCL EXTENSION cl_khr_int64_base_atomics : enable
#pragma OPENCL EXTENSION cl_khr_int64_extended_atomics : enable
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
#define BN_DEVICE
#define BN_GLOBAL __global
inline bn_u32 bn_atomic_add_u32(volatile __global bn_u32* p, bn_u32 v)
{
    return atomic_add(p, v);
}
inline bn_u32 bn_atomic_min_u32(volatile __global bn_u32* p, bn_u32 v)
{
    return atomic_min(p, v);
}
inline bn_u32 bn_atomic_max_u32(volatile __global bn_u32* p, bn_u32 v)
{
    return atomic_max(p, v);
}
inline bn_u32 bn_atomic_cas_u32(volatile __global bn_u32* p, bn_u32 expected, bn_u32 desired)
{
    return atomic_cmpxchg(p, expected, desired);
}
inline bn_u64 bn_atomic_add_u64(volatile __global bn_u64* p, bn_u64 v)
{
    return atom_add(p, v);
}
inline bn_u64 bn_atomic_min_u64(volatile __global bn_u64* p, bn_u64 v)
{
    return atom_min(p, v);
}
inline bn_u64 bn_atomic_max_u64(volatile __global bn_u64* p, bn_u64 v)
{
    return atom_max(p, v);
}
inline bn_u64 bn_atomic_cas_u64(volatile __global bn_u64* p, bn_u64 expected, bn_u64 desired)
{
    return atom_cmpxchg(p, expected, desired);
}
#elif defined(BANYAN_LANG_CUDA)
#define BN_DEVICE __device__ __forceinline__
#define BN_GLOBAL
BN_DEVICE bn_u32 bn_atomic_add_u32(bn_u32* p, bn_u32 v)
{
    return atomicAdd(p, v);
}
BN_DEVICE bn_u32 bn_atomic_min_u32(bn_u32* p, bn_u32 v)
{
    return atomicMin(p, v);
}
BN_DEVICE bn_u32 bn_atomic_max_u32(bn_u32* p, bn_u32 v)
{
    return atomicMax(p, v);
}
BN_DEVICE bn_u32 bn_atomic_cas_u32(bn_u32* p, bn_u32 expected, bn_u32 desired)
{
    return atomicCAS(p, expected, desired);
}
BN_DEVICE bn_u64 bn_atomic_add_u64(bn_u64* p, bn_u64 v)
{
    return atomicAdd(p, v);
}
BN_DEVICE bn_u64 bn_atomic_min_u64(bn_u64* p, bn_u64 v)
{
    return atomicMin(p, v);
}
BN_DEVICE bn_u64 bn_atomic_max_u64(bn_u64* p, bn_u64 v)
{
    return atomicMax(p, v);
}
BN_DEVICE bn_u64 bn_atomic_cas_u64(bn_u64* p, bn_u64 expected, bn_u64 desired)
{
    return atomicCAS(p, expected, desired);
}
#else
#define BN_DEVICE inline
#define BN_GLOBAL
#endif

/* ---- Gravity (paper section 3) ---------------------------------------------------------------------- */
#if defined(BANYAN_LANG_OPENCL)
#define BN_POW(x, y) pow(x, y)
#define BN_RSQRT(x) rsqrt(x)
#elif defined(BANYAN_LANG_CUDA)
/* rsqrtf rescales denormal arguments around the hardware's reciprocal square root (three more instructions per
 * interaction); the flush-to-zero form is the same instruction alone and gives the same bits for every normal
 * argument (a squared distance below 1.2e-38 does not occur in internal units). */
__device__ __forceinline__ float bn_rsqrt_ftz(float x)
{
    float y;
    asm("rsqrt.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
}
#define BN_RSQRT(x) bn_rsqrt_ftz(x)
#define BN_POW(x, y) powf(x, y)
#else
#include <math.h>
#define BN_POW(x, y) powf(x, y)
#define BN_RSQRT(x) (1.0f / sqrtf(x))
#endif

/* Particle-particle interaction with Plummer softening: adds to acc.xyz the pull m r / (r^2 + eps^2)^(3/2) of a
 * source of mass m at offset r = (dx, dy, dz) from the target, and to acc.w the potential -m / (r^2 + eps^2)^(1/2).
 * A source at zero distance with eps = 0 contributes nothing (so a particle may meet itself in a list).
 * 23 flops, the count the paper's benchmarks use. */
BN_DEVICE bn_f4 bn_interact_pp(bn_f4 acc, float dx, float dy, float dz, float m, float eps2)
{
    const float r2 = dz * dz + (dy * dy + (dx * dx + eps2)); /* three fused multiply-adds */
    const float rinv = r2 > 0.0f ? BN_RSQRT(r2) : 0.0f;
    const float mrinv = m * rinv;
    const float mrinv3 = mrinv * rinv * rinv;
    acc.x += mrinv3 * dx;
    acc.y += mrinv3 * dy;
    acc.z += mrinv3 * dz;
    acc.w -= mrinv;
    return acc;
}

/* The quadrupole of a cell as the walk stages it, from the second moment Q = (q0.x, q0.y, q0.z, q0.w, q1.x, q1.y)
 * = (Qxx, Qyy, Qzz, Qxy, Qxz, Qyz) about the centre of mass (cell_quad0, cell_quad1.xy): its trace-free form
 * T = 3 Q - tr(Q) I as t0 = (Txx, Tyy, Tzz, Txy) and t1 = (Txz, Tyz, -eps^2 tr Q, 0). Done once per staged cell,
 * so that each interaction needs neither the trace nor the factor 3. */
BN_DEVICE bn_f4 bn_quad_staged0(bn_f4 q0)
{
    const float tr = q0.x + q0.y + q0.z;
    bn_f4 t;
    t.x = 3.0f * q0.x - tr;
    t.y = 3.0f * q0.y - tr;
    t.z = 3.0f * q0.z - tr;
    t.w = 3.0f * q0.w;
    return t;
}

BN_DEVICE bn_f4 bn_quad_staged1(bn_f4 q0, bn_f4 q1, float eps2)
{
    bn_f4 t;
    t.x = 3.0f * q1.x;
    t.y = 3.0f * q1.y;
    t.z = -eps2 * (q0.x + q0.y + q0.z);
    t.w = 0.0f;
    return t;
}

/* Cell-particle interaction, monopole plus quadrupole (paper section 3.2), softened like bn_interact_pp: adds to
 * acc the pull and potential of a cell of mass m whose centre of mass lies at offset r = (dx, dy, dz) from the
 * target; t0, t1 as bn_quad_staged0 / bn_quad_staged1 give them (T = 3 Q - tr(Q) I, Q the second moment about the
 * centre of mass).
 * With s^2 = r^2 + eps^2, the Taylor expansion of sum m_k / |r + y_k| to second order (the dipole vanishes about
 * the centre of mass) is
 *     phi = -m / s - (3 r.Q.r / s^5 - trQ / s^3) / 2 = -m / s - W / (2 s^5),   W = r.T.r - eps^2 trQ
 *     a   = -grad_target phi = r (m / s^3 + 5/2 W / s^7) - T.r / s^5
 * (the trace-free form is exact with softening too: the eps^2 trQ term carries what the trace adds when s != r;
 * a is the exact gradient of phi). The walk only accepts cells with r > 0; no guard for r = 0.
 * 65 flops in the paper's count (which its benchmarks and ours use); about 33 instructions here. */
BN_DEVICE bn_f4 bn_interact_pc(bn_f4 acc, float dx, float dy, float dz, float m, bn_f4 t0, bn_f4 t1, float eps2)
{
    const float r2 = dz * dz + (dy * dy + (dx * dx + eps2)); /* three fused multiply-adds */
    const float rinv = BN_RSQRT(r2);
    const float rinv2 = rinv * rinv;
    const float rinv5 = rinv * rinv2 * rinv2;
    const float tx = t0.x * dx + t0.w * dy + t1.x * dz; /* T.r */
    const float ty = t0.w * dx + t0.y * dy + t1.y * dz;
    const float tz = t1.x * dx + t1.y * dy + t0.z * dz;
    const float w = tz * dz + (ty * dy + (tx * dx + t1.z)); /* r.T.r - eps^2 trQ */
    const float mr = m * rinv;
    const float w5 = w * rinv5; /* W / s^5 */
    const float s = rinv2 * (mr + 2.5f * w5);
    /* One accumulation per term, so that each becomes a fused multiply-add. */
    acc.x += s * dx;
    acc.x -= rinv5 * tx;
    acc.y += s * dy;
    acc.y -= rinv5 * ty;
    acc.z += s * dz;
    acc.z -= rinv5 * tz;
    acc.w -= 0.5f * w5;
    acc.w -= mr;
    return acc;
}

/* Relative opening criterion (the acceleration-based test of GADGET-4, Springel et al. 2021, for a quadrupole
 * expansion): a cell of mass M and size s (cell_quad1.w) is accepted for a group when M s^3 / d^5 <= alpha |a|,
 * |a| the smallest previous acceleration in the group, i.e. d^2 > bn_rel_cell(M, s) * bn_rel_group(alpha, |a|):
 * the neglected octupole, relative to the particle's own acceleration, stays below about alpha. The walk takes the
 * larger of that radius and the geometric one (l / theta + delta), which keeps a group from accepting a cell that
 * holds one of its particles. */
BN_DEVICE float bn_rel_cell(float m, float size)
{
    return BN_POW(m * size * size * size, 0.4f);
}
BN_DEVICE float bn_rel_group(float alpha, float a_min)
{
    return BN_POW(alpha * a_min, -0.4f);
}

/* ---- The tree walk (paper section 2.2; core/gravity/forces.cpp, kernels_cu/walk.cu, kernels_cl/walk.cl) ------------
 */
/* Work-items of a walk work-group (one group of <= N_crit particles at a time; apart from BANYAN_WG, which the
 * OpenCL programs vary). A power of two, N_crit <= it <= 256 (the walk packs per-chunk counts into 10-bit fields). */
#define BANYAN_WALK_WG 128
/* Entries of each level list (current and next) a walk work-group keeps in local memory; the rest of a longer
 * list goes to its slice of a global spill buffer. */
#define BANYAN_WALK_LIST 1024
#if BANYAN_WALK_WG < BANYAN_N_CRIT || BANYAN_WALK_WG > 256 || (BANYAN_WALK_WG & (BANYAN_WALK_WG - 1)) != 0
#error "the walk's work-group: a power of two, N_crit <= it <= 256 (10-bit count fields)"
#endif
/* What each work-item of the walk found in one step, added up over the work-group by one 64-bit prefix sum: cells
 * accepted in bits 0-9, leaves opened in bits 10-19, child cells to test next in bits 20-31 (at most 8 per
 * work-item), and the particles of the opened leaves in bits 32-63. */
#define BANYAN_WALK_LEAF_SHIFT 10
#define BANYAN_WALK_NODE_SHIFT 20
#define BANYAN_WALK_PART_SHIFT 32
#define BANYAN_WALK_COUNT_MASK 0x3FFu /* cells accepted, leaves opened */
#define BANYAN_WALK_NODE_MASK 0xFFFu  /* child cells */
/* A work-item's mark for "no particle of the group" (its slot beyond the group). */
#define BANYAN_WALK_NONE 0xFFFFFFFFu

/* ---- Time integration (core/simulation/simulation.cpp, kernels_cu/integrate.cu, kernels_cl/integrate.cl)
 * --------------- */
/* Per-particle terms summed for the energy log: kinetic, potential, momentum (3), angular momentum (3), and the mass
 * (the symmetric rung rule's frame: Simulation::block_kick). */
#define BANYAN_ENERGY_TERMS 9

/* Block (hierarchical) time steps: a particle on rung k moves with the step dt_max / 2^k. Rungs 0 .. BANYAN_MAX_RUNG;
 * the rung histogram the kick writes has one more bin, for particles that asked for a rung beyond the run's limit. */
#define BANYAN_MAX_RUNG 30
#define BANYAN_RUNG_BINS (BANYAN_MAX_RUNG + 2)

/* The rung a particle of acceleration (ax, ay, az) asks for: the smallest k >= 0 whose step dt_k = dt_max 2^-k is
 * at most sqrt(2 eta eps / |a|) (GADGET-4's criterion, Springel et al. 2021, MNRAS 506, 2871), or limit + 1
 * when even rung `limit` is too long. Tested as dt_k^4 |a|^2 <= (2 eta eps)^2 in double precision, with
 * dt2_max = dt_max^2 and c2 = (2 eta eps)^2: no square root (whose rounding OpenCL leaves open), products of floats
 * exact in double, so every backend and the CPU reference choose the same integer. |a| = 0 asks for rung 0. */
BN_DEVICE bn_u32 bn_block_rung(float ax, float ay, float az, double dt2_max, double c2, bn_u32 limit)
{
    const double a2 = (double)ax * (double)ax + (double)ay * (double)ay + (double)az * (double)az;
    double d2 = dt2_max; /* dt_k^2 */
    bn_u32 k = 0;
    while (k <= limit && d2 * d2 * a2 > c2) {
        d2 *= 0.25;
        ++k;
    }
    return k;
}

/* The time-symmetric rule's probe (Simulation::probe_rungs) is needed for a particle on rung k only where the end of
 * its step could ask for a deeper rung: not where the start's criterion allows a step four times as long, since the
 * end's |a| would have to grow sixteenfold within the step (the rung of 16 |a|, i.e. of c2 / 256, is still k).
 * Such particles are those held on a rung deeper than they need (steps aligned to the current level) and, on rung 0,
 * those far below the criterion: most of a galaxy's halo and disc. A step twice as long was too little slack: on
 * the merger at eps 0.01 it skipped 0.4 % of the particles the probe sends deeper, 0.04 % at four times
 * (docs/benchmarks.md, "The probe's skip"). */
BN_DEVICE bn_u32 bn_block_probe_needed(float ax, float ay, float az, double dt2_max, double c2, bn_u32 k)
{
    return bn_block_rung(ax, ay, az, dt2_max, c2 * (1.0 / 256.0), k) > k ? 1u : 0u;
}

#endif /* BANYAN_DEVICE_SHARED_H */
