// TEMPORARY: replaced by core/primitives.cpp and core/radix_sort.cpp.
#include "backend.hpp"
#include "error.hpp"
namespace banyan {
void Backend::sort_pairs(const Buffer<bn_u64>&, const Buffer<bn_u32>&, Buffer<bn_u64>&, Buffer<bn_u32>&, std::size_t, int, int) { throw UsageError("todo"); }
}
