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
 * device (letBoxCells), so that only the few hundred or thousand chosen come back to the host, and the runs of groups
 * they hold are found there too (letBoxRuns: the groups' first particles never leave the device; downloading them
 * took 4.7 ms of the LET's 10.8 on two H200s (a trace) at 2^24 a GPU, docs/benchmarks.md). A cell is
 * opened when a group in some box may open it (bn_let_opens in tree_shared.h, with a margin over the walk's own
 * test); the tree sent holds every cell whose ancestors are all opened, in the octree's order, so children stay
 * consecutive and the root is cell 0. Built on the device (kernels letOpened, letSelect, letGather and two scans),
 * moved through host memory, which works with any MPI and either backend, or GPU to GPU where the backend has a
 * transport (set_peer_exchange; core/parallel/transport.hpp): then the trees stay on the device from their gather to
 * the graft, received in place behind the local tree and their links shifted there (letShiftLinks). The same bytes
 * land in the same places either way.
 *
 * The walk waits for the trees only where it must: with its boxes every rank sends its top tree (the cells holding
 * more than 1/top_per_rank of its particles and their children, as a pruned tree whose leaves without particles
 * stand for what stayed home). A group whose fine box opens none of those leaves of any other rank (letFarGroups)
 * is far: the top trees give it exactly the cells the received trees would, so it walks the local root and the
 * top roots while the trees travel, and only the near groups walk the graft after them (TreeForces::begin and
 * walk_received).
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
    double download_ms = 0; ///< of build_ms: the downloads of the trees into host memory (GPU to GPU: their copies
                            ///< into the send buffer, issued)
    double gather_ms = 0;   ///< of boxes_ms: their all-gather (waiting for the other ranks included)
    double heads_ms = 0;    ///< of build_ms: the exchange of the trees' sizes (waiting included)
    double exchange_ms = 0; ///< the exchange and the upload of what arrived (wall time)
    double mpi_ms = 0;      ///< of exchange_ms: the messages (MPI, or the device transport)
    double upload_ms = 0;   ///< of exchange_ms: the upload (it waits for the walk the device runs when it starts;
                            ///< GPU to GPU: the links' shift, issued)
    /// Inside the messages (waiting for the other ranks included): the boxes' all-gather, the sizes, the trees.
    double comm_ms() const noexcept { return gather_ms + heads_ms + mpi_ms; }
    std::uint64_t top_cells = 0;              ///< of the other ranks' top trees, grafted before the exchange
    std::uint64_t groups = 0, far_groups = 0; ///< this rank's groups, and those walked before the trees arrived
};

class LetExchange {
public:
    LetExchange(Backend& be, const Comm& comm);

    /// After @p tree was built: shares the boxes of its groups and its top tree with every rank (collective), then
    /// builds this rank's tree for every other rank, under opening @p criterion (its 1 / theta and alpha, as the
    /// walk's), on the device and into host memory (GPU to GPU: into a send buffer on the device). With alpha > 0
    /// every box carries the smallest previous |a| of its particles, read from @p acc_old (.w, tree order, as
    /// TreeForces::set_previous_accelerations), so that each tree sent opens what the receiving groups' relative
    /// test opens. Then the sizes of the trees to come are exchanged (collective), and the others' top trees are
    /// grafted with room for them (graft_tops): remote() is ready for the far groups' walk before exchange().
    void build(Octree& tree, const OpeningCriterion& criterion, const Buffer<bn_f4>* acc_old = nullptr);
    /// Sends the trees and receives the others' (collective; through host memory, so that it overlaps a walk
    /// running on the device, or GPU to GPU), and grafts what arrived behind @p tree, the tree of the last build()
    /// (receive()).
    void exchange(Octree& tree);

    /// The trees of the build()s that follow go GPU to GPU through @p peers (not owned; it must outlive its use
    /// here), or through host memory when it is null (the default). Every rank chooses alike.
    void set_peer_exchange(PeerExchange* peers) noexcept { peers_ = peers; }

    // The pieces of build() and exchange(), for one process too (tests):
    /// This rank's boxes (coarse and fine, let.cpp has the layout) and its top tree, as sent to every rank; with
    /// @p acc_old, each lower corner's w is the smallest previous |a| in the box (for the relative criterion),
    /// else 0. The boxes stay on the device for graft_tops.
    std::vector<std::byte> boxes_message(Octree& tree, const OpeningCriterion& criterion,
                                         const Buffer<bn_f4>* acc_old = nullptr);
    /// Appends to @p out the local essential tree of @p tree for the rank whose boxes_message() is @p boxes (nothing
    /// when either has no particles).
    void tree_for(Octree& tree, const OpeningCriterion& criterion, std::span<const std::byte> boxes, HostBytes& out);
    /// Grafts the top trees of the other ranks' boxes_message()s in @p messages (rank q's in [offsets[q],
    /// offsets[q + 1]); rank @p self's is skipped) behind @p tree, in its arrays (Octree::make_room_behind; their
    /// roots and sizes in remote()), with room behind them for received trees of @p let_cells cells and
    /// @p let_particles particles; then flags each of @p tree's groups far
    /// or near (remote().far, near) from this rank's boxes of the last boxes_message(@p tree), under @p criterion.
    /// remote().split tells whether every other rank with particles sent a top tree (else every group walks after
    /// the exchange). The links of the top trees are shifted in place in @p messages.
    void graft_tops(Octree& tree, const OpeningCriterion& criterion, std::span<std::byte> messages,
                    std::span<const std::size_t> offsets, std::size_t self, std::size_t let_cells,
                    std::size_t let_particles);
    /// Grafts the trees in @p recv (rank q's in [offsets[q], offsets[q + 1])) behind @p tree and the top trees of
    /// the last graft_tops(), in the tree's arrays (their roots and sizes in remote()), on the device: each array
    /// uploaded where it lies (the cells' first indices shifted in place in @p recv).
    void receive(Octree& tree, std::span<std::byte> recv, std::span<const std::size_t> offsets);

