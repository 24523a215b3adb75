/**
 * @file numbers.hpp
 * @brief Numbers read from text (command-line options, unit strings, the Python module's unit strings, checkpoint
 *        entries) in the one form people mean: decimal, as in 2, -0.5, .5, 3., 1e10, 6.674E-8. Never hexadecimal
 *        (0x10, 0x1p3), infinity or NaN, spaces around the digits, or a leading plus on whole numbers; the C library's
 *        readers accept all of those, and a mass of 0x1p3 is nobody's 8. Lists of them are comma-separated.
 */
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace banyan {

/// The length of the decimal number at the start of @p text: [+-] digits [. digits] [(e|E) [+-] digits], with a
/// digit before or after the point; 0 when @p text does not start with one.
std::size_t decimal_length(std::string_view text);

/// The whole of @p text as a decimal number (decimal_length), finite in double; nullopt when it is anything else.
std::optional<double> parse_decimal(std::string_view text);

/// The whole of @p text as a whole number: an optional minus and decimal digits, within long long; else nullopt.
std::optional<long long> parse_whole(std::string_view text);

/// The whole of @p text as a count: decimal digits only, within 64 bits; else nullopt.
std::optional<std::uint64_t> parse_count(std::string_view text);

/// The comma-separated items of @p text, as written (empty ones kept: "" is one empty item, "a," two items).
std::vector<std::string> comma_items(std::string_view text);

} // namespace banyan
