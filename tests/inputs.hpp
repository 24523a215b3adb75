/**
 * @file inputs.hpp
 * @brief Particle sets shared by the tree and force tests (x, y, z, mass), seeded and reproducible.
 */
#pragma once

#include "core/device_shared.h"
#include "core/simulation/plummer.hpp"

#include <cstdint>
#include <random>
#include <vector>

namespace banyan::test {

/// A double in (0, 1) from 53 random bits.
inline double uniform01(std::mt19937_64& g)
{
    return (static_cast<double>(g() >> 11) + 0.5) * 0x1.0p-53;
}

/// A Plummer sphere's positions and masses (core/simulation/plummer.hpp).
inline std::vector<bn_f4> plummer_input(std::size_t n, std::uint64_t seed)
{
    return plummer(n, seed).pos;
}

/// Uniform in [-1, 1]^3 with masses between 0.5 / n and 1.5 / n.
inline std::vector<bn_f4> cube_input(std::size_t n, std::uint64_t seed)
{
    std::mt19937_64 g(seed);
    std::vector<bn_f4> p(n);
    for (auto& q : p) {
        q.x = static_cast<float>(2 * uniform01(g) - 1);
        q.y = static_cast<float>(2 * uniform01(g) - 1);
        q.z = static_cast<float>(2 * uniform01(g) - 1);
        q.w = static_cast<float>((0.5 + uniform01(g)) / static_cast<double>(n));
    }
    return p;
}

} // namespace banyan::test
