/**
 * @file octree.cpp
 * @brief Drives the tree build on the device: which kernel runs when, over what, into which buffer.
 *
 * Phases (paper section 2.1 and 3.2): bounding box and keys; radix sort of (key, index); the particle arrays
 * gathered into key order; cells level by level (one host round trip per level, for three counts); links; groups;
 * multipoles. Everything else stays on the device.
 */
#include "core/tree/octree.hpp"

#include "core/error.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <vector>

namespace banyan {

namespace {

std::size_t ceil_div(std::size_t a, std::size_t b) { return (a + b - 1) / b; }
bn_u32 u32(std::size_t n) { return static_cast<bn_u32>(n); }

/// Grows @p b to at least @p n elements (never shrinks), keeping the first @p keep elements.
template <class T>
void grow(Backend& be, Buffer<T>& b, std::size_t n, std::size_t keep, const char* what)
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
        double* out[] = {&t_->keys, &t_->sort, &t_->move, &t_->build, &t_->link, &t_->groups, &t_->multipoles};
        for (std::size_t i = 0; i + 1 < marks_.size() && i < std::size(out); ++i)
            *out[i] = be_.elapsed_ms(marks_[i], marks_[i + 1]);
        t_->total = be_.elapsed_ms(marks_.front(), marks_.back());
    }

private:
    Backend& be_;
    TreeTimings* t_;
    std::vector<Event> marks_;
};

} // namespace

Octree::Octree(Backend& be) : be_(be)
{
    box_ = be_.alloc<bn_f4>(2, "tree.box");
    frame_ = be_.alloc<bn_f4>(1, "tree.frame");
    counters_ = be_.alloc<bn_u32>(3, "tree.counters");
    compact_count_ = be_.alloc<bn_u32>(1, "tree.compact_count");
    group_total_ = be_.alloc<bn_u32>(1, "tree.group_total");
    level_begin_dev_ = be_.alloc<bn_u32>(BANYAN_TREE_LEVELS + 1, "tree.level_begin");
}

Grid Octree::grid(std::size_t items) const
{
    const std::size_t wg = be_.work_group_size();
    return Grid{ceil_div(items, wg), wg};
}

void Octree::reserve_particles(std::size_t n)
{
    if (n > 0x7FFFFFFFu) throw UsageError(fmt::format("tree: {} particles is more than the 2^31 - 1 supported", n));
    if (pos_ && pos_.size() >= n) return;
    const std::size_t m = std::max<std::size_t>(n, 1);
    pos_ = be_.alloc<bn_f4>(m, "tree.pos");
    vel_ = be_.alloc<bn_f4>(m, "tree.vel");
    pos_tmp_ = be_.alloc<bn_f4>(m, "tree.pos_tmp");
    vel_tmp_ = be_.alloc<bn_f4>(m, "tree.vel_tmp");
    id_ = be_.alloc<bn_u32>(m, "tree.id");
    id_tmp_ = be_.alloc<bn_u32>(m, "tree.id_tmp");
    iota_ = be_.alloc<bn_u32>(m, "tree.iota");
    perm_ = be_.alloc<bn_u32>(m, "tree.perm");
    raw_keys_ = be_.alloc<bn_u64>(m, "tree.raw_keys");
    keys_ = be_.alloc<bn_u64>(m, "tree.keys");
    active_ = be_.alloc<bn_u32>(m, "tree.active");
    active_next_ = be_.alloc<bn_u32>(m, "tree.active_next");
    flags_ = be_.alloc<bn_u32>(m, "tree.flags");
    starts_ = be_.alloc<bn_u32>(m, "tree.starts");
    group_first_ = be_.alloc<bn_u32>(m, "tree.group_first");
    be_.launch("treeIota", grid(m), iota_, u32(m));
}

void Octree::reserve_cells(std::size_t n, std::size_t keep)
{
    if (cell_capacity_ >= n) return;
    // Grow by half again, so a tree that deepens a little does not reallocate every level.
    const std::size_t cap = std::max(n, cell_capacity_ + cell_capacity_ / 2);
    grow(be_, cell_key_, cap, keep, "tree.cell_key");
    grow(be_, cell_level_, cap, keep, "tree.cell_level");
    grow(be_, cell_first_, cap, keep, "tree.cell_first");
    grow(be_, cell_count_, cap, keep, "tree.cell_count");
    grow(be_, cell_pbegin_, cap, keep, "tree.cell_pbegin");
    grow(be_, cell_pcount_, cap, keep, "tree.cell_pcount");
    grow(be_, cell_parent_, cap, 0, "tree.cell_parent");
    grow(be_, cell_com_, cap, 0, "tree.cell_com");
    grow(be_, cell_quad0_, cap, 0, "tree.cell_quad0");
    grow(be_, cell_quad1_, cap, 0, "tree.cell_quad1");
    grow(be_, cell_centre_, cap, 0, "tree.cell_centre");
    cell_capacity_ = cap;
}

