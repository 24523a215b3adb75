/**
 * @file forces.hpp
 * @brief Gravitational forces by the tree walk (paper sections 2.2, 3.2, 3.3) on either backend, and the
 *        conveniences around it: results in the caller's particle order, a one-call host function, and direct
 *        summation on a sample of targets (the accuracy reference at large N).
 *
 * The walk itself is kernels_cu/walk.cu and kernels_cl/walk.cl (one launch: every work-group walks whole groups);
 * the cell and particle interactions are bn_interact_pc and bn_interact_pp in device_shared.h.
 */
#pragma once

#include "core/device/backend.hpp"
#include "core/gravity/precision.hpp"
#include "core/tree/octree.hpp"

#include <cstdint>
#include <span>
#include <vector>

namespace banyan {

/// Interactions of one force evaluation, summed over all particles.
struct InteractionTotals {
    std::uint64_t pp = 0; ///< particle-particle (23 flops each)
    std::uint64_t pc = 0; ///< particle-cell (65 flops each)
};

/// The trees other ranks sent (their local essential trees, core/parallel/let.hpp), grafted behind the local tree
/// in the tree's own arrays (Octree::make_room_behind, graft()), so that each group walks once over all of them:
/// the local tree's cells in [0, cell_base) and its particles in [0, particle_base), the received trees after them,
/// in the octree's layout (tree_shared.h: a node's children are consecutive, a leaf's particles too) with their
/// links shifted to index these arrays. A cell that its sender accepted for all of this rank's groups is a leaf
/// without particles; the sender's test guarantees that the walk here accepts it too.
struct RemoteTrees {
    std::vector<bn_u32> roots;                    ///< the root cell of each received tree (cell_base and beyond)
    std::size_t cell_base = 0, particle_base = 0; ///< the local tree's cells and particles, in front
    std::size_t cells = 0, particles = 0;         ///< all behind them: the top trees (if any), then the received
    // The walk in two parts over ranks (let.hpp): the top trees of the other ranks, sent with their boxes, lie
    // first behind the local tree; the groups flagged in far (1 per local group) walk the local root and the top
    // roots while the received trees travel, the groups flagged in near walk the local and received roots after.
    std::vector<bn_u32> top_roots;                ///< the root cell of each top tree
    std::size_t top_cells = 0, top_particles = 0; ///< of cells and particles: the top trees'
    Buffer<bn_u32> far, near;                     ///< per local group, 0 or 1; near = 1 - far
    bool split = false;                           ///< whether far and near hold for the local tree
};

/// Accelerations and potentials by the tree walk, optionally with per-particle interaction counts. Keeps no
/// device memory of its own beyond a few words: its results and the walk's per-cell data and spill buffer live in
/// the tree's workspace (octree.hpp), free once the build is done. The results therefore stay valid until the
/// tree is built again.
class TreeForces {
public:
    explicit TreeForces(Backend& be);
    TreeForces(const TreeForces&) = delete;
    TreeForces& operator=(const TreeForces&) = delete;

    /// One walk over @p tree (built: cells, groups and multipoles, with the build's kind of @p criterion), its
    /// opening angle theta in [0, 1] (0: every cell is opened, i.e. direct summation) and relative alpha (> 0: see
    /// set_previous_accelerations), and Plummer softening @p eps >= 0. Afterwards acc()[i] = (ax, ay, az, phi)
    /// of the particle at tree position i and totals() the interactions summed over all particles; with
    /// set_count_each(true) also pp_counts()[i] / pc_counts()[i], the particles / cells it met (itself excluded).
    /// Blocks until the walk has finished: it reads back whether a level list outgrew the spill buffer, and if one
    /// did walks again with a larger one (results are never incomplete).
    /// @param[out] walk_ms when given, the device time of the (last, complete) walk, cell preparation included.
    /// @throws UsageError for theta outside [0, 1], alpha or eps negative or not finite.
    void compute(Octree& tree, const OpeningCriterion& criterion, float eps, double* walk_ms = nullptr);

