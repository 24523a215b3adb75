/**
 * @file octree.hpp
 * @brief The sparse octree built entirely on the device (paper sections 2.1, 3.2, 3.3): keys, sort, the cells of
 *        all levels at once, linking, groups for the walk and multipoles, on either backend.
 *
 * The order of the phases, the sizes and the ownership of every device buffer live here once; each kernel exists
 * twice, in kernels_cu/tree_*.cu and kernels_cl/tree_*.cl, under the same name. Conventions (frame, keys, cell
 * order, array meanings) are in tree_shared.h.
 */
#pragma once

#include "core/device/backend.hpp"
#include "core/tree/opening.hpp"
#include "core/tree/workspace.hpp"
#include "core/tree_shared.h"

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

namespace banyan {

/// Device time of each phase of one build, in milliseconds (device events; the build phase includes the wait for
/// the level counts, which is part of its cost).
struct TreeTimings {
    double keys = 0;       ///< bounding box and keys
    double sort = 0;       ///< radix sort of (key, index)
    double move = 0;       ///< particle arrays reordered
    double build = 0;      ///< cells of every level
    double link = 0;       ///< parents, children
    double groups = 0;     ///< groups and their boxes
    double multipoles = 0; ///< mass, centre of mass, quadrupoles, sizes
    double total = 0;
};

/// The octree's device memory (paper section 3.3 counts the same way): particles, cells and groups are kept from
/// build to build; everything else a build needs for a moment (keys, the sort's double buffers, the permutation,
/// the level lists, the double-precision moments) lives in one workspace, seven slots of 4 bytes per particle,
/// whose phases never overlap. The walk uses the same workspace for its results and per-cell data once the build
/// is done (TreeForces), so a force evaluation needs no scratch memory of its own.
///
/// Each phase that borrows the workspace declares its regions by name in a WorkspaceLayout (workspace.hpp), which
/// checks that they neither overlap nor outgrow it; the layouts live with the phases: the build's in octree.cpp
/// (compute_keys to make_groups), the walk's in TreeForces::launch_local (forces.cpp; its accelerations, in slots
/// 0-3, stay valid until the next build), the domain decomposition's in Decomposition::balance (domain.cpp) and
/// the way back to input order in Simulation::input_order (simulation.cpp).
class Octree {
public:
    using Levels = std::array<std::size_t, BANYAN_TREE_LEVELS + 1>;

    explicit Octree(Backend& be);
    Octree(const Octree&) = delete;
    Octree& operator=(const Octree&) = delete;

    /// Uploads @p pos (x, y, z, mass) and @p vel (may be empty: the tree then keeps no velocities); particle i
    /// gets id i.
    void set_particles(std::span<const bn_f4> pos, std::span<const bn_f4> vel = {});
    /// As above with the ids given (ids[i] for particle i; a restart keeps each particle's identity and order). Ids
    /// of 2^32 or more need keep_high_ids(true) first (std::logic_error otherwise).
    void set_particles(std::span<const bn_f4> pos, std::span<const bn_f4> vel, std::span<const std::uint64_t> ids);
    /// Sets the ids of particles [at, at + ids.size()) (both words, where the high ones are kept).
    void set_ids(std::span<const std::uint64_t> ids, std::size_t at = 0);
    /// Makes room for @p n particles (with velocities when @p with_vel) and sets size() to n; the particle
    /// arrays are then filled by the caller on the device (Simulation streams its initial conditions in).
    void resize(std::size_t n, bool with_vel);
    /// Sets size() to @p n keeping the first min(size(), n) particles (positions, velocities when kept, ids, rungs);
    /// the others are for the caller to fill. The arrays grow with an eighth to spare when they must (a rank's share of
    /// the particles changes a little every step, core/parallel/domain.hpp).
    void resize_keep(std::size_t n);

    /// Builds the whole tree from the particles on the device, reordering them (and their ids) into key order.
    /// Overwrites the workspace (and so the results of the last walk).
    /// @param[out] timings when given, the device time of each phase (adds device events; no other cost).
    void build(TreeTimings* timings = nullptr);

    /// The box whose frame (tree_shared.h) the builds that follow use instead of the particles' own bounding box,
    /// whenever every particle lies inside that frame (else a build falls back to its own box); nullopt: always
    /// the particles' own box (the default). Over ranks the decomposition sets it (domain.hpp): every cell of the
    /// local tree is then a cell of the frame common to all ranks, whose key ranges the ranks hold, so no cell
    /// holds a thin slice of this rank's particles beside another rank's domain (such a slice is a group of a few
    /// particles spread across a large cell, whose walk opens every cell near that wide box).
    void set_frame_box(std::optional<std::array<bn_f4, 2>> box) noexcept { frame_box_ = box; }
    const std::optional<std::array<bn_f4, 2>>& frame_box() const noexcept { return frame_box_; }
    /// Whether the last build used the box of set_frame_box.
    bool built_in_frame_box() const noexcept { return in_frame_box_; }

