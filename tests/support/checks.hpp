/**
 * @file checks.hpp
 * @brief Checks of one kernel family against its CPU reference, each defined with the part of the suite that sweeps
 *        it (named below) and also run once at small sizes by test_race_check.cpp, the part run under Oclgrind.
 *
 * Each reports through doctest's CHECK, so call them from inside a test case.
 */
#pragma once

#include "core/device/backend.hpp"
#include "core/gravity/forces.hpp"
#include "core/parallel/let.hpp"
#include "core/tree/octree.hpp"
#include "tests/support/reference_tree.hpp"

#include <cstdint>
#include <vector>

namespace banyan::test {

/// test_atomics.cpp: atomicsCheck at work-group size @p wg (left set on @p be) over @p n work-items, every 32- and
/// 64-bit atomic against the CPU's exact prediction.
void check_atomics(Backend& be, std::size_t wg, bn_u32 n);

/// test_tree.cpp: builds @p tree from @p pos and @p vel (may be empty) after poisoning it, and compares keys,
/// permutation, cells, links and groups exactly and multipoles within 1e-6 with the CPU reference tree.
RefTree check_tree_against_reference(const std::vector<bn_f4>& pos, const std::vector<bn_f4>& vel, Octree& tree);

/// test_forces.cpp: the device walk of @p tree (already computed into @p forces) against the CPU walk: interaction
/// counts exactly, forces to round-off. @p alpha, @p acc_old: the relative criterion the walk had on top (tree
/// order), TreeForces::set_relative.
void check_walk_against_cpu(Octree& tree, TreeForces& forces, float theta, float eps, float alpha = 0.0f,
                            const std::vector<bn_f4>& acc_old = {});

/// test_simulation.cpp: one kick-drift-kick step of a Plummer sphere of @p n particles (tree or direct forces)
/// against the CPU to the bit, and the new forces against double-precision direct sums.
void check_one_step(Backend& be, std::size_t n, bool direct, std::uint64_t seed);

/// test_block_steps.cpp: the tree of a Plummer sphere of @p n particles (seed @p seed) and its walk over every group
/// at @p theta and @p eps, against which the walks over the active groups of block time steps are checked.
struct ActiveWalks {
    Backend& be;
    float theta, eps;
    Octree tree;
    TreeForces forces;
    std::vector<bn_f4> whole; ///< the walk over every group: accelerations in tree order

    ActiveWalks(Backend& be, std::size_t n, std::uint64_t seed, float theta, float eps);
    /// The accelerations (tree order) of the walk over the groups with a particle on rung @p level or deeper
    /// (TreeForces::set_active; @p rungs per particle in tree order), its outputs poisoned first so that a group it
    /// skips shows; the walk then goes back to every group.
    std::vector<bn_f4> active(const std::vector<bn_u32>& rungs, bn_u32 level);
};

/// The buffers of Backend::sort_pairs: @p keys and @p values uploaded, and outputs of their size.
struct SortBuffers {
    Backend& be;
    std::size_t n;
    Buffer<bn_u64> keys_in;
    Buffer<bn_u32> values_in;
    Buffer<bn_u64> keys_out;
    Buffer<bn_u32> values_out;

    SortBuffers(Backend& be, const std::vector<bn_u64>& keys, const std::vector<bn_u32>& values)
        : be(be), n(keys.size()), keys_in(be.upload<bn_u64>(keys, "keys_in")),
          values_in(be.upload<bn_u32>(values, "values_in")), keys_out(be.alloc<bn_u64>(n, "keys_out")),
          values_out(be.alloc<bn_u32>(n, "values_out"))
    {
    }
    /// Backend::sort_pairs on bits [begin_bit, end_bit), inputs to outputs.
    void sort(int begin_bit, int end_bit)
    {
        be.sort_pairs(keys_in, values_in, keys_out, values_out, n, begin_bit, end_bit);
    }
};

/// @p keys and @p values uploaded, sorted on the device by Backend::sort_pairs on bits [begin_bit, end_bit), and
/// downloaded.
struct SortedPairs {
    std::vector<bn_u64> keys;
    std::vector<bn_u32> values;
};
inline SortedPairs sorted_on_device(Backend& be, const std::vector<bn_u64>& keys, const std::vector<bn_u32>& values,
                                    int begin_bit, int end_bit)
{
    SortBuffers b(be, keys, values);
    b.sort(begin_bit, end_bit);
    return {b.keys_out.download(), b.values_out.download()};
}

/// Two halves of a Plummer sphere of @p n particles (@p all, a = those with x < 0.1 first, na of them), each in its
/// own built tree, and in @p let b's top tree (top_per_rank 256) grafted behind a's tree with a's groups flagged far or
/// near, then the local essential tree of b for a's boxes received (what two ranks do, in one process; defined in
/// test_parallel.cpp). Public members only, so that a test can bind them by name: auto& [all, ta, tb, let, na] = h.
struct LetHalves {
    std::vector<bn_f4> all;
    Octree ta, tb;
    LetExchange let;
    std::size_t na = 0;

    LetHalves(Backend& be, std::size_t n, std::uint64_t seed, float theta);
};

} // namespace banyan::test
