/**
 * @file opening.cpp
 * @brief The opening criterion's names and checks.
 */
#include "core/tree/opening.hpp"

#include "core/error.hpp"

#include <fmt/format.h>

#include <cmath>
#include <limits>

namespace banyan {

const char* to_string(Opening o) noexcept
{
    return o == Opening::bmax ? "bmax" : "paper";
}

Opening parse_opening(std::string_view text, std::string_view what)
{
    if (text == "paper") return Opening::paper;
    if (text == "bmax") return Opening::bmax;
    throw UsageError(fmt::format("{}: the opening criterion must be paper or bmax, got '{}'", what, text));
}

float OpeningCriterion::inv_theta() const noexcept
{
    return theta > 0.0f ? 1.0f / theta : std::numeric_limits<float>::infinity();
}

void OpeningCriterion::check(std::string_view what) const
{
    if (!opening_angle_ok(theta))
        throw UsageError(
            fmt::format("{}: the opening angle theta must be in {}, got {}", what, opening_angle_range, theta));
    if (!(alpha >= 0.0f && std::isfinite(alpha)))
        throw UsageError(
            fmt::format("{}: the relative criterion's alpha must be >= 0 and within single precision's range (below "
                        "3.4e38), got {}",
                        what, alpha));
}

} // namespace banyan
