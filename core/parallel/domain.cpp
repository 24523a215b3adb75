/**
 * @file domain.cpp
 * @brief Domain decomposition: the common frame, the sampled splitters and the exchange of the particles that
 *        change rank (domain.hpp has the scheme).
 */
#include "core/parallel/domain.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstring>
#include <limits>

namespace banyan {

namespace {

constexpr bn_u64 key_end = bn_u64{1} << BANYAN_TREE_KEY_BITS; // beyond every key

struct Sample {
    bn_u64 key;
    double weight;
};

/// Frees @p v's memory now (clear() keeps it).
template <class T> void release(std::vector<T>& v)
{
    std::vector<T>().swap(v);
}

} // namespace

Decomposition::Decomposition(Backend& be, const Comm& comm) : be_(be), comm_(comm)
{
    box_ = be_.alloc<bn_f4>(2, "domain.box");
    frame_ = be_.alloc<bn_f4>(1, "domain.frame");
    count_ = be_.alloc<bn_u32>(1, "domain.count");
}

std::array<bn_f4, 2> common_frame_box(const std::array<float, 3>& lo, const std::array<float, 3>& hi)
{
    // The tree is built in this frame until the next balance, and the particles drift in the substeps of a block
    // step before that: a margin keeps them inside.
    const float margin = std::max({hi[0] - lo[0], hi[1] - lo[1], hi[2] - lo[2], 0.0f}) / 16.0f;
    return {bn_f4{lo[0] - margin, lo[1] - margin, lo[2] - margin, 0.0f},
            bn_f4{hi[0] + margin, hi[1] + margin, hi[2] + margin, 0.0f}};
}

void Decomposition::global_bounds(Octree& tree, std::array<float, 3>& lo, std::array<float, 3>& hi)
{
    const float inf = std::numeric_limits<float>::infinity();
    lo = {inf, inf, inf};
    hi = {-inf, -inf, -inf};
    if (const std::size_t n = tree.size()) {
        be_.reduce_bounds(tree.pos(), n, box_);
        const auto b = box_.download(2);
        lo = {b[0].x, b[0].y, b[0].z};
        hi = {b[1].x, b[1].y, b[1].z};
    }
    comm_.min(lo);
    comm_.max(hi);
}

void Decomposition::adopt_frame(Octree& tree)
{
    std::array<float, 3> lo, hi;
    global_bounds(tree, lo, hi);
    if (lo[0] <= hi[0]) tree.set_frame_box(common_frame_box(lo, hi));
}

BalanceStats Decomposition::balance(Octree& tree, double work)
{
    const auto t0 = std::chrono::steady_clock::now();
    BalanceStats st;
    const std::size_t P = static_cast<std::size_t>(comm_.size());
    const std::size_t me = static_cast<std::size_t>(comm_.rank());
    const std::size_t n = tree.size();
    const bool with_vel = static_cast<bool>(tree.vel());
    const bool with_rungs = static_cast<bool>(tree.rungs());  // block time steps: each particle's rung travels too
    const bool with_high = static_cast<bool>(tree.id_high()); // ids of 2^32 or more: their high words travel too
    const Grid grid = grid_for(be_, n);

    // 1. The frame common to all ranks, from the global bounding box; every particle's key in it.
    std::array<float, 3> lo, hi;
    global_bounds(tree, lo, hi);
    splitters_.assign(P - 1, key_end);
    std::uint64_t total = n;
    comm_.sum(std::span<std::uint64_t>(&total, 1));
    if (total == 0) return st;
    const auto box = common_frame_box(lo, hi);
    box_.upload(std::span<const bn_f4>(box));
    tree.set_frame_box(box);

    std::size_t stays = n;
    std::vector<bn_u64> leaver_keys;
    std::vector<bn_f4> leaver_pos, leaver_vel;
    std::vector<bn_u32> leaver_ids, leaver_high, leaver_rungs;
    {
        auto& ws = tree.workspace(0);
        const std::size_t m = std::max<std::size_t>(n, 1);
        // The workspace while the particles are split: keys in slots 0-1, stay flags 2, 0..n-1 in 3, the partition
        // in 4, the keys in its order in 5-6.
        WorkspaceLayout split = tree.workspace_layout("the split of the decomposition");
        const auto keys_at = split.slots<bn_u64>("keys", 0, m);
        const auto stay_at = split.slots<bn_u32>("stay flags", 2, n);
        const auto iota_at = split.slots<bn_u32>("indices", 3, n);
        const auto perm_at = split.slots<bn_u32>("partition", 4, n);
        const auto gathered_keys_at = split.slots<bn_u64>("keys in partition order", 5, n);
        auto keys = split.view(ws, keys_at);
        if (n) be_.launch(kernels::treeKeys, grid, tree.pos(), box_, to_u32(n), keys, frame_);

        // 2. Samples at even spacing, each with an equal share of this rank's work; the same splitters everywhere.
        const std::size_t s = std::min(n, samples_);
        std::vector<Sample> mine(s);
        if (s) {
            std::vector<bn_u32> idx(s);
            for (std::size_t k = 0; k < s; ++k)
                idx[k] = to_u32((2 * k + 1) * n / (2 * s));
            ensure_size(be_, sample_index_, s, "domain.sample_index");
            ensure_size(be_, sample_keys_, s, "domain.sample_keys");
            sample_index_.upload(std::span<const bn_u32>(idx));
            be_.gather(keys, sample_index_, s, sample_keys_);
            const auto k = sample_keys_.download(s);
            for (std::size_t j = 0; j < s; ++j)
                mine[j].key = k[j];
        }
        const bool count_particles = comm_.any(n > 0 && !(work > 0));
        const double w = (count_particles ? static_cast<double>(n) : work) / static_cast<double>(s ? s : 1);
        for (auto& x : mine)
            x.weight = w;
        auto all = all_gather<Sample>(comm_, mine);
        st.bytes += mine.size() * sizeof(Sample) * (P - 1);
        std::stable_sort(all.begin(), all.end(), [](const Sample& a, const Sample& b) { return a.key < b.key; });
        double sum = 0;
        for (const auto& x : all)
            sum += x.weight;
        double before = 0;
        std::size_t k = 0;
        for (std::size_t q = 1; q < P; ++q) {
            const double target = sum * static_cast<double>(q) / static_cast<double>(P);
            while (k < all.size() && before + all[k].weight <= target)
                before += all[k++].weight;
            splitters_[q - 1] = k < all.size() ? all[k].key : key_end;
        }
        const bn_u64 lo_key = me == 0 ? 0 : splitters_[me - 1];
        const bn_u64 hi_key = me + 1 == P ? key_end : splitters_[me];

        // 3. Those that stay first (stable), then those that leave, whose data goes to the host.
        if (n) {
            auto stay = split.view(ws, stay_at);
            auto iota = split.view(ws, iota_at);
            auto perm = split.view(ws, perm_at);
            be_.launch(kernels::domainStay, grid, keys, to_u32(n), lo_key, hi_key, stay);
            be_.launch(kernels::treeIota, grid, iota, to_u32(n));
            be_.split(iota, stay, n, perm, count_);
            stays = count_.at(0);
            const std::size_t leave = n - stays;
            if (leave) {
                auto gathered_keys = split.view(ws, gathered_keys_at);
                be_.gather(keys, perm, n, gathered_keys);
                leaver_keys.resize(leave);
                gathered_keys.download(std::span<bn_u64>(leaver_keys), stays);
                // Slots 0-3 are free now: each array in turn goes through them into its new order.
                auto through = [&](auto& array, auto& out) {
                    using T = typename std::remove_reference_t<decltype(array)>::value_type;
                    WorkspaceLayout move = tree.workspace_layout("the move of the decomposition");
                    move.slots<bn_u32>("partition", 4, n);
                    const auto tmp_at = move.slots<T>("array in partition order", 0, n);
                    auto tmp = move.view(ws, tmp_at);
                    be_.gather(array, perm, n, tmp);
                    out.resize(leave);
                    tmp.download(std::span<T>(out), stays);
                    array.copy_from(tmp, stays);
                };
                through(tree.pos(), leaver_pos);
                if (with_vel) through(tree.vel(), leaver_vel);
                through(tree.ids(), leaver_ids);
                if (with_high) through(tree.id_high(), leaver_high);
                if (with_rungs) through(tree.rungs(), leaver_rungs);
            }
        }
    }

    // 4. Leavers to their ranks, packed by destination in their order; arrivals in rank order behind the stayers.
    // A record: position, velocity (when kept), rung (when kept), the id's high word (when kept), its low word.
    const std::size_t rung_at = sizeof(bn_f4) * (with_vel ? 2 : 1);
    const std::size_t high_at = rung_at + (with_rungs ? sizeof(bn_u32) : 0);
    const std::size_t rec = high_at + sizeof(bn_u32) * (with_high ? 2 : 1);
    const std::size_t leave = leaver_keys.size();
    std::vector<std::size_t> dest(leave);
    for (std::size_t i = 0; i < leave; ++i)
        dest[i] = static_cast<std::size_t>(std::upper_bound(splitters_.begin(), splitters_.end(), leaver_keys[i]) -
                                           splitters_.begin());
    Packed send = pack_by_rank(dest, P, rec, [&](std::size_t i, std::byte* r) {
        std::memcpy(r, &leaver_pos[i], sizeof(bn_f4));
        if (with_vel) std::memcpy(r + sizeof(bn_f4), &leaver_vel[i], sizeof(bn_f4));
        if (with_rungs) std::memcpy(r + rung_at, &leaver_rungs[i], sizeof(bn_u32));
        if (with_high) std::memcpy(r + high_at, &leaver_high[i], sizeof(bn_u32));
        std::memcpy(r + rec - sizeof(bn_u32), &leaver_ids[i], sizeof(bn_u32));
    });
    // Host memory is what limits a start: the first balance moves most particles (a rank's initial slice lies all
    // over the system), so every copy goes as soon as the next is made.
    release(leaver_keys), release(leaver_pos), release(leaver_vel), release(leaver_ids), release(leaver_high);
    release(leaver_rungs);
    release(dest);
    std::vector<std::size_t> recv_offsets;
    std::vector<std::byte> recv = comm_.exchange(send.bytes, send.offsets, recv_offsets);
    const std::size_t arrive = recv.size() / rec;
    st.sent = leave;
    st.received = arrive;
    st.bytes += send.bytes.size();
    release(send.bytes);

    tree.resize_keep(stays + arrive);
    // Unpacked and uploaded in pieces, so that no second copy of all arrivals is ever held.
    constexpr std::size_t piece = std::size_t{1} << 20;
    std::vector<bn_f4> p, v;
    std::vector<bn_u32> id, high, rung;
    for (std::size_t at = 0; at < arrive; at += piece) {
        const std::size_t m = std::min(piece, arrive - at);
        p.resize(m), v.resize(with_vel ? m : 0), id.resize(m), high.resize(with_high ? m : 0);
        rung.resize(with_rungs ? m : 0);
        for (std::size_t i = 0; i < m; ++i) {
            const std::byte* r = recv.data() + (at + i) * rec;
            std::memcpy(&p[i], r, sizeof(bn_f4));
            if (with_vel) std::memcpy(&v[i], r + sizeof(bn_f4), sizeof(bn_f4));
            if (with_rungs) std::memcpy(&rung[i], r + rung_at, sizeof(bn_u32));
            if (with_high) std::memcpy(&high[i], r + high_at, sizeof(bn_u32));
            std::memcpy(&id[i], r + rec - sizeof(bn_u32), sizeof(bn_u32));
        }
        tree.pos().upload(std::span<const bn_f4>(p), stays + at);
        if (with_vel) tree.vel().upload(std::span<const bn_f4>(v), stays + at);
        if (with_rungs) tree.rungs().upload(std::span<const bn_u32>(rung), stays + at);
        if (with_high) tree.id_high().upload(std::span<const bn_u32>(high), stays + at);
        tree.ids().upload(std::span<const bn_u32>(id), stays + at);
    }
    st.ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    return st;
}

} // namespace banyan
