/**
 * @file let.cpp
 * @brief Local essential trees: the boxes of every rank's groups, the pruned trees built on the device, their
 *        exchange through host memory and the concatenation of what arrives (let.hpp has the scheme).
 *
 * A tree on the wire: u64 cells, u64 particles, then pos (particles float4), com, quad0, quad1 (cells float4 each),
 * first, count (cells u32 each), all in host byte order (every rank runs the same build on one kind of machine).
 */
#include "core/parallel/let.hpp"

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
template <class T> void append(HostBytes& out, const Buffer<T>& b, std::size_t n)
{
    const std::size_t at = out.size();
    out.resize(at + n * sizeof(T));
    if (n) b.download(std::span<T>(reinterpret_cast<T*>(out.data() + at), n));
}

/// This rank's particles as seen by the others: the coarsest cells holding at most `coarse` particles, and inside
/// them the coarsest holding at most `fine` (a leaf that holds more is taken whole), each as the run of groups it
/// holds. Cells never straddle the space-filling curve's jumps, so their boxes stay tight (runs of equal counts
/// would not: one run across two far octants spans everything between).
struct BoxRuns {
    std::vector<bn_u32> coarse, fine; ///< pairs (first group, end group) per box
    std::vector<bn_u32> fine_begin;   ///< the fine boxes of coarse box k: [fine_begin[k], fine_begin[k + 1])
};

/// @p coarse and @p fine: the chosen cells as (first particle, particles), sorted.
BoxRuns box_runs(const Octree& tree, const std::vector<std::pair<bn_u32, bn_u32>>& coarse,
                 const std::vector<std::pair<bn_u32, bn_u32>>& fine)
{
    BoxRuns r;
    const std::size_t ng = tree.groups();
    if (ng == 0) return r;
    const auto group_first = tree.group_first().download(ng);
    auto runs = [&](const std::vector<std::pair<bn_u32, bn_u32>>& cells) {
        std::vector<bn_u32> out;
        for (const auto& [first, n] : cells) {
            const auto g0 = std::lower_bound(group_first.begin(), group_first.end(), first) - group_first.begin();
            const auto g1 = std::lower_bound(group_first.begin(), group_first.end(), first + n) - group_first.begin();
            out.push_back(static_cast<bn_u32>(g0));
            out.push_back(static_cast<bn_u32>(g1));
        }
        return out;
    };
    r.coarse = runs(coarse);
    r.fine = runs(fine);
    // Fine runs nest in coarse ones (a smaller limit chooses descendants), both in curve order.
    std::size_t f = 0;
    r.fine_begin.push_back(0);
    for (std::size_t k = 0; k < r.coarse.size(); k += 2) {
        while (f < r.fine.size() && r.fine[f] < r.coarse[k + 1])
            f += 2;
        r.fine_begin.push_back(static_cast<bn_u32>(f / 2));
    }
    return r;
}

} // namespace

LetExchange::LetExchange(Backend& be, const Comm& comm) : be_(be), comm_(comm) {}

