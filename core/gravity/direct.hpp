/**
 * @file direct.hpp
 * @brief Direct O(N^2) summation on the device, in single and in double precision (the tree's reference).
 */
#pragma once

#include "core/device/backend.hpp"

namespace banyan {

/// acc_pot[i] = (ax, ay, az, potential) of particle i from all others, softening @p eps (0 allowed), single
/// precision. @p pos_mass holds x, y, z, m. Both buffers hold at least @p n elements.
void direct_forces(Backend& be, const Buffer<bn_f4>& pos_mass, std::size_t n, float eps, Buffer<bn_f4>& acc_pot);

/// As above for the targets first .. first + count - 1 only (from all n particles), into acc_pot[0 .. count - 1]:
/// a rank's share of a direct sum over several. The same sums, bit for bit, as those places of the whole.
void direct_forces(Backend& be, const Buffer<bn_f4>& pos_mass, std::size_t n, std::size_t first, std::size_t count,
                   float eps, Buffer<bn_f4>& acc_pot);

/// acc_pot[list[k]] = (ax, ay, az, potential) of the @p count particles list[0 .. count - 1] from all @p n (block time
/// steps: a substep with few active particles needs no tree), the sources in slices of BANYAN_DIRECT_SLICE whose
/// partial sums go through @p partial (grown as needed). Other entries of acc_pot are left as they are.
void direct_forces_listed(Backend& be, const Buffer<bn_f4>& pos_mass, std::size_t n, const Buffer<bn_u32>& list,
                          std::size_t count, float eps, Buffer<bn_f4>& partial, Buffer<bn_f4>& acc_pot);

/// As direct_forces, with differences and sums in double precision; acc_pot holds 4 doubles per particle.
void direct_forces_f64(Backend& be, const Buffer<bn_f4>& pos_mass, std::size_t n, double eps, Buffer<double>& acc_pot);

} // namespace banyan
