/**
 * @file test_sort.cpp
 * @brief Backend::sort_pairs against std::stable_sort: edge sizes, key sets, bit ranges, every work-group size,
 *        both vendor modes on CUDA, untouched inputs; Boost.Compute's sort_by_key as a second oracle on OpenCL.
 *
 * Values are the original indices, so a stability error shows as a wrong value. Outputs are poisoned first, so
 * an unwritten element shows. "sort timing" (skipped unless asked for: -tc='sort timing' --no-skip) prints the
 * device time of 63-bit sorts at 2^20 and 2^24 (GPU) pairs.
 */
#include "tests/support/checks.hpp"
#include "tests/support/harness.hpp"

#include "core/error.hpp"

#include <doctest/doctest.h>
#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <string>
#include <vector>

#ifdef BANYAN_HAVE_OPENCL
#include "backend_opencl/opencl_backend.hpp"

#include <boost/compute/algorithm/sort_by_key.hpp>
#include <boost/compute/command_queue.hpp>
#include <boost/compute/container/vector.hpp>
#include <boost/compute/context.hpp>
#endif

using namespace banyan;

namespace {

enum class KeySet { random63, equal, few, sorted, reversed, all_bits, random64 };

/// Every key set, with the name a failure prints.
constexpr std::pair<KeySet, const char*> key_sets[] = {
    {KeySet::random63, "random 63-bit"}, {KeySet::equal, "all equal"},         {KeySet::few, "few distinct"},
    {KeySet::sorted, "sorted"},          {KeySet::reversed, "reverse sorted"}, {KeySet::all_bits, "all 63 bits used"},
    {KeySet::random64, "random 64-bit"}};

const char* name(KeySet s)
{
    for (const auto& [set, set_name] : key_sets)
        if (set == s) return set_name;
    return "?";
}

std::vector<bn_u64> make_keys(KeySet set, std::size_t n)
{
    auto& rng = test::rng();
    constexpr bn_u64 low63 = (bn_u64{1} << 63) - 1;
    std::vector<bn_u64> k(n);
    switch (set) {
    case KeySet::random63:
    case KeySet::sorted:
    case KeySet::reversed:
        for (auto& x : k)
            x = rng() & low63;
        if (set == KeySet::sorted) std::sort(k.begin(), k.end());
        if (set == KeySet::reversed) std::sort(k.begin(), k.end(), std::greater<>());
        break;
    case KeySet::equal:
        std::fill(k.begin(), k.end(), rng() & low63);
        break;
    case KeySet::few: {
        const bn_u64 pool[5] = {rng() & low63, rng() & low63, rng() & low63, 0, low63};
        for (auto& x : k)
            x = pool[rng() % 5];
        break;
    }
    case KeySet::all_bits:
        // Extremes in every digit of every pass: 0, 2^63 - 1, single bits, their complements and random keys.
        for (std::size_t i = 0; i < n; ++i) {
            const bn_u64 r = rng();
            switch (r % 5) {
            case 0:
                k[i] = 0;
                break;
            case 1:
                k[i] = low63;
                break;
            case 2:
                k[i] = bn_u64{1} << (r >> 8) % 63;
                break;
            case 3:
                k[i] = low63 ^ (bn_u64{1} << (r >> 8) % 63);
                break;
            default:
                k[i] = (r >> 3) & low63;
                break;
            }
        }
        break;
    case KeySet::random64:
        for (auto& x : k)
            x = rng();
        break;
    }
    return k;
}

bn_u64 field(bn_u64 key, int begin_bit, int end_bit)
{
    const int bits = end_bit - begin_bit;
    const bn_u64 mask = bits == 64 ? ~bn_u64{0} : (bn_u64{1} << bits) - 1;
    return (key >> begin_bit) & mask;
}

/// Sorts @p keys (values = indices) on the device by [begin_bit, end_bit) and checks keys and values exactly
/// against std::stable_sort, and that the inputs are unchanged; then the same with sort_pairs_double (the tree's
/// sort), whose result is in whichever pair it says.
void check_sort(const std::vector<bn_u64>& keys, int begin_bit, int end_bit)
{
    auto& be = test::backend();
    const std::size_t n = keys.size();
    std::vector<bn_u32> values(n);
    std::iota(values.begin(), values.end(), 0u);
    test::SortBuffers pairs(be, keys, values);
    pairs.keys_out.fill(0xdeadbeefdeadbeefull);
    pairs.values_out.fill(0xdeadbeefu);
    pairs.sort(begin_bit, end_bit);

    std::vector<bn_u32> order(n);
    std::iota(order.begin(), order.end(), 0u);
    std::stable_sort(order.begin(), order.end(), [&](bn_u32 a, bn_u32 b) {
        return field(keys[a], begin_bit, end_bit) < field(keys[b], begin_bit, end_bit);
    });
    const auto got_keys = pairs.keys_out.download();
    const auto got_values = pairs.values_out.download();
    std::size_t bad = 0, first_bad = n;
    for (std::size_t i = 0; i < n; ++i) {
        if (got_values[i] != order[i] || got_keys[i] != keys[order[i]]) {
            if (!bad) first_bad = i;
            ++bad;
        }
    }
    INFO("first wrong output at ", first_bad, " of ", n);
    CHECK(bad == 0);
    CHECK(pairs.keys_in.download() == keys);
    CHECK(pairs.values_in.download() == values);

    // Pair A the inputs, pair B the outputs.
    test::SortBuffers two(be, keys, values);
    two.keys_out.fill(0xdeadbeefdeadbeefull);
    two.values_out.fill(0xdeadbeefu);
    const bool in_b =
        be.sort_pairs_double(two.keys_in, two.values_in, two.keys_out, two.values_out, n, begin_bit, end_bit);
    const auto dk = (in_b ? two.keys_out : two.keys_in).download(n);
    const auto dv = (in_b ? two.values_out : two.values_in).download(n);
    std::size_t bad_double = 0;
    for (std::size_t i = 0; i < n; ++i)
        bad_double += dv[i] != order[i] || dk[i] != keys[order[i]];
    INFO("sort_pairs_double, result in pair ", in_b ? "B" : "A");
    CHECK(bad_double == 0);
}

struct Range {
    int begin_bit, end_bit;
};
// Full 63 and 64 bits, skipping low bits, skipping high bits, narrower than one digit, the top bits alone.
constexpr Range all_ranges[] = {{0, 63}, {0, 64}, {8, 40}, {0, 21}, {3, 7}, {61, 64}};

/// The size sweep at the default work-group size, and a shorter one at the others (fast on a 2-core CPU).
std::vector<std::size_t> sizes_for(std::size_t wg)
{
    const std::size_t limit =
        wg == BANYAN_WG_DEFAULT ? test::max_size() : std::min<std::size_t>(test::max_size(), 1 << 16);
    return test::edge_sizes(limit);
}

} // namespace

