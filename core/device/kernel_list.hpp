/**
 * @file kernel_list.hpp
 * @brief Every kernel of kernels_cu/ and kernels_cl/, declared once with its parameter types, and their ids.
 *
 * BANYAN_KERNELS(X) calls X(name, parameters...) once per kernel, in the order of the kernel files. A parameter is
 *   In<T>       a buffer the kernel reads:                        const T* in both kernel languages
 *   Out<T>      a buffer the kernel writes or updates atomically: T*
 *   InBits<N>   a buffer of N-byte elements of any type, read bit for bit (the gathers):    const bn_u32*, const
 *               bn_u64* or const uint4* for N = 4, 8, 16
 *   OutBits<N>  the same, written
 *   T           a scalar passed by value: bn_u32, bn_i32, bn_u64, float, double or bn_f4
 * with the types of core/device_shared.h. core/device/kernels.hpp makes typed launch handles of the list
 * (kernels::walkPrepare, ...) and the table that tests/kernels/test_kernel_pairs.cpp checks both kernel folders
 * against; backend_cuda/kernel_registry.hpp checks each CUDA kernel's signature against it when it is compiled. A
 * kernel added, removed or changed here is changed in kernels_cu/ and kernels_cl/ too.
 *
 * This file is the list and the ids only (no types), so that CUDA translation units, where bn_f4 is CUDA's float4,
 * and host ones, where it is a struct, each read the list with their own meaning of the names.
 */
#pragma once

#include <cstddef>

