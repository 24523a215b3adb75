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

bn_u32 u32(std::size_t n) { return static_cast<bn_u32>(n); }

double ms_since(std::chrono::steady_clock::time_point t0)
{
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

/// Appends @p n elements of @p b to @p out (downloaded in place).
template <class T>
void append(std::vector<std::byte>& out, const Buffer<T>& b, std::size_t n)
{
    const std::size_t at = out.size();
    out.resize(at + n * sizeof(T));
    if (n) b.download(std::span<T>(reinterpret_cast<T*>(out.data() + at), n));
}

/// Reads @p n elements of T from @p p into @p out (appended); returns the position after them.
template <class T>
const std::byte* take(const std::byte* p, std::size_t n, std::vector<T>& out)
{
    const std::size_t at = out.size();
    out.resize(at + n);
    if (n) std::memcpy(out.data() + at, p, n * sizeof(T));
    return p + n * sizeof(T);
}

} // namespace

LetExchange::LetExchange(Backend& be, const Comm& comm) : be_(be), comm_(comm) {}

void LetExchange::build(const Octree& tree, float theta)
{
    const auto t0 = std::chrono::steady_clock::now();
    stats_ = {};
    const std::size_t P = static_cast<std::size_t>(comm_.size());
    const std::size_t me = static_cast<std::size_t>(comm_.rank());
    const std::size_t nc = tree.cells(), ng = tree.groups();
    const std::size_t wg = be_.work_group_size();
    const Grid cells_grid{(nc + wg - 1) / wg, wg};

    // The boxes of runs of this rank's groups, to every rank.
    const std::size_t nb = std::min(ng, boxes_per_rank_);
    std::vector<bn_f4> mine(2 * nb);
    if (nb) {
        ensure_size(be_, boxes_, 2 * nb, "let.boxes");
        be_.launch("letGroupBoxes", Grid{nb, wg}, tree.group_lo(), tree.group_hi(), u32(ng), u32(nb), boxes_);
        boxes_.download(std::span<bn_f4>(mine));
    }
    std::vector<std::size_t> counts;
    const auto boxes = all_gather<bn_f4>(comm_, mine, &counts);
    stats_.bytes_sent += mine.size() * sizeof(bn_f4) * (P - 1);
    stats_.bytes_received += (boxes.size() - mine.size()) * sizeof(bn_f4);

    const float inv_theta = theta > 0.0f ? 1.0f / theta : std::numeric_limits<float>::infinity();
    send_.clear();
    send_offsets_.assign(P + 1, 0);
    std::size_t first_box = 0;
    for (std::size_t q = 0; q < P; ++q) {
        send_offsets_[q] = send_.size();
        const std::size_t nbq = counts[q] / 2;
        const std::size_t box0 = first_box;
        first_box += counts[q];
        if (q == me || nbq == 0 || nc == 0) continue; // nothing for ourselves, nor for a rank without particles
        ensure_size(be_, boxes_, 2 * nbq, "let.boxes");
        boxes_.upload(std::span<const bn_f4>(boxes.data() + box0, 2 * nbq));
        ensure_size(be_, opened_, nc, "let.opened");
        ensure_size(be_, keep_, nc, "let.keep");
        ensure_size(be_, send_count_, nc, "let.send_count");
        ensure_size(be_, cell_index_, nc, "let.cell_index");
        ensure_size(be_, particle_index_, nc, "let.particle_index");
        be_.launch("letOpened", cells_grid, tree.cell_com(), tree.cell_quad1(), u32(nc), inv_theta, boxes_, u32(nbq),
                   opened_);
        be_.launch("letSelect", cells_grid, tree.cell_parent(), tree.cell_count(), opened_, u32(nc), keep_,
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
        be_.launch("letGather", cells_grid, tree.cell_com(), tree.cell_quad0(), tree.cell_quad1(), tree.cell_first(),
                   tree.cell_count(), tree.pos(), opened_, keep_, cell_index_,
                   particle_index_, u32(nc), out_com_, out_quad0_, out_quad1_, out_first_, out_count_, out_pos_);
        const std::uint64_t header[2] = {cells, parts};
        const std::size_t at = send_.size();
        send_.resize(at + sizeof header);
        std::memcpy(send_.data() + at, header, sizeof header);
        append(send_, out_pos_, parts);
        append(send_, out_com_, cells);
        append(send_, out_quad0_, cells);
        append(send_, out_quad1_, cells);
        append(send_, out_first_, cells);
        append(send_, out_count_, cells);
        stats_.cells_sent += cells;
        stats_.particles_sent += parts;
    }
    send_offsets_[P] = send_.size();
    stats_.bytes_sent += send_.size();
    stats_.build_ms = ms_since(t0);
}

void LetExchange::exchange()
{
    const auto t0 = std::chrono::steady_clock::now();
    const std::size_t P = static_cast<std::size_t>(comm_.size());
    std::vector<std::size_t> offsets;
    const auto recv = comm_.exchange(send_, send_offsets_, offsets);
    stats_.bytes_received += recv.size();

    // Concatenated: indices of each tree shift by the cells and particles of the trees before it.
    std::vector<bn_f4> pos, com, quad0, quad1;
    std::vector<bn_u32> first, count;
    remote_.roots.clear();
    for (std::size_t q = 0; q < P; ++q) {
        if (offsets[q + 1] == offsets[q]) continue;
        const std::byte* p = recv.data() + offsets[q];
        std::uint64_t header[2];
        std::memcpy(header, p, sizeof header);
        p += sizeof header;
        const std::size_t cells = header[0], parts = header[1];
        const std::size_t c0 = com.size(), p0 = pos.size();
        p = take(p, parts, pos);
        p = take(p, cells, com);
        p = take(p, cells, quad0);
        p = take(p, cells, quad1);
        p = take(p, cells, first);
        p = take(p, cells, count);
        if (p != recv.data() + offsets[q + 1]) throw std::runtime_error("local essential tree: a damaged message");
        for (std::size_t c = c0; c < com.size(); ++c) first[c] += u32(bn_tree_is_leaf(count[c]) ? p0 : c0);
        remote_.roots.push_back(u32(c0));
    }
    remote_.cells = com.size();
    remote_.particles = pos.size();
    stats_.cells_received = remote_.cells;
    stats_.particles_received = remote_.particles;
    auto put = [&](auto& b, const auto& v, const char* what) {
        using T = typename std::remove_reference_t<decltype(b)>::value_type;
        ensure_size(be_, b, v.size(), what);
        if (!v.empty()) b.upload(std::span<const T>(v));
    };
    put(remote_.pos, pos, "let.remote_pos");
    put(remote_.com, com, "let.remote_com");
    put(remote_.quad0, quad0, "let.remote_quad0");
    put(remote_.quad1, quad1, "let.remote_quad1");
    put(remote_.first, first, "let.remote_first");
    put(remote_.count, count, "let.remote_count");
    stats_.exchange_ms = ms_since(t0);
}

} // namespace banyan
