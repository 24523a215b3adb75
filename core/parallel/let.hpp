/**
 * @file let.hpp
 * @brief Local essential trees (Salmon & Warren 1994; the original code's section 3.3): for every other rank, the
 *        part of this rank's octree that its particles need under the same opening test, sent as a pruned tree
 *        (accepted cells with their multipoles, opened leaves with their particles); and the trees that arrive,
 *        concatenated on the device for TreeForces::add_remote.
 *
 * The other rank's particles are known here only by a few boxes: the bounding boxes of runs of its groups (the
 * groups lie along the space-filling curve, so a run is compact), shared by all ranks after each build. A cell is
 * opened when a group in some box may open it (bn_let_opens in tree_shared.h, with a margin over the walk's own
 * test); the tree sent holds every cell whose ancestors are all opened, in the octree's order, so children stay
 * consecutive and the root is cell 0. Built on the device (kernels letOpened, letSelect, letGather and two scans),
 * moved through host memory, which works with any MPI and either backend.
 */
#pragma once

#include "core/device/backend.hpp"
#include "core/gravity/forces.hpp"
#include "core/parallel/comm.hpp"
#include "core/tree/octree.hpp"

#include <cstdint>
#include <vector>

namespace banyan {

/// What the last build() and exchange() moved on this rank.
struct LetStats {
    std::uint64_t cells_sent = 0, particles_sent = 0;         ///< summed over the trees this rank sent
    std::uint64_t cells_received = 0, particles_received = 0; ///< summed over the trees that arrived
    std::uint64_t bytes_sent = 0, bytes_received = 0;         ///< trees and boxes
    double build_ms = 0;    ///< boxes, the trees on the device and their download (wall time)
    double exchange_ms = 0; ///< the exchange and the upload of what arrived (wall time)
};

class LetExchange {
public:
    LetExchange(Backend& be, const Comm& comm);

    /// After @p tree was built: shares the boxes of its groups with every rank (collective), then builds this
    /// rank's tree for every other rank, opening angle @p theta, on the device and into host memory. Call before
    /// the local walk is launched (the device runs commands in order).
    void build(const Octree& tree, float theta);
    /// Sends the trees and receives the others' (collective; host memory only, so that it overlaps a walk running
    /// on the device), and uploads what arrived into remote().
    void exchange();

    const RemoteTrees& remote() const noexcept { return remote_; }
    const LetStats& stats() const noexcept { return stats_; }

    /// Boxes per rank (runs of groups; default 64). Fewer send more; tests vary it.
    void set_boxes_per_rank(std::size_t b) noexcept { boxes_per_rank_ = b ? b : 1; }

private:
    Backend& be_;
    const Comm& comm_;
    std::size_t boxes_per_rank_ = 64;
    LetStats stats_;
    std::vector<std::byte> send_;
    std::vector<std::size_t> send_offsets_;
    RemoteTrees remote_;
    Buffer<bn_f4> boxes_;
    Buffer<bn_u32> opened_, keep_, send_count_, cell_index_, particle_index_;
    Buffer<bn_f4> out_com_, out_quad0_, out_quad1_, out_pos_;
    Buffer<bn_u32> out_first_, out_count_;
};

} // namespace banyan
