/**
 * @file shared_folder.hpp
 * @brief A temporary folder made by rank 0 and named to every rank, for the multi-rank tests that write files, and
 *        the bytes of a file they wrote (to compare files written over different numbers of ranks).
 */
#pragma once

#include "core/parallel/comm.hpp"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

namespace banyan::test {

/// Made by rank 0 (mkdtemp under the temporary directory) and broadcast: the ranks share it (one node, or TMPDIR on
/// a shared file system). Empty when it could not be made.
inline std::filesystem::path shared_temp_folder(const Comm& comm)
{
    std::vector<std::byte> name;
    if (comm.rank() == 0) {
        std::string templ = (std::filesystem::temp_directory_path() / "banyan-mpi-test-XXXXXX").string();
        if (::mkdtemp(templ.data()) == nullptr) templ.clear();
        for (char c : templ)
            name.push_back(static_cast<std::byte>(c));
    }
    comm.broadcast(name, 0);
    std::string s;
    for (std::byte b : name)
        s.push_back(static_cast<char>(b));
    return s;
}

/// The whole content of the file at @p p (empty when it cannot be read).
inline std::string file_bytes(const std::filesystem::path& p)
{
    std::ifstream f(p, std::ios::binary);
    return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

} // namespace banyan::test