    /// compute() in two halves, so that the host may work while the device walks: begin() checks the arguments
    /// and launches the walk (it returns at once), end() waits for it and walks again if the spill buffer was too
    /// small. Between them neither the tree nor @p remote may change.
    /// @param remote when given (over ranks), the other ranks' trees grafted behind @p tree (its cell_base and
    ///        particle_base are @p tree's cells and particles), in its arrays: every group walks the local root
    ///        and the received roots at once, so the results are the forces of all ranks.
    ///        With remote->split, begin() walks only the far groups, over the local root and the top roots, and
    ///        walk_received() the near ones over the local and received roots, once the received trees are there.
    void begin(Octree& tree, const OpeningCriterion& criterion, float eps, RemoteTrees* remote = nullptr);
    /// After begin() with a split remote: launches the near groups' walk (nothing otherwise; end() calls it when
    /// the caller did not). The received trees must be in place.
    void walk_received(Octree& tree);
    void end(Octree& tree, double* walk_ms = nullptr);

    /// Accelerations and potentials (tree order; slots 0-3 of the tree's workspace) of the last compute().
    const Buffer<bn_f4>& acc() const noexcept { return acc_; }
    /// The buffer compute() writes into for @p tree, made current: where saved accelerations are restored.
    Buffer<bn_f4>& bind_acc(Octree& tree);
    /// Per-particle counts of the last compute(); throws std::logic_error unless set_count_each(true) was in effect.
    const Buffer<bn_u32>& pp_counts() const;
    const Buffer<bn_u32>& pc_counts() const;
    const InteractionTotals& totals() const noexcept { return totals_; }
    /// Number of particles of the last compute().
    std::size_t size() const noexcept { return n_; }

    /// What the relative opening criterion (bn_rel_cell in device_shared.h) of the compute()s that follow reads:
    /// with a criterion's alpha > 0 a cell is accepted for a group when M s^3 / d^5 <= alpha |a| for the smallest
    /// previous acceleration |a| of the group, read from the .w of @p acc_old (tree order of the tree walked, at
    /// least size() entries; a simulation keeps it in vel.w, which the build moves with the particles), and when
    /// the geometric test of theta holds too (theta 1 for the relative test alone). nullptr: none (a criterion
    /// with alpha > 0 is then a logic error). Over ranks the groups are this rank's, so @p acc_old is too.
    void set_previous_accelerations(const Buffer<bn_f4>* acc_old) noexcept { acc_old_ = acc_old; }
    const Buffer<bn_f4>* previous_accelerations() const noexcept { return acc_old_; }

    /// Block time steps: the compute()s that follow walk only the groups that hold a particle with
    /// (*rungs)[i] >= @p level (tree order, at least size() entries; core/simulation/simulation.hpp), found and
    /// compacted on the device (the paper's "active" groups). Only those groups' particles get accelerations (and
    /// counts); the others' entries of acc() are left undefined. nullptr: every group (the default).
    void set_active(const Buffer<bn_u32>* rungs, bn_u32 level) noexcept
    {
        rungs_ = rungs;
        level_ = level;
    }
    /// The walks that follow compute the field at @p sinks (tree order, at least size() entries) instead of at the
    /// particles' positions, from the same sources (the particles and the cells' multipoles): for block time steps,
    /// the acceleration at each particle's predicted position (Simulation::probe_rungs). The tree's group boxes
    /// must bound the sinks (Octree::fit_group_boxes). nullptr: at the particles (the default). Over ranks the
    /// sinks are this rank's and the received trees sources as they came: a cell sent without its particles, which
    /// the wider boxes may ask to open, is taken whole (walkForces accepts it).
    void set_sinks(const Buffer<bn_f4>* sinks) noexcept { sinks_ = sinks; }
    /// Groups the last compute() walked (all of the tree's without set_active), read with the totals.
    std::size_t walked_groups() const noexcept { return walked_groups_; }

    /// Whether compute() keeps per-particle interaction counts (8 bytes per particle more; off by default: only
    /// tests and the accuracy tools read them, everyone else uses totals()).
    void set_count_each(bool on) noexcept { count_each_ = on; }

