/**
 * @file workspace.hpp
 * @brief The layout of the octree's workspace as a type: each phase that borrows the workspace (the build's keys,
 *        sort, moves, cells, groups and multipoles; the walk; the domain decomposition) names its regions, and the
 *        layout checks that they neither overlap nor run past the workspace.
 *
 * The workspace is one device buffer of slots of 4 bytes per particle (Octree::slot_bytes()), whose phases never
 * run at once, so that the build, the walk and the decomposition need no scratch memory of their own (paper section
 * 3.3 counts memory the same way). A region is either whole slots (Layout::slots) or packed behind the regions
 * before it (Layout::next); every region is a named view of the workspace.
 */
#pragma once

#include "core/device/buffer.hpp"

#include <cstddef>
#include <string>
#include <vector>

namespace banyan {

/// A region of a workspace layout: @p count elements of T from byte @p offset.
template <class T> struct WorkspaceRegion {
    std::size_t offset = 0;
    std::size_t count = 0;
};

/// One phase's regions in the workspace. Regions are checked as they are added: one that overlaps another region of
/// the same phase is a logic error (a bug in banyan, never a user's mistake), thrown as std::logic_error naming both;
/// so is a view of a workspace smaller than the layout.
class WorkspaceLayout {
public:
    /// @p phase names the phase in errors; @p slot_bytes is the workspace's slot size; @p align the device's view
    /// alignment (every region starts on it).
    WorkspaceLayout(std::string phase, std::size_t slot_bytes, std::size_t align);

    /// A region of @p n elements of T (room for at least one) from slot @p first.
    template <class T> WorkspaceRegion<T> slots(const char* name, std::size_t first, std::size_t n)
    {
        return {add(name, first * slot_bytes_, bytes_of<T>(n)), n};
    }
    /// A region of @p n elements of T (room for at least one) behind the furthest region so far.
    template <class T> WorkspaceRegion<T> next(const char* name, std::size_t n)
    {
        return {add(name, end(), bytes_of<T>(n)), n};
    }

    /// The first byte behind every region, aligned: the workspace bytes this layout needs.
    std::size_t end() const noexcept;

    /// Region @p r of @p workspace.
    template <class T> Buffer<T> view(const Buffer<unsigned char>& workspace, const WorkspaceRegion<T>& r) const
    {
        check_fits(workspace.size());
        return workspace.view_as<T>(r.offset, r.count);
    }

private:
    struct Region {
        std::string name;
        std::size_t offset = 0, bytes = 0;
    };
    template <class T> static std::size_t bytes_of(std::size_t n) { return (n < 1 ? 1 : n) * sizeof(T); }
    std::size_t add(const char* name, std::size_t offset, std::size_t bytes);
    void check_fits(std::size_t workspace_bytes) const;

    std::string phase_;
    std::size_t slot_bytes_, align_;
    std::vector<Region> regions_;
};

} // namespace banyan
