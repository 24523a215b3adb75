/**
 * @file precision.cpp
 * @brief Internal units, the input checks that remain, and the tree-depth warning.
 */
#include "core/gravity/precision.hpp"

#include "core/error.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <utility>
#include <vector>

namespace banyan {

namespace {

/// The extent (largest side of the bounding box) and the total mass of @p pos_mass.
std::pair<double, double> extent_and_mass(std::span<const bn_f4> pos_mass)
{
    double lo[3] = {INFINITY, INFINITY, INFINITY}, hi[3] = {-INFINITY, -INFINITY, -INFINITY}, total = 0;
    for (const bn_f4& p : pos_mass) {
        const double x[3] = {p.x, p.y, p.z};
        for (int a = 0; a < 3; ++a)
            lo[a] = std::min(lo[a], x[a]), hi[a] = std::max(hi[a], x[a]);
        total += p.w;
    }
    if (pos_mass.empty()) return {0.0, 0.0};
    return {std::max({hi[0] - lo[0], hi[1] - lo[1], hi[2] - lo[2]}), total};
}

void scale(std::span<bn_f4> v, int xyz, int w)
{
    for (bn_f4& a : v)
        a = {std::ldexp(a.x, xyz), std::ldexp(a.y, xyz), std::ldexp(a.z, xyz), std::ldexp(a.w, w)};
}

} // namespace

InternalUnits InternalUnits::for_system(std::span<const bn_f4> pos_mass, double eps)
{
    const auto [extent, mass] = extent_and_mass(pos_mass);
    return for_extent_and_mass(extent, mass, eps);
}

InternalUnits InternalUnits::for_extent_and_mass(double extent, double mass, double eps)
{
    InternalUnits u;
    const double length = std::isfinite(eps) ? std::max(extent, eps) : extent;
    if (length > 0 && !(length >= 1.0 / 16 && length <= 1024)) u.k = std::ilogb(length);
    if (mass > 0 && !(mass >= std::ldexp(1.0, -20) && mass <= std::ldexp(1.0, 20))) u.j = std::ilogb(mass);
    if ((3 * u.k - u.j) % 2 != 0) u.j += 1; // G = 1 in both units needs a time unit that is a power of two
    return u;
}

void InternalUnits::to_internal(std::span<bn_f4> pos_mass) const
{
    if (!identity()) scale(pos_mass, -k, -j);
}
void InternalUnits::from_internal(std::span<bn_f4> pos_mass) const
{
    if (!identity()) scale(pos_mass, k, j);
}
void InternalUnits::velocities_to_internal(std::span<bn_f4> vel) const
{
    if (!identity()) scale(vel, -velocity_exp(), 0);
}
void InternalUnits::velocities_from_internal(std::span<bn_f4> vel) const
{
    if (!identity()) scale(vel, velocity_exp(), 0);
}
std::size_t InternalUnits::forces_from_internal(std::span<bn_f4> acc_pot) const
{
    if (identity()) return 0;
    std::size_t lost = 0;
    auto convert = [&](float& v, int e) {
        const float before = v;
        v = std::ldexp(v, e);
        lost += std::isnormal(before) && !std::isnormal(v);
    };
    for (bn_f4& a : acc_pot) {
        convert(a.x, acceleration_exp()), convert(a.y, acceleration_exp()), convert(a.z, acceleration_exp());
        convert(a.w, potential_exp());
    }
    return lost;
}

void check_precision_range(std::span<const bn_f4> pos_mass, double eps, const std::string& what)
{
    const auto [extent, total] = extent_and_mass(pos_mass);
    std::size_t lightest = 0;
    for (std::size_t i = 1; i < pos_mass.size(); ++i)
        if (pos_mass[i].w < pos_mass[lightest].w) lightest = i;
    const double min_mass = pos_mass.empty() ? 0.0 : pos_mass[lightest].w;
    check_precision_range(extent, total, min_mass, lightest, pos_mass.size(), eps, what);
}

void check_precision_range(double extent, double total, double min_mass, std::size_t lightest, std::size_t n,
                           double eps, const std::string& what)
{
    using L = PrecisionLimits;
    const char* help = "(README, \"Limits\")";
    if (n > 1 && extent > 0 && !(eps <= L::max_eps_ratio * extent))
        throw UsageError(fmt::format("{}: the softening {} is more than {} times the extent {} of the particles, "
                                     "beyond what single precision handles {}",
                                     what, eps, L::max_eps_ratio, extent, help));
    if (n > 0 && !(min_mass >= L::min_mass_ratio * total))
        throw UsageError(fmt::format("{}: particle {} has the mass {}, less than {} of the total mass {}: single "
                                     "precision cannot hold both {}",
                                     what, lightest, min_mass, L::min_mass_ratio, total, help));
}

void check_coincident(std::span<const bn_f4> pos, std::span<const std::uint64_t> ids, const std::string& what)
{
    // Sorted by position (then index): particles at one point are neighbours.
    std::vector<bn_u32> order(pos.size());
    for (std::size_t i = 0; i < order.size(); ++i)
        order[i] = static_cast<bn_u32>(i);
    auto at = [&](bn_u32 i) { return std::array<float, 3>{pos[i].x, pos[i].y, pos[i].z}; };
    std::sort(order.begin(), order.end(),
              [&](bn_u32 a, bn_u32 b) { return std::pair(at(a), a) < std::pair(at(b), b); });
    for (std::size_t i = 1; i < order.size(); ++i) {
        if (at(order[i - 1]) != at(order[i])) continue;
        const auto id = [&](bn_u32 k) -> std::uint64_t { return ids.empty() ? k : ids[k]; };
        const std::uint64_t a = std::min(id(order[i - 1]), id(order[i])), b = std::max(id(order[i - 1]), id(order[i]));
        throw UsageError(fmt::format("{}: particles {} and {} lie at one point; without softening (eps = 0) their pull "
                                     "on each other is infinite: give a softening eps > 0 (README, \"Limits\")",
                                     what, a, b));
    }
}

std::optional<std::string> check_tree_depth(Octree& tree, const InternalUnits& units, const std::string& what)
{
    if (tree.depth() < BANYAN_MAX_DEPTH) return std::nullopt;
    const auto& begin = tree.level_begin();
    const std::size_t first = begin[BANYAN_MAX_DEPTH], count = begin[BANYAN_MAX_DEPTH + 1] - first;
    std::vector<bn_u32> pcount(count);
    tree.cell_pcount().download(std::span<bn_u32>(pcount), first);
    const auto largest = std::max_element(pcount.begin(), pcount.end());
    if (largest == pcount.end() || *largest <= BANYAN_N_LEAF) return std::nullopt;
    const double extent = tree.frame().at(0).w;
    // The spread of that leaf's particles: r^2 between them must stay well inside float's range.
    const bn_u32 pbegin = tree.cell_pbegin().at(first + static_cast<std::size_t>(largest - pcount.begin()));
    std::vector<bn_f4> leaf(*largest);
    tree.pos().download(std::span<bn_f4>(leaf), pbegin);
    double spread = 0;
    for (const bn_f4& p : leaf)
        spread = std::max({spread, std::fabs(double(p.x) - leaf[0].x), std::fabs(double(p.y) - leaf[0].y),
                           std::fabs(double(p.z) - leaf[0].z)});
    const double in_units = std::ldexp(1.0, units.k);
    if (spread > 0 && spread < PrecisionLimits::min_spread_ratio * extent)
        throw UsageError(
            fmt::format("{}: {} particles lie within {} of each other in a system of extent {}: a range "
                        "of scales beyond {:.0e} that single precision cannot serve at once (far outliers? "
                        "README, \"Limits\")",
                        what, *largest, spread * in_units, extent * in_units, 1 / PrecisionLimits::min_spread_ratio));
    return fmt::format("the tree reached its deepest level ({}) with {} particles in one leaf: they lie closer "
                       "together than it resolves (1/2^{} of the extent {} of all the particles), so their forces "
                       "are summed directly: correct, but slow. Far outliers usually cause this (README, \"Limits\")",
                       BANYAN_MAX_DEPTH, *largest, BANYAN_MAX_DEPTH, extent * in_units);
}

} // namespace banyan