    /// The last results in the order the particles had when given to Octree::set_particles (out[ids[i]] = x[i]).
    /// Buffers hold at least size() elements; @p pp and @p pc may be null (and must be unless counts were kept).
    void to_input_order(const Octree& tree, Buffer<bn_f4>& acc, Buffer<bn_u32>* pp = nullptr,
                        Buffer<bn_u32>* pc = nullptr);

    /// Walks that had to be repeated with a larger spill buffer, since construction.
    int retries() const noexcept { return retries_; }
    /// Work-groups launched per compute unit (persistent work-groups; default 16 on a GPU, 4 on a CPU).
    void set_groups_per_unit(unsigned g) noexcept { groups_per_unit_ = g ? g : 1; }
    /// Level-list entries per work-group kept in the global spill buffer beyond BANYAN_WALK_LIST. By default the
    /// first walk sizes it by the particles (about one entry per particle in all, at most 1024 per work-group and
    /// list); it grows by itself when a walk needs more, and a walk never allocates more than the widest level of
    /// its tree can use. Tests set it small to exercise the growth. 0 (before the first walk): not sized yet.
    void set_spill_capacity(std::size_t entries) noexcept { spill_cap_ = entries ? entries : 1; }
    std::size_t spill_capacity() const noexcept { return spill_cap_; }
    /// For tests: fills the tree's whole workspace (where the results go) with all-ones bytes (NaN, 0xFFFFFFFF),
    /// so that a particle the walk misses shows.
    void poison(Octree& tree);

private:
    /// Releases the views of the tree's workspace (before it may grow, so that the old allocation goes at once).
    void drop_views() noexcept;
    /// Which groups a launch walks: all (or the active ones of set_active), or over ranks with a split remote the
    /// far ones (from the top roots) or the near ones (from the received roots).
    enum class Part { all, far, near };
    /// Lays the walk out in the tree's workspace (for Part::all and far) and launches walkPrepare and walkForces
    /// over the local tree and what is grafted behind it.
    void launch_local(Octree& tree, Part part = Part::all);
    /// Fills the views of the tree's workspace for the walk's layout.
    void lay_out(Octree& tree);
    /// Whether the last launch, whose status read_outputs() gave as @p needed, outgrew the spill buffer (which
    /// then grows).
    bool spill_overflowed(bn_u32 needed);

    Backend& be_;
    std::size_t n_ = 0;
    unsigned groups_per_unit_;
    std::size_t spill_cap_ = 0;  // level-list entries per work-group and list beyond BANYAN_WALK_LIST (0: not sized)
    std::size_t walk_cap_ = 1;   // of the last layout: spill_cap_, or less where the tree cannot use that many
    std::size_t list_bound_ = 0; // of the last layout: the longest level list its walk can ask for
    int retries_ = 0;
    OpeningCriterion criterion_; // of the last begin()
    float eps_ = 0;
    const Buffer<bn_f4>* acc_old_ = nullptr; // the previous accelerations the relative criterion reads
    const Buffer<bn_u32>* rungs_ = nullptr;  // block time steps: walk the groups with a rung >= level_ only
    const Buffer<bn_f4>* sinks_ = nullptr;   // where the field is wanted, when not at the particles (set_sinks)
    RemoteTrees* remote_ = nullptr;          // of the last begin(): the trees grafted behind the local one
    bool split_ = false;                     // the last begin() walked the far groups; the near ones follow
    bool near_pending_ = false;              // walk_received() has not run yet
    bn_u32 level_ = 0;
    std::size_t walked_groups_ = 0;
    std::size_t wgs_ = 1;          // work-groups of the last launch
    Event start_, stop_;           // around the last local walk (the far groups' when split)
    Event near_start_, near_stop_; // around the near groups' walk when split
    bool count_each_ = false;
    bool counted_ = false; // whether the last compute() kept counts
    InteractionTotals totals_;
    // Views of the tree's workspace, made by compute().
    Buffer<bn_f4> acc_, mac_;
    Buffer<float> rel_;
    Buffer<bn_u2> link_; ///< per cell (cell_first, cell_count), as walkPrepare writes it
    Buffer<bn_u32> pp_, pc_, spill_;
    // The active groups (set_active): flags, indices, the compacted list and the walk's copies of their data.
    Buffer<bn_u32> active_flags_, active_iota_, active_list_, active_first_, active_count_;
    Buffer<bn_f4> active_lo_, active_hi_;
    // Owned: a few words. The walk's outputs, the interaction totals, the status (the longest level list asked for
    // when one outgrew its room, else 0) and the number of active groups, are views of one buffer, read back with
    // one transfer.
    Buffer<unsigned char> outputs_;
    Buffer<bn_u64> totals_dev_;
    Buffer<bn_u32> counter_, status_, active_total_;
    Buffer<bn_u32> roots_, near_roots_; // the walks' first levels: the local root (0), then the grafted roots