std::size_t Octree::device_bytes() const noexcept
{
    std::size_t total = 0;
    auto add = [&](const auto& b) { total += b ? b.bytes() : 0; };
    add(pos_), add(vel_), add(pos_tmp_), add(vel_tmp_), add(id_), add(id_tmp_), add(iota_), add(perm_);
    add(raw_keys_), add(keys_), add(box_), add(frame_);
    add(active_), add(active_next_), add(flags_), add(starts_), add(counters_);
    add(compact_count_), add(level_begin_dev_);
    add(cell_key_), add(cell_level_), add(cell_parent_), add(cell_first_), add(cell_count_), add(cell_pbegin_);
    add(cell_pcount_), add(moments_), add(cell_com_), add(cell_quad0_), add(cell_quad1_), add(cell_centre_);
    add(group_first_), add(group_count_), add(group_total_), add(group_lo_), add(group_hi_);
    return total;
}

void Octree::poison()
{
    auto fill = [](auto& b, auto v) {
        if (b) b.fill(v);
    };
    const bn_f4 nan4{std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::quiet_NaN(),
                     std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::quiet_NaN()};
    fill(raw_keys_, ~bn_u64{0}), fill(keys_, ~bn_u64{0}), fill(perm_, 0xDEADBEEFu), fill(frame_, nan4);
    fill(cell_key_, ~bn_u64{0}), fill(cell_level_, 0xDEADBEEFu), fill(cell_parent_, 0xDEADBEEFu);
    fill(cell_first_, 0xDEADBEEFu), fill(cell_count_, 0xDEADBEEFu), fill(cell_pbegin_, 0xDEADBEEFu);
    fill(cell_pcount_, 0xDEADBEEFu), fill(moments_, std::numeric_limits<double>::quiet_NaN());
    fill(cell_com_, nan4), fill(cell_quad0_, nan4), fill(cell_quad1_, nan4), fill(cell_centre_, nan4);
    fill(group_first_, 0xDEADBEEFu), fill(group_count_, 0xDEADBEEFu), fill(group_lo_, nan4), fill(group_hi_, nan4);
}

void Octree::set_particles(std::span<const bn_f4> pos, std::span<const bn_f4> vel)
{
    if (!vel.empty() && vel.size() != pos.size())
        throw UsageError(fmt::format("tree: {} positions but {} velocities", pos.size(), vel.size()));
    reserve_particles(pos.size());
    n_ = pos.size();
    pos_.upload(pos);
    if (vel.empty()) vel_.fill(bn_f4{0, 0, 0, 0}, 0, std::max<std::size_t>(n_, 1));
    else vel_.upload(vel);
    id_.copy_from(iota_, n_);
    level_begin_.fill(0);
    n_groups_ = 0;
    depth_ = -1;
}

void Octree::set_particles(std::span<const bn_f4> pos, std::span<const bn_f4> vel, std::span<const bn_u32> ids)
{
    if (ids.size() != pos.size())
        throw UsageError(fmt::format("tree: {} positions but {} ids", pos.size(), ids.size()));
    set_particles(pos, vel);
    id_.upload(ids);
}

void Octree::build(TreeTimings* timings)
{
    PhaseClock clock(be_, timings);
    compute_keys();
    clock.mark();
    sort_keys();
    clock.mark();
    move_particles();
    clock.mark();
    build_levels();
    clock.mark();
    link_cells();
    clock.mark();
    make_groups();
    clock.mark();
    compute_multipoles();
    clock.mark();
    clock.finish();
}

void Octree::compute_keys()
{
    if (n_ == 0) return;
    be_.reduce_bounds(pos_, n_, box_);
    be_.launch("treeKeys", grid(n_), pos_, box_, u32(n_), raw_keys_, frame_);
}

void Octree::sort_keys()
{
    if (n_ == 0) return;
    be_.sort_pairs(raw_keys_, iota_, keys_, perm_, n_, 0, BANYAN_TREE_KEY_BITS);
}

void Octree::move_particles()
{
    if (n_ == 0) return;
    be_.gather(pos_, perm_, n_, pos_tmp_);
    be_.gather(vel_, perm_, n_, vel_tmp_);
    be_.gather(id_, perm_, n_, id_tmp_);
    std::swap(pos_, pos_tmp_);
    std::swap(vel_, vel_tmp_);
    std::swap(id_, id_tmp_);
}