std::vector<std::pair<bn_u32, bn_u32>> LetExchange::chosen_cells(const Octree& tree, std::size_t limit)
{
    const std::size_t nc = tree.cells(), n = tree.size();
    if (nc == 0) return {};
    // Every chosen cell is a distinct cell; and per level the cells left uncovered hold more than `limit` particles
    // each (at most n / limit of them), each with at most 8 children chosen.
    const std::size_t cap = std::min(nc, 8 * BANYAN_TREE_LEVELS * (n / std::max<std::size_t>(limit, 1) + 1));
    ensure_size(be_, opened_, nc, "let.opened"); // here: covered
    ensure_size(be_, box_list_, 2 * cap, "let.box_list");
    ensure_size(be_, box_count_, 1, "let.box_count");
    box_count_.fill(0u);
    const auto& lb = tree.level_begin();
    for (int level = 0; level < BANYAN_TREE_LEVELS && lb[static_cast<std::size_t>(level)] < nc; ++level) {
        const std::size_t a = lb[static_cast<std::size_t>(level)], b = lb[static_cast<std::size_t>(level) + 1];
        if (a == b) break;
        be_.launch(kernels::letBoxCells, grid_for(be_, b - a), tree.cell_pbegin(), tree.cell_pcount(),
                   tree.cell_count(), tree.cell_parent(), to_u32(a), to_u32(b), to_u32(limit), opened_, box_count_,
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

std::vector<std::byte> LetExchange::boxes_message(const Octree& tree, const Buffer<bn_f4>* acc_old)
{
    const std::size_t n = tree.size(), wg = be_.work_group_size();
    const auto coarse = chosen_cells(tree, std::max<std::size_t>(BANYAN_N_CRIT, n / 64));
    const auto fine = chosen_cells(tree, std::max<std::size_t>(BANYAN_N_CRIT, n / fine_per_rank_));
    const BoxRuns runs = box_runs(tree, coarse, fine);
    const std::size_t nc_box = runs.coarse.size() / 2, nf_box = runs.fine.size() / 2, nall = nc_box + nf_box;
    std::vector<bn_f4> boxes(2 * nall);
    if (nall) {
        std::vector<bn_u32> all_runs(runs.coarse);
        all_runs.insert(all_runs.end(), runs.fine.begin(), runs.fine.end());
        ensure_size(be_, runs_, all_runs.size(), "let.runs");
        runs_.upload(std::span<const bn_u32>(all_runs));
        ensure_size(be_, boxes_, 2 * nall, "let.boxes");
        be_.launch(kernels::letGroupBoxes, Grid{nall, wg}, tree.group_lo(), tree.group_hi(), tree.group_first(),
                   tree.group_count(), runs_, to_u32(nall), acc_old ? *acc_old : tree.group_lo(),
                   bn_u32{acc_old ? 1u : 0u}, boxes_);
        boxes_.download(std::span<bn_f4>(boxes));
    }
    std::vector<std::byte> msg(8 + boxes.size() * sizeof(bn_f4) + runs.fine_begin.size() * sizeof(bn_u32));
    const bn_u32 head[2] = {to_u32(nc_box), to_u32(nf_box)};
    std::memcpy(msg.data(), head, 8);
    if (!boxes.empty()) std::memcpy(msg.data() + 8, boxes.data(), boxes.size() * sizeof(bn_f4));
    if (!runs.fine_begin.empty())
        std::memcpy(msg.data() + 8 + boxes.size() * sizeof(bn_f4), runs.fine_begin.data(),
                    runs.fine_begin.size() * sizeof(bn_u32));
    return msg;
}

void LetExchange::tree_for(const Octree& tree, const OpeningCriterion& criterion, std::span<const std::byte> boxes,
                           HostBytes& out)
{
    const std::size_t nc = tree.cells();
    bn_u32 h[2] = {0, 0};
    if (boxes.size() >= 8) std::memcpy(h, boxes.data(), 8);
    const std::size_t ncq = h[0], nfq = h[1];
    if (ncq == 0 || nc == 0) return; // a rank without particles needs nothing; a rank without them sends nothing
    if (boxes.size() != 8 + 2 * (ncq + nfq) * sizeof(bn_f4) + (ncq + 1) * sizeof(bn_u32))
        throw std::runtime_error("local essential tree: a damaged message of boxes");
    const Grid cells_grid = grid_for(be_, nc);
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
    ensure_size(be_, opened_, nc, "let.opened");
    ensure_size(be_, keep_, nc, "let.keep");
    ensure_size(be_, send_count_, nc, "let.send_count");
    ensure_size(be_, cell_index_, nc, "let.cell_index");
    ensure_size(be_, particle_index_, nc, "let.particle_index");
    // Level by level from the root: a cell is tested only when its parent was opened.
    const auto& lb = tree.level_begin();
    for (int level = 0; level < BANYAN_TREE_LEVELS && lb[static_cast<std::size_t>(level)] < nc; ++level) {
        const std::size_t a = lb[static_cast<std::size_t>(level)], b = lb[static_cast<std::size_t>(level) + 1];
        if (a == b) break;
        be_.launch(kernels::letOpened, grid_for(be_, b - a), tree.cell_com(), tree.cell_quad1(), tree.cell_parent(),
                   to_u32(a), to_u32(b), inv_theta, criterion.alpha, coarse_, to_u32(ncq), fine_, fine_begin_, opened_);
    }
    be_.launch(kernels::letSelect, cells_grid, tree.cell_parent(), tree.cell_count(), opened_, to_u32(nc), keep_,
               send_count_);
    be_.exclusive_scan(keep_, cell_index_, nc);
    be_.exclusive_scan(send_count_, particle_index_, nc);
    const std::size_t cells = std::size_t{cell_index_.at(nc - 1)} + keep_.at(nc - 1);
    const std::size_t parts = std::size_t{particle_index_.at(nc - 1)} + send_count_.at(nc - 1);
    ensure_size(be_, out_com_, cells, "let.com");
    ensure_size(be_, out_quad0_, cells, "let.quad0");
    ensure_size(be_, out_quad1_, cells, "let.quad1");
    ensure_size(be_, out_first_, cells, "let.first");
    ensure_size(be_, out_count_, cells, "let.count");
    ensure_size(be_, out_pos_, parts, "let.pos");
    be_.launch(kernels::letGather, cells_grid, tree.cell_com(), tree.cell_quad0(), tree.cell_quad1(), tree.cell_first(),
               tree.cell_count(), tree.pos(), opened_, keep_, cell_index_, particle_index_, to_u32(nc), out_com_,
               out_quad0_, out_quad1_, out_first_, out_count_, out_pos_);
    const std::uint64_t header[2] = {cells, parts};
    const std::size_t at = out.size();
    out.resize(at + sizeof header);
    std::memcpy(out.data() + at, header, sizeof header);
    const auto t0 = std::chrono::steady_clock::now();
    append(out, out_pos_, parts);
    append(out, out_com_, cells);
    append(out, out_quad0_, cells);
    append(out, out_quad1_, cells);
    append(out, out_first_, cells);
    append(out, out_count_, cells);
    stats_.download_ms += ms_since(t0);
    stats_.cells_sent += cells;
    stats_.particles_sent += parts;
}

void LetExchange::build(const Octree& tree, const OpeningCriterion& criterion, const Buffer<bn_f4>* acc_old)
{
    if (criterion.alpha > 0.0f && (acc_old == nullptr || acc_old->size() < tree.size()))
        throw std::logic_error("local essential tree: the relative criterion needs the previous accelerations");
    const auto t0 = std::chrono::steady_clock::now();
    stats_ = {};
    local_cells_ = tree.cells();
    local_particles_ = tree.size();
    const std::size_t P = static_cast<std::size_t>(comm_.size());
    const std::size_t me = static_cast<std::size_t>(comm_.rank());
    const auto msg = boxes_message(tree, criterion.alpha > 0.0f ? acc_old : nullptr);
    std::vector<std::size_t> counts;
    const auto boxes = comm_.all_gather(msg, &counts);
    stats_.boxes_ms = ms_since(t0);
    stats_.bytes_sent += msg.size() * (P - 1);
    stats_.bytes_received += boxes.size() - msg.size();
    send_.clear();
    send_offsets_.assign(P + 1, 0);
    std::size_t at = 0;
    for (std::size_t q = 0; q < P; ++q) {
        send_offsets_[q] = send_.size();
        const std::span<const std::byte> theirs(boxes.data() + at, counts[q]);
        at += counts[q];
        if (q != me) tree_for(tree, criterion, theirs, send_);
    }
    send_offsets_[P] = send_.size();
    stats_.bytes_sent += send_.size();
    stats_.build_ms = ms_since(t0);
}

void LetExchange::exchange()
{
    const auto t0 = std::chrono::steady_clock::now();
    comm_.exchange(send_, send_offsets_, recv_, recv_offsets_);
    stats_.mpi_ms = ms_since(t0);
    stats_.bytes_received += recv_.size();
    receive(recv_, recv_offsets_, local_cells_, local_particles_);
    stats_.exchange_ms = ms_since(t0);
}

void LetExchange::receive(std::span<std::byte> recv, std::span<const std::size_t> offsets, std::size_t local_cells,
                          std::size_t local_particles)
{
    const std::size_t P = offsets.size() - 1;
    // Where each tree's arrays lie in recv, and where they go in the graft: the indices of each tree shift by the
    // local tree's cells and particles and those of the trees before it.
    struct Piece {
        std::size_t cells, parts, c0, p0;
        std::byte* at; // its pos array
    };
    std::vector<Piece> pieces;
    remote_.roots.clear();
    std::size_t cells_total = local_cells, parts_total = local_particles;
    for (std::size_t q = 0; q < P; ++q) {
        if (offsets[q + 1] == offsets[q]) continue;
        std::byte* p = recv.data() + offsets[q];
        std::uint64_t header[2];
        if (offsets[q + 1] - offsets[q] < sizeof header)
            throw std::runtime_error("local essential tree: a damaged message");
        std::memcpy(header, p, sizeof header);
        const std::size_t cells = header[0], parts = header[1];
        if (sizeof header + parts * sizeof(bn_f4) + cells * (3 * sizeof(bn_f4) + 2 * sizeof(bn_u32)) !=
            offsets[q + 1] - offsets[q])
            throw std::runtime_error("local essential tree: a damaged message");
        pieces.push_back({cells, parts, cells_total, parts_total, p + sizeof header});
        remote_.roots.push_back(to_u32(cells_total));
        cells_total += cells, parts_total += parts;
    }
    remote_.cell_base = local_cells;
    remote_.particle_base = local_particles;
    remote_.cells = cells_total - local_cells;
    remote_.particles = parts_total - local_particles;
    stats_.cells_received = remote_.cells;
    stats_.particles_received = remote_.particles;
    ensure_size(be_, remote_.pos, parts_total, "let.remote_pos");
    ensure_size(be_, remote_.com, cells_total, "let.remote_com");
    ensure_size(be_, remote_.quad0, cells_total, "let.remote_quad0");
    ensure_size(be_, remote_.quad1, cells_total, "let.remote_quad1");
    ensure_size(be_, remote_.first, cells_total, "let.remote_first");
    ensure_size(be_, remote_.count, cells_total, "let.remote_count");
    const auto t0 = std::chrono::steady_clock::now();
    for (const Piece& k : pieces) {
        std::byte* p = k.at;
        auto put = [&](auto& b, std::size_t n, std::size_t offset) {
            using T = typename std::remove_reference_t<decltype(b)>::value_type;
            // The message is a byte stream: its arrays need not be aligned for T, so they go up as bytes.
            if (n) b.raw().upload(p, n * sizeof(T), offset * sizeof(T));
            p += n * sizeof(T);
        };
        // A leaf's first is a particle index, a cell's its first child's: both shift to the graft.
        std::byte* first = p + k.parts * sizeof(bn_f4) + 3 * k.cells * sizeof(bn_f4);
        const std::byte* count = first + k.cells * sizeof(bn_u32);
        for (std::size_t c = 0; c < k.cells; ++c) {
            bn_u32 f, n;
            std::memcpy(&f, first + 4 * c, 4);
            std::memcpy(&n, count + 4 * c, 4);
            f += to_u32(bn_tree_is_leaf(n) ? k.p0 : k.c0);
            std::memcpy(first + 4 * c, &f, 4);
        }
        put(remote_.pos, k.parts, k.p0);
        put(remote_.com, k.cells, k.c0);
        put(remote_.quad0, k.cells, k.c0);
        put(remote_.quad1, k.cells, k.c0);
        put(remote_.first, k.cells, k.c0);
        put(remote_.count, k.cells, k.c0);
    }
    stats_.upload_ms = ms_since(t0);
}

} // namespace banyan
