/**
 * @file version.hpp
 * @brief banyan's version (CMakeLists.txt's project VERSION), for `banyan --version` and the metadata of output
 *        files and checkpoints.
 */
#pragma once

#ifndef BANYAN_VERSION
#error "BANYAN_VERSION is defined by CMakeLists.txt from the project's VERSION"
#endif

namespace banyan {
inline constexpr const char* version = BANYAN_VERSION;
} // namespace banyan
