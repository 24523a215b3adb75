/**
 * @file direct.cpp
 * @brief Launches the direct-summation kernels (kernels_cu/direct.cu, kernels_cl/direct.cl).
 */
#include "core/gravity/direct.hpp"

#include "core/error.hpp"

namespace banyan {

void direct_forces(Backend& be, const Buffer<bn_f4>& pos_mass, std::size_t n, float eps, Buffer<bn_f4>& acc_pot)
{
    direct_forces(be, pos_mass, n, 0, n, eps, acc_pot);
}

void direct_forces(Backend& be, const Buffer<bn_f4>& pos_mass, std::size_t n, std::size_t first, std::size_t count,
                   float eps, Buffer<bn_f4>& acc_pot)
{
    if (first > n || count > n - first) throw std::invalid_argument("direct_forces: targets beyond the particles");
    if (pos_mass.size() < n || acc_pot.size() < count) throw std::invalid_argument("direct_forces: buffers too small");
    grid_for(be, n); // the size check
    if (count == 0) return;
    be.launch(kernels::directForces, grid_for(be, count), pos_mass, to_u32(n), to_u32(first), to_u32(count), eps * eps,
              acc_pot);
}

void direct_forces_listed(Backend& be, const Buffer<bn_f4>& pos_mass, std::size_t n, const Buffer<bn_u32>& list,
                          std::size_t count, float eps, Buffer<bn_f4>& partial, Buffer<bn_f4>& acc_pot)
{
    if (pos_mass.size() < n || acc_pot.size() < n || list.size() < count || count > n)
        throw std::invalid_argument("direct_forces_listed: buffers too small");
    grid_for(be, n); // the size check
    if (count == 0) return;
    const std::size_t wg = be.work_group_size();
    const std::size_t per_block = wg / BANYAN_DIRECT_LANES;
    const std::size_t slices = (n + BANYAN_DIRECT_SLICE - 1) / BANYAN_DIRECT_SLICE;
    const std::size_t blocks = (count + per_block - 1) / per_block;
    ensure_size(be, partial, slices * count, "direct.listed_partial");
    be.launch(kernels::directListedPartial, Grid{slices * blocks, wg}, pos_mass, to_u32(n), list, to_u32(count),
              eps * eps, partial);
    be.launch(kernels::directListedSum, Grid{count, wg}, partial, to_u32(slices), list, to_u32(count), acc_pot);
}

void direct_forces_f64(Backend& be, const Buffer<bn_f4>& pos_mass, std::size_t n, double eps, Buffer<double>& acc_pot)
{
    if (pos_mass.size() < n || acc_pot.size() < 4 * n)
        throw std::invalid_argument("direct_forces_f64: buffers too small");
    be.launch(kernels::directForcesF64, grid_for(be, n), pos_mass, to_u32(n), eps * eps, acc_pot);
}

} // namespace banyan
