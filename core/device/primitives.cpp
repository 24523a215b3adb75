/**
 * @file primitives.cpp
 * @brief Portable host drivers of the parallel primitives (scan, bounds, sum, compact, split, gather).
 *
 * These are Backend's default implementations: they launch the kernels of kernels_cu/ and kernels_cl/ {scan,
 * compact, reduce, gather} through their typed handles (core/device/kernels.hpp), so the same driver runs on both
 * backends (CUDA may override some with CUB, see backend_cuda/vendor_scan.cu). No driver waits for the device:
 * results, counts included, stay on the device.
 *
 * Scan is reduce-then-scan over tiles of work_group_size() * BANYAN_SCAN_ITEMS items: one sum per tile, then a scan
 * of each tile plus its offset. While the tile sums fit one tile, each group adds up the sums before its tile itself
 * (two launches: the tree build makes many small calls); beyond that the sums are scanned first by the same driver,
 * one level deeper. No work-group waits for another, which OpenCL could not guarantee to finish. Compact and split
 * use the same tiles and passes, with a scatter that reorders each tile in local memory in place of the scan.
 */
#include "core/device/backend.hpp"
#include "core/error.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <limits>
#include <utility>

namespace banyan {

namespace {

// Mode bits of scanReduce / scanDownsweep (kernels_*/scan.*) and compactScatter (kernels_*/compact.*), defined once
// in core/device_shared.h for the host and both kernel languages.
constexpr bn_u32 scan_inclusive = BANYAN_SCAN_INCLUSIVE;
constexpr bn_u32 scan_offsets = BANYAN_SCAN_OFFSETS;
constexpr bn_u32 scan_total = BANYAN_SCAN_TOTAL;
constexpr bn_u32 scan_nonzero = BANYAN_SCAN_NONZERO;
constexpr bn_u32 scan_lookup = BANYAN_SCAN_LOOKUP;
constexpr bn_u32 compact_split = BANYAN_COMPACT_SPLIT;
constexpr bn_u32 compact_single = BANYAN_COMPACT_SINGLE;
constexpr bn_u32 compact_lookup = BANYAN_COMPACT_LOOKUP;

// Partial results of the reductions: at most this many groups in their first pass.
constexpr std::size_t reduce_max_groups = 1024;

// Items are indexed with 32-bit unsigned integers on the device; keep a tile of headroom below 2^32.
constexpr std::size_t max_items = std::size_t{0xF0000000u};

void check_size(std::size_t n, const char* what)
{
    if (n > max_items) throw UsageError(fmt::format("{}: {} items is more than the {} supported", what, n, max_items));
}

template <class T> void check_capacity(const Buffer<T>& b, std::size_t n, const char* what, const char* name)
{
    if (b.size() < n)
        throw UsageError(fmt::format("{}: buffer '{}' holds {} items, {} are needed", what, name, b.size(), n));
}

/// Launches @p kernel over @p groups work-groups of the primitives' work-group size.
template <class... P, class... A> void run(Backend& be, const Kernel<P...>& kernel, std::size_t groups, A&&... args)
{
    be.launch(kernel, Grid{groups, be.work_group_size()}, std::forward<A>(args)...);
}

std::size_t ceil_div(std::size_t a, std::size_t b)
{
    return (a + b - 1) / b;
}

/// Scans in[0..n) into out (which may be in). With @p total, the grand total lands in total[0] on the device.
/// @p level names the scratch buffer of this level's tile sums ("scan.partials.<level>").
void scan_levels(Backend& be, const Buffer<bn_u32>& in, Buffer<bn_u32>& out, std::size_t n, bool inclusive,
                 Buffer<bn_u32>* total, int level)
{
    if (n == 0) return;
    const std::size_t tile = be.work_group_size() * BANYAN_SCAN_ITEMS;
    const std::size_t tiles = ceil_div(n, tile);
    bn_u32 mode = inclusive ? scan_inclusive : 0;
    if (tiles == 1) {
        // One tile: a single group scans it; the total (if asked for) is its sum.
        if (total)
            run(be, kernels::scanDownsweep, 1, in, out, to_u32(n), in, *total, mode | scan_total);
        else
            run(be, kernels::scanDownsweep, 1, in, out, to_u32(n), in, out, mode);
        return;
    }
    Buffer<bn_u32>& partials = be.scratch_buffer<bn_u32>(fmt::format("scan.partials.{}", level), tiles);
    run(be, kernels::scanReduce, tiles, in, to_u32(n), partials, bn_u32{0});
    if (tiles <= tile) {
        // Few enough tile sums that each group adds up those before it: two launches, no scan of the sums.
        if (total)
            run(be, kernels::scanDownsweep, tiles, in, out, to_u32(n), partials, *total,
                mode | scan_lookup | scan_total);
        else
            run(be, kernels::scanDownsweep, tiles, in, out, to_u32(n), partials, out, mode | scan_lookup);
        return;
    }
    scan_levels(be, partials, partials, tiles, false, total, level + 1); // tile offsets, and the total
    run(be, kernels::scanDownsweep, tiles, in, out, to_u32(n), partials, out, mode | scan_offsets);
}

/// compact and split: count the flags of each tile, turn the counts into offsets (and count[0]), scatter.
void compact_or_split(Backend& be, const Buffer<bn_u32>& in, const Buffer<bn_u32>& flags, std::size_t n,
                      Buffer<bn_u32>& out, Buffer<bn_u32>& count, bool split)
{
    const char* what = split ? "split" : "compact";
    check_size(n, what);
    check_capacity(in, n, what, "in");
    check_capacity(flags, n, what, "flags");
    check_capacity(out, n, what, "out");
    check_capacity(count, 1, what, "count");
    if (n == 0) {
        count.fill(0u, 0, 1);
        return;
    }
    const std::size_t tile = be.work_group_size() * BANYAN_SCAN_ITEMS;
    const std::size_t tiles = ceil_div(n, tile);
    const bn_u32 mode = split ? compact_split : 0;
    if (tiles == 1) {
        // The scatter's one group counts, places and writes count[0] itself: one launch for small inputs.
        run(be, kernels::compactScatter, 1, in, flags, to_u32(n), flags, out, count, mode | compact_single);
        return;
    }
    Buffer<bn_u32>& offsets = be.scratch_buffer<bn_u32>("compact.tiles", tiles);
    run(be, kernels::scanReduce, tiles, flags, to_u32(n), offsets, scan_nonzero);
    if (tiles <= tile) {
        // Few enough tile counts that each group adds up what it needs: two launches, no scan of the counts.
        run(be, kernels::compactScatter, tiles, in, flags, to_u32(n), offsets, out, count, mode | compact_lookup);
        return;
    }
    scan_levels(be, offsets, offsets, tiles, false, &count, 0); // offsets, and count[0] = the total
    run(be, kernels::compactScatter, tiles, in, flags, to_u32(n), offsets, out, count, mode);
}

} // namespace

void Backend::exclusive_scan(const Buffer<bn_u32>& in, Buffer<bn_u32>& out, std::size_t n)
{
    check_size(n, "exclusive_scan");
    check_capacity(in, n, "exclusive_scan", "in");
    check_capacity(out, n, "exclusive_scan", "out");
    scan_levels(*this, in, out, n, false, nullptr, 0);
}

void Backend::inclusive_scan(const Buffer<bn_u32>& in, Buffer<bn_u32>& out, std::size_t n)
{
    check_size(n, "inclusive_scan");
    check_capacity(in, n, "inclusive_scan", "in");
    check_capacity(out, n, "inclusive_scan", "out");
    scan_levels(*this, in, out, n, true, nullptr, 0);
}

void Backend::reduce_bounds(const Buffer<bn_f4>& in, std::size_t n, Buffer<bn_f4>& out)
{
    check_size(n, "reduce_bounds");
    if (n == 0) throw UsageError("reduce_bounds: needs at least one item");
    check_capacity(in, n, "reduce_bounds", "in");
    check_capacity(out, 2, "reduce_bounds", "out");
    const std::size_t groups = std::min(ceil_div(n, work_group_size() * BANYAN_REDUCE_ITEMS), reduce_max_groups);
    if (groups == 1) {
        run(*this, kernels::reduceBounds, 1, in, to_u32(n), bn_u32{0}, out);
        return;
    }
    Buffer<bn_f4>& partials = scratch_buffer<bn_f4>("reduce.bounds", 2 * groups);
    run(*this, kernels::reduceBounds, groups, in, to_u32(n), bn_u32{0}, partials);
    run(*this, kernels::reduceBounds, 1, partials, to_u32(groups), bn_u32{1}, out);
}

void Backend::reduce_sum(const Buffer<double>& in, std::size_t n, Buffer<double>& out)
{
    check_size(n, "reduce_sum");
    check_capacity(in, n, "reduce_sum", "in");
    check_capacity(out, 1, "reduce_sum", "out");
    const std::size_t groups = std::min(ceil_div(n, work_group_size() * BANYAN_REDUCE_ITEMS), reduce_max_groups);
    if (groups <= 1) {
        run(*this, kernels::reduceSum, 1, in, to_u32(n), out); // n = 0 writes 0
        return;
    }
    Buffer<double>& partials = scratch_buffer<double>("reduce.sum", groups);
    run(*this, kernels::reduceSum, groups, in, to_u32(n), partials);
    run(*this, kernels::reduceSum, 1, partials, to_u32(groups), out);
}

void Backend::compact(const Buffer<bn_u32>& in, const Buffer<bn_u32>& flags, std::size_t n, Buffer<bn_u32>& out,
                      Buffer<bn_u32>& count)
{
    compact_or_split(*this, in, flags, n, out, count, false);
}

void Backend::split(const Buffer<bn_u32>& in, const Buffer<bn_u32>& flags, std::size_t n, Buffer<bn_u32>& out,
                    Buffer<bn_u32>& count)
{
    compact_or_split(*this, in, flags, n, out, count, true);
}

void Backend::check_gather(const Buffer<bn_u32>& perm, std::size_t n, std::size_t out_bytes,
                           std::size_t elem_bytes) const
{
    check_size(n, "gather");
    check_capacity(perm, n, "gather", "perm");
    if (out_bytes < n * elem_bytes)
        throw UsageError(fmt::format("gather: the output holds {} bytes, {} are needed", out_bytes, n * elem_bytes));
}

} // namespace banyan
