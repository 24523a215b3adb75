/**
 * @file force_errors.hpp
 * @brief The multi-rank tests' measure of forces: relative acceleration errors against double-precision direct
 *        summation on the test's device, sorted, and their quantiles.
 */
#pragma once

#include "core/gravity/forces.hpp"
#include "tests/support/harness.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

namespace banyan::test {

/// Relative acceleration errors of @p acc (ax, ay, az, phi per particle) against double-precision direct summation
/// of @p pos, sorted ascending (non-finite ones as 1e30).
inline std::vector<double> force_errors(const std::vector<bn_f4>& pos, const std::vector<bn_f4>& acc, double eps)
{
    Backend& be = backend();
    const std::size_t n = pos.size();
    auto p = be.upload<bn_f4>(pos, "test.pos");
    std::vector<bn_u32> t(n);
    std::iota(t.begin(), t.end(), 0u);
    auto targets = be.upload<bn_u32>(t, "test.targets");
    auto ref = be.alloc<double>(4 * n, "test.ref");
    direct_forces_f64_targets(be, p, n, targets, n, eps, ref);
    const auto r = ref.download(4 * n);
    std::vector<double> e(n);
    for (std::size_t i = 0; i < n; ++i) {
        const double dx = acc[i].x - r[4 * i], dy = acc[i].y - r[4 * i + 1], dz = acc[i].z - r[4 * i + 2];
        const double a = std::sqrt(r[4 * i] * r[4 * i] + r[4 * i + 1] * r[4 * i + 1] + r[4 * i + 2] * r[4 * i + 2]);
        e[i] = std::sqrt(dx * dx + dy * dy + dz * dz) / (a > 0 ? a : 1.0);
        if (!std::isfinite(e[i])) e[i] = 1e30;
    }
    std::sort(e.begin(), e.end());
    return e;
}

/// The @p q quantile of @p sorted (0 when empty).
inline double quantile(const std::vector<double>& sorted, double q)
{
    return sorted.empty() ? 0.0 : sorted[std::min(sorted.size() - 1, static_cast<std::size_t>(q * sorted.size()))];
}

} // namespace banyan::test