TEST_CASE("sort_pairs: random 63-bit keys over the full size sweep, every work-group size, both vendor modes")
{
    auto& be = test::backend();
    for (bool vendor : test::vendor_modes()) {
        be.set_vendor_primitives(vendor);
        for (std::size_t wg : test::work_group_sizes()) {
            be.set_work_group_size(wg);
            for (std::size_t n : sizes_for(wg)) {
                CAPTURE(vendor);
                CAPTURE(wg);
                CAPTURE(n);
                check_sort(make_keys(KeySet::random63, n), 0, 63);
            }
        }
    }
    test::restore_work_group_size();
    be.set_vendor_primitives(true);
}

TEST_CASE("sort_pairs: every key set and bit range")
{
    auto& be = test::backend();
    // Sizes around the tile edges at every work-group size, plus one large size with a partial last tile.
    const std::size_t large = std::min<std::size_t>(test::max_size(), std::size_t{1} << 18) + 3;
    for (bool vendor : test::vendor_modes()) {
        be.set_vendor_primitives(vendor);
        for (std::size_t wg : test::work_group_sizes()) {
            be.set_work_group_size(wg);
            const bool full = wg == BANYAN_WG_DEFAULT;
            std::vector<std::size_t> sizes{1, 255, 2049, 4097};
            if (full) sizes.push_back(large);
            for (const auto& [set, set_name] : key_sets) {
                for (const Range& r : all_ranges) {
                    // At the non-default sizes, every key set at the main ranges, and every range on random keys.
                    if (!full && !(r.begin_bit == 0 && r.end_bit >= 63) && set != KeySet::random64) continue;
                    for (std::size_t n : sizes) {
                        CAPTURE(vendor);
                        CAPTURE(wg);
                        CAPTURE(set_name);
                        CAPTURE(r.begin_bit);
                        CAPTURE(r.end_bit);
                        CAPTURE(n);
                        check_sort(make_keys(set, n), r.begin_bit, r.end_bit);
                    }
                }
            }
        }
    }
    test::restore_work_group_size();
    be.set_vendor_primitives(true);
}

TEST_CASE("sort_pairs: every begin bit and width on a small input")
{
    // Each pass count from 1 to 8, and last passes of every width, at odd offsets.
    auto& be = test::backend();
    for (bool vendor : test::vendor_modes()) {
        be.set_vendor_primitives(vendor);
        const auto keys = make_keys(KeySet::random64, 3001);
        for (int begin = 0; begin < 64; begin += 7)
            for (int end = begin + 1; end <= 64; end += 5) {
                CAPTURE(vendor);
                CAPTURE(begin);
                CAPTURE(end);
                check_sort(keys, begin, end);
            }
    }
    be.set_vendor_primitives(true);
}

