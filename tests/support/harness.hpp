/**
 * @file harness.hpp
 * @brief What every conformance test needs: the backend under test, the sizes and work-group sizes to sweep,
 *        and seeded random inputs. Defined in harness.cpp, for both test programs (banyan_tests, banyan_mpi_tests).
 */
#pragma once

#include "core/device/backend.hpp"

#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

namespace banyan::test {

/// The device the suite runs on (chosen by --backend in main; the test binary exits 77 if it is absent).
Backend& backend();

/// In the "cross" suite (--backend cross): the OpenCL GPU beside the CUDA device that backend() returns.
Backend& other_backend();

/// True when the device is a GPU: sizes then go up to 2^24 instead of 2^20.
bool on_gpu();

/// Largest problem size for the sweeps: 2^20 on a CPU device, 2^24 on a GPU (BANYAN_TEST_MAX_LOG2 overrides).
std::size_t max_size();

/// 0, 1, 63, 64, 65, 255, 256, 257 and 2^k - 1, 2^k + 1 for k = 10, 12, ..., up to @p limit.
std::vector<std::size_t> edge_sizes(std::size_t limit);

/// Work-group sizes to run the primitives at: 32, 64, 128, 256 on OpenCL (so that nothing depends on a warp of
/// 32), the one fixed size on CUDA. Each call sets the backend to it; call restore_work_group_size() after.
std::vector<std::size_t> work_group_sizes();
void restore_work_group_size();

/// On CUDA: {true, false} (CUB, then our own kernels); elsewhere {true}. Use with set_vendor_primitives().
std::vector<bool> vendor_modes();

/// A seeded generator; the seed is printed by main so a failure can be reproduced (BANYAN_TEST_SEED sets it).
std::mt19937_64& rng();

// For the mains (conformance_main.cpp, mpi/mpi_main.cpp).

/// Takes `--backend NAME` or `--backend=NAME` out of the command line: returns NAME (empty when absent) and puts
/// the other arguments, argv[0] first, into @p rest (for doctest).
std::string take_backend_option(int argc, char** argv, std::vector<char*>& rest);
/// Makes @p be (and @p other, for the suite "cross") what backend() and other_backend() return; the old ones are
/// closed first. set_backends(nullptr) closes them.
void set_backends(std::unique_ptr<Backend> be, std::unique_ptr<Backend> other = nullptr);
/// Seeds rng() from BANYAN_TEST_SEED, or with the default seed; returns the seed (for main to print).
std::uint64_t seed_rng();

} // namespace banyan::test
