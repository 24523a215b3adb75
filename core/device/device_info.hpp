/**
 * @file device_info.hpp
 * @brief What a device is, and how a user asks for one.
 */
#pragma once

#include <cstdint>
#include <string>

namespace banyan {

struct DeviceInfo {
    std::string backend; ///< the name of its backend (backend_registry.hpp), as --backend takes it
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
    /// Whether buffers have device addresses that other libraries take: arrays handed over through DLPack
    /// (Backend::wrap_device_memory).
    bool device_pointers = false;
};

} // namespace banyan
