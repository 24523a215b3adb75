/**
 * @file let.hpp
 * @brief Local essential trees (Salmon & Warren 1994; the original code's section 3.3): for every other rank, the
 *        part of this rank's octree that its particles need under the same opening test, sent as a pruned tree
 *        (accepted cells with their multipoles, opened leaves with their particles); and the trees that arrive,
 *        grafted on the device behind the local tree (RemoteTrees), for one walk over all of them.
 *
 * The other rank's particles are known here by boxes in two levels, shared by all ranks after each build: coarse
 * boxes (the bounding boxes of the groups of each of its coarsest cells with at most 1/64 of its particles) and fine
 * ones inside them (cells with at most 1/4096), tested only where the coarse box fails; the cells are chosen on the
 * device (letBoxCells), so that only the few hundred or thousand chosen come back to the host. A cell is
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
#include <span>
#include <utility>
#include <vector>

namespace banyan {

/// What the last build() and exchange() moved on this rank.
struct LetStats {
    std::uint64_t cells_sent = 0, particles_sent = 0;         ///< summed over the trees this rank sent
    std::uint64_t cells_received = 0, particles_received = 0; ///< summed over the trees that arrived
    std::uint64_t bytes_sent = 0, bytes_received = 0;         ///< trees and boxes
    double build_ms = 0;    ///< boxes, the trees on the device and their download (wall time)
    double boxes_ms = 0;    ///< of build_ms: this rank's boxes and their all-gather
    double download_ms = 0; ///< of build_ms: the downloads of the trees into host memory
    double exchange_ms = 0; ///< the exchange and the upload of what arrived (wall time)
    double mpi_ms = 0;      ///< of exchange_ms: the messages
    double upload_ms = 0;   ///< of exchange_ms: the upload (it waits for the walk the device runs when it starts)
};

class LetExchange {
public:
    LetExchange(Backend& be, const Comm& comm);

    /// After @p tree was built: shares the boxes of its groups with every rank (collective), then builds this
    /// rank's tree for every other rank, under opening @p criterion (its 1 / theta and alpha, as the walk's), on the
    /// device and into host memory. With alpha > 0 every box carries the smallest previous |a| of its particles,
    /// read from @p acc_old (.w, tree order, as TreeForces::set_previous_accelerations), so that each tree sent
    /// opens what the receiving groups' relative test opens.
    void build(const Octree& tree, const OpeningCriterion& criterion, const Buffer<bn_f4>* acc_old = nullptr);
    /// Sends the trees and receives the others' (collective; host memory only, so that it overlaps a walk running
    /// on the device), and uploads what arrived into remote().
    void exchange();

    // The pieces of build() and exchange(), for one process too (tests):
    /// This rank's boxes (coarse and fine, let.cpp has the layout), as sent to every rank; with @p acc_old, each
    /// lower corner's w is the smallest previous |a| in the box (for the relative criterion), else 0.
    std::vector<std::byte> boxes_message(const Octree& tree, const Buffer<bn_f4>* acc_old = nullptr);
    /// Appends to @p out the local essential tree of @p tree for the rank whose boxes_message() is @p boxes (nothing
    /// when either has no particles).
    void tree_for(const Octree& tree, const OpeningCriterion& criterion, std::span<const std::byte> boxes,
                  HostBytes& out);
    /// Grafts the trees in @p recv (rank q's in [offsets[q], offsets[q + 1])) into remote() behind room for a local
    /// tree of @p local_cells cells and @p local_particles particles, on the device: each array uploaded where it
    /// lies (the cells' first indices shifted in place in @p recv). exchange() gives the tree of the last build().
    void receive(std::span<std::byte> recv, std::span<const std::size_t> offsets, std::size_t local_cells,
                 std::size_t local_particles);

    RemoteTrees& remote() noexcept { return remote_; }
    const RemoteTrees& remote() const noexcept { return remote_; }
    const LetStats& stats() const noexcept { return stats_; }

    /// The finest boxes of a rank hold about 1 / fine_per_rank of its particles (default 4096; at least N_crit).
    /// Finer boxes prune the trees closer and cost more tests.
    void set_fine_per_rank(std::size_t f) noexcept { fine_per_rank_ = f ? f : 1; }

private:
    /// The cells chosen as boxes for @p limit (letBoxCells, level by level), as (first particle, particles), sorted.
    std::vector<std::pair<bn_u32, bn_u32>> chosen_cells(const Octree& tree, std::size_t limit);

    Backend& be_;
    const Comm& comm_;
    std::size_t fine_per_rank_ = 4096;
    LetStats stats_;
    std::size_t local_cells_ = 0, local_particles_ = 0; // of the tree of the last build()
    HostBytes send_, recv_;                             // kept from one evaluation to the next
    std::vector<std::size_t> send_offsets_, recv_offsets_;
    RemoteTrees remote_;
    Buffer<bn_f4> boxes_, coarse_, fine_;
    Buffer<bn_u32> runs_, fine_begin_, box_list_, box_count_;
    Buffer<bn_u32> opened_, keep_, send_count_, cell_index_, particle_index_;
    Buffer<bn_f4> out_com_, out_quad0_, out_quad1_, out_pos_;
    Buffer<bn_u32> out_first_, out_count_;
};

} // namespace banyan
