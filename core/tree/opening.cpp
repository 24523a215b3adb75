/**
 * @file opening.cpp
 * @brief The opening criterion's names and checks.
 */
#include "core/tree/opening.hpp"

#include "core/error.hpp"

#include <fmt/format.h>

#include <cmath>
#include <limits>
#include <string>

namespace banyan {

const char* to_string(Opening o) noexcept
{
    for (const auto& c : opening_criteria)
        if (c.kind == o) return c.name.data(); // the names are literals: null-terminated
    return opening_criteria.front().name.data();
}

Opening parse_opening(std::string_view text, std::string_view what)
{
    for (const auto& c : opening_criteria)
        if (text == c.name) return c.kind;
    throw UsageError(fmt::format("{}: the opening criterion must be {}, got '{}'", what, opening_names(), text));
}

bool is_opening_name(std::string_view text) noexcept
{
    for (const auto& c : opening_criteria)
        if (text == c.name) return true;
    return false;
}

std::string opening_names(std::string_view quote)
{
    std::string names;
    for (std::size_t i = 0; i < opening_criteria.size(); ++i)
        names += fmt::format("{}{}{}{}",
                             i == 0                             ? ""
                             : i + 1 == opening_criteria.size() ? " or "
                                                                : ", ",
                             quote, opening_criteria[i].name, quote);
    return names;
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