void Octree::build_levels()
{
    level_begin_.fill(0);
    depth_ = -1;
    if (n_ == 0) return;
    active_.copy_from(iota_, n_); // level 0: every particle
    std::size_t n_list = n_;      // entries in the active list, retired ones included
    std::size_t n_live = n_;      // particles not yet in a leaf
    std::size_t offset = 0;
    std::size_t bound = 1; // most cells this level can have: the root alone, then 8 per node of the level above
    for (int level = 0; level <= BANYAN_MAX_DEPTH && n_live > 0; ++level) {
        level_begin_[level] = offset;
        reserve_cells(offset + bound, offset);
        be_.launch("treeLevelFlags", grid(n_list), keys_, active_, u32(n_list), u32(3 * (BANYAN_MAX_DEPTH - level)),
                   flags_, counters_);
        be_.compact(iota_, flags_, n_list, starts_, counters_); // cell starts; counters[0] = number of cells
        const bn_u32 clean = n_list == n_live ? 1u : 0u;
        be_.launch("treeLevelCells", grid(bound), keys_, active_, starts_, u32(n_list), clean, counters_,
                   u32(level), u32(offset), cell_key_, cell_level_, cell_first_, cell_count_, cell_pbegin_,
                   cell_pcount_);
        bn_u32 counts[3];
        counters_.download(std::span<bn_u32>(counts, 3)); // the one wait of the level
        const std::size_t cells = counts[0], retired = counts[1], leaves = counts[2];
        if (cells > bound || retired > n_live || leaves > cells)
            throw std::logic_error(fmt::format("tree: level {} has {} cells (bound {}), {} leaves retiring {} of {} "
                                               "particles",
                                               level, cells, bound, leaves, retired, n_live));
        offset += cells;
        depth_ = level;
        n_live -= retired;
        // Drop the retired entries once they are a quarter of the list: until then skipping them costs less.
        if (n_live > 0 && 4 * (n_list - n_live) >= n_list) {
            be_.launch("treeLevelLive", grid(n_list), active_, u32(n_list), flags_);
            be_.compact(active_, flags_, n_list, active_next_, compact_count_);
            std::swap(active_, active_next_);
            n_list = n_live;
        }
        // Each node of this level holds more than N_leaf of the particles left and has at most 8 children.
        bound = std::min(n_live, 8 * (cells - leaves));
    }
    if (n_live != 0) throw std::logic_error("tree: particles left after the deepest level");
    for (int l = depth_ + 1; l <= BANYAN_TREE_LEVELS; ++l) level_begin_[l] = offset;
}

void Octree::link_cells()
{
    const std::size_t nc = cells();
    if (nc == 0) return;
    std::array<bn_u32, BANYAN_TREE_LEVELS + 1> lb{};
    for (std::size_t l = 0; l < lb.size(); ++l) lb[l] = u32(level_begin_[l]);
    level_begin_dev_.upload(std::span<const bn_u32>(lb));
    be_.launch("treeLink", grid(nc), cell_key_, cell_level_, cell_pcount_, level_begin_dev_, u32(nc), cell_first_,
               cell_count_, cell_parent_);
}

void Octree::make_groups()
{
    n_groups_ = 0;
    if (n_ == 0) return;
    const std::size_t nc = cells();
    flags_.fill(0u, 0, n_);
    be_.launch("treeGroupFlags", grid(nc), cell_parent_, cell_count_, cell_pbegin_, cell_pcount_, u32(nc), flags_);
    be_.compact(iota_, flags_, n_, group_first_, group_total_);
    n_groups_ = group_total_.at(0);
    grow(be_, group_count_, n_groups_, 0, "tree.group_count");
    grow(be_, group_lo_, n_groups_, 0, "tree.group_lo");
    grow(be_, group_hi_, n_groups_, 0, "tree.group_hi");
    be_.launch("treeGroupBoxes", grid(n_groups_), pos_, group_first_, u32(n_groups_), u32(n_), group_count_,
               group_lo_, group_hi_);
}

void Octree::compute_multipoles()
{
    const std::size_t nc = cells();
    if (nc == 0) return;
    const std::size_t stride = cell_capacity_;
    grow(be_, moments_, 10 * stride, 0, "tree.moments");
    be_.launch("treeMultipoleLeaves", grid(nc), pos_, cell_key_, cell_level_, cell_first_, cell_count_, frame_,
               u32(nc), u32(stride), moments_);
    for (int level = depth_ - 1; level >= 0; --level) {
        const std::size_t b = level_begin_[level], e = level_begin_[level + 1];
        be_.launch("treeMultipoleNodes", grid(e - b), cell_key_, cell_level_, cell_first_, cell_count_, frame_,
                   u32(b), u32(e), u32(stride), moments_);
    }
    be_.launch("treeMultipoleStore", grid(nc), moments_, cell_key_, cell_level_, frame_, u32(nc), u32(stride),
               cell_com_, cell_quad0_, cell_quad1_, cell_centre_);
}

} // namespace banyan