// clang-format off
#define BANYAN_KERNELS(X)                                                                                          \
    /* atomics_check: the device atomics of device_shared.h (tests/device/test_atomics.cpp) */                      \
    X(atomicsCheck, Out<bn_u32>, Out<bn_u64>, Out<bn_u32>, Out<bn_u64>, Out<bn_u32>, Out<bn_u64>, bn_u32, bn_u32)     \
    /* compact */                                                                                                   \
    X(compactScatter, In<bn_u32>, In<bn_u32>, bn_u32, In<bn_u32>, Out<bn_u32>, Out<bn_u32>, bn_u32)                   \
    /* direct */                                                                                                    \
    X(directForces, In<bn_f4>, bn_u32, bn_u32, bn_u32, float, Out<bn_f4>)                                           \
    X(directListedPartial, In<bn_f4>, bn_u32, In<bn_u32>, bn_u32, float, Out<bn_f4>)                                 \
    X(directListedSum, In<bn_f4>, bn_u32, In<bn_u32>, bn_u32, Out<bn_f4>)                                            \
    X(directForcesF64, In<bn_f4>, bn_u32, double, Out<double>)                                                      \
    X(directForcesF64Targets, In<bn_f4>, bn_u32, In<bn_u32>, bn_u32, double, Out<double>)                           \
    /* gather */                                                                                                    \
    X(gather32, InBits<4>, In<bn_u32>, bn_u32, OutBits<4>)                                                          \
    X(gather64, InBits<8>, In<bn_u32>, bn_u32, OutBits<8>)                                                          \
    X(gather128, InBits<16>, In<bn_u32>, bn_u32, OutBits<16>)                                                       \
    /* integrate */                                                                                                 \
    X(integrateKickDrift, Out<bn_f4>, Out<bn_f4>, In<bn_f4>, bn_u32, float, float)                                  \
    X(integrateKick, Out<bn_f4>, In<bn_f4>, bn_u32, float)                                                          \
    X(integrateBlockKickDrift, Out<bn_f4>, Out<bn_f4>, In<bn_f4>, In<bn_u32>, bn_u32, bn_u32, float, float)          \
    X(integrateBlockKick, Out<bn_f4>, In<bn_f4>, Out<bn_u32>, bn_u32, bn_u32, float, bn_u32, double, double, bn_u32, \
      Out<bn_u32>)                                                                                                  \
    X(integrateBlockPredict, In<bn_f4>, In<bn_f4>, In<bn_f4>, In<bn_u32>, bn_u32, bn_u32, float, In<double>, double, \
      double, bn_u32, Out<bn_u32>, Out<bn_f4>)                                                                       \
    X(integrateBlockProbe, In<bn_f4>, Out<bn_u32>, Out<bn_u32>, bn_u32, double, double, bn_u32, bn_u32, Out<bn_u32>) \
    X(integrateEnergyPartials, In<bn_f4>, In<bn_f4>, In<bn_f4>, bn_u32, Out<double>)                                \
    X(integrateEnergyTotals, In<double>, bn_u32, Out<double>)                                                       \
    X(integrateToInputOrder, In<bn_f4>, In<bn_f4>, In<bn_f4>, In<bn_u32>, bn_u32, bn_u32, bn_u32, Out<bn_f4>,        \
      Out<bn_f4>, Out<bn_f4>)                                                                                       \
    X(integrateTrack, In<bn_f4>, In<bn_u32>, bn_u32, bn_u32, bn_u32, Out<bn_f4>)                                    \
    /* parallel */                                                                                                  \
    X(domainStay, In<bn_u64>, bn_u32, bn_u64, bn_u64, Out<bn_u32>)                                                  \
    X(letGroupBoxes, In<bn_f4>, In<bn_f4>, In<bn_u32>, In<bn_u32>, In<bn_u32>, bn_u32, In<bn_f4>, bn_u32, Out<bn_f4>) \
    X(letBoxRuns, In<bn_u32>, bn_u32, bn_u32, Out<bn_u32>)                                                         \
    X(letBoxCells, In<bn_u32>, In<bn_u32>, In<bn_u32>, In<bn_u32>, bn_u32, bn_u32, bn_u32, Out<bn_u32>, Out<bn_u32>, \
      Out<bn_u32>, bn_u32)                                                                                          \
    X(letOpened, In<bn_f4>, In<bn_f4>, In<bn_u32>, bn_u32, bn_u32, float, float, In<bn_f4>, bn_u32, In<bn_f4>,       \
      In<bn_u32>, Out<bn_u32>)                                                                                      \
    X(letSelect, In<bn_u32>, In<bn_u32>, In<bn_u32>, bn_u32, Out<bn_u32>, Out<bn_u32>)                               \
    X(letTopOpened, In<bn_u32>, In<bn_f4>, In<bn_u32>, bn_u32, bn_u32, bn_u32, float, float, Out<bn_u32>)          \
    X(letFarGroups, In<bn_f4>, In<bn_u32>, bn_u32, bn_u32, In<bn_f4>, In<bn_f4>, In<bn_u32>, bn_u32, bn_u32, float,   \
      float, Out<bn_u32>, Out<bn_u32>)                                                                            \
    X(letGather, In<bn_f4>, In<bn_f4>, In<bn_f4>, In<bn_u32>, In<bn_u32>, In<bn_f4>, In<bn_u32>, In<bn_u32>,         \
      In<bn_u32>, In<bn_u32>, bn_u32, Out<bn_f4>, Out<bn_f4>, Out<bn_f4>, Out<bn_u32>, Out<bn_u32>, Out<bn_f4>)      \
    X(letShiftLinks, Out<bn_u32>, In<bn_u32>, bn_u32, bn_u32, bn_u32, bn_u32)                                      \
    /* radix_sort */                                                                                                \
    X(radixHistogram, In<bn_u64>, bn_u32, bn_u32, bn_u32, Out<bn_u32>, bn_u32)                                      \
    X(radixScatter, In<bn_u64>, In<bn_u32>, Out<bn_u64>, Out<bn_u32>, bn_u32, bn_u32, bn_u32, In<bn_u32>, bn_u32)    \
    /* reduce */                                                                                                    \
    X(reduceBounds, In<bn_f4>, bn_u32, bn_u32, Out<bn_f4>)                                                          \
    X(reduceSum, In<double>, bn_u32, Out<double>)                                                                   \
    /* scan */                                                                                                      \
    X(scanReduce, In<bn_u32>, bn_u32, Out<bn_u32>, bn_u32)                                                          \
    X(scanDownsweep, In<bn_u32>, Out<bn_u32>, bn_u32, In<bn_u32>, Out<bn_u32>, bn_u32)                              \
    /* tree_build */                                                                                                \
    X(treeCellStarts, In<bn_u64>, bn_u32, Out<bn_u32>, Out<bn_u32>, Out<bn_u32>)                                    \
    X(treeCellList, In<bn_u32>, In<bn_u32>, bn_u32, bn_u32, Out<bn_u64>, Out<bn_u32>)                               \
    X(treeCellWrite, In<bn_u64>, bn_u32, In<bn_u64>, In<bn_u32>, bn_u32, Out<bn_u64>, Out<bn_u32>, Out<bn_u32>,     \
      Out<bn_u32>, Out<bn_u32>, Out<bn_u32>)                                                                        \
    /* tree_groups */                                                                                               \
    X(treeGroupFlags, In<bn_u32>, In<bn_u32>, In<bn_u32>, In<bn_u32>, In<bn_u32>, bn_u32, Out<bn_u32>)              \
    X(treeGroupBoxes, In<bn_f4>, In<bn_u32>, bn_u32, bn_u32, Out<bn_u32>, Out<bn_f4>, Out<bn_f4>)                   \
    /* tree_keys */                                                                                                 \
    X(treeIota, Out<bn_u32>, bn_u32)                                                                                \
    X(treeKeys, In<bn_f4>, In<bn_f4>, bn_u32, Out<bn_u64>, Out<bn_f4>)                                              \
    /* tree_link */                                                                                                 \
    X(treeLink, In<bn_u64>, In<bn_u32>, In<bn_u32>, In<bn_u32>, bn_u32, Out<bn_u32>, Out<bn_u32>, Out<bn_u32>)      \
    /* tree_multipoles */                                                                                           \
    X(treeMultipoleLeaves, In<bn_f4>, In<bn_u64>, In<bn_u32>, In<bn_u32>, In<bn_u32>, In<bn_f4>, bn_u32, bn_u32,    \
      Out<double>)                                                                                                  \
    X(treeMultipoleNodes, In<bn_u64>, In<bn_u32>, In<bn_u32>, In<bn_u32>, In<bn_f4>, bn_u32, bn_u32, bn_u32, bn_u32, \
      Out<double>)                                                                                                  \
    X(treeMultipoleStore, In<double>, In<bn_u64>, In<bn_u32>, In<bn_f4>, bn_u32, bn_u32, Out<bn_f4>, Out<bn_f4>,     \
      Out<bn_f4>, bn_u32)                                                                                           \
    /* walk: link is (cell_first, cell_count) per cell; walkForces' arguments as kernels_cl/walk.cl names them */    \
    X(walkPrepare, In<bn_f4>, In<bn_f4>, In<bn_u32>, In<bn_u32>, bn_u32, float, Out<bn_f4>, Out<bn_u2>)            \
    X(walkPrepareRelative, In<bn_f4>, In<bn_f4>, bn_u32, Out<float>)                                                \
    X(walkForces,                                                                                                   \
      /* pos, src, mac, link, cell_com, cell_quad0, cell_quad1 */                                                   \
      In<bn_f4>, In<bn_f4>, In<bn_f4>, In<bn_u2>, In<bn_f4>, In<bn_f4>, In<bn_f4>,                                  \
      /* group_first, group_count, group_lo, group_hi, group_total (the group count, on the device), eps2 */        \
      In<bn_u32>, In<bn_u32>, In<bn_f4>, In<bn_f4>, In<bn_u32>, float,                                              \
      /* next_group, spill, spill_cap, status, totals, acc_pot, pp_count, pc_count */                               \
      Out<bn_u32>, Out<bn_u32>, bn_u32, Out<bn_u32>, Out<bn_u64>, Out<bn_f4>, Out<bn_u32>, Out<bn_u32>,             \
      /* count_each, roots, nroots, rel, acc_old, alpha */                                                          \
      bn_u32, In<bn_u32>, bn_u32, In<float>, In<bn_f4>, float)                                                      \
    X(walkGroupFlags, In<bn_u32>, In<bn_u32>, In<bn_u32>, bn_u32, bn_u32, Out<bn_u32>)                              \
    X(walkGroupGather, In<bn_u32>, In<bn_u32>, In<bn_u32>, In<bn_u32>, In<bn_f4>, In<bn_f4>, bn_u32, Out<bn_u32>,     \
      Out<bn_u32>, Out<bn_f4>, Out<bn_f4>)                                                                          \
    X(walkScatter, In<bn_f4>, In<bn_u32>, In<bn_u32>, In<bn_u32>, bn_u32, Out<bn_f4>, Out<bn_u32>, Out<bn_u32>,      \
      bn_u32)
// clang-format on

namespace banyan {

/// One id per kernel of BANYAN_KERNELS, dense from 0 in the list's order: the index of each backend's kernel table.
enum class KernelId : unsigned {
#define BANYAN_KERNEL_ID(name, ...) name,
    BANYAN_KERNELS(BANYAN_KERNEL_ID)
#undef BANYAN_KERNEL_ID
};

/// How many kernels BANYAN_KERNELS declares.
inline constexpr std::size_t kernel_count = 0
#define BANYAN_KERNEL_ONE(name, ...) +1
    BANYAN_KERNELS(BANYAN_KERNEL_ONE)
#undef BANYAN_KERNEL_ONE
    ;

/// @p id as an index into a table of kernel_count entries.
constexpr std::size_t index_of(KernelId id) noexcept
{
    return static_cast<std::size_t>(id);
}

} // namespace banyan
