/**
 * @file error.cpp
 * @brief Builds DeviceError messages (only when a call has failed).
 */
#include "core/error.hpp"

#include <fmt/format.h>

namespace banyan {

DeviceError::DeviceError(std::string backend, std::string call, long code, std::string code_name, const char* file,
                         int line, std::string detail)
    : std::runtime_error(fmt::format("{} error: {} failed with {} ({}) at {}:{}{}{}", backend, call, code_name, code,
                                     file, line, detail.empty() ? "" : "\n", detail)),
      backend_(std::move(backend)), call_(std::move(call)), code_(code), detail_(std::move(detail))
{
}

} // namespace banyan