TEST_CASE("sort_pairs: bad arguments are UsageErrors")
{
    auto& be = test::backend();
    auto k = be.alloc<bn_u64>(10, "k");
    auto v = be.alloc<bn_u32>(10, "v");
    auto ko = be.alloc<bn_u64>(10, "ko");
    auto vo = be.alloc<bn_u32>(10, "vo");
    auto small = be.alloc<bn_u64>(5, "small");
    for (bool vendor : test::vendor_modes()) {
        be.set_vendor_primitives(vendor);
        CHECK_THROWS_AS(be.sort_pairs(k, v, ko, vo, 10, 5, 5), UsageError);
        CHECK_THROWS_AS(be.sort_pairs(k, v, ko, vo, 10, -1, 5), UsageError);
        CHECK_THROWS_AS(be.sort_pairs(k, v, ko, vo, 10, 0, 65), UsageError);
        CHECK_THROWS_AS(be.sort_pairs(k, v, small, vo, 10, 0, 64), UsageError);
        CHECK_THROWS_AS(be.sort_pairs(k, v, k, vo, 10, 0, 64), UsageError);
        be.sort_pairs(k, v, ko, vo, 0, 0, 64); // n = 0 does nothing
    }
    be.set_vendor_primitives(true);
}

#ifdef BANYAN_HAVE_OPENCL
TEST_CASE("sort_pairs agrees with Boost.Compute's sort_by_key")
{
    auto* ocl = dynamic_cast<opencl::OpenCLBackend*>(&test::backend());
    if (!ocl) return; // an OpenCL oracle for the OpenCL backend
    namespace bc = boost::compute;
    static_assert(sizeof(bc::ulong_) == sizeof(bn_u64));
    bc::context context(ocl->context(), true);
    bc::command_queue queue(ocl->queue(), true);
    for (KeySet set : {KeySet::random64, KeySet::few}) {
        CAPTURE(name(set));
        const std::size_t n = (std::size_t{1} << 15) + 17;
        const auto keys = make_keys(set, n);
        std::vector<bn_u32> values(n);
        std::iota(values.begin(), values.end(), 0u);

        bc::vector<bc::ulong_> bkeys(n, context);
        bc::vector<bc::uint_> bvalues(n, context);
        queue.enqueue_write_buffer(bkeys.get_buffer(), 0, n * sizeof(bn_u64), keys.data());
        queue.enqueue_write_buffer(bvalues.get_buffer(), 0, n * sizeof(bn_u32), values.data());
        bc::sort_by_key(bkeys.begin(), bkeys.end(), bvalues.begin(), queue);
        std::vector<bn_u64> want_keys(n);
        std::vector<bn_u32> want_values(n);
        queue.enqueue_read_buffer(bkeys.get_buffer(), 0, n * sizeof(bn_u64), want_keys.data());
        queue.enqueue_read_buffer(bvalues.get_buffer(), 0, n * sizeof(bn_u32), want_values.data());

        const test::SortedPairs got = test::sorted_on_device(test::backend(), keys, values, 0, 64);
        CHECK(got.keys == want_keys);
        CHECK(got.values == want_values); // both sorts are stable
    }
}
#endif

TEST_CASE("sort timing" * doctest::skip())
{
    auto& be = test::backend();
    std::vector<std::size_t> sizes{std::size_t{1} << 20};
    if (test::on_gpu()) sizes.push_back(std::size_t{1} << 24);
    for (bool vendor : test::vendor_modes()) {
        be.set_vendor_primitives(vendor);
        for (std::size_t n : sizes) {
            const auto keys = make_keys(KeySet::random63, n);
            std::vector<bn_u32> values(n);
            std::iota(values.begin(), values.end(), 0u);
            test::SortBuffers b(be, keys, values);
            b.sort(0, 63); // warm-up: builds, scratch
            be.synchronize();
            const int reps = test::on_gpu() ? 20 : 3;
            std::vector<double> ms;
            for (int r = 0; r < reps; ++r) {
                auto a = be.record();
                b.sort(0, 63);
                auto end = be.record();
                ms.push_back(be.elapsed_ms(a, end));
            }
            std::sort(ms.begin(), ms.end());
            fmt::print("sort_pairs {} {} pairs, 63 bits, wg {}: median {:.3f} ms, min {:.3f} ms ({:.0f} Mpairs/s)\n",
                       vendor && be.info().backend == "cuda" ? "(CUB)" : "(ours)", n, be.work_group_size(),
                       ms[ms.size() / 2], ms[0], double(n) / ms[ms.size() / 2] * 1e-3);
        }
    }
    be.set_vendor_primitives(true);
}
