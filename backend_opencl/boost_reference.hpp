/**
 * @file boost_reference.hpp
 * @brief Boost.Compute's sort_by_key on an OpenCL backend's own context and queue: the reference that
 *        `banyan bench primitives` times our OpenCL sort against.
 *
 * Plain C++ declarations: no OpenCL or Boost header reaches the includer (the Boost.Compute types live in the .cpp).
 * Everything is enqueued on the backend's one in-order queue, so Backend::record() markers placed around sort()
 * bracket exactly Boost.Compute's work.
 */
#pragma once

#include "core/device/backend.hpp"

#include <memory>
#include <span>
#include <string>
#include <vector>

namespace banyan::opencl {

/// One Boost.Compute sort_by_key problem: pristine copies of the inputs and a work copy that sort() sorts.
class BoostComputeSort {
public:
    /// Uploads @p keys and @p values (same length) to the device of @p be.
    /// Throws UsageError when @p be is not an OpenCL backend, and std::exception (with the reason) when
    /// Boost.Compute fails.
    BoostComputeSort(Backend& be, std::span<const bn_u64> keys, std::span<const bn_u32> values);
    ~BoostComputeSort();
    BoostComputeSort(const BoostComputeSort&) = delete;
    BoostComputeSort& operator=(const BoostComputeSort&) = delete;

    /// Enqueues a device copy of the pristine inputs over the work copy (sort() sorts in place).
    void restore();
    /// Enqueues boost::compute::sort_by_key (ascending, all 64 key bits) on the work copy. The first call builds
    /// Boost.Compute's kernels: time it only after a warm-up run.
    void sort();
    /// Reads the work copy back (blocking).
    void download(std::vector<bn_u64>& keys, std::vector<bn_u32>& values);
    /// Which algorithm Boost.Compute picks on this device ("radix sort" on a GPU, its merge sort on a CPU).
    std::string algorithm() const;

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

} // namespace banyan::opencl
