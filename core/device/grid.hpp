/**
 * @file grid.hpp
 * @brief Sizes of kernel launches: the grid of work-groups, the grid over a number of work-items, and the one checked
 *        narrowing of host sizes to the kernels' 32-bit counts and indices.
 */
#pragma once

#include "core/device_shared.h"

#include <cstddef>

namespace banyan {

class Backend;

/// How many work-groups of how many work-items (1-D). OpenCL's global size is groups * local.
struct Grid {
    std::size_t groups = 0;
    std::size_t local = 0;
};

/// The most work-items, and the largest count or index, that a kernel's 32-bit unsigned integers hold.
inline constexpr std::size_t max_u32 = 0xFFFFFFFFu;

[[noreturn]] void throw_not_u32(std::size_t n);

/// @p n as the bn_u32 that kernels take for counts and indices; throws UsageError naming @p n when it does not fit.
inline bn_u32 to_u32(std::size_t n)
{
    if (n > max_u32) throw_not_u32(n);
    return static_cast<bn_u32>(n);
}

/// One work-item per item of @p items, in work-groups of @p be's work_group_size() (the last one partly idle;
/// none for no items). Throws UsageError when @p items exceeds what the kernels' 32-bit indices reach.
Grid grid_for(const Backend& be, std::size_t items);

} // namespace banyan
