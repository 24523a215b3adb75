/**
 * @file let.cpp
 * @brief Local essential trees: the boxes of every rank's groups, the pruned trees built on the device, their
 *        exchange through host memory or GPU to GPU and the concatenation of what arrives (let.hpp has the scheme).
 *
 * A tree on the wire: u64 cells, u64 particles, then pos (particles float4), com, quad0, quad1 (cells float4 each),
 * first, count (cells u32 each), all in host byte order (every rank runs the same build on one kind of machine).
 * GPU to GPU the header travels with the sizes in build() and each array as a message of its own, received where it
 * is grafted.
 */
#include "core/parallel/let.hpp"
#include "core/tree_shared.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <limits>

namespace banyan {

namespace {

double ms_since(std::chrono::steady_clock::time_point t0)
{
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

/// Appends @p n elements of @p b to @p out (downloaded in place).
template <class T> void append_array(HostBytes& out, const Buffer<T>& b, std::size_t n)
{
    const std::size_t at = out.size();
    out.resize(at + n * sizeof(T));
    if (n) b.download(std::span<T>(reinterpret_cast<T*>(out.data() + at), n));
}

/// The bytes of a tree of @p cells cells and @p parts particles on the wire, without its header.
std::size_t tree_bytes(std::size_t cells, std::size_t parts)
{
    return parts * sizeof(bn_f4) + cells * (3 * sizeof(bn_f4) + 2 * sizeof(bn_u32));
}

/// This rank's particles as seen by the others: the coarsest cells holding at most `coarse` particles, and inside
/// them the coarsest holding at most `fine` (a leaf that holds more is taken whole), each given as (first particle,
/// particles) and on the device as the run of groups it holds (letBoxRuns). Cells never straddle the space-filling
/// curve's jumps, so their boxes stay tight (runs of equal counts would not: one run across two far octants spans
/// everything between).
struct BoxCells {
    std::vector<bn_u32> cells;      ///< pairs (first particle, particles): the coarse boxes' cells, then the fine ones'
    std::vector<bn_u32> fine_begin; ///< the fine boxes of coarse box k: [fine_begin[k], fine_begin[k + 1])
    std::size_t coarse = 0, fine = 0;
};

/// @p coarse and @p fine: the chosen cells as (first particle, particles), sorted.
BoxCells box_cells(const std::vector<std::pair<bn_u32, bn_u32>>& coarse,
                   const std::vector<std::pair<bn_u32, bn_u32>>& fine)
{
    BoxCells r;
    if (coarse.empty()) return r; // no particles: the message is its header alone (box_bytes)
    r.coarse = coarse.size(), r.fine = fine.size();
    for (const auto& list : {&coarse, &fine})
        for (const auto& [first, n] : *list) {
            r.cells.push_back(first);
            r.cells.push_back(n);
        }
    // Fine cells nest in coarse ones (a smaller limit chooses descendants), both in curve order.
    std::size_t f = 0;
    r.fine_begin.push_back(0);
    for (const auto& [first, n] : coarse) {
        while (f < fine.size() && fine[f].first < first + n)
            ++f;
        r.fine_begin.push_back(static_cast<bn_u32>(f));
    }
    return r;
}

/// The per-cell scratch of choosing and gathering a tree, in @p tree's workspace (free from the end of a build to the
/// walk, which starts after LetExchange::build), so that a rank holds no arrays of its cells' size for the trees
/// beside the workspace: whether each cell is opened (for the boxes: covered), kept, the particles it sends, and the
/// scans of both. The gathered tree follows behind (gather_tree).
struct Scratch {
    WorkspaceLayout layout;
    WorkspaceRegion<bn_u32> opened, keep, send_count, cell_index, particle_index;

    explicit Scratch(const Octree& tree) : layout(tree.workspace_layout("the local essential trees"))
    {
        const std::size_t nc = tree.cells();
        opened = layout.next<bn_u32>("opened", nc);
        keep = layout.next<bn_u32>("kept", nc);
        send_count = layout.next<bn_u32>("particles sent", nc);
        cell_index = layout.next<bn_u32>("cell index", nc);
        particle_index = layout.next<bn_u32>("particle index", nc);
    }
};

/// The opened flags of Scratch, in @p tree's workspace (grown to hold the scratch when it must).
Buffer<bn_u32> opened_flags(Octree& tree)
{
    const Scratch s(tree);
    return s.layout.view(tree.workspace(s.layout.end()), s.opened);
}

/// The top tree opens every cell whose opening radius exceeds this many times the smallest of the cells it leaves
/// home (measured: docs/benchmarks.md, "Many GPUs, part 2").
constexpr float top_reach = 8.0f;

/// The bytes of a boxes message before its top tree: the header, the boxes and fine_begin.
std::size_t box_bytes(std::span<const std::byte> m)
{
    bn_u32 h[2] = {0, 0};
    if (m.size() >= sizeof h) std::memcpy(h, m.data(), sizeof h);
    if (h[0] == 0) return std::min(m.size(), sizeof h);
    return sizeof h + 2 * (std::size_t{h[0]} + h[1]) * sizeof(bn_f4) + (std::size_t{h[0]} + 1) * sizeof(bn_u32);
}

/// A tree on the wire (this file's header has the layout): its cells, particles and first array (its pos).
struct WireTree {
    std::size_t cells = 0, parts = 0;
    std::byte* at = nullptr;
};

/// The tree in @p m (all of it: one tree), checked against its size.
WireTree wire_tree(std::span<std::byte> m)
{
    std::uint64_t header[2];
    if (m.size() < sizeof header) throw std::runtime_error("local essential tree: a damaged message");
    std::memcpy(header, m.data(), sizeof header);
    const std::size_t cells = header[0], parts = header[1];
    if (sizeof header + tree_bytes(cells, parts) != m.size())
        throw std::runtime_error("local essential tree: a damaged message");
    return {cells, parts, m.data() + sizeof header};
}

} // namespace

/// A tree gathered on the device: views of the tree's workspace, valid until it is used again.
struct LetExchange::Gathered {
    std::size_t cells = 0, parts = 0;
    Buffer<bn_f4> pos, com, quad0, quad1;
    Buffer<bn_u32> first, count;
};

LetExchange::LetExchange(Backend& be, const Comm& comm)
    : be_(be), comm_(comm), send_(StagingAllocator<std::byte>(&be)), recv_(StagingAllocator<std::byte>(&be))
{
}

std::vector<std::pair<bn_u32, bn_u32>> LetExchange::chosen_cells(Octree& tree, std::size_t limit)
{
    const std::size_t nc = tree.cells(), n = tree.size();
    if (nc == 0) return {};
    // Every chosen cell is a distinct cell; and per level the cells left uncovered hold more than `limit` particles
    // each (at most n / limit of them), each with at most 8 children chosen.
    const std::size_t cap = std::min(nc, 8 * BANYAN_TREE_LEVELS * (n / std::max<std::size_t>(limit, 1) + 1));
    auto covered = opened_flags(tree);
    ensure_size(be_, box_list_, 2 * cap, "let.box_list");
    ensure_size(be_, box_count_, 1, "let.box_count");
    box_count_.fill(0u);
    const auto& lb = tree.level_begin();
    for (int level = 0; level < BANYAN_TREE_LEVELS && lb[static_cast<std::size_t>(level)] < nc; ++level) {
        const std::size_t a = lb[static_cast<std::size_t>(level)], b = lb[static_cast<std::size_t>(level) + 1];
        if (a == b) break;
        be_.launch(kernels::letBoxCells, grid_for(be_, b - a), tree.cell_pbegin(), tree.cell_pcount(),
                   tree.cell_count(), tree.cell_parent(), to_u32(a), to_u32(b), to_u32(limit), covered, box_count_,
                   box_list_, to_u32(cap));
    }
    const std::size_t chosen = box_count_.at(0);
    if (chosen > cap) throw std::logic_error("local essential tree: more boxes than cells can give");
    const auto flat = box_list_.download(2 * chosen);
    std::vector<std::pair<bn_u32, bn_u32>> cells(chosen);
    for (std::size_t i = 0; i < chosen; ++i)
        cells[i] = {flat[2 * i], flat[2 * i + 1]};
    std::sort(cells.begin(), cells.end()); // the kernel appends in no set order
    return cells;
}

std::vector<std::byte> LetExchange::boxes_message(Octree& tree, const OpeningCriterion& criterion,
                                                  const Buffer<bn_f4>* acc_old)
{
    const std::size_t n = tree.size(), wg = be_.work_group_size();
    const auto coarse = chosen_cells(tree, std::max<std::size_t>(BANYAN_N_CRIT, n / 64));
    const auto fine = chosen_cells(tree, std::max<std::size_t>(BANYAN_N_CRIT, n / fine_per_rank_));
    const BoxCells chosen = box_cells(coarse, fine);
    const std::size_t nc_box = chosen.coarse, nf_box = chosen.fine, nall = nc_box + nf_box;
    std::vector<bn_f4> boxes(2 * nall);
    if (nall) {
        ensure_size(be_, runs_, chosen.cells.size(), "let.runs");
        runs_.upload(std::span<const bn_u32>(chosen.cells));
        be_.launch(kernels::letBoxRuns, grid_for(be_, nall), tree.group_first(), to_u32(tree.groups()), to_u32(nall),
                   runs_);
        ensure_size(be_, boxes_, 2 * nall, "let.boxes");
        be_.launch(kernels::letGroupBoxes, Grid{nall, wg}, tree.group_lo(), tree.group_hi(), tree.group_first(),
                   tree.group_count(), runs_, to_u32(nall), acc_old ? *acc_old : tree.group_lo(),
                   bn_u32{acc_old ? 1u : 0u}, boxes_);
        boxes_.download(std::span<bn_f4>(boxes));
    }
    coarse_boxes_ = nc_box, fine_boxes_ = nf_box;
    // The top tree (let.hpp): the cells with more than `limit` particles opened, their children kept; then also
    // every cell whose opening radius exceeds top_reach times the smallest of the cells left home (as sent, a
    // sparse cell would reach every group and leave none far; opened, it costs little: it holds few particles).
    HostBytes top;
    const std::size_t nc = tree.cells();
    if (top_per_rank_ && nc) {
        const std::size_t limit = std::max<std::size_t>(BANYAN_N_CRIT, n / top_per_rank_);
        const float inv_theta = criterion.inv_theta();
        float r_max = std::numeric_limits<float>::infinity();
        const auto& lb = tree.level_begin();
        for (int pass = 0; pass < 2; ++pass) {
            auto opened = opened_flags(tree);
            for (int level = 0; level < BANYAN_TREE_LEVELS && lb[static_cast<std::size_t>(level)] < nc; ++level) {
                const std::size_t a = lb[static_cast<std::size_t>(level)], b = lb[static_cast<std::size_t>(level) + 1];
                if (a == b) break;
                be_.launch(kernels::letTopOpened, grid_for(be_, b - a), tree.cell_pcount(), tree.cell_quad1(),
                           tree.cell_parent(), to_u32(a), to_u32(b), to_u32(limit), inv_theta, r_max, opened);
            }
            top.clear();
            append(top, gather_tree(tree));
            if (pass == 1) break;
            const WireTree t = wire_tree(top);
            const std::byte* q1 = t.at + (t.parts + 2 * t.cells) * sizeof(bn_f4);
            const std::byte* count = t.at + (t.parts + 3 * t.cells) * sizeof(bn_f4) + t.cells * sizeof(bn_u32);
            float r0 = std::numeric_limits<float>::infinity();
            for (std::size_t c = 0; c < t.cells; ++c) {
                bn_u32 k;
                bn_f4 q;
                std::memcpy(&k, count + 4 * c, 4);
                std::memcpy(&q, q1 + sizeof(bn_f4) * c, sizeof q);
                if (k == BANYAN_TREE_LEAF_BIT) r0 = std::min(r0, bn_open_radius(q, inv_theta));
            }
            if (!(r0 < r_max)) break; // nothing left home
            r_max = top_reach * r0;
        }
    }
    std::vector<std::byte> msg(8 + boxes.size() * sizeof(bn_f4) + chosen.fine_begin.size() * sizeof(bn_u32) +
                               top.size());
    if (!top.empty()) std::memcpy(msg.data() + msg.size() - top.size(), top.data(), top.size());
    const bn_u32 head[2] = {to_u32(nc_box), to_u32(nf_box)};
    std::memcpy(msg.data(), head, 8);
    if (!boxes.empty()) std::memcpy(msg.data() + 8, boxes.data(), boxes.size() * sizeof(bn_f4));
    if (!chosen.fine_begin.empty())
        std::memcpy(msg.data() + 8 + boxes.size() * sizeof(bn_f4), chosen.fine_begin.data(),
                    chosen.fine_begin.size() * sizeof(bn_u32));
    return msg;
}

void LetExchange::tree_for(Octree& tree, const OpeningCriterion& criterion, std::span<const std::byte> boxes,
                           HostBytes& out)
{
    if (const Gathered t = chosen_tree(tree, criterion, boxes); t.cells) append(out, t);
}

LetExchange::Gathered LetExchange::chosen_tree(Octree& tree, const OpeningCriterion& criterion,
                                               std::span<const std::byte> boxes)
{
    const std::size_t nc = tree.cells();
    bn_u32 h[2] = {0, 0};
    if (boxes.size() >= 8) std::memcpy(h, boxes.data(), 8);
    const std::size_t ncq = h[0], nfq = h[1];
    if (ncq == 0 || nc == 0) return {}; // a rank without particles needs nothing; a rank without them sends nothing
    if (boxes.size() < box_bytes(boxes) ||
        box_bytes(boxes) != 8 + 2 * (ncq + nfq) * sizeof(bn_f4) + (ncq + 1) * sizeof(bn_u32))
        throw std::runtime_error("local essential tree: a damaged message of boxes");
    const float inv_theta = criterion.inv_theta();
    const std::byte* m = boxes.data();
    std::vector<bn_f4> b(2 * (ncq + nfq));
    std::memcpy(b.data(), m + 8, b.size() * sizeof(bn_f4));
    std::vector<bn_u32> fb(ncq + 1);
    std::memcpy(fb.data(), m + 8 + b.size() * sizeof(bn_f4), fb.size() * sizeof(bn_u32));
    ensure_size(be_, coarse_, 2 * ncq, "let.coarse");
    ensure_size(be_, fine_, 2 * nfq, "let.fine");
    ensure_size(be_, fine_begin_, ncq + 1, "let.fine_begin");
    coarse_.upload(std::span<const bn_f4>(b.data(), 2 * ncq));
    if (nfq) fine_.upload(std::span<const bn_f4>(b.data() + 2 * ncq, 2 * nfq));
    fine_begin_.upload(std::span<const bn_u32>(fb));
    auto opened = opened_flags(tree);
    // Level by level from the root: a cell is tested only when its parent was opened.
    const auto& lb = tree.level_begin();
    for (int level = 0; level < BANYAN_TREE_LEVELS && lb[static_cast<std::size_t>(level)] < nc; ++level) {
        const std::size_t a = lb[static_cast<std::size_t>(level)], b = lb[static_cast<std::size_t>(level) + 1];
        if (a == b) break;
        be_.launch(kernels::letOpened, grid_for(be_, b - a), tree.cell_com(), tree.cell_quad1(), tree.cell_parent(),
                   to_u32(a), to_u32(b), inv_theta, criterion.alpha, coarse_, to_u32(ncq), fine_, fine_begin_, opened);
    }
    Gathered t = gather_tree(tree);
    stats_.cells_sent += t.cells;
    stats_.particles_sent += t.parts;
    return t;
}

LetExchange::Gathered LetExchange::gather_tree(Octree& tree)
{
    const std::size_t nc = tree.cells();
    Scratch s(tree);
    const std::size_t scratch_end = s.layout.end();
    std::size_t cells = 0, parts = 0;
    {
        auto& ws = tree.workspace(scratch_end);
        auto keep = s.layout.view(ws, s.keep), send_count = s.layout.view(ws, s.send_count);
        auto cell_index = s.layout.view(ws, s.cell_index), particle_index = s.layout.view(ws, s.particle_index);
        be_.launch(kernels::letSelect, grid_for(be_, nc), tree.cell_parent(), tree.cell_count(),
                   s.layout.view(ws, s.opened), to_u32(nc), keep, send_count);
        be_.exclusive_scan(keep, cell_index, nc);
        be_.exclusive_scan(send_count, particle_index, nc);
        cells = std::size_t{cell_index.at(nc - 1)} + keep.at(nc - 1);
        parts = std::size_t{particle_index.at(nc - 1)} + send_count.at(nc - 1);
    }
    // The tree gathered behind the scratch: the workspace grows (keeping the scratch) only for a tree larger than
    // what is left of it, which is most of the workspace.
    const auto com_at = s.layout.next<bn_f4>("com sent", cells);
    const auto quad0_at = s.layout.next<bn_f4>("quad0 sent", cells);
    const auto quad1_at = s.layout.next<bn_f4>("quad1 sent", cells);
    const auto first_at = s.layout.next<bn_u32>("first sent", cells);
    const auto count_at = s.layout.next<bn_u32>("count sent", cells);
    const auto pos_at = s.layout.next<bn_f4>("particles sent", parts);
    auto& ws = tree.workspace(s.layout.end(), scratch_end);
    Gathered t{cells,
               parts,
               s.layout.view(ws, pos_at),
               s.layout.view(ws, com_at),
               s.layout.view(ws, quad0_at),
               s.layout.view(ws, quad1_at),
               s.layout.view(ws, first_at),
               s.layout.view(ws, count_at)};
    be_.launch(kernels::letGather, grid_for(be_, nc), tree.cell_com(), tree.cell_quad0(), tree.cell_quad1(),
               tree.cell_first(), tree.cell_count(), tree.pos(), s.layout.view(ws, s.opened), s.layout.view(ws, s.keep),
               s.layout.view(ws, s.cell_index), s.layout.view(ws, s.particle_index), to_u32(nc), t.com, t.quad0,
               t.quad1, t.first, t.count, t.pos);
    return t;
}

void LetExchange::append(HostBytes& out, const Gathered& t)
{
    const std::uint64_t header[2] = {t.cells, t.parts};
    const std::size_t at = out.size();
    out.resize(at + sizeof header);
    std::memcpy(out.data() + at, header, sizeof header);
    const auto t0 = std::chrono::steady_clock::now();
    append_array(out, t.pos, t.parts);
    append_array(out, t.com, t.cells);
    append_array(out, t.quad0, t.cells);
    append_array(out, t.quad1, t.cells);
    append_array(out, t.first, t.cells);
    append_array(out, t.count, t.cells);
    stats_.download_ms += ms_since(t0);
}

std::size_t LetExchange::append_on_device(const Gathered& t, std::size_t at)
{
    const std::size_t end = at + tree_bytes(t.cells, t.parts);
    if (!device_send_ || device_send_.size() < end) {
        // Grown by a quarter more than asked, kept from one evaluation to the next: a rare copy (and never less
        // than peer_read_slack behind the last tree).
        auto grown = be_.alloc<std::byte>(end + end / 4 + peer_read_slack, "let.device_send");
        if (at) grown.copy_from(device_send_, at);
        device_send_ = std::move(grown);
    }
    const auto t0 = std::chrono::steady_clock::now();
    auto put = [&](const auto& b, std::size_t n) {
        const std::size_t bytes = n * sizeof(typename std::remove_reference_t<decltype(b)>::value_type);
        if (bytes) device_send_.raw().copy_from(b.raw(), bytes, 0, at);
        at += bytes;
    };
    put(t.pos, t.parts);
    put(t.com, t.cells);
    put(t.quad0, t.cells);
    put(t.quad1, t.cells);
    put(t.first, t.cells);
    put(t.count, t.cells);
    stats_.download_ms += ms_since(t0);
    return at;
}

void LetExchange::build(Octree& tree, const OpeningCriterion& criterion, const Buffer<bn_f4>* acc_old)
{
    if (criterion.alpha > 0.0f && (acc_old == nullptr || acc_old->size() < tree.size()))
        throw std::logic_error("local essential tree: the relative criterion needs the previous accelerations");
    const auto t0 = std::chrono::steady_clock::now();
    stats_ = {};
    local_cells_ = tree.cells();
    local_particles_ = tree.size();
    const std::size_t P = static_cast<std::size_t>(comm_.size());
    const std::size_t me = static_cast<std::size_t>(comm_.rank());
    const auto msg = boxes_message(tree, criterion, criterion.alpha > 0.0f ? acc_old : nullptr);
    std::vector<std::size_t> counts;
    const auto tg = std::chrono::steady_clock::now();
    auto boxes = comm_.all_gather(msg, &counts);
    stats_.gather_ms = ms_since(tg);
    stats_.boxes_ms = ms_since(t0);
    stats_.bytes_sent += msg.size() * (P - 1);
    stats_.bytes_received += boxes.size() - msg.size();
    std::vector<std::size_t> box_offsets(P + 1, 0);
    for (std::size_t q = 0; q < P; ++q)
        box_offsets[q + 1] = box_offsets[q] + counts[q];
    send_.clear();
    send_offsets_.assign(P + 1, 0);
    sent_.assign(P, {0, 0});
    std::size_t on_device = 0; // GPU to GPU: the bytes in device_send_
    for (std::size_t q = 0; q < P; ++q) {
        send_offsets_[q] = peers_ ? on_device : send_.size();
        if (q == me) continue;
        const std::span<const std::byte> theirs(boxes.data() + box_offsets[q], counts[q]);
        const Gathered t = chosen_tree(tree, criterion, theirs.first(box_bytes(theirs)));
        if (!t.cells) continue;
        sent_[q] = {t.cells, t.parts};
        if (peers_) {
            on_device = append_on_device(t, on_device);
            stats_.bytes_sent += 16; // its header goes with the sizes below
        } else {
            append(send_, t);
        }
    }
    send_offsets_[P] = peers_ ? on_device : send_.size();
    stats_.bytes_sent += send_offsets_[P];
    // The sizes of the trees to come (their headers), so that the graft and the walk's layout are made once, before
    // the far groups walk.
    std::vector<std::byte> heads(16 * P);
    std::vector<std::size_t> head_offsets(P + 1, 0), recv_head_offsets;
    for (std::size_t q = 0; q < P; ++q) {
        head_offsets[q + 1] = 16 * (q + 1);
        const std::uint64_t h[2] = {sent_[q].first, sent_[q].second};
        std::memcpy(heads.data() + 16 * q, h, sizeof h);
    }
    const auto th = std::chrono::steady_clock::now();
    const auto their_heads = comm_.exchange(heads, head_offsets, recv_head_offsets);
    stats_.heads_ms = ms_since(th);
    coming_.assign(P, {0, 0});
    std::size_t let_cells = 0, let_particles = 0;
    for (std::size_t q = 0; q < P; ++q) {
        std::uint64_t h[2];
        std::memcpy(h, their_heads.data() + recv_head_offsets[q], sizeof h);
        coming_[q] = {h[0], h[1]};
        let_cells += h[0], let_particles += h[1];
    }
    graft_tops(tree, criterion, boxes, box_offsets, me, let_cells, let_particles);
    stats_.build_ms = ms_since(t0);
}

void LetExchange::exchange(Octree& tree)
{
    if (tree.cells() != local_cells_ || tree.size() != local_particles_)
        throw std::logic_error("local essential tree: exchange() for another tree than build()'s");
    const auto t0 = std::chrono::steady_clock::now();
    if (peers_) {
        exchange_on_device(tree);
    } else {
        comm_.exchange(send_, send_offsets_, recv_, recv_offsets_);
        stats_.mpi_ms = ms_since(t0);
        stats_.bytes_received += recv_.size();
        receive(tree, recv_, recv_offsets_);
    }
    stats_.exchange_ms = ms_since(t0);
}

void LetExchange::exchange_on_device(Octree& tree)
{
    const std::size_t P = static_cast<std::size_t>(comm_.size());
    const Sizes at = place_trees(tree, coming_);
    Octree::Graft g = tree.graft();
    // Each tree as its arrays, in the wire's order on both sides: from the send buffer, into the graft's arrays.
    std::vector<PeerSend> sends;
    std::vector<PeerRecv> recvs;
    for (std::size_t q = 0; q < P; ++q) {
        const int peer = static_cast<int>(q);
        std::size_t from = send_offsets_[q];
        const auto [cells, parts] = sent_[q];
        for (const std::size_t bytes : {parts * sizeof(bn_f4), cells * sizeof(bn_f4), cells * sizeof(bn_f4),
                                        cells * sizeof(bn_f4), cells * sizeof(bn_u32), cells * sizeof(bn_u32)}) {
            if (cells) sends.push_back({peer, &device_send_.raw(), from, bytes});
            from += bytes;
        }
        const auto [rc, rp] = coming_[q];
        if (!rc) continue;
        const auto [c, p] = at[q];
        recvs.push_back({peer, &g.pos.raw(), p * sizeof(bn_f4), rp * sizeof(bn_f4)});
        recvs.push_back({peer, &g.com.raw(), c * sizeof(bn_f4), rc * sizeof(bn_f4)});
        recvs.push_back({peer, &g.quad0.raw(), c * sizeof(bn_f4), rc * sizeof(bn_f4)});
        recvs.push_back({peer, &g.quad1.raw(), c * sizeof(bn_f4), rc * sizeof(bn_f4)});
        recvs.push_back({peer, &g.first.raw(), c * sizeof(bn_u32), rc * sizeof(bn_u32)});
        recvs.push_back({peer, &g.count.raw(), c * sizeof(bn_u32), rc * sizeof(bn_u32)});
        stats_.bytes_received += 16 + tree_bytes(rc, rp);
    }
    const auto t0 = std::chrono::steady_clock::now();
    peers_->exchange(sends, recvs);
    stats_.mpi_ms = ms_since(t0);
    // The links as upload_tree shifts them on the host: by the tree's first cell and particle in the graft.
    const auto t1 = std::chrono::steady_clock::now();
    for (std::size_t q = 0; q < P; ++q)
        if (const std::size_t cells = coming_[q].first) {
            const auto [c, p] = at[q];
            be_.launch(kernels::letShiftLinks, grid_for(be_, cells), g.first, g.count, to_u32(c), to_u32(c + cells),
                       to_u32(c), to_u32(p));
        }
    stats_.upload_ms = ms_since(t1);
}

void LetExchange::upload_tree(Octree::Graft g, std::byte* p, std::size_t cells, std::size_t parts, std::size_t c0,
                              std::size_t p0)
{
    auto put = [&](auto& b, std::size_t n, std::size_t offset) {
        using T = typename std::remove_reference_t<decltype(b)>::value_type;
        // The message is a byte stream: its arrays need not be aligned for T, so they go up as bytes.
        if (n) b.raw().upload(p, n * sizeof(T), offset * sizeof(T));
        p += n * sizeof(T);
    };
    // A leaf's first is a particle index, a cell's its first child's: both shift to the graft.
    std::byte* first = p + parts * sizeof(bn_f4) + 3 * cells * sizeof(bn_f4);
    const std::byte* count = first + cells * sizeof(bn_u32);
    for (std::size_t c = 0; c < cells; ++c) {
        bn_u32 f, n;
        std::memcpy(&f, first + 4 * c, 4);
        std::memcpy(&n, count + 4 * c, 4);
        f += to_u32(bn_tree_is_leaf(n) ? p0 : c0);
        std::memcpy(first + 4 * c, &f, 4);
    }
    put(g.pos, parts, p0);
    put(g.com, cells, c0);
    put(g.quad0, cells, c0);
    put(g.quad1, cells, c0);
    put(g.first, cells, c0);
    put(g.count, cells, c0);
}

void LetExchange::graft_tops(Octree& tree, const OpeningCriterion& criterion, std::span<std::byte> messages,
                             std::span<const std::size_t> offsets, std::size_t self, std::size_t let_cells,
                             std::size_t let_particles)
{
    const std::size_t P = offsets.size() - 1, lc = tree.cells(), lp = tree.size();
    std::vector<WireTree> tops;
    bool every = true; // every other rank with particles sent its top tree
    for (std::size_t q = 0; q < P; ++q) {
        if (q == self) continue;
        const auto m = messages.subspan(offsets[q], offsets[q + 1] - offsets[q]);
        const std::size_t at = box_bytes(m);
        if (at == m.size())
            every = every && at <= 8; // without a top tree: fine only for a rank without particles
        else
            tops.push_back(wire_tree(m.subspan(at)));
    }
    RemoteTrees& r = remote_;
    r.top_roots.clear();
    r.roots.clear();
    r.cell_base = lc, r.particle_base = lp;
    std::size_t c = lc, p = lp;
    for (const WireTree& t : tops) {
        r.top_roots.push_back(to_u32(c));
        c += t.cells, p += t.parts;
    }
    r.top_cells = c - lc, r.top_particles = p - lp;
    r.cells = r.top_cells + let_cells, r.particles = r.top_particles + let_particles;
    // Room behind the tree, made once for the tops and the trees to come (receive() fills it in place).
    tree.make_room_behind(r.cells, r.particles);
    c = lc, p = lp;
    for (const WireTree& t : tops) {
        upload_tree(tree.graft(), t.at, t.cells, t.parts, c, p);
        c += t.cells, p += t.parts;
    }
    stats_.top_cells = r.top_cells;
    // Far or near: from this rank's fine boxes (a box whose groups may open no top leaf left home is far).
    const std::size_t ng = tree.groups();
    r.split = every && ng > 0 && fine_boxes_ > 0;
    stats_.groups = ng;
    stats_.far_groups = 0;
    if (!r.split) return;
    ensure_size(be_, r.far, ng, "let.far");
    ensure_size(be_, r.near, ng, "let.near");
    r.far.fill(0u, 0, ng);
    r.near.fill(1u, 0, ng);
    be_.launch(kernels::letFarGroups, grid_for(be_, fine_boxes_), boxes_, runs_, to_u32(coarse_boxes_),
               to_u32(coarse_boxes_ + fine_boxes_), tree.cell_com(), tree.cell_quad1(), tree.cell_count(), to_u32(lc),
               to_u32(lc + r.top_cells), criterion.inv_theta(), criterion.alpha, r.far, r.near);
    ensure_size(be_, far_index_, ng, "let.far_index");
    be_.exclusive_scan(r.far, far_index_, ng);
    stats_.far_groups = std::size_t{far_index_.at(ng - 1)} + r.far.at(ng - 1);
}

void LetExchange::receive(Octree& tree, std::span<std::byte> recv, std::span<const std::size_t> offsets)
{
    const std::size_t P = offsets.size() - 1;
    std::vector<WireTree> pieces(P);
    Sizes sizes(P, {0, 0});
    for (std::size_t q = 0; q < P; ++q)
        if (offsets[q + 1] > offsets[q]) {
            pieces[q] = wire_tree(recv.subspan(offsets[q], offsets[q + 1] - offsets[q]));
            sizes[q] = {pieces[q].cells, pieces[q].parts};
        }
    const Sizes at = place_trees(tree, sizes);
    const auto t0 = std::chrono::steady_clock::now();
    for (std::size_t q = 0; q < P; ++q)
        if (pieces[q].cells)
            upload_tree(tree.graft(), pieces[q].at, pieces[q].cells, pieces[q].parts, at[q].first, at[q].second);
    stats_.upload_ms = ms_since(t0);
}

LetExchange::Sizes LetExchange::place_trees(Octree& tree, const Sizes& sizes)
{
    const std::size_t local_cells = tree.cells(), local_particles = tree.size();
    RemoteTrees& r = remote_;
    // Each tree's indices shift by the local tree's cells and particles, the top trees' and the trees before it.
    Sizes at(sizes.size(), {0, 0});
    r.roots.clear();
    const std::size_t c0 = local_cells + r.top_cells, p0 = local_particles + r.top_particles;
    std::size_t c = c0, p = p0;
    for (std::size_t q = 0; q < sizes.size(); ++q) {
        if (!sizes[q].first) continue;
        at[q] = {c, p};
        r.roots.push_back(to_u32(c));
        c += sizes[q].first, p += sizes[q].second;
    }
    stats_.cells_received = c - c0;
    stats_.particles_received = p - p0;
    if (r.split) {
        // graft_tops made the arrays for the sizes announced, and the walk may run over their front already.
        if (c - local_cells != r.cells || p - local_particles != r.particles || r.cell_base != local_cells ||
            r.particle_base != local_particles)
            throw std::logic_error("local essential tree: the trees received are not those announced");
    } else {
        r.cell_base = local_cells, r.particle_base = local_particles;
        r.cells = c - local_cells, r.particles = p - local_particles;
        tree.make_room_behind(r.cells, r.particles);
    }
    return at;
}

} // namespace banyan
