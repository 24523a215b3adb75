/**
 * @file device_info.hpp
 * @brief What a device is, and how a user asks for one.
 */
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace banyan {

enum class BackendKind { cuda, opencl };

std::string_view to_string(BackendKind b) noexcept;

struct DeviceInfo {
    BackendKind backend = BackendKind::opencl;
    int index = 0;       ///< index within its backend, as `banyan devices` prints it and --device takes it
    std::string name;    ///< e.g. "NVIDIA H200"
    std::string vendor;  ///< vendor or OpenCL platform name
    std::string version; ///< driver / runtime / OpenCL version
    bool gpu = false;    ///< false for CPUs (PoCL) and other accelerators
    std::uint64_t memory_bytes = 0;
    std::uint64_t max_alloc_bytes = 0; ///< the largest single allocation (OpenCL: often a quarter of the memory)
    std::size_t view_align = 256;      ///< byte offsets of views (sub-buffers) must be multiples of this
    unsigned compute_units = 0;
    std::size_t max_work_group = 0;
};

} // namespace banyan