    RemoteTrees& remote() noexcept { return remote_; }
    const RemoteTrees& remote() const noexcept { return remote_; }
    const LetStats& stats() const noexcept { return stats_; }

    /// The finest boxes of a rank hold about 1 / fine_per_rank of its particles (default 4096; at least N_crit).
    /// Finer boxes prune the trees closer and cost more tests.
    void set_fine_per_rank(std::size_t f) noexcept { fine_per_rank_ = f ? f : 1; }
    /// The top tree sent with the boxes holds the cells with more than 1 / top_per_rank of a rank's particles and
    /// their children. Larger: more groups are far (walked while the trees travel), more bytes in every box
    /// message and more tests in letFarGroups. 0 (the default): no top trees; every group walks after the
    /// exchange. Off by default: for a Plummer sphere on two GPUs the far groups are the cheap ones of the outskirts
    /// and the split costs more than it hides (docs/benchmarks.md, "Many GPUs, part 2").
    void set_top_per_rank(std::size_t t) noexcept { top_per_rank_ = t; }

private:
    struct Gathered;                                                // a tree gathered on the device (let.cpp)
    using Sizes = std::vector<std::pair<std::size_t, std::size_t>>; // (cells, particles) of a tree per rank

    /// The cells chosen as boxes for @p limit (letBoxCells, level by level), as (first particle, particles), sorted.
    std::vector<std::pair<bn_u32, bn_u32>> chosen_cells(Octree& tree, std::size_t limit);
    /// The local essential tree of @p tree for the rank whose boxes are @p boxes, gathered on the device (none:
    /// 0 cells, when either has no particles).
    Gathered chosen_tree(Octree& tree, const OpeningCriterion& criterion, std::span<const std::byte> boxes);
    /// The pruned tree of the cells kept under the opened flags in @p tree's workspace (let.cpp, Scratch;
    /// letSelect, scans, letGather), in the workspace.
    Gathered gather_tree(Octree& tree);
    /// Appends @p t to @p out as on the wire (downloaded).
    void append(HostBytes& out, const Gathered& t);
    /// Copies @p t to byte @p at of device_send_ (grown, keeping what is before it) in the wire's order, without
    /// its header; returns the end.
    std::size_t append_on_device(const Gathered& t, std::size_t at);
    /// Where the trees of @p sizes go in rank order behind @p tree and the top trees (their roots in remote()), with
    /// room made, or checked against what graft_tops made; returns each rank's first cell and particle there.
    Sizes place_trees(Octree& tree, const Sizes& sizes);
    /// exchange() GPU to GPU: each array of each tree received in place, then its links shifted.
    void exchange_on_device(Octree& tree);
    /// Uploads the tree on the wire at @p at (@p cells cells, @p parts particles) into the arrays @p g at cell @p c0
    /// and particle @p p0, its links shifted there (in place in the message).
    void upload_tree(Octree::Graft g, std::byte* at, std::size_t cells, std::size_t parts, std::size_t c0,
                     std::size_t p0);

    Backend& be_;
    const Comm& comm_;
    std::size_t fine_per_rank_ = 4096;
    std::size_t top_per_rank_ = 0;
    std::size_t coarse_boxes_ = 0, fine_boxes_ = 0; // of the last boxes_message(), in boxes_ and runs_
    LetStats stats_;
    std::size_t local_cells_ = 0, local_particles_ = 0; // of the tree of the last build()
    HostBytes send_, recv_;                             // kept from one evaluation to the next
    std::vector<std::size_t> send_offsets_, recv_offsets_;
    PeerExchange* peers_ = nullptr;
    Buffer<std::byte> device_send_; // GPU to GPU: the trees sent, at send_offsets_ (kept as send_ is)
    Sizes sent_, coming_;           // the trees of the last build(): sent to and coming from each rank
    RemoteTrees remote_;
    Buffer<bn_f4> boxes_, coarse_, fine_;
    Buffer<bn_u32> runs_, fine_begin_, box_list_, box_count_;
    Buffer<bn_u32> far_index_;
};

} // namespace banyan
