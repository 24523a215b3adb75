/**
 * @file grid.cpp
 * @brief The launch-size helpers of grid.hpp.
 */
#include "core/device/grid.hpp"

#include "core/device/backend.hpp"
#include "core/error.hpp"

#include <fmt/format.h>

namespace banyan {

void throw_not_u32(std::size_t n)
{
    throw UsageError(fmt::format("{} does not fit the 32-bit unsigned integers that the device kernels count and "
                                 "index with (at most {})",
                                 n, max_u32));
}

Grid grid_for(const Backend& be, std::size_t items)
{
    if (items > max_u32)
        throw UsageError(fmt::format("a launch over {} items: more than the {} that the device kernels' 32-bit "
                                     "indices reach",
                                     items, max_u32));
    const std::size_t wg = be.work_group_size();
    return Grid{(items + wg - 1) / wg, wg};
}

} // namespace banyan
