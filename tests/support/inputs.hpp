/**
 * @file inputs.hpp
 * @brief Particle sets shared by the tree and force tests (x, y, z, mass), seeded and reproducible.
 */
#pragma once

#include "core/device_shared.h"
#include "core/files/snapshot.hpp"
#include "core/models/plummer.hpp"

#include <array>
#include <cstdint>
#include <random>
#include <span>
#include <vector>

namespace banyan::test {

/// Makes the first @p gas particles of @p s gas and the last @p stars stars, each with fields of its own (gas:
/// density, temperature, metals and a smoothing length as eps; stars: metals and formation time), the others dark
/// with softening @p eps: an input of every kind, for the tests that a run keeps each particle's fields.
inline void make_gas_and_stars(Snapshot& s, std::size_t gas, std::size_t stars, float eps)
{
    const std::size_t n = s.size();
    s.n_gas = gas, s.n_star = stars, s.n_dark = n - gas - stars;
    for (std::size_t i = 0; i < gas; ++i) {
        s.gas_rho.push_back(1.0f + 0.001f * static_cast<float>(i));
        s.gas_temp.push_back(1e4f + static_cast<float>(i));
        s.gas_metals.push_back(0.02f - 1e-5f * static_cast<float>(i));
        s.eps[i] = 0.01f + 1e-4f * static_cast<float>(i); // a smoothing length, not a softening
    }
    for (std::size_t i = 0; i < stars; ++i) {
        s.star_metals.push_back(0.01f + 1e-5f * static_cast<float>(i));
        s.star_tform.push_back(-0.5f + 1e-3f * static_cast<float>(i));
    }
    for (std::size_t i = gas; i < n; ++i)
        s.eps[i] = eps;
}

/// A double in (0, 1) from 53 random bits.
inline double uniform01(std::mt19937_64& g)
{
    return (static_cast<double>(g() >> 11) + 0.5) * 0x1.0p-53;
}

/// A Plummer sphere's positions and masses (core/models/plummer.hpp).
inline std::vector<bn_f4> plummer_input(std::size_t n, std::uint64_t seed)
{
    return plummer(n, seed).pos;
}

/// Where plummer_clusters puts one of its clusters: its particles' positions times @p scale plus @p offset, and each
/// particle's mass @p mass, or the sphere's own (1 / n) when 0.
struct Cluster {
    float scale;
    std::array<float, 3> offset;
    double mass = 0;
};

/// A Plummer sphere of @p n particles dealt in turn to @p clusters (particle i to cluster i % clusters.size()), each
/// shrunk and moved as it says: clustered inputs, whose trees are deep.
inline std::vector<bn_f4> plummer_clusters(std::size_t n, std::uint64_t seed, std::span<const Cluster> clusters)
{
    auto p = plummer(n, seed).pos;
    for (std::size_t i = 0; i < n; ++i) {
        const Cluster& c = clusters[i % clusters.size()];
        p[i].x = p[i].x * c.scale + c.offset[0];
        p[i].y = p[i].y * c.scale + c.offset[1];
        p[i].z = p[i].z * c.scale + c.offset[2];
        if (c.mass > 0) p[i].w = static_cast<float>(c.mass);
    }
    return p;
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