    /// Over ranks (core/parallel/let.hpp): room behind the built tree for @p cells more cells in the five arrays
    /// the walk reads (cell_com, cell_quad0, cell_quad1, cell_first, cell_count) and for @p particles more positions
    /// in pos(), the tree kept. The other ranks' trees are written there (graft()), and one walk runs over all of
    /// them without a copy of the local tree (16 bytes a particle and 56 a cell). The room stays for the builds
    /// that follow, whose grafts are about as large.
    void make_room_behind(std::size_t cells, std::size_t particles);
    /// The arrays of make_room_behind, writable: the local tree in front, what is grafted behind it.
    struct Graft {
        Buffer<bn_f4>& com;
        Buffer<bn_f4>& quad0;
        Buffer<bn_f4>& quad1;
        Buffer<bn_u32>& first;
        Buffer<bn_u32>& count;
        Buffer<bn_f4>& pos;
    };
    Graft graft() noexcept { return {cell_com_, cell_quad0_, cell_quad1_, cell_first_, cell_count_, pos_}; }

    /// The opening criterion of the builds that follow (the default: the paper's).
    void set_opening(Opening o) noexcept { opening_ = o; }
    Opening opening() const noexcept { return opening_; }

    std::size_t size() const noexcept { return n_; }
    std::size_t cells() const noexcept { return level_begin_[BANYAN_TREE_LEVELS]; }
    std::size_t groups() const noexcept { return n_groups_; }
    /// Deepest level that holds a cell (-1 for no particles).
    int depth() const noexcept { return depth_; }
    /// Level L holds cells [level_begin()[L], level_begin()[L + 1]).
    const Levels& level_begin() const noexcept { return level_begin_; }
    /// The most cells any level holds (a walk's level list is never longer, TreeForces).
    std::size_t widest_level() const noexcept
    {
        std::size_t w = 0;
        for (int l = 0; l < BANYAN_TREE_LEVELS; ++l)
            w = std::max(w, level_begin_[l + 1] - level_begin_[l]);
        return w;
    }

    /// Bytes per workspace slot (4 per particle, rounded up to the device's view alignment).
    std::size_t slot_bytes() const noexcept { return slot_; }
    /// An empty layout of the workspace for @p phase: slots of slot_bytes(), regions aligned for the device's views.
    WorkspaceLayout workspace_layout(std::string phase) const;
    /// The workspace, grown to at least @p bytes (and 7 slots); growing keeps its first @p keep bytes and loses the
    /// rest. Between the end of one build() and the start of the next the walk (and before it, over ranks, the
    /// selection of the local essential trees) may use all of it. Views of it come from a layout's view().
    Buffer<unsigned char>& workspace(std::size_t bytes, std::size_t keep = 0);

    // Particles (size() elements valid), in key order after build().
    Buffer<bn_f4>& pos() noexcept { return pos_; }
    const Buffer<bn_f4>& pos() const noexcept { return pos_; }
    Buffer<bn_f4>& vel() noexcept { return vel_; }
    /// The low 32 bits of each particle's id: what the kernels read (a particle's index among one tree's, < 2^31).
    Buffer<bn_u32>& ids() noexcept { return id_; }
    const Buffer<bn_u32>& ids() const noexcept { return id_; }
    /// The high 32 bits of each particle's id, kept and moved with the particles only after keep_high_ids(true) (4
    /// bytes per particle; empty otherwise, every id then below 2^32). Over ranks an id is the particle's index in
    /// the input, up to the run's total, which may pass 2^32 though each tree holds fewer than 2^31 particles: the
    /// second word costs nothing in runs whose ids fit one (docs/parallel.md, "Particle ids").
    void keep_high_ids(bool on);
    bool high_ids_kept() const noexcept { return keep_high_ids_; }
    Buffer<bn_u32>& id_high() noexcept { return id_high_; }
    const Buffer<bn_u32>& id_high() const noexcept { return id_high_; }
    /// The ids of the size() particles in their current order, both words joined.
    std::vector<std::uint64_t> download_ids() const;
    /// Block time steps: each particle's rung (core/simulation/simulation.hpp), kept and moved with the particles
    /// only after keep_rungs(true) (4 bytes per particle); empty otherwise. Its contents are the caller's.
    void keep_rungs(bool on);
    Buffer<bn_u32>& rungs() noexcept { return rung_; }
    const Buffer<bn_u32>& rungs() const noexcept { return rung_; }
    /// The keys of the particles in their current order, computed afresh in the frame of the last build (for
    /// tests: the build keeps them only while it needs them).
    Buffer<bn_u64> keys() const;
    /// (lo.x, lo.y, lo.z, side) of the last build.
    const Buffer<bn_f4>& frame() const noexcept { return frame_; }

