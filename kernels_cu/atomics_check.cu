/**
 * @file atomics_check.cu
 * @brief A kernel that exercises every bn_atomic_* of device_shared.h so tests/device/test_atomics.cpp can check them.
 *
 * The CUDA twin of kernels_cl/atomics_check.cl (see there for the layout of the counters); the hashes are
 * repeated in the test, keep the three copies identical.
 */
#include "core/device_shared.h"

#include "backend_cuda/kernel_registry.hpp"

namespace {

constexpr unsigned atomics_sum = 0, atomics_min = 1, atomics_max = 2, atomics_ticket = 3, atomics_cas = 4;
constexpr unsigned atomics_cas_counters = 32;

__device__ __forceinline__ bn_u32 atomics_hash32(bn_u32 x)
{
    x ^= x >> 16;
    x *= 0x7feb352du;
    x ^= x >> 15;
    x *= 0x846ca68bu;
    x ^= x >> 16;
    return x;
}

__device__ __forceinline__ bn_u64 atomics_hash64(bn_u64 x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

} // namespace

/// One thread per id < n; 32- and 64-bit atomics on global memory, contended on purpose (all ids on one address
/// for add / min / max, n / 32 per CAS counter); slots32 / slots64 (nslots >= n, empty = all ones) receive every
/// id by CAS with linear probing. Block BANYAN_WG; no shared memory.
__global__ void __launch_bounds__(BANYAN_WG)
    atomicsCheck(bn_u32* c32, bn_u64* c64, bn_u32* tickets32, bn_u64* tickets64, bn_u32* slots32, bn_u64* slots64,
                 bn_u32 n, bn_u32 nslots)
{
    const bn_u32 id = blockIdx.x * blockDim.x + threadIdx.x;
    if (id >= n) return;
    const bn_u32 h32 = atomics_hash32(id);
    const bn_u64 h64 = atomics_hash64(id);

    bn_atomic_add_u32(&c32[atomics_sum], h32);
    bn_atomic_min_u32(&c32[atomics_min], h32);
    bn_atomic_max_u32(&c32[atomics_max], h32);
    tickets32[id] = bn_atomic_add_u32(&c32[atomics_ticket], 1u);
    bn_atomic_add_u64(&c64[atomics_sum], h64);
    bn_atomic_min_u64(&c64[atomics_min], h64);
    bn_atomic_max_u64(&c64[atomics_max], h64);
    tickets64[id] = bn_atomic_add_u64(&c64[atomics_ticket], 1ull);

    // Lock-free CAS increments: some CAS always succeeds, so this progresses without any scheduling guarantee. The
    // first guess is read atomically (an add of 0): a plain read beside other threads' CAS is a data race.
    bn_u32* p32 = &c32[atomics_cas + id % atomics_cas_counters];
    bn_u32 old32 = bn_atomic_add_u32(p32, 0u);
    for (;;) {
        const bn_u32 seen = bn_atomic_cas_u32(p32, old32, old32 + 1u);
        if (seen == old32) break;
        old32 = seen;
    }
    tickets32[n + id] = old32;
    bn_u64* p64 = &c64[atomics_cas + id % atomics_cas_counters];
    bn_u64 old64 = bn_atomic_add_u64(p64, 0ull);
    for (;;) {
        const bn_u64 seen = bn_atomic_cas_u64(p64, old64, old64 + 1ull);
        if (seen == old64) break;
        old64 = seen;
    }
    tickets64[n + id] = old64;

    // CAS insertion into open-addressing tables (linear probing; a slot is claimed exactly once).
    bn_u32 s = h32 % nslots;
    while (bn_atomic_cas_u32(&slots32[s], 0xffffffffu, id) != 0xffffffffu)
        s = s + 1u == nslots ? 0u : s + 1u;
    const bn_u64 key = (static_cast<bn_u64>(h32) << 32) | id; // unique, and uses the high half
    s = static_cast<bn_u32>(h64 % nslots);
    while (bn_atomic_cas_u64(&slots64[s], ~0ull, key) != ~0ull)
        s = s + 1u == nslots ? 0u : s + 1u;
}
BANYAN_CUDA_KERNEL(atomicsCheck);
