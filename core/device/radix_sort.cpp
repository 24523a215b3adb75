/**
 * @file radix_sort.cpp
 * @brief The portable host driver of the stable LSD radix sort of (64-bit key, 32-bit value) pairs.
 *
 * Backend's default sort_pairs (CUDA overrides it with CUB while vendor primitives are on, see
 * backend_cuda/vendor_sort.cu). One pass per BANYAN_RADIX_BITS-bit digit of [begin_bit, end_bit), the last one
 * masked to the bits left; each pass is histogram -> exclusive scan -> scatter (kernels_cu/ and kernels_cl/
 * radix_sort), with tiles of work_group_size() * BANYAN_SORT_ITEMS pairs. The passes ping-pong between the
 * outputs and two scratch buffers, arranged so that the last pass lands in the outputs and the inputs are only
 * read. Nothing waits for the device.
 */
#include "core/device/backend.hpp"
#include "core/error.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>

namespace banyan {

namespace {

// Items are indexed with 32-bit unsigned integers on the device; keep a tile of headroom below 2^32.
constexpr std::size_t sort_max_items = std::size_t{0xF0000000u};

template <class T> void check_capacity(const Buffer<T>& b, std::size_t n, const char* name)
{
    if (b.size() < n)
        throw UsageError(fmt::format("sort_pairs: buffer '{}' holds {} items, {} are needed", name, b.size(), n));
}

/// The checks of both sorts: the bit range, the number of items, and the four buffers' sizes (each named as the
/// sort's parameter: @p names, in the order of the buffers).
void check_sort_args(std::size_t n, int begin_bit, int end_bit, const Buffer<bn_u64>& keys_a,
                     const Buffer<bn_u32>& values_a, const Buffer<bn_u64>& keys_b, const Buffer<bn_u32>& values_b,
                     const std::array<const char*, 4>& names)
{
    if (begin_bit < 0 || end_bit > 64 || begin_bit >= end_bit)
        throw UsageError(
            fmt::format("sort_pairs: bit range [{}, {}) needs 0 <= begin_bit < end_bit <= 64", begin_bit, end_bit));
    if (n > sort_max_items)
        throw UsageError(fmt::format("sort_pairs: {} items is more than the {} supported", n, sort_max_items));
    check_capacity(keys_a, n, names[0]);
    check_capacity(values_a, n, names[1]);
    check_capacity(keys_b, n, names[2]);
    check_capacity(values_b, n, names[3]);
}

} // namespace

void Backend::radix_pass(const Buffer<bn_u64>& src_keys, const Buffer<bn_u32>& src_values, Buffer<bn_u64>& dst_keys,
                         Buffer<bn_u32>& dst_values, std::size_t n, int shift, int bits)
{
    const std::size_t wg = work_group_size();
    const std::size_t tile = wg * BANYAN_SORT_ITEMS;
    const std::size_t groups = (n + tile - 1) / tile;
    const bn_u32 mask = (1u << bits) - 1u;
    const std::size_t hist_len = std::size_t{mask + 1} * groups;
    // hist[digit * groups + group]: the counts, then (scanned in place) the first output position of each.
    Buffer<bn_u32>& hist = scratch_buffer<bn_u32>("sort.hist", std::size_t{BANYAN_RADIX_DIGITS} * groups);
    const Grid grid{groups, wg};
    launch(kernels::radixHistogram, grid, src_keys, to_u32(n), static_cast<bn_u32>(shift), mask, hist, to_u32(groups));
    exclusive_scan(hist, hist, hist_len);
    launch(kernels::radixScatter, grid, src_keys, src_values, dst_keys, dst_values, to_u32(n),
           static_cast<bn_u32>(shift), mask, hist, to_u32(groups));
}

bool Backend::sort_pairs_double(Buffer<bn_u64>& keys, Buffer<bn_u32>& values, Buffer<bn_u64>& keys_alt,
                                Buffer<bn_u32>& values_alt, std::size_t n, int begin_bit, int end_bit)
{
    check_sort_args(n, begin_bit, end_bit, keys, values, keys_alt, values_alt,
                    {"keys", "values", "keys_alt", "values_alt"});
    if (n == 0) return false;
    const int passes = (end_bit - begin_bit + BANYAN_RADIX_BITS - 1) / BANYAN_RADIX_BITS;
    for (int pass = 0; pass < passes; ++pass) {
        const int shift = begin_bit + pass * BANYAN_RADIX_BITS;
        const int bits = std::min(BANYAN_RADIX_BITS, end_bit - shift);
        if (pass % 2 == 0)
            radix_pass(keys, values, keys_alt, values_alt, n, shift, bits);
        else
            radix_pass(keys_alt, values_alt, keys, values, n, shift, bits);
    }
    return passes % 2 == 1;
}

void Backend::sort_pairs(const Buffer<bn_u64>& keys_in, const Buffer<bn_u32>& values_in, Buffer<bn_u64>& keys_out,
                         Buffer<bn_u32>& values_out, std::size_t n, int begin_bit, int end_bit)
{
    check_sort_args(n, begin_bit, end_bit, keys_in, values_in, keys_out, values_out,
                    {"keys_in", "values_in", "keys_out", "values_out"});
    if (n == 0) return;
    if (&keys_in.raw() == &keys_out.raw() || &values_in.raw() == &values_out.raw())
        throw UsageError("sort_pairs: the outputs must not alias the inputs");

    const int passes = (end_bit - begin_bit + BANYAN_RADIX_BITS - 1) / BANYAN_RADIX_BITS;
    Buffer<bn_u64>* tmp_keys = nullptr;
    Buffer<bn_u32>* tmp_values = nullptr;
    if (passes > 1) {
        tmp_keys = &scratch_buffer<bn_u64>("sort.keys", n);
        tmp_values = &scratch_buffer<bn_u32>("sort.values", n);
    }

    const Buffer<bn_u64>* src_keys = &keys_in;
    const Buffer<bn_u32>* src_values = &values_in;
    for (int pass = 0; pass < passes; ++pass) {
        const int shift = begin_bit + pass * BANYAN_RADIX_BITS;
        const int bits = std::min(BANYAN_RADIX_BITS, end_bit - shift);
        // Odd distance from the last pass: the scratch pair; even: the outputs.
        const bool to_out = (passes - 1 - pass) % 2 == 0;
        Buffer<bn_u64>& dst_keys = to_out ? keys_out : *tmp_keys;
        Buffer<bn_u32>& dst_values = to_out ? values_out : *tmp_values;

        radix_pass(*src_keys, *src_values, dst_keys, dst_values, n, shift, bits);
        src_keys = &dst_keys;
        src_values = &dst_values;
    }
}

} // namespace banyan
