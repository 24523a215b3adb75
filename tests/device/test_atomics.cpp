/**
 * @file test_atomics.cpp
 * @brief The bn_atomic_* helpers of device_shared.h (add, min, max, cas; 32 and 64 bits, global memory), through
 *        the atomicsCheck kernel (kernels_cu/atomics_check.cu, kernels_cl/atomics_check.cl), on the backend under test.
 *
 * Many work-items hit the same addresses; every result is one the CPU predicts exactly whatever the order: wrapping
 * sums, minima and maxima of hashes of the ids, tickets from add and from CAS loops (each set a permutation), and a
 * CAS-filled hash table holding every id once.
 */
#include "tests/support/checks.hpp"
#include "tests/support/harness.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <numeric>
#include <vector>

using namespace banyan;

namespace {

// Counter layout of atomicsCheck (kernels_cl/atomics_check.cl).
constexpr std::size_t at_sum = 0, at_min = 1, at_max = 2, at_ticket = 3, at_cas = 4, cas_counters = 32;
constexpr std::size_t counters = at_cas + cas_counters;

// The kernels' hashes, repeated here: keep identical.
bn_u32 hash32(bn_u32 x)
{
    x ^= x >> 16;
    x *= 0x7feb352du;
    x ^= x >> 15;
    x *= 0x846ca68bu;
    x ^= x >> 16;
    return x;
}

bn_u64 hash64(bn_u64 x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

/// Whether v (sorted in place) is first, first + 1, ..., first + v.size() - 1.
template <class T> bool is_run(std::vector<T> v, T first)
{
    std::sort(v.begin(), v.end());
    for (std::size_t i = 0; i < v.size(); ++i)
        if (v[i] != first + static_cast<T>(i)) return false;
    return true;
}

} // namespace

/// atomicsCheck at work-group size @p wg over @p n work-items against the CPU's exact prediction (the backend's
/// work-group size is left at @p wg).
void test::check_atomics(Backend& be, std::size_t wg, bn_u32 n)
{
    CAPTURE(wg);
    CAPTURE(n);
    be.set_work_group_size(wg);
    const bn_u32 nslots = n + n / 3 + 1;
    // Starting values: 64-bit tickets and CAS counters start just below 2^32, so they carry into the high
    // half; 32-bit sums wrap.
    const bn_u32 t32_start = 0xFFFFFF00u; // wraps past 2^32 for n > 256
    const bn_u64 t64_start = 0xFFFFFFFFull - 100, cas64_start = 0xFFFFFFFFull - 3;
    std::vector<bn_u32> c32(counters, 0u);
    std::vector<bn_u64> c64(counters, 0ull);
    c32[at_sum] = 17u;
    c32[at_min] = 0xFFFFFFFFu;
    c32[at_ticket] = t32_start;
    c64[at_sum] = 1ull << 63;
    c64[at_min] = ~0ull;
    c64[at_ticket] = t64_start;
    for (std::size_t k = 0; k < cas_counters; ++k) {
        c32[at_cas + k] = static_cast<bn_u32>(1000 * k);
        c64[at_cas + k] = cas64_start + k;
    }
    auto d32 = be.upload<bn_u32>(c32, "c32");
    auto d64 = be.upload<bn_u64>(c64, "c64");
    auto t32 = be.alloc<bn_u32>(2 * n, "tickets32");
    auto t64 = be.alloc<bn_u64>(2 * n, "tickets64");
    t32.fill(0xDEADBEEFu);
    t64.fill(0xDEADBEEFDEADBEEFull);
    auto s32 = be.alloc<bn_u32>(nslots, "slots32");
    auto s64 = be.alloc<bn_u64>(nslots, "slots64");
    s32.fill(0xFFFFFFFFu);
    s64.fill(~0ull);
    be.launch(kernels::atomicsCheck, Grid{(n + wg - 1) / wg, wg}, d32, d64, t32, t64, s32, s64, n, nslots);

    // The CPU's prediction.
    bn_u32 sum32 = 17u, min32 = 0xFFFFFFFFu, max32 = 0u;
    bn_u64 sum64 = 1ull << 63, min64 = ~0ull, max64 = 0ull;
    std::vector<std::vector<bn_u32>> ids_of(cas_counters);
    for (bn_u32 id = 0; id < n; ++id) {
        sum32 += hash32(id);
        min32 = std::min(min32, hash32(id));
        max32 = std::max(max32, hash32(id));
        sum64 += hash64(id);
        min64 = std::min(min64, hash64(id));
        max64 = std::max(max64, hash64(id));
        ids_of[id % cas_counters].push_back(id);
    }
    const auto g32 = d32.download();
    const auto g64 = d64.download();
    CHECK(g32[at_sum] == sum32);
    CHECK(g32[at_min] == min32);
    CHECK(g32[at_max] == max32);
    CHECK(g32[at_ticket] == t32_start + n);
    CHECK(g64[at_sum] == sum64);
    CHECK(g64[at_min] == min64);
    CHECK(g64[at_max] == max64);
    CHECK(g64[at_ticket] == t64_start + n);

    // Add returns the old value: the tickets are consecutive values (mod 2^32 for 32 bits).
    const auto tk32 = t32.download();
    const auto tk64 = t64.download();
    std::vector<bn_u32> add32(tk32.begin(), tk32.begin() + n);
    for (auto& t : add32)
        t -= t32_start; // 0 .. n-1 modulo 2^32
    CHECK(is_run<bn_u32>(add32, 0u));
    CHECK(is_run<bn_u64>(std::vector<bn_u64>(tk64.begin(), tk64.begin() + n), t64_start));

    // CAS loops: each counter advanced once per id of its class, and handed out each value once.
    for (std::size_t k = 0; k < cas_counters; ++k) {
        CAPTURE(k);
        const auto& ids = ids_of[k];
        CHECK(g32[at_cas + k] == 1000 * k + ids.size());
        CHECK(g64[at_cas + k] == cas64_start + k + ids.size());
        std::vector<bn_u32> got32;
        std::vector<bn_u64> got64;
        for (bn_u32 id : ids) {
            got32.push_back(tk32[n + id]);
            got64.push_back(tk64[n + id]);
        }
        CHECK(is_run<bn_u32>(got32, static_cast<bn_u32>(1000 * k)));
        CHECK(is_run<bn_u64>(got64, cas64_start + k));
    }

    // CAS insertion: every id in exactly one slot, the rest still empty.
    std::vector<bn_u32> in32, in64;
    for (bn_u32 s : s32.download())
        if (s != 0xFFFFFFFFu) in32.push_back(s);
    for (bn_u64 s : s64.download())
        if (s != ~0ull) {
            const auto id = static_cast<bn_u32>(s);
            CHECK((s >> 32) == hash32(id)); // the high half arrived intact
            in64.push_back(id);
        }
    CHECK(in32.size() == n);
    CHECK(in64.size() == n);
    CHECK(is_run<bn_u32>(in32, 0u));
    CHECK(is_run<bn_u32>(in64, 0u));
}

TEST_CASE("32- and 64-bit atomics add, min, max and cas give exactly predictable results")
{
    auto& be = test::backend();
    for (std::size_t wg : test::work_group_sizes())
        for (bn_u32 n : {1u, 255u, 5000u, 20011u})
            test::check_atomics(be, wg, n);
    test::restore_work_group_size();
}
