/**
 * @file key_values.hpp
 * @brief Text blocks of key=value lines, as checkpoints store the options and bookkeeping of a run: parsing, and
 *        typed look-ups that name the missing or malformed entry.
 */
#pragma once

#include <cstdint>
#include <map>
#include <string>

namespace banyan {

using KeyValues = std::map<std::string, std::string>;

/// Splits @p text into key=value lines (the first '=' divides them); lines without '=' are passed over.
KeyValues parse_key_values(const std::string& text);

/// The value of @p key; throws UsageError naming @p what (the file) and the missing key.
const std::string& value_of(const KeyValues& kv, const std::string& key, const std::string& what);
/// The value of @p key as a double (shortest round-trip text gives the same bits back), or UsageError.
double double_of(const KeyValues& kv, const std::string& key, const std::string& what);
/// The value of @p key as an unsigned whole number, or UsageError.
std::uint64_t u64_of(const KeyValues& kv, const std::string& key, const std::string& what);

} // namespace banyan
