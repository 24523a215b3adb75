/**
 * @file octree.cpp
 * @brief Drives the tree build on the device: which kernel runs when, over what, into which buffer.
 *
 * Phases (paper section 2.1 and 3.2): bounding box and keys; radix sort of (key, index); the particle arrays
 * gathered into key order; the cells of all levels at once (kernels_cl/tree_build.cl; one host round trip, for the
 * level counts); links; multipoles; groups (one more, for the group count). Everything else stays on the device.
 */
#include "core/tree/octree.hpp"

#include "core/error.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <stdexcept>
#include <type_traits>
#include <vector>

namespace banyan {

namespace {

std::size_t ceil_div(std::size_t a, std::size_t b)
{
    return (a + b - 1) / b;
}

/// Slots of 4 bytes per particle in the workspace (each phase's layout is with the phase, below).
constexpr std::size_t workspace_slots = 7;

/// The alignment of the device's views, and so of the workspace's slots and regions.
std::size_t view_align(const Backend& be)
{
    return std::max<std::size_t>(be.info().view_align, 16);
}

/// Grows @p b to at least @p n elements (never shrinks), keeping the first @p keep elements.
template <class T> void grow(Backend& be, Buffer<T>& b, std::size_t n, std::size_t keep, const char* what)
{
    if (b && b.size() >= n) return;
    Buffer<T> fresh = be.alloc<T>(std::max<std::size_t>(n, 1), what);
    if (keep && b) fresh.copy_from(b, std::min(keep, b.size()));
    b = std::move(fresh);
}

/// Device time between consecutive marks, when timing was asked for.
class PhaseClock {
public:
    PhaseClock(Backend& be, TreeTimings* t) : be_(be), t_(t)
    {
        if (t_) marks_.push_back(be_.record());
    }
    void mark()
    {
        if (t_) marks_.push_back(be_.record());
    }
    void finish()
    {
        if (!t_) return;
        double* out[] = {&t_->keys, &t_->sort, &t_->move, &t_->build, &t_->link, &t_->multipoles, &t_->groups};
        for (std::size_t i = 0; i + 1 < marks_.size() && i < std::size(out); ++i)
            *out[i] = be_.elapsed_ms(marks_[i], marks_[i + 1]);
        t_->total = be_.elapsed_ms(marks_.front(), marks_.back());
    }

private:
    Backend& be_;
    TreeTimings* t_;
    std::vector<Event> marks_;
};

/// Whether every point of [lo, hi] gets a grid coordinate inside the frame of @p box (tree_shared.h: none clamped
/// to the frame's edge), in the float arithmetic of bn_tree_grid_coord. NaN bounds give false.
bool frame_holds(const std::array<bn_f4, 2>& box, bn_f4 lo, bn_f4 hi)
{
    const bn_f4 o = box[0];
    const float inv = bn_tree_pow2(BANYAN_MAX_DEPTH - bn_tree_frame_exponent(box[0], box[1]));
    const auto in = [inv](float a, float b, float origin) {
        return (a - origin) * inv >= 0.0f && (b - origin) * inv < static_cast<float>(BANYAN_TREE_GRID);
    };
    return in(lo.x, hi.x, o.x) && in(lo.y, hi.y, o.y) && in(lo.z, hi.z, o.z);
}

} // namespace

Octree::Octree(Backend& be) : be_(be)
{
    box_ = be_.alloc<bn_f4>(2, "tree.box");
    frame_ = be_.alloc<bn_f4>(1, "tree.frame");
    level_count_ = be_.alloc<bn_u32>(BANYAN_TREE_LEVELS, "tree.level_count");
    group_total_ = be_.alloc<bn_u32>(1, "tree.group_total");
}

Buffer<unsigned char>& Octree::workspace(std::size_t bytes, std::size_t keep)
{
    const std::size_t want = std::max(bytes, workspace_slots * slot_);
    if (!workspace_ || workspace_.size() < want) {
        if (keep && workspace_) {
            auto fresh = be_.alloc<unsigned char>(want, "tree.workspace");
            fresh.copy_from(workspace_, std::min(keep, workspace_.size()));
            workspace_ = std::move(fresh);
        } else {
            workspace_ = Buffer<unsigned char>(); // free first, so growing does not need both at once
            workspace_ = be_.alloc<unsigned char>(want, "tree.workspace");
        }
    }
    return workspace_;
}

WorkspaceLayout Octree::workspace_layout(std::string phase) const
{
    return WorkspaceLayout(std::move(phase), slot_, view_align(be_));
}

void Octree::reserve_particles(std::size_t n, bool with_vel)
{
    // Cell counts carry a flag in bit 31 (BANYAN_TREE_LEAF_BIT): 2^31 - 1 particles is the most one tree can hold.
    if (n > 0x7FFFFFFFu) throw UsageError(fmt::format("tree: {} particles is more than the 2^31 - 1 supported", n));
    const std::size_t m = std::max<std::size_t>(n, 1);
    const std::size_t align = view_align(be_);
    slot_ = ceil_div(4 * m, align) * align;
    if (!id_ || id_.size() < m) {
        pos_ = Buffer<bn_f4>(), id_ = Buffer<bn_u32>();
        pos_ = be_.alloc<bn_f4>(m, "tree.pos");
        id_ = be_.alloc<bn_u32>(m, "tree.id");
    }
    if (!with_vel)
        vel_ = Buffer<bn_f4>();
    else if (!vel_ || vel_.size() < m) {
        vel_ = Buffer<bn_f4>();
        vel_ = be_.alloc<bn_f4>(m, "tree.vel");
    }
    if (!keep_rungs_)
        rung_ = Buffer<bn_u32>();
    else if (!rung_ || rung_.size() < m) {
        rung_ = Buffer<bn_u32>();
        rung_ = be_.alloc<bn_u32>(m, "tree.rung");
    }
    if (!keep_high_ids_)
        id_high_ = Buffer<bn_u32>();
    else if (!id_high_ || id_high_.size() < m) {
        id_high_ = Buffer<bn_u32>();
        id_high_ = be_.alloc<bn_u32>(m, "tree.id_high");
    }
    workspace(0);
    // A Plummer sphere has about N / 4.3 cells; the arrays grow by themselves when a tree needs more.
    if (cell_capacity_ < m / 4 + 64) grow_cells(m / 4 + 64, 0);
}

void Octree::grow_cells(std::size_t n, std::size_t keep)
{
    if (cell_capacity_ >= n) return;
    grow(be_, cell_key_, n, keep, "tree.cell_key");
    grow(be_, cell_level_, n, keep, "tree.cell_level");
    grow(be_, cell_first_, n, keep, "tree.cell_first");
    grow(be_, cell_count_, n, keep, "tree.cell_count");
    grow(be_, cell_pbegin_, n, keep, "tree.cell_pbegin");
    grow(be_, cell_pcount_, n, keep, "tree.cell_pcount");
    grow(be_, cell_parent_, n, 0, "tree.cell_parent");
    grow(be_, cell_com_, n, 0, "tree.cell_com");
    grow(be_, cell_quad0_, n, 0, "tree.cell_quad0");
    grow(be_, cell_quad1_, n, 0, "tree.cell_quad1");
    cell_capacity_ = n;
}

void Octree::make_room_behind(std::size_t cells, std::size_t particles)
{
    const std::size_t nc = this->cells();
    grow(be_, cell_com_, nc + cells, nc, "tree.cell_com");
    grow(be_, cell_quad0_, nc + cells, nc, "tree.cell_quad0");
    grow(be_, cell_quad1_, nc + cells, nc, "tree.cell_quad1");
    grow(be_, cell_first_, nc + cells, nc, "tree.cell_first");
    grow(be_, cell_count_, nc + cells, nc, "tree.cell_count");
    grow(be_, pos_, n_ + particles, n_, "tree.pos");
}

Buffer<bn_u64> Octree::keys() const
{
    auto out = be_.alloc<bn_u64>(std::max<std::size_t>(n_, 1), "tree.keys (test)");
    // The kernel writes the frame too (the same one, from the same box): a const method leaves the build's alone.
    auto frame = be_.alloc<bn_f4>(1, "tree.frame (test)");
    if (n_) be_.launch(kernels::treeKeys, grid_for(be_, n_), pos_, box_, to_u32(n_), out, frame);
    return out;
}

void Octree::poison()
{
    auto fill = [](auto& b, auto v) {
        if (b) b.fill(v);
    };
    const bn_f4 nan4{std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::quiet_NaN(),
                     std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::quiet_NaN()};
    // The workspace but its first four slots, where the walk's accelerations stay until the next step's drift.
    if (workspace_ && workspace_.size() > 4 * slot_)
        workspace_.fill(static_cast<unsigned char>(0xA5), 4 * slot_, workspace_.size() - 4 * slot_);
    fill(frame_, nan4);
    fill(cell_key_, ~bn_u64{0}), fill(cell_level_, 0xDEADBEEFu), fill(cell_parent_, 0xDEADBEEFu);
    fill(cell_first_, 0xDEADBEEFu), fill(cell_count_, 0xDEADBEEFu), fill(cell_pbegin_, 0xDEADBEEFu);
    fill(cell_pcount_, 0xDEADBEEFu);
    fill(cell_com_, nan4), fill(cell_quad0_, nan4), fill(cell_quad1_, nan4);
    fill(group_first_, 0xDEADBEEFu), fill(group_count_, 0xDEADBEEFu), fill(group_lo_, nan4), fill(group_hi_, nan4);
}

void Octree::resize(std::size_t n, bool with_vel)
{
    reserve_particles(n, with_vel);
    n_ = n;
    level_begin_.fill(0);
    n_groups_ = 0;
    depth_ = -1;
    if (n_) be_.launch(kernels::treeIota, grid_for(be_, n_), id_, to_u32(n_));
    if (id_high_) id_high_.fill(0u);
}

void Octree::resize_keep(std::size_t n)
{
    const std::size_t keep = std::min(n_, n);
    const bool with_vel = static_cast<bool>(vel_);
    // The ids' size is the particle capacity: pos() may be longer (make_room_behind).
    if (n > id_.size()) {
        // Room for an eighth more, so that the next steps' exchanges rarely grow the arrays again.
        const std::size_t m = std::min<std::size_t>(n + n / 8, 0x7FFFFFFFu);
        if (n > 0x7FFFFFFFu) throw UsageError(fmt::format("tree: {} particles is more than the 2^31 - 1 supported", n));
        auto regrow = [&](auto& b, const char* what) {
            using T = typename std::remove_reference_t<decltype(b)>::value_type;
            auto fresh = be_.alloc<T>(m, what);
            if (keep) fresh.copy_from(b, keep);
            b = std::move(fresh);
        };
        regrow(pos_, "tree.pos");
        regrow(id_, "tree.id");
        if (with_vel) regrow(vel_, "tree.vel");
        if (keep_rungs_) regrow(rung_, "tree.rung");
        if (keep_high_ids_) regrow(id_high_, "tree.id_high");
    }
    const std::size_t cap = id_.size();
    const std::size_t align = view_align(be_);
    slot_ = ceil_div(4 * std::max<std::size_t>(cap, 1), align) * align;
    workspace(0);
    if (cell_capacity_ < cap / 4 + 64) grow_cells(cap / 4 + 64, 0);
    n_ = n;
    level_begin_.fill(0);
    n_groups_ = 0;
    depth_ = -1;
}

void Octree::keep_rungs(bool on)
{
    keep_rungs_ = on;
    if (!on)
        rung_ = Buffer<bn_u32>();
    else if (id_ && (!rung_ || rung_.size() < id_.size()))
        rung_ = be_.alloc<bn_u32>(id_.size(), "tree.rung");
}

void Octree::keep_high_ids(bool on)
{
    keep_high_ids_ = on;
    if (!on)
        id_high_ = Buffer<bn_u32>();
    else if (id_ && (!id_high_ || id_high_.size() < id_.size())) {
        id_high_ = be_.alloc<bn_u32>(id_.size(), "tree.id_high");
        id_high_.fill(0u); // the ids the tree holds are below 2^32
    }
}

std::vector<std::uint64_t> Octree::download_ids() const
{
    std::vector<std::uint64_t> out(n_);
    if (n_ == 0) return out;
    const std::vector<bn_u32> low = id_.download(n_);
    const std::vector<bn_u32> high = id_high_ ? id_high_.download(n_) : std::vector<bn_u32>(n_, 0u);
    for (std::size_t i = 0; i < n_; ++i)
        out[i] = std::uint64_t{high[i]} << 32 | low[i];
    return out;
}

void Octree::set_ids(std::span<const std::uint64_t> ids, std::size_t at)
{
    if (at + ids.size() > n_) throw std::logic_error("Octree::set_ids: beyond the particles");
    std::vector<bn_u32> low(ids.size()), high(ids.size());
    bool above = false;
    for (std::size_t i = 0; i < ids.size(); ++i) {
        low[i] = static_cast<bn_u32>(ids[i]);
        high[i] = static_cast<bn_u32>(ids[i] >> 32);
        above |= high[i] != 0;
    }
    if (above && !id_high_) throw std::logic_error("Octree::set_ids: ids of 2^32 or more without keep_high_ids");
    id_.upload(std::span<const bn_u32>(low), at);
    if (id_high_) id_high_.upload(std::span<const bn_u32>(high), at);
}

void Octree::set_particles(std::span<const bn_f4> pos, std::span<const bn_f4> vel)
{
    if (!vel.empty() && vel.size() != pos.size())
        throw UsageError(fmt::format("tree: {} positions but {} velocities", pos.size(), vel.size()));
    resize(pos.size(), !vel.empty());
    pos_.upload(pos);
    if (!vel.empty()) vel_.upload(vel);
}

void Octree::set_particles(std::span<const bn_f4> pos, std::span<const bn_f4> vel, std::span<const std::uint64_t> ids)
{
    if (ids.size() != pos.size())
        throw UsageError(fmt::format("tree: {} positions but {} ids", pos.size(), ids.size()));
    set_particles(pos, vel);
    set_ids(ids);
}

void Octree::build(TreeTimings* timings)
{
    PhaseClock clock(be_, timings);
    workspace(0);
    compute_keys();
    clock.mark();
    const std::size_t pair = sort_keys();
    clock.mark();
    move_particles(pair);
    clock.mark();
    build_cells(pair);
    clock.mark();
    link_cells();
    clock.mark();
    // The multipoles before the groups, whose count the host waits for: then only the group boxes and the walk
    // are launched after that wait, the multipoles' many small launches before it, while the device is busy.
    // (The groups' scratch slots are free again once the multipoles are stored.)
    compute_multipoles();
    clock.mark();
    make_groups();
    clock.mark();
    clock.finish();
}

void Octree::compute_keys()
{
    in_frame_box_ = false;
    if (n_ == 0) return;
    be_.reduce_bounds(pos_, n_, box_);
    if (frame_box_) {
        const auto b = box_.download(2);
        if (frame_holds(*frame_box_, b[0], b[1])) {
            box_.upload(std::span<const bn_f4>(*frame_box_));
            in_frame_box_ = true;
        }
    }
    // Pair A of the sort (sort_keys).
    WorkspaceLayout layout = workspace_layout("the keys");
    const auto keys_at = layout.slots<bn_u64>("keys", 0, n_);
    const auto iota_at = layout.slots<bn_u32>("indices", 2, n_);
    auto keys = layout.view(workspace_, keys_at);
    auto iota = layout.view(workspace_, iota_at);
    be_.launch(kernels::treeKeys, grid_for(be_, n_), pos_, box_, to_u32(n_), keys, frame_);
    be_.launch(kernels::treeIota, grid_for(be_, n_), iota, to_u32(n_));
}

std::size_t Octree::sort_keys()
{
    if (n_ == 0) return 0;
    // The sort's double buffer: pair A (keys and values) as compute_keys left it, pair B behind it.
    WorkspaceLayout layout = workspace_layout("the sort");
    const auto keys_a_at = layout.slots<bn_u64>("keys A", 0, n_);
    const auto values_a_at = layout.slots<bn_u32>("values A", 2, n_);
    const auto keys_b_at = layout.slots<bn_u64>("keys B", 4, n_);
    const auto values_b_at = layout.slots<bn_u32>("values B", 6, n_);
    auto keys_a = layout.view(workspace_, keys_a_at), keys_b = layout.view(workspace_, keys_b_at);
    auto values_a = layout.view(workspace_, values_a_at), values_b = layout.view(workspace_, values_b_at);
    return be_.sort_pairs_double(keys_a, values_a, keys_b, values_b, n_, 0, BANYAN_TREE_KEY_BITS) ? 4 : 0;
}

void Octree::move_particles(std::size_t pair)
{
    if (n_ == 0) return;
    // The sorted keys (kept for build_cells) and the permutation where the sort left them: pair A (slots 0-2)
    // leaves slots 3-6 free, pair B (slots 4-6) slots 0-3, for one particle array at a time.
    const std::size_t spare = pair == 0 ? 3 : 0;
    auto through = [&](auto& a) {
        using T = typename std::remove_reference_t<decltype(a)>::value_type;
        WorkspaceLayout layout = workspace_layout("the move");
        layout.slots<bn_u64>("sorted keys", pair, n_);
        const auto perm_at = layout.slots<bn_u32>("permutation", pair + 2, n_);
        const auto tmp_at = layout.slots<T>("array in key order", spare, n_);
        const auto perm = layout.view(workspace_, perm_at);
        auto tmp = layout.view(workspace_, tmp_at);
        be_.gather(a, perm, n_, tmp);
        a.copy_from(tmp, n_);
    };
    through(pos_);
    if (vel_) through(vel_);
    through(id_);
    if (id_high_) through(id_high_);
    if (rung_) through(rung_);
}

void Octree::build_cells(std::size_t pair)
{
    level_begin_.fill(0);
    depth_ = -1;
    if (n_ == 0) return;
    // The sorted keys where the sort left them; the cells' offsets and first levels in two of the slots the keys
    // leave free (the permutation is spent).
    const std::size_t free0 = pair == 0 ? 2 : 0;
    WorkspaceLayout layout = workspace_layout("the cells");
    const auto keys_at = layout.slots<bn_u64>("sorted keys", pair, n_);
    const auto offsets_at = layout.slots<bn_u32>("cell offsets", free0, n_);
    const auto first_level_at = layout.slots<bn_u32>("first levels", free0 + 1, n_);
    const auto keys = layout.view(workspace_, keys_at);
    auto offsets = layout.view(workspace_, offsets_at), first_level = layout.view(workspace_, first_level_at);
    level_count_.fill(0u);
    be_.launch(kernels::treeCellStarts, grid_for(be_, n_), keys, to_u32(n_), offsets, first_level, level_count_);
    be_.exclusive_scan(offsets, offsets, n_);
    std::array<bn_u32, BANYAN_TREE_LEVELS> counts{};
    level_count_.download(std::span<bn_u32>(counts)); // the one wait of the phase
    std::size_t total = 0;
    for (int l = 0; l < BANYAN_TREE_LEVELS; ++l) {
        level_begin_[l] = total;
        total += counts[l];
        if (counts[l]) depth_ = l;
    }
    level_begin_[BANYAN_TREE_LEVELS] = total;
    if (counts[0] != 1 || total > 0x7FFFFFFFu)
        throw std::logic_error(fmt::format("tree: {} roots and {} cells for {} particles", counts[0], total, n_));
    // Room for a quarter more, so that a count that creeps up from step to step does not reallocate every step.
    if (total > cell_capacity_) grow_cells(total + std::max(total / 4, n_ / 64), 0);
    // The (level, first particle) pairs and their sort live in cell arrays that are written only later (by the
    // multipoles and the links).
    auto levels = cell_quad0_.view_as<bn_u64>(0, total), levels_alt = cell_quad1_.view_as<bn_u64>(0, total);
    auto starts = cell_com_.view_as<bn_u32>(0, total);
    be_.launch(kernels::treeCellList, grid_for(be_, n_), offsets, first_level, to_u32(n_), to_u32(total), levels,
               starts);
    const bool alt = be_.sort_pairs_double(levels, starts, levels_alt, cell_parent_, total, 0, 5);
    be_.launch(kernels::treeCellWrite, grid_for(be_, total), keys, to_u32(n_), alt ? levels_alt : levels,
               alt ? cell_parent_ : starts, to_u32(total), cell_key_, cell_level_, cell_first_, cell_count_,
               cell_pbegin_, cell_pcount_);
}

void Octree::link_cells()
{
    const std::size_t nc = cells();
    if (nc == 0) return;
    be_.launch(kernels::treeLink, grid_for(be_, nc), cell_key_, cell_level_, cell_pcount_, level_count_, to_u32(nc),
               cell_first_, cell_count_, cell_parent_);
}

void Octree::make_groups()
{
    n_groups_ = 0;
    if (n_ == 0) return;
    const std::size_t nc = cells();
    WorkspaceLayout layout = workspace_layout("the groups");
    const auto flags_at = layout.slots<bn_u32>("flags", 0, n_);
    const auto iota_at = layout.slots<bn_u32>("indices", 1, n_);
    const auto starts_at = layout.slots<bn_u32>("group starts", 2, n_);
    auto flags = layout.view(workspace_, flags_at), iota = layout.view(workspace_, iota_at);
    auto starts = layout.view(workspace_, starts_at);
    flags.fill(0u, 0, n_);
    be_.launch(kernels::treeIota, grid_for(be_, n_), iota, to_u32(n_));
    be_.launch(kernels::treeGroupFlags, grid_for(be_, nc), cell_parent_, cell_first_, cell_count_, cell_pbegin_,
               cell_pcount_, to_u32(nc), flags);
    be_.compact(iota, flags, n_, starts, group_total_);
    n_groups_ = group_total_.at(0);
    // An eighth more than needed when they grow, so that a count that creeps up from step to step does not
    // reallocate every step.
    if (!group_first_ || group_first_.size() < n_groups_) {
        const std::size_t room = n_groups_ + n_groups_ / 8;
        grow(be_, group_first_, room, 0, "tree.group_first");
        grow(be_, group_count_, room, 0, "tree.group_count");
        grow(be_, group_lo_, room, 0, "tree.group_lo");
        grow(be_, group_hi_, room, 0, "tree.group_hi");
    }
    group_first_.copy_from(starts, n_groups_);
    fit_group_boxes(pos_);
}

void Octree::fit_group_boxes(const Buffer<bn_f4>& points)
{
    if (n_groups_ == 0) return;
    if (points.size() < n_) throw std::logic_error("Octree::fit_group_boxes: fewer points than particles");
    be_.launch(kernels::treeGroupBoxes, grid_for(be_, n_groups_), points, group_first_, to_u32(n_groups_), to_u32(n_),
               group_count_, group_lo_, group_hi_);
}

void Octree::compute_multipoles()
{
    const std::size_t nc = cells();
    if (nc == 0) return;
    const std::size_t stride = nc;
    // 11 doubles per cell from byte 0 (the workspace grows when the cells need more than its 7 slots).
    WorkspaceLayout layout = workspace_layout("the multipoles");
    const auto moments_at = layout.slots<double>("moments", 0, 11 * stride);
    auto moments = layout.view(workspace(layout.end()), moments_at);
    be_.launch(kernels::treeMultipoleLeaves, grid_for(be_, nc), pos_, cell_key_, cell_level_, cell_first_, cell_count_,
               frame_, to_u32(nc), to_u32(stride), moments);
    // Levels whose cells cannot keep the device's resident threads busy (2048 per compute unit) get eight
    // work-items per cell, one per child slot, instead of one: otherwise each waits on its children's loads in turn.
    const std::size_t resident = 2048 * std::max<std::size_t>(be_.info().compute_units, 1);
    for (int level = depth_ - 1; level >= 0; --level) {
        const std::size_t b = level_begin_[level], e = level_begin_[level + 1];
        const std::size_t lanes = 8 * (e - b) <= resident ? 8 : 1;
        be_.launch(kernels::treeMultipoleNodes, grid_for(be_, lanes * (e - b)), cell_key_, cell_level_, cell_first_,
                   cell_count_, frame_, to_u32(b), to_u32(e), to_u32(stride), to_u32(lanes), moments);
    }
    be_.launch(kernels::treeMultipoleStore, grid_for(be_, nc), moments, cell_key_, cell_level_, frame_, to_u32(nc),
               to_u32(stride), cell_com_, cell_quad0_, cell_quad1_, static_cast<bn_u32>(opening_));
}

} // namespace banyan
