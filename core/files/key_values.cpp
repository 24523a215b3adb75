/**
 * @file key_values.cpp
 * @brief Parsing and typed look-ups of key=value text.
 */
#include "core/files/key_values.hpp"

#include "core/error.hpp"
#include "core/numbers.hpp"

#include <fmt/format.h>

#include <cstdlib>
#include <sstream>

namespace banyan {

KeyValues parse_key_values(const std::string& text)
{
    KeyValues kv;
    std::istringstream in(text);
    std::string line;
    while (std::getline(in, line)) {
        const auto eq = line.find('=');
        if (eq == std::string::npos) continue;
        kv[line.substr(0, eq)] = line.substr(eq + 1);
    }
    return kv;
}

const std::string& value_of(const KeyValues& kv, const std::string& key, const std::string& what)
{
    auto it = kv.find(key);
    if (it == kv.end()) throw UsageError(fmt::format("{}: the entry '{}' is missing", what, key));
    return it->second;
}

double double_of(const KeyValues& kv, const std::string& key, const std::string& what)
{
    const std::string& s = value_of(kv, key, what);
    const auto v = parse_decimal(s);
    if (!v) throw UsageError(fmt::format("{}: '{}' is not a finite decimal number: '{}'", what, key, s));
    return *v;
}

std::uint64_t u64_of(const KeyValues& kv, const std::string& key, const std::string& what)
{
    const std::string& s = value_of(kv, key, what);
    const auto v = parse_count(s);
    if (!v) throw UsageError(fmt::format("{}: '{}' is not a whole number: '{}'", what, key, s));
    return *v;
}

} // namespace banyan
