/**
 * @file domain.hpp
 * @brief Domain decomposition along the space-filling curve: each rank holds the particles of one range of Morton
 *        keys, in a frame common to all ranks, with the ranges chosen so that each rank gets an equal share of the
 *        work; particles that leave their rank's range move to their new rank (the original code's scheme,
 *        Bédorf et al. 2014, section 3.1).
 *
 * One balance() per force evaluation, before the tree is built:
 *   1. the global bounding box (a min / max over ranks, with a margin) gives the frame of tree_shared.h, and every
 *      particle its key in it (kernel treeKeys, into the tree's workspace); the tree is built in the same frame until
 *      the next balance (Octree::set_frame_box), so its cells are cells of that frame, never astride a rank's range;
 *   2. each rank sends up to samples_per_rank keys taken at even spacing through its particles, each weighted with
 *      an equal share of the rank's work (the interactions of its last walk, or its particle count); all ranks
 *      sort the same samples the same way and cut the curve where the cumulative weight passes k / P of the total;
 *   3. a stable partition (kernel domainStay, split) puts the particles that stay first; those that leave go
 *      through host memory to their new ranks (Comm::exchange) and arrive behind them, in rank order.
 * Every step is deterministic, so a run continues bit for bit on the same number of ranks.
 */
#pragma once

#include "core/device/backend.hpp"
#include "core/parallel/comm.hpp"
#include "core/tree/octree.hpp"

#include <array>
#include <cstdint>
#include <vector>

namespace banyan {

/// What one balance() did on this rank.
struct BalanceStats {
    std::uint64_t sent = 0;     ///< particles that left this rank
    std::uint64_t received = 0; ///< particles that arrived
    std::uint64_t bytes = 0;    ///< bytes sent (particles and samples)
    double ms = 0;              ///< wall time of the whole balance
};

/// The box of the frame common to all ranks (tree_shared.h: the frame is (lo, 2^e) with 2^e above the box's largest
/// extent) for particles within [@p lo, @p hi] on all ranks: that box with a margin of 1/16 of its largest extent
/// on every side.
std::array<bn_f4, 2> common_frame_box(const std::array<float, 3>& lo, const std::array<float, 3>& hi);

class Decomposition {
public:
    Decomposition(Backend& be, const Comm& comm);

    /// Moves particles between ranks (positions, velocities and rungs when the tree keeps them, ids with their high
    /// words when it keeps those) so that this rank
    /// holds the keys [splitters()[rank - 1], splitters()[rank]) of the common frame. @p work is this rank's share of
    /// the work as measured (e.g. the interactions of its last walk); 0 on any rank counts particles instead on all.
    /// Collective. Leaves the tree unbuilt, its workspace overwritten.
    BalanceStats balance(Octree& tree, double work);

    /// Gives @p tree the frame a balance of its particles as they are would give it, without moving any: a restart
    /// from a state saved right after a balance (the end of a step) builds its trees in the frame of the straight
    /// run. Collective.
    void adopt_frame(Octree& tree);

    /// The P - 1 keys where the ranks' ranges meet (rank r holds [s[r - 1], s[r]), s[-1] = 0, s[P - 1] = 2^63).
    const std::vector<bn_u64>& splitters() const noexcept { return splitters_; }

    /// Keys sampled per rank (default 2048; tests make it small).
    void set_samples_per_rank(std::size_t s) noexcept { samples_ = s ? s : 1; }

private:
    /// The bounding box of all ranks' particles (collective); lo > hi without particles.
    void global_bounds(Octree& tree, std::array<float, 3>& lo, std::array<float, 3>& hi);

    Backend& be_;
    const Comm& comm_;
    std::size_t samples_ = 2048;
    std::vector<bn_u64> splitters_;
    Buffer<bn_f4> box_, frame_;
    Buffer<bn_u32> count_, sample_index_;
    Buffer<bn_u64> sample_keys_;
};

} // namespace banyan
