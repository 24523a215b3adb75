/**
 * @file octree.hpp
 * @brief The sparse octree built entirely on the device (paper sections 2.1, 3.2, 3.3): keys, sort, level-by-level
 *        construction, linking, groups for the walk and multipoles, on either backend.
 *
 * The order of the phases, the sizes and the ownership of every device buffer live here once; each kernel exists
 * twice, in kernels_cu/tree_*.cu and kernels_cl/tree_*.cl, under the same name. Conventions (frame, keys, cell
 * order, array meanings) are in tree_shared.h.
 */
#pragma once

#include "core/device/backend.hpp"
#include "core/tree_shared.h"

#include <array>
#include <cstddef>
#include <span>

namespace banyan {

/// Device time of each phase of one build, in milliseconds (device events; the build phase includes the waits for
/// the per-level counts, which are part of its cost).
struct TreeTimings {
    double keys = 0;       ///< bounding box and keys
    double sort = 0;       ///< radix sort of (key, index)
    double move = 0;       ///< particle arrays reordered
    double build = 0;      ///< level-by-level cells
    double link = 0;       ///< parents, children
    double groups = 0;     ///< groups and their boxes
    double multipoles = 0; ///< mass, centre of mass, quadrupoles, sizes
    double total = 0;
};

class Octree {
public:
    using Levels = std::array<std::size_t, BANYAN_TREE_LEVELS + 1>;

    explicit Octree(Backend& be);
    Octree(const Octree&) = delete;
    Octree& operator=(const Octree&) = delete;

    /// Uploads @p pos (x, y, z, mass) and @p vel (may be empty: zeros); particle i gets id i.
    void set_particles(std::span<const bn_f4> pos, std::span<const bn_f4> vel = {});
    /// As above with the ids given (ids[i] for particle i; a restart keeps each particle's identity and order).
    void set_particles(std::span<const bn_f4> pos, std::span<const bn_f4> vel, std::span<const bn_u32> ids);

    /// Builds the whole tree from the particles on the device, reordering them (and their ids) into key order.
    /// @param[out] timings when given, the device time of each phase (adds device events; no other cost).
    void build(TreeTimings* timings = nullptr);

    /// Reorders another per-particle array the way the last build reordered the particles (out-of-place through
    /// a scratch buffer; @p a must hold at least size() elements of 4, 8 or 16 bytes).
    template <class T>
    void follow_permutation(Buffer<T>& a)
    {
        auto& tmp = be_.scratch_buffer<T>("tree.follow", n_);
        be_.gather(a, perm_, n_, tmp);
        a.copy_from(tmp, n_);
    }

    std::size_t size() const noexcept { return n_; }
    std::size_t cells() const noexcept { return level_begin_[BANYAN_TREE_LEVELS]; }
    std::size_t groups() const noexcept { return n_groups_; }
    /// Deepest level that holds a cell (-1 for no particles).
    int depth() const noexcept { return depth_; }
    /// Level L holds cells [level_begin()[L], level_begin()[L + 1]).
    const Levels& level_begin() const noexcept { return level_begin_; }
    /// Device memory of the octree's own buffers (the primitives' scratch memory is Backend::scratch_bytes()).
    std::size_t device_bytes() const noexcept;

    // Particles (size() elements valid), in key order after build().
    Buffer<bn_f4>& pos() noexcept { return pos_; }
    Buffer<bn_f4>& vel() noexcept { return vel_; }
    const Buffer<bn_u32>& ids() const noexcept { return id_; }
    const Buffer<bn_u64>& keys() const noexcept { return keys_; }
    /// perm[i] = where the particle now at i was before the last build.
    const Buffer<bn_u32>& permutation() const noexcept { return perm_; }
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
    const Buffer<bn_f4>& cell_centre() const noexcept { return cell_centre_; }

    // Groups (groups() elements valid).
    const Buffer<bn_u32>& group_first() const noexcept { return group_first_; }
    const Buffer<bn_u32>& group_count() const noexcept { return group_count_; }
    const Buffer<bn_f4>& group_lo() const noexcept { return group_lo_; }
    const Buffer<bn_f4>& group_hi() const noexcept { return group_hi_; }

    /// For tests: fills every array a build writes (whole capacity) with a sentinel, so that an element no phase
    /// writes shows as wrong instead of keeping a plausible value from an earlier build.
    void poison();

    // The phases of build(), in order, for tests that look between them.
    void compute_keys();
    void sort_keys();
    void move_particles();
    void build_levels();
    void link_cells();
    void make_groups();
    void compute_multipoles();

private:
    Grid grid(std::size_t items) const;
    void reserve_particles(std::size_t n);
    void reserve_cells(std::size_t n, std::size_t keep);

    Backend& be_;
    std::size_t n_ = 0;
    std::size_t n_groups_ = 0;
    int depth_ = -1;
    Levels level_begin_{};

    // Particles and the arrays that follow them through the sort.
    Buffer<bn_f4> pos_, vel_, pos_tmp_, vel_tmp_;
    Buffer<bn_u32> id_, id_tmp_, iota_, perm_;
    Buffer<bn_u64> raw_keys_, keys_;
    Buffer<bn_f4> box_, frame_;
    // Level-by-level construction: the list of particles not yet in a leaf, and per-level work arrays.
    Buffer<bn_u32> active_, active_next_, flags_, starts_, counters_, compact_count_;
    Buffer<bn_u32> level_begin_dev_;
    // Cells.
    std::size_t cell_capacity_ = 0;
    Buffer<bn_u64> cell_key_;
    Buffer<bn_u32> cell_level_, cell_parent_, cell_first_, cell_count_, cell_pbegin_, cell_pcount_;
    Buffer<double> moments_; // 10 doubles per cell while the multipoles are summed
    Buffer<bn_f4> cell_com_, cell_quad0_, cell_quad1_, cell_centre_;
    // Groups.
    Buffer<bn_u32> group_first_, group_count_, group_total_;
    Buffer<bn_f4> group_lo_, group_hi_;
};

} // namespace banyan