    // Cells (cells() elements valid); meanings in tree_shared.h.
    const Buffer<bn_u64>& cell_key() const noexcept { return cell_key_; }
    const Buffer<bn_u32>& cell_level() const noexcept { return cell_level_; }
    const Buffer<bn_u32>& cell_parent() const noexcept { return cell_parent_; }
    const Buffer<bn_u32>& cell_first() const noexcept { return cell_first_; }
    const Buffer<bn_u32>& cell_count() const noexcept { return cell_count_; }
    const Buffer<bn_u32>& cell_pbegin() const noexcept { return cell_pbegin_; }
    const Buffer<bn_u32>& cell_pcount() const noexcept { return cell_pcount_; }
    const Buffer<bn_f4>& cell_com() const noexcept { return cell_com_; }
    const Buffer<bn_f4>& cell_quad0() const noexcept { return cell_quad0_; }
    const Buffer<bn_f4>& cell_quad1() const noexcept { return cell_quad1_; }

    // Groups (groups() elements valid).
    const Buffer<bn_u32>& group_first() const noexcept { return group_first_; }
    const Buffer<bn_u32>& group_count() const noexcept { return group_count_; }
    const Buffer<bn_f4>& group_lo() const noexcept { return group_lo_; }
    const Buffer<bn_f4>& group_hi() const noexcept { return group_hi_; }
    /// groups() on the device (one word), what the walk reads.
    const Buffer<bn_u32>& group_total() const noexcept { return group_total_; }
    /// Fits the groups' boxes to @p points (tree order, at least size() elements) instead of the particles: a walk
    /// for targets at other positions than the particles' (TreeForces::set_sinks) needs boxes around the targets.
    /// fit_group_boxes(pos()) gives back the build's boxes, to the bit.
    void fit_group_boxes(const Buffer<bn_f4>& points);

    /// For tests: fills every array a build writes (whole capacity, and the workspace from slot 4 on: slots 0-3 may
    /// hold the accelerations a simulation's next drift reads) with a sentinel, so that an element no phase writes
    /// shows as wrong instead of keeping a plausible value from an earlier build.
    void poison();

private:
    void reserve_particles(std::size_t n, bool with_vel);
    void grow_cells(std::size_t n, std::size_t keep);
    // The phases of build(), in order. sort_keys returns the first slot of the pair holding the sorted keys.
    void compute_keys();
    std::size_t sort_keys();
    void move_particles(std::size_t pair);
    void build_cells(std::size_t pair);
    void link_cells();
    void make_groups();
    void compute_multipoles();

    Backend& be_;
    std::size_t n_ = 0;
    std::size_t n_groups_ = 0;
    Opening opening_ = Opening::paper;
    int depth_ = -1;
    Levels level_begin_{};
    std::size_t slot_ = 0; // workspace slot bytes

    // Particles, kept in key order.
    Buffer<bn_f4> pos_, vel_;
    Buffer<bn_u32> id_;
    Buffer<bn_u32> id_high_; // with keep_high_ids(true) only
    bool keep_high_ids_ = false;
    Buffer<bn_u32> rung_; // with keep_rungs(true) only
    bool keep_rungs_ = false;
    Buffer<unsigned char> workspace_;
    Buffer<bn_f4> box_, frame_;
    std::optional<std::array<bn_f4, 2>> frame_box_;
    bool in_frame_box_ = false;
    Buffer<bn_u32> level_count_;
    // Cells.
    std::size_t cell_capacity_ = 0;
    Buffer<bn_u64> cell_key_;
    Buffer<bn_u32> cell_level_, cell_parent_, cell_first_, cell_count_, cell_pbegin_, cell_pcount_;
    Buffer<bn_f4> cell_com_, cell_quad0_, cell_quad1_;
    // Groups.
    Buffer<bn_u32> group_first_, group_count_, group_total_;
    Buffer<bn_f4> group_lo_, group_hi_;
};

} // namespace banyan