    /// Zeroes the outputs, to be summed by the next launches.
    void clear_outputs();
    /// Waits for the walks launched, then reads the outputs: the status (spill_overflowed), and into @p t the
    /// totals (and the active groups' count into walked_groups_ after a walk over active groups).
    bn_u32 read_outputs(InteractionTotals& t);
};

/// The device memory a tree build and walk of @p n particles (with velocities kept and moved, for a simulation,
/// when @p velocities) needs at its peak on @p be, from the layout of the arrays (octree.hpp, TreeForces): the
/// particles, the workspace, the cell and group arrays and the walk's first spill buffer (4 bytes a particle at
/// most: more only where a walk asks for more), with N / 4 + 64 cells (a Plummer sphere has N / 4.3; the cell
/// arrays grow by a quarter when a more clustered system needs more). With @p block (block time steps): the rungs,
/// and the walk's copies of the active groups; with @p probe too (the symmetric rung rule): the predicted
/// positions, the accelerations kept aside and the pending flags, 36 bytes a particle.
std::size_t estimate_device_bytes(const Backend& be, std::size_t n, bool velocities, bool block = false,
                                  bool probe = false);

/// Host results of one force evaluation, in the order of the input particles.
struct ForceResult {
    std::vector<bn_f4> acc;     ///< ax, ay, az, phi
    std::vector<bn_u32> pp, pc; ///< interaction counts (empty for direct summation)
    InteractionTotals totals;
    std::size_t out_of_range = 0; ///< values of acc beyond float's normal range in the input's units (precision.hpp)
};

/// Tree forces of @p pos (x, y, z, mass) in one call: builds the octree, walks it, returns results in input order.
/// Works in internal units (precision.hpp), so any absolute scale of the input is served; results beyond float's
/// range are counted in out_of_range. Warns (notice) of an overfull deep leaf, refuses particles too close for any
/// units (check_tree_depth).
ForceResult tree_forces(Backend& be, std::span<const bn_f4> pos, float theta, float eps);

/// Tree forces of the @p tree's particles, which the caller has put on the device itself (Octree::resize, then
/// pos() filled, in internal units @p units; ids as resize leaves them), walked with @p forces: accelerations and
/// potentials in the order of the particles as given, into @p acc (at least tree.size() elements), still in
/// internal units. What tree_forces does without its host copies and allocations, for callers that keep the tree
/// and evaluate again and again (the Python module).
void tree_forces_on_device(Octree& tree, TreeForces& forces, const InternalUnits& units, float theta, float eps,
                           Buffer<bn_f4>& acc);

/// The index of the first element of @p v with a component that is not finite (NaN or infinite); v.size() when all
/// are. Results of a force evaluation (and states built from them) are checked with it before they are written.
std::size_t first_non_finite(std::span<const bn_f4> v);

/// Direct summation in double precision for the targets listed in @p targets only: acc_pot[4 t .. 4 t + 3] =
/// (ax, ay, az, phi) of particle targets[t] from all @p n particles but itself (kernel directForcesF64Targets).
void direct_forces_f64_targets(Backend& be, const Buffer<bn_f4>& pos_mass, std::size_t n, const Buffer<bn_u32>& targets,
                               std::size_t ntargets, double eps, Buffer<double>& acc_pot);

} // namespace banyan
