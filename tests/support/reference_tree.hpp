/**
 * @file reference_tree.hpp
 * @brief A plain C++ octree builder written from the paper (sections 2.1, 3.2, 3.3), the oracle of the device tree.
 *
 * It shares no code with the device build: keys are interleaved bit by bit, the tree is built by recursive
 * subdivision (not level by level), cells are then put in the storage order of core/tree_shared.h, and multipoles
 * are summed in double precision directly over each cell's particles (not bottom-up). Only the conventions are
 * common: the frame, the key layout, the cell order and the array meanings documented in tree_shared.h.
 */
#pragma once

#include "core/tree_shared.h"

#include <array>
#include <cstddef>
#include <span>
#include <vector>

namespace banyan::test {

struct RefMultipole {
    double mass = 0;
    std::array<double, 3> com{};    ///< centre of mass
    std::array<double, 6> quad{};   ///< xx, yy, zz, xy, xz, yz about the centre of mass
    std::array<double, 3> centre{}; ///< geometric centre
    double size = 0;                ///< side l
    double delta = 0;               ///< |com - centre|
    double bmax = 0;                ///< largest |particle - com| over the cell's particles (exact)
};

struct RefTree {
    // Frame.
    std::array<float, 3> lo{};
    int exponent = 0; ///< side = 2^exponent
    // Particles in tree order.
    std::vector<bn_u64> keys;
    std::vector<bn_u32> ids; ///< ids[i] = input index of the particle at position i
    std::vector<bn_f4> pos, vel;
    // Cells in storage order (level, then key).
    std::vector<bn_u64> cell_key;
    std::vector<bn_u32> cell_level, cell_parent, cell_first, cell_count, cell_pbegin, cell_pcount;
    std::vector<bn_u32> level_begin; ///< BANYAN_TREE_LEVELS + 1 entries
    // Groups.
    std::vector<bn_u32> group_first, group_count;
    std::vector<bn_f4> group_lo, group_hi;
    // Multipoles in double precision.
    std::vector<RefMultipole> multipole;

    std::size_t cells() const noexcept { return cell_key.size(); }
    int depth() const; ///< deepest level with a cell (-1 when empty)
};

/// Builds the reference tree of particles @p pos (w = mass) and @p vel (may be empty: then vel stays empty).
RefTree build_reference_tree(std::span<const bn_f4> pos, std::span<const bn_f4> vel = {});

/// The reference Morton key of grid coordinates, bit by bit.
bn_u64 reference_morton(bn_u32 ix, bn_u32 iy, bn_u32 iz);

} // namespace banyan::test
