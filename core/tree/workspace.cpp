/**
 * @file workspace.cpp
 * @brief The checks of a workspace layout.
 */
#include "core/tree/workspace.hpp"

#include <fmt/format.h>

#include <stdexcept>

namespace banyan {

WorkspaceLayout::WorkspaceLayout(std::string phase, std::size_t slot_bytes, std::size_t align)
    : phase_(std::move(phase)), slot_bytes_(slot_bytes), align_(align < 1 ? 1 : align)
{
}

std::size_t WorkspaceLayout::end() const noexcept
{
    std::size_t e = 0;
    for (const Region& r : regions_)
        e = std::max(e, r.offset + r.bytes);
    return (e + align_ - 1) / align_ * align_;
}

std::size_t WorkspaceLayout::add(const char* name, std::size_t offset, std::size_t bytes)
{
    if (offset % align_ != 0)
        throw std::logic_error(fmt::format("workspace layout of {}: region '{}' at byte {} is not aligned to {}",
                                           phase_, name, offset, align_));
    for (const Region& r : regions_)
        if (offset < r.offset + r.bytes && r.offset < offset + bytes)
            throw std::logic_error(fmt::format("workspace layout of {}: region '{}' (bytes {} to {}) overlaps '{}' "
                                               "(bytes {} to {})",
                                               phase_, name, offset, offset + bytes, r.name, r.offset,
                                               r.offset + r.bytes));
    regions_.push_back(Region{name, offset, bytes});
    return offset;
}

void WorkspaceLayout::check_fits(std::size_t workspace_bytes) const
{
    if (workspace_bytes < end())
        throw std::logic_error(fmt::format("workspace layout of {}: needs {} bytes, the workspace holds {}", phase_,
                                           end(), workspace_bytes));
}

} // namespace banyan
