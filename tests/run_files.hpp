/**
 * @file run_files.hpp
 * @brief Helpers of the tests that run simulations and compare their states and files (test_simulation.cpp,
 *        test_block_steps.cpp): a temporary output folder, a file's bytes, and bit-for-bit equal particle arrays.
 */
#pragma once

#include "core/device_shared.h"

#include <fmt/format.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

namespace banyan::test {

/// A fresh, empty folder under the system's temporary folder, removed at the end of the scope.
struct TempDir {
    std::filesystem::path path;
    explicit TempDir(const std::string& name)
        : path(std::filesystem::temp_directory_path() / fmt::format("banyan-test-{}-{}", ::getpid(), name))
    {
        std::filesystem::remove_all(path);
    }
    ~TempDir()
    {
        std::error_code ec;
        std::filesystem::remove_all(path, ec);
    }
    std::string str() const { return path.string(); }
};

/// The bytes of the file at @p p (empty when it cannot be read).
inline std::string file_bytes(const std::filesystem::path& p)
{
    std::ifstream f(p, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

/// Whether @p a and @p b hold the same values bit for bit.
inline bool same_bits(const std::vector<bn_f4>& a, const std::vector<bn_f4>& b)
{
    return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(bn_f4)) == 0);
}

} // namespace banyan::test
