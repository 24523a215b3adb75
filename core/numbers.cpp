/**
 * @file numbers.cpp
 * @brief Decimal numbers from text (numbers.hpp): checked against the grammar first, then converted by
 *        std::from_chars, which neither depends on the locale nor accepts a leading plus.
 */
#include "core/numbers.hpp"

#include <charconv>
#include <cmath>
#include <system_error>

namespace banyan {

namespace {

bool digit(char c)
{
    return c >= '0' && c <= '9';
}

/// The digits of @p t from @p i on.
std::size_t digits_from(std::string_view t, std::size_t i)
{
    std::size_t k = i;
    while (k < t.size() && digit(t[k]))
        ++k;
    return k - i;
}

} // namespace

std::size_t decimal_length(std::string_view t)
{
    std::size_t i = 0;
    if (i < t.size() && (t[i] == '+' || t[i] == '-')) ++i;
    const std::size_t whole = digits_from(t, i);
    i += whole;
    std::size_t fraction = 0;
    if (i < t.size() && t[i] == '.') {
        fraction = digits_from(t, i + 1);
        if (whole + fraction > 0) i += 1 + fraction;
    }
    if (whole + fraction == 0) return 0;
    if (i < t.size() && (t[i] == 'e' || t[i] == 'E')) {
        std::size_t k = i + 1;
        if (k < t.size() && (t[k] == '+' || t[k] == '-')) ++k;
        if (const std::size_t e = digits_from(t, k)) i = k + e;
    }
    return i;
}

std::optional<double> parse_decimal(std::string_view t)
{
    if (t.empty() || decimal_length(t) != t.size()) return std::nullopt;
    if (t[0] == '+') t.remove_prefix(1);
    double v = 0;
    const auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), v, std::chars_format::general);
    if (ec != std::errc() || end != t.data() + t.size() || !std::isfinite(v)) return std::nullopt;
    return v;
}

std::optional<long long> parse_whole(std::string_view t)
{
    const std::size_t sign = !t.empty() && t[0] == '-' ? 1 : 0;
    if (t.size() == sign || digits_from(t, sign) != t.size() - sign) return std::nullopt;
    long long v = 0;
    const auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), v, 10);
    if (ec != std::errc() || end != t.data() + t.size()) return std::nullopt;
    return v;
}

std::optional<std::uint64_t> parse_count(std::string_view t)
{
    if (t.empty() || digits_from(t, 0) != t.size()) return std::nullopt;
    std::uint64_t v = 0;
    const auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), v, 10);
    if (ec != std::errc() || end != t.data() + t.size()) return std::nullopt;
    return v;
}

std::vector<std::string> comma_items(std::string_view text)
{
    std::vector<std::string> items;
    for (std::size_t at = 0;;) {
        const std::size_t comma = text.find(',', at);
        items.emplace_back(text.substr(at, comma == std::string_view::npos ? std::string_view::npos : comma - at));
        if (comma == std::string_view::npos) return items;
        at = comma + 1;
    }
}

} // namespace banyan
