/**
 * @file atomics_check.cl
 * @brief A kernel that exercises every bn_atomic_* of device_shared.h so tests/device/test_atomics.cpp can check them.
 *
 * Each result is one a CPU can predict exactly whatever the order in which work-items run: wrapping sums,
 * minima and maxima of hashes of the ids, add- and CAS-based tickets (each a permutation), and CAS insertion of
 * every id into an open-addressing table. The hashes are repeated in the test; keep them identical.
 */

/* Layout of the counters c32 / c64 (the test initialises and checks them). */
#define ATOMICS_SUM 0      /* += hash(id), wrapping */
#define ATOMICS_MIN 1      /* min of hash(id) */
#define ATOMICS_MAX 2      /* max of hash(id) */
#define ATOMICS_TICKET 3   /* += 1; the value returned is id's ticket, tickets[id] */
#define ATOMICS_CAS 4      /* ATOMICS_CAS + id % ATOMICS_CAS_COUNTERS: incremented by CAS loops; tickets[n + id] */
#define ATOMICS_CAS_COUNTERS 32

inline bn_u32 atomics_hash32(bn_u32 x)
{
    x ^= x >> 16;
    x *= 0x7feb352du;
    x ^= x >> 15;
    x *= 0x846ca68bu;
    x ^= x >> 16;
    return x;
}

inline bn_u64 atomics_hash64(bn_u64 x)
{
    x += 0x9e3779b97f4a7c15ul;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ul;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebul;
    return x ^ (x >> 31);
}

/* One work-item per id < n; 32-bit and 64-bit atomics on global memory, contended on purpose (all ids on one
 * address for add / min / max, n / 32 per CAS counter). slots32 / slots64 (nslots >= n entries, empty = all ones)
 * receive every id by CAS with linear probing. Work-group BANYAN_WG; no local memory. */
__kernel __attribute__((reqd_work_group_size(BANYAN_WG, 1, 1))) void atomicsCheck(
    __global bn_u32* c32, __global bn_u64* c64, __global bn_u32* tickets32, __global bn_u64* tickets64,
    __global bn_u32* slots32, __global bn_u64* slots64, bn_u32 n, bn_u32 nslots)
{
    const bn_u32 id = get_global_id(0);
    if (id >= n) return;
    const bn_u32 h32 = atomics_hash32(id);
    const bn_u64 h64 = atomics_hash64(id);

    bn_atomic_add_u32(&c32[ATOMICS_SUM], h32);
    bn_atomic_min_u32(&c32[ATOMICS_MIN], h32);
    bn_atomic_max_u32(&c32[ATOMICS_MAX], h32);
    tickets32[id] = bn_atomic_add_u32(&c32[ATOMICS_TICKET], 1u);
    bn_atomic_add_u64(&c64[ATOMICS_SUM], h64);
    bn_atomic_min_u64(&c64[ATOMICS_MIN], h64);
    bn_atomic_max_u64(&c64[ATOMICS_MAX], h64);
    tickets64[id] = bn_atomic_add_u64(&c64[ATOMICS_TICKET], 1ul);

    // Lock-free CAS increments: some CAS always succeeds, so this progresses without any scheduling guarantee. The
    // first guess is read atomically (an add of 0): a plain read beside other work-items' CAS is a data race.
    __global bn_u32* p32 = &c32[ATOMICS_CAS + id % ATOMICS_CAS_COUNTERS];
    bn_u32 old32 = bn_atomic_add_u32(p32, 0u);
    for (;;) {
        const bn_u32 seen = bn_atomic_cas_u32(p32, old32, old32 + 1u);
        if (seen == old32) break;
        old32 = seen;
    }
    tickets32[n + id] = old32;
    __global bn_u64* p64 = &c64[ATOMICS_CAS + id % ATOMICS_CAS_COUNTERS];
    bn_u64 old64 = bn_atomic_add_u64(p64, 0ul);
    for (;;) {
        const bn_u64 seen = bn_atomic_cas_u64(p64, old64, old64 + 1ul);
        if (seen == old64) break;
        old64 = seen;
    }
    tickets64[n + id] = old64;

    // CAS insertion into open-addressing tables (linear probing; a slot is claimed exactly once).
    bn_u32 s = h32 % nslots;
    while (bn_atomic_cas_u32(&slots32[s], 0xffffffffu, id) != 0xffffffffu) s = s + 1u == nslots ? 0u : s + 1u;
    const bn_u64 key = ((bn_u64)h32 << 32) | id; /* unique, and uses the high half */
    s = (bn_u32)(h64 % nslots);
    while (bn_atomic_cas_u64(&slots64[s], ~0ul, key) != ~0ul) s = s + 1u == nslots ? 0u : s + 1u;
}
