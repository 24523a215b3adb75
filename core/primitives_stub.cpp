// TEMPORARY: replaced by core/primitives.cpp and core/radix_sort.cpp.
#include "backend.hpp"
#include "error.hpp"
namespace banyan {
void Backend::exclusive_scan(const Buffer<bn_u32>&, Buffer<bn_u32>&, std::size_t) { throw UsageError("todo"); }
void Backend::inclusive_scan(const Buffer<bn_u32>&, Buffer<bn_u32>&, std::size_t) { throw UsageError("todo"); }
void Backend::reduce_bounds(const Buffer<bn_f4>&, std::size_t, Buffer<bn_f4>&) { throw UsageError("todo"); }
void Backend::reduce_sum(const Buffer<double>&, std::size_t, Buffer<double>&) { throw UsageError("todo"); }
void Backend::compact(const Buffer<bn_u32>&, const Buffer<bn_u32>&, std::size_t, Buffer<bn_u32>&, Buffer<bn_u32>&) { throw UsageError("todo"); }
void Backend::split(const Buffer<bn_u32>&, const Buffer<bn_u32>&, std::size_t, Buffer<bn_u32>&, Buffer<bn_u32>&) { throw UsageError("todo"); }
void Backend::sort_pairs(const Buffer<bn_u64>&, const Buffer<bn_u32>&, Buffer<bn_u64>&, Buffer<bn_u32>&, std::size_t, int, int) { throw UsageError("todo"); }
void Backend::gather_raw(const RawBuffer&, const Buffer<bn_u32>&, std::size_t, RawBuffer&, std::size_t) { throw UsageError("todo"); }
}
