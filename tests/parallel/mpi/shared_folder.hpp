/**
 * @file shared_folder.hpp
 * @brief A temporary folder made by rank 0 and named to every rank, for the multi-rank tests that write files.
 */
#pragma once

#include "core/parallel/comm.hpp"

#include <doctest/doctest.h>

#include <cstdlib>
#include <exception>
#include <filesystem>
#include <string>
#include <system_error>
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

/// A shared_temp_folder for one test case (collective): the same path on every rank, REQUIREd to have been made, and
/// removed by rank 0 at the end of the scope once every rank is done with it (a barrier first). A scope left by an
/// exception may have left the ranks in different places: then nothing collective is done, and the folder stays.
struct SharedFolder : std::filesystem::path {
    const Comm& comm;

    explicit SharedFolder(const Comm& c) : std::filesystem::path(shared_temp_folder(c)), comm(c) { REQUIRE(!empty()); }
    SharedFolder(const SharedFolder&) = delete;
    SharedFolder& operator=(const SharedFolder&) = delete;
    ~SharedFolder()
    {
        if (std::uncaught_exceptions() > 0) return;
        comm.barrier();
        std::error_code ec;
        if (comm.rank() == 0) std::filesystem::remove_all(*this, ec);
    }
};

} // namespace banyan::test
