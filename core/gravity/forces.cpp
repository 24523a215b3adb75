/**
 * @file forces.cpp
 * @brief Drives the tree walk: per-walk cell data, one launch of persistent work-groups over all groups, the check
 *        that no level list outgrew its spill buffer, and the way back to the caller's particle order.
 */
#include "core/gravity/forces.hpp"

#include "core/error.hpp"
#include "core/gravity/precision.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

namespace banyan {

namespace {

static_assert(BANYAN_WALK_LIST >= 1, "the walk needs a local level list");

} // namespace

TreeForces::TreeForces(Backend& be) : be_(be), groups_per_unit_(be.info().gpu ? 16u : 4u)
{
    counter_ = be_.alloc<bn_u32>(1, "walk.counter");
    const std::size_t align = std::max<std::size_t>(be_.info().view_align, 16);
    outputs_ = be_.alloc<unsigned char>(2 * align + sizeof(bn_u32), "walk.outputs");
    totals_dev_ = outputs_.view_as<bn_u64>(0, 2);
    status_ = outputs_.view_as<bn_u32>(align, 1);
    active_total_ = outputs_.view_as<bn_u32>(2 * align, 1);
    roots_ = be_.alloc<bn_u32>(1, "walk.roots");
    roots_.fill(0u);
    near_roots_ = be_.alloc<bn_u32>(1, "walk.near_roots");
}

void TreeForces::clear_outputs()
{
    outputs_.fill(static_cast<unsigned char>(0));
}

bn_u32 TreeForces::read_outputs(InteractionTotals& t)
{
    const auto bytes = outputs_.download(outputs_.size());
    const std::size_t align = std::max<std::size_t>(be_.info().view_align, 16);
    bn_u64 totals[2];
    bn_u32 status, active;
    std::memcpy(totals, bytes.data(), sizeof totals);
    std::memcpy(&status, bytes.data() + align, sizeof status);
    std::memcpy(&active, bytes.data() + 2 * align, sizeof active);
    t.pp = totals[0];
    t.pc = totals[1];
    if (rungs_) walked_groups_ = active;
    return status;
}

void TreeForces::drop_views() noexcept
{
    acc_ = {}, mac_ = {}, link_ = {}, rel_ = {}, spill_ = {}, pp_ = {}, pc_ = {};
    active_flags_ = {}, active_iota_ = {}, active_list_ = {}, active_first_ = {}, active_count_ = {};
    active_lo_ = {}, active_hi_ = {};
}

Buffer<bn_f4>& TreeForces::bind_acc(Octree& tree)
{
    drop_views();
    WorkspaceLayout layout = tree.workspace_layout("the accelerations");
    const auto acc_at = layout.slots<bn_f4>("accelerations", 0, std::max<std::size_t>(tree.size(), 1));
    acc_ = layout.view(tree.workspace(0), acc_at);
    return acc_;
}

const Buffer<bn_u32>& TreeForces::pp_counts() const
{
    if (!counted_) throw std::logic_error("TreeForces: per-particle counts were not kept (set_count_each)");
    return pp_;
}

const Buffer<bn_u32>& TreeForces::pc_counts() const
{
    if (!counted_) throw std::logic_error("TreeForces: per-particle counts were not kept (set_count_each)");
    return pc_;
}

void TreeForces::poison(Octree& tree)
{
    tree.workspace(0).fill(0xFF);
}

void TreeForces::compute(Octree& tree, const OpeningCriterion& criterion, float eps, double* walk_ms)
{
    begin(tree, criterion, eps);
    end(tree, walk_ms);
}

void TreeForces::begin(Octree& tree, const OpeningCriterion& criterion, float eps, RemoteTrees* remote)
{
    remote_ = remote && remote->cells ? remote : nullptr;
    if (remote_ && (remote_->cell_base != tree.cells() || remote_->particle_base != tree.size()))
        throw std::logic_error("tree forces: the grafted trees were received for another tree");
    criterion.check("tree forces");
    if (!(eps >= 0.0f && std::isfinite(eps)))
        throw UsageError(fmt::format("tree forces: the softening eps must be >= 0 and within single precision's "
                                     "range (below 3.4e38), got {}",
                                     eps));
    if (criterion.alpha > 0.0f && acc_old_ == nullptr)
        throw std::logic_error("tree forces: the relative criterion needs the previous accelerations "
                               "(set_previous_accelerations)");
    n_ = tree.size();
    totals_ = {};
    counted_ = false;
    criterion_ = criterion;
    eps_ = eps;
    if (n_ == 0) return;
    if (tree.cells() == 0 || tree.groups() == 0) throw std::logic_error("tree forces: the octree has not been built");
    if (criterion.alpha > 0.0f && acc_old_->size() < n_)
        throw std::logic_error("tree forces: fewer previous accelerations than particles (set_previous_accelerations)");
    if (rungs_ && rungs_->size() < n_) throw std::logic_error("tree forces: fewer rungs than particles (set_active)");
    if (sinks_ && sinks_->size() < n_) throw std::logic_error("tree forces: sinks need one per particle (set_sinks)");
    walked_groups_ = tree.groups();
    // With active groups (block time steps) the walk is not split: its flags would have to meet the far and near
    // ones.
    split_ = remote_ && remote_->split && !rungs_;
    near_pending_ = split_;
    launch_local(tree, split_ ? Part::far : Part::all);
}

void TreeForces::walk_received(Octree& tree)
{
    if (!near_pending_) return;
    near_pending_ = false;
    launch_local(tree, Part::near);
}

void TreeForces::lay_out(Octree& tree)
{
    // Over ranks the received trees lie behind the local tree's cells and particles (RemoteTrees): the walk runs
    // over all cells at once, from the local root and the received roots.
    const std::size_t nc = tree.cells() + (remote_ ? remote_->cells : 0);
    const std::size_t ngroups = tree.groups();
    const std::size_t units = std::max<unsigned>(be_.info().compute_units, 1);
    const std::size_t most_wgs = std::max<std::size_t>(1, std::min(ngroups, units * groups_per_unit_));
    // The spill buffer is 2 walk_cap_ entries per work-group, sized by the particles, not by the device: a level
    // list holds children of the cells opened one level up, all of one level, so it is never longer than the
    // widest level of the local tree plus every grafted cell (the first list: the roots). No more is ever
    // allocated; a walk that reports a longer list is a logic error (spill_overflowed). A first walk starts with
    // about one entry per particle in all (4 bytes a particle; at most 1024 per work-group and list, the size it
    // had for every N before), and the buffer grows to what a walk asks for (end()).
    list_bound_ = tree.widest_level() + (remote_ ? remote_->cells + 1 : 0);
    const std::size_t most_cap = list_bound_ > BANYAN_WALK_LIST ? list_bound_ - BANYAN_WALK_LIST : 1;
    if (spill_cap_ == 0) spill_cap_ = std::clamp<std::size_t>(n_ / (2 * most_wgs), 1, 1024);
    walk_cap_ = std::min(spill_cap_, most_cap);
    // Where long level lists (a cusp, a galaxy's unequal depths, theta near 0) make it large, fewer work-groups
    // walk, so that it takes at most 64 bytes a particle (all else of a run holds about 86) or the room of 4
    // work-groups a compute unit, whichever is more; and never more than an eighth of the device (at most 2 GiB).
    // On an H200 4 work-groups a unit walk a 2^20 Milky Way 2 % slower than 16, in 343 MiB of spill against 1184
    // (docs/benchmarks.md, "Small runs' device memory").
    const std::size_t per_wg = 2 * walk_cap_ * sizeof(bn_u32);
    const std::size_t device_budget =
        std::max<std::size_t>(std::min<std::size_t>(be_.info().memory_bytes / 8, std::size_t{2} << 30), 1 << 20);
    const std::size_t budget = std::min(
        device_budget, std::max<std::size_t>(64 * n_, units * std::min<std::size_t>(groups_per_unit_, 4) * per_wg));
    wgs_ = std::max<std::size_t>(1, std::min(most_wgs, budget / per_wg));
    const std::size_t spill_entries = 2 * wgs_ * walk_cap_;
    // The walk's layout: the accelerations in slots 0-3 (valid until the next build), then per cell the opening
    // data and the links, the relative criterion's factor (a one-element stand-in without it), the spill buffer,
    // and the counts when kept (without, two one-element stand-ins the kernel never touches). estimate_device_bytes
    // counts the same.
    WorkspaceLayout layout = tree.workspace_layout("the walk");
    const auto acc_at = layout.slots<bn_f4>("accelerations", 0, n_);
    const auto mac_at = layout.slots<bn_f4>("opening data", 4, nc);
    const auto link_at = layout.next<bn_u2>("links", nc);
    const auto rel_at = layout.next<float>("relative factors", criterion_.alpha > 0.0f ? nc : 1);
    const auto spill_at = layout.next<bn_u32>("spill", spill_entries);
    const auto pp_at = layout.next<bn_u32>("pp counts", count_each_ ? n_ : 1);
    const auto pc_at = layout.next<bn_u32>("pc counts", count_each_ ? n_ : 1);
    // Block time steps, or the far and near groups over ranks: the groups' flags, indices and compacted list, and
    // the walk's copies of the walked groups' data (one-element stand-ins when every group is walked).
    const std::size_t na = rungs_ || split_ ? ngroups : 1;
    const auto flags_at = layout.next<bn_u32>("active flags", na);
    const auto iota_at = layout.next<bn_u32>("group indices", na);
    const auto list_at = layout.next<bn_u32>("active groups", na);
    const auto first_at = layout.next<bn_u32>("active groups' first particles", na);
    const auto count_at = layout.next<bn_u32>("active groups' counts", na);
    const auto lo_at = layout.next<bn_f4>("active groups' lower corners", na);
    const auto hi_at = layout.next<bn_f4>("active groups' upper corners", na);
    // Views of a workspace about to grow go first: the old allocation is then freed at once.
    drop_views();
    const auto& ws = tree.workspace(layout.end());
    acc_ = layout.view(ws, acc_at);
    mac_ = layout.view(ws, mac_at);
    link_ = layout.view(ws, link_at);
    rel_ = layout.view(ws, rel_at);
    spill_ = layout.view(ws, spill_at);
    pp_ = layout.view(ws, pp_at);
    pc_ = layout.view(ws, pc_at);
    active_flags_ = layout.view(ws, flags_at), active_iota_ = layout.view(ws, iota_at);
    active_list_ = layout.view(ws, list_at), active_first_ = layout.view(ws, first_at);
    active_count_ = layout.view(ws, count_at), active_lo_ = layout.view(ws, lo_at), active_hi_ = layout.view(ws, hi_at);
}

void TreeForces::launch_local(Octree& tree, Part part)
{
    const std::size_t ngroups = tree.groups();
    if (part != Part::near) {
        lay_out(tree);
        clear_outputs();
    }
    counter_.fill(0u);
    (part == Part::near ? near_start_ : start_) = be_.record();
    // The groups walked, unless all: their flags, compacted on the device (the count stays there, for the walk).
    const Buffer<bn_u32>* flags = nullptr;
    if (rungs_) {
        be_.launch(kernels::walkGroupFlags, grid_for(be_, ngroups), tree.group_first(), tree.group_count(), *rungs_,
                   to_u32(ngroups), level_, active_flags_);
        flags = &active_flags_;
    } else if (part != Part::all) {
        flags = part == Part::far ? &remote_->far : &remote_->near;
    }
    if (flags) {
        be_.launch(kernels::treeIota, grid_for(be_, ngroups), active_iota_, to_u32(ngroups));
        be_.compact(active_iota_, *flags, ngroups, active_list_, active_total_);
        be_.launch(kernels::walkGroupGather, grid_for(be_, ngroups), active_list_, active_total_, tree.group_first(),
                   tree.group_count(), tree.group_lo(), tree.group_hi(), to_u32(ngroups), active_first_, active_count_,
                   active_lo_, active_hi_);
    }
    const auto& group_first = flags ? active_first_ : tree.group_first();
    const auto& group_count = flags ? active_count_ : tree.group_count();
    const auto& group_lo = flags ? active_lo_ : tree.group_lo();
    const auto& group_hi = flags ? active_hi_ : tree.group_hi();
    const auto& group_total = flags ? active_total_ : tree.group_total();
    // The cells walked: the local tree, and over ranks what is grafted behind it (the far groups reach only the
    // top trees, which lie first: the received trees may still be on their way).
    std::size_t nc = tree.cells(), nroots = 1;
    Buffer<bn_u32>& roots_dev = part == Part::near ? near_roots_ : roots_;
    if (remote_) {
        // The roots (few: one per rank).
        const auto& grafted = part == Part::far ? remote_->top_roots : remote_->roots;
        std::vector<bn_u32> roots{0};
        roots.insert(roots.end(), grafted.begin(), grafted.end());
        nroots = roots.size();
        ensure_size(be_, roots_dev, nroots, "walk.roots");
        roots_dev.upload(std::span<const bn_u32>(roots));
        nc += part == Part::far ? remote_->top_cells : remote_->cells;
    }
    // Over ranks the tree's arrays hold the grafted trees behind the local one; its positions are the walk's
    // targets in [0, n_) and its sources (the received particles behind them) at once.
    const auto& com = tree.cell_com();
    const auto& quad0 = tree.cell_quad0();
    const auto& quad1 = tree.cell_quad1();
    be_.launch(kernels::walkPrepare, grid_for(be_, nc), com, quad1, tree.cell_first(), tree.cell_count(), to_u32(nc),
               criterion_.inv_theta(), mac_, link_);
    if (criterion_.alpha > 0.0f)
        be_.launch(kernels::walkPrepareRelative, grid_for(be_, nc), com, quad1, to_u32(nc), rel_);
    // Without the relative criterion the kernel reads neither rel_ (a stand-in) nor the previous accelerations.
    be_.launch(kernels::walkForces, Grid{wgs_, BANYAN_WALK_WG}, sinks_ ? *sinks_ : tree.pos(), tree.pos(), mac_, link_,
               com, quad0, quad1, group_first, group_count, group_lo, group_hi, group_total, eps_ * eps_, counter_,
               spill_, to_u32(walk_cap_), status_, totals_dev_, acc_, pp_, pc_, bn_u32{count_each_ ? 1u : 0u},
               roots_dev, to_u32(nroots), rel_, criterion_.alpha > 0.0f ? *acc_old_ : acc_, criterion_.alpha);
    (part == Part::near ? near_stop_ : stop_) = be_.record();
}

bool TreeForces::spill_overflowed(bn_u32 needed)
{
    if (needed == 0) return false;
    // No level list is longer than the widest level plus the grafted cells (lay_out): one that asked for more
    // is a bug, never a reason for a larger buffer.
    if (needed > list_bound_)
        throw std::logic_error(fmt::format("tree forces: a level list asked for {} entries, more than the {} that "
                                           "the widest level of the tree and the grafted cells allow",
                                           needed, list_bound_));
    // A level list outgrew BANYAN_WALK_LIST + walk_cap_ entries: the walk is incomplete. Walk again with room
    // for what was asked for (a level after a truncated one may ask for more; hence the callers' loops). lay_out
    // allocates no more than the tree can use.
    const std::size_t want = needed > BANYAN_WALK_LIST ? needed - BANYAN_WALK_LIST : 1;
    spill_cap_ = std::max(2 * walk_cap_, want + want / 2);
    ++retries_;
    return true;
}

void TreeForces::end(Octree& tree, double* walk_ms)
{
    if (walk_ms) *walk_ms = 0;
    if (n_ == 0) return;
    walk_received(tree);
    for (int attempt = 0; spill_overflowed(read_outputs(totals_)); ++attempt) {
        if (attempt >= 16) throw std::runtime_error("tree forces: level lists keep outgrowing the spill buffer");
        split_ = false; // the received trees are there now: every group walks the graft at once
        launch_local(tree);
    }
    if (walk_ms) *walk_ms = be_.elapsed_ms(start_, stop_) + (split_ ? be_.elapsed_ms(near_start_, near_stop_) : 0.0);
    counted_ = count_each_;
}

void TreeForces::to_input_order(const Octree& tree, Buffer<bn_f4>& acc, Buffer<bn_u32>* pp, Buffer<bn_u32>* pc)
{
    if (n_ == 0) return;
    if (tree.size() != n_ || acc.size() < n_ || (pp && pp->size() < n_) || (pc && pc->size() < n_))
        throw std::invalid_argument("TreeForces::to_input_order: sizes do not match");
    if ((pp || pc) && !counted_)
        throw std::logic_error("TreeForces::to_input_order: per-particle counts were not kept (set_count_each)");
    // Without counts the kernel does not touch the count buffers: the walk's stand-ins fill those places. With
    // one count wanted, the other goes to a scratch buffer, so that the kernel has one form.
    const bool counts = pp || pc;
    Buffer<bn_u32>* sink = nullptr;
    if (counts && (!pp || !pc)) sink = &be_.scratch_buffer<bn_u32>("walk.sink", n_);
    be_.launch(kernels::walkScatter, grid_for(be_, n_), acc_, pp_, pc_, tree.ids(), to_u32(n_), acc,
               counts ? (pp ? *pp : *sink) : pp_, counts ? (pc ? *pc : *sink) : pc_, bn_u32{counts ? 1u : 0u});
}

ForceResult tree_forces(Backend& be, std::span<const bn_f4> pos, float theta, float eps)
{
    ForceResult r;
    const std::size_t n = pos.size();
    if (n == 0) return r;
    // In internal units (precision.hpp): any absolute scale of the input then fits single precision.
    const InternalUnits units = InternalUnits::for_system(pos, eps);
    const float eps_internal = static_cast<float>(units.length_to_internal(eps));
    if (unsoftened(eps_internal)) check_coincident(pos, {}, "the particles");
    std::vector<bn_f4> internal(pos.begin(), pos.end());
    units.to_internal(internal);
    Octree tree(be);
    tree.set_particles(internal);
    tree.build();
    if (auto warning = check_tree_depth(tree, units, "the particles")) notice("warning: " + *warning);
    TreeForces forces(be);
    forces.set_count_each(true);
    forces.compute(tree, theta, eps_internal);
    auto acc = be.alloc<bn_f4>(n, "forces.acc");
    auto pp = be.alloc<bn_u32>(n, "forces.pp");
    auto pc = be.alloc<bn_u32>(n, "forces.pc");
    forces.to_input_order(tree, acc, &pp, &pc);
    r.acc = acc.download(n);
    r.out_of_range = units.forces_from_internal(r.acc);
    r.pp = pp.download(n);
    r.pc = pc.download(n);
    r.totals = forces.totals();
    return r;
}

void tree_forces_on_device(Octree& tree, TreeForces& forces, const InternalUnits& units, float theta, float eps,
                           Buffer<bn_f4>& acc)
{
    if (tree.size() == 0) return;
    tree.build();
    if (auto warning = check_tree_depth(tree, units, "the particles")) notice("warning: " + *warning);
    if (unsoftened(eps)) check_coincident(tree.pos().download(tree.size()), tree.download_ids(), "the particles");
    forces.compute(tree, theta, eps);
    forces.to_input_order(tree, acc);
}

void direct_forces_f64_targets(Backend& be, const Buffer<bn_f4>& pos_mass, std::size_t n, const Buffer<bn_u32>& targets,
                               std::size_t ntargets, double eps, Buffer<double>& acc_pot)
{
    if (n >= (std::size_t{1} << 32) || ntargets >= (std::size_t{1} << 32))
        throw UsageError(fmt::format("direct summation of {} particles on {} targets: too many", n, ntargets));
    if (pos_mass.size() < n || targets.size() < ntargets || acc_pot.size() < 4 * ntargets)
        throw std::invalid_argument("direct_forces_f64_targets: buffers too small");
    be.launch(kernels::directForcesF64Targets, grid_for(be, ntargets), pos_mass, to_u32(n), targets, to_u32(ntargets),
              eps * eps, acc_pot);
}

std::size_t estimate_device_bytes(const Backend& be, std::size_t n, bool velocities, bool block, bool probe)
{
    const double N = static_cast<double>(n);
    const double cells = N / 4 + 64; // the initial capacity of the cell arrays (octree.cpp)
    const double groups = N / 16;    // groups hold up to N_crit = 64 particles; a Plummer sphere has about N / 30
    const double units = std::max(1u, be.info().compute_units);
    // The walk's first spill buffer (TreeForces::lay_out): about one entry per particle, at most 1024 per
    // work-group and list, 16 work-groups per unit at most.
    const double spill = std::min(4.0 * N, 2.0 * 1024 * sizeof(bn_u32) * std::min(groups, 16 * units));
    const double particles = (velocities ? 36.0 : 20.0) * N + (block ? 4.0 * N : 0.0) // pos, vel, id, rung
                             + (block && probe ? 36.0 * N : 0.0); // Simulation::probe_rungs' buffers
    // The workspace: the build's 7 slots, its moments per cell, or the walk's layout (TreeForces::launch_local:
    // the accelerations, opening data and links per cell, the spill buffer).
    // Block steps: the active groups' flags, indices, list and copies, 52 bytes per group.
    const double active = block ? 52 * groups : 0.0;
    const double workspace = std::max({28 * N, 80 * cells, 16 * N + 24 * cells + spill + active});
    const double kept = 80 * cells + 40 * groups; // cell and group arrays
    // Sort histograms (0.5 bytes per particle), scan partials, CUB's temporary storage, counters and the energy
    // sums' partials.
    const double small = N + 256.0 * 1024;
    return static_cast<std::size_t>(particles + workspace + kept + small);
}

std::size_t first_non_finite(std::span<const bn_f4> v)
{
    for (std::size_t i = 0; i < v.size(); ++i)
        if (!(std::isfinite(v[i].x) && std::isfinite(v[i].y) && std::isfinite(v[i].z) && std::isfinite(v[i].w)))
            return i;
    return v.size();
}

} // namespace banyan
