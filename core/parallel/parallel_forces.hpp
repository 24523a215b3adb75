/**
 * @file parallel_forces.hpp
 * @brief Tree forces over all ranks: the domain decomposition, the local tree, the local essential trees of the
 *        other ranks, and one walk over the local tree with the received ones grafted on.
 *
 * One compute():
 *   balance (domain.hpp)  ->  build the local tree  ->  boxes and trees for the other ranks (let.hpp, on the
 *   device, with the top trees grafted and the groups far from every other rank flagged)  ->  the far groups walk
 *   the local root and the top roots while the trees travel (host) and are grafted behind the local tree and the
 *   top trees  ->  the near groups walk the local root and the received roots (TreeForces::begin, walk_received).
 *   Every group walks once.
 * On one rank it is the tree build and walk of one GPU, nothing more. The trees go GPU to GPU or through host memory
 * (transport.hpp), chosen once, when the ranks make their ParallelForces.
 */
#pragma once

#include "core/device/backend.hpp"
#include "core/gravity/forces.hpp"
#include "core/parallel/comm.hpp"
#include "core/parallel/domain.hpp"
#include "core/parallel/let.hpp"
#include "core/parallel/transport.hpp"
#include "core/tree/octree.hpp"

namespace banyan {

/// Wall time (host clock, after the device finished each phase) and traffic of one compute() on this rank.
struct ParallelTimings {
    double balance = 0;      ///< decomposition and particle exchange
    double build = 0;        ///< the local octree
    double let_build = 0;    ///< boxes and the trees for the other ranks
    double let_exchange = 0; ///< the exchange of the trees and their upload (the far groups walk meanwhile)
    double walk = 0;         ///< after the exchange: the near groups' walk (and the rest of the far groups')
    double total = 0;
    double walk_device = 0; ///< the walks alone (device events, far and near groups summed)
    /// Of let_build and let_exchange: the time inside their messages (LetStats::comm_ms; waiting included), and
    /// the rest, the trees' making and grafting.
    double comm = 0, let_make = 0;
    BalanceStats balance_stats;
    LetStats let;

    /// Sums the phases' times (not the statistics): over the steps of a run.
    ParallelTimings& operator+=(const ParallelTimings& o) noexcept;
    /// What the phases took since @p earlier, sums of the same run.
    ParallelTimings since(const ParallelTimings& earlier) const noexcept;
};

/// One phase over all ranks: the slowest rank's time and the mean.
struct PhaseSpread {
    double max = 0, mean = 0;
};

/// The phases of ParallelTimings over all ranks, named to be set beside the original code's timers (Bédorf et al.
/// 2014, SC'14: Domain, Build, LET Com, Grav, GPUgrav, Wait, TOTAL; docs/parallel.md has the table): domain = the
/// balance, build = the local tree, let_make = the trees for the other ranks made and the received ones grafted,
/// comm = their messages, gravity = the walk over the local and the received trees (one walk: local and remote
/// gravity are one phase), gravity_device = the same by device events, total. wait estimates the time a rank
/// waited for the others inside comm: its time there beyond the least any rank spent there (the last rank to
/// arrive waited for no one).
struct ParallelPhases {
    PhaseSpread domain, build, let_make, comm, gravity, gravity_device, wait, total;
};
/// Collective: every rank calls it with its own @p t (one compute(), or sums over steps).
ParallelPhases phases_over_ranks(const Comm& comm, const ParallelTimings& t);

class ParallelForces {
public:
    /// Opens the path of the trees between the ranks for @p transport (open_peer_exchange; the
    /// default: BANYAN_TRANSPORT, else automatic). Collective.
    ParallelForces(Backend& be, const Comm& comm, Transport transport = default_transport());

    /// For the logs: "trees: GPU to GPU through NCCL 2.28.9" or "trees: through host memory (MPI)".
    std::string transport() const { return transport_text(peers_.get()); }
    /// The trees of the compute()s that follow go through @p peers (null: host memory), which may serve several
    /// ParallelForces (a benchmark's rows; tests). Every rank chooses alike.
    void use_peer_exchange(std::shared_ptr<PeerExchange> peers);

    /// Moves particles between ranks (unless @p rebalance is false: then each rank keeps its particles), builds
    /// @p tree and computes the forces on this rank's particles (the active groups', with forces().set_active)
    /// from all ranks' particles; results in forces().acc() (tree order), valid until the tree is built again.
    /// Collective.
    void compute(Octree& tree, const OpeningCriterion& criterion, float eps, ParallelTimings* timings = nullptr,
                 bool rebalance = true);

    TreeForces& forces() noexcept { return forces_; }
    const TreeForces& forces() const noexcept { return forces_; }
    Decomposition& decomposition() noexcept { return domain_; }
    LetExchange& let() noexcept { return let_; }
    /// The measured work of this rank's walks since the last balance (23 flops per particle, 65 per cell
    /// interaction; with block time steps the substeps of a step, whose active groups differ), which weighs the
    /// next balance; a restart restores it so that the continuation decomposes as the straight run did.
    double work() const noexcept { return work_; }
    void set_work(double w) noexcept { work_ = w; }

private:
    Backend& be_;
    const Comm& comm_;
    std::shared_ptr<PeerExchange> peers_; // null: through host memory; before its users, destroyed after them
    Decomposition domain_;
    LetExchange let_;
    TreeForces forces_;
    double work_ = 0;
};

} // namespace banyan
