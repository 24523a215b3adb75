/**
 * @file opencl_backend.hpp
 * @brief The OpenCL implementation of banyan::Backend (ICD loader, OpenCL 1.2 host API).
 */
#pragma once

#include "core/device/backend.hpp"
#include "core/device/backend_registry.hpp"
#include "backend_opencl/cl_check.hpp"

#include <array>
#include <map>
#include <mutex>
#include <string>
#include <utility>

namespace banyan {

/// Adds the OpenCL backend ("opencl") to @p registry: called by the build's register_backends
/// (cmake/BackendRegistry.cmake).
void register_opencl_backend(BackendRegistry& registry);

} // namespace banyan

namespace banyan::opencl {

/// The backend's name (--backend opencl, DeviceInfo::backend).
inline constexpr const char* backend_name = "opencl";

/// Owns one cl_* handle; releases it without throwing.
template <class H, cl_int (*Release)(H)> class Handle {
public:
    Handle() = default;
    explicit Handle(H h) : h_(h) {}
    Handle(Handle&& o) noexcept : h_(std::exchange(o.h_, nullptr)) {}
    Handle& operator=(Handle&& o) noexcept
    {
        if (this != &o) {
            reset();
            h_ = std::exchange(o.h_, nullptr);
        }
        return *this;
    }
    ~Handle() { reset(); }
    H get() const noexcept { return h_; }
    void reset() noexcept
    {
        if (h_) Release(h_);
        h_ = nullptr;
    }

private:
    H h_ = nullptr;
};

using Context = Handle<cl_context, clReleaseContext>;
using Queue = Handle<cl_command_queue, clReleaseCommandQueue>;
using Program = Handle<cl_program, clReleaseProgram>;
using ClKernel = Handle<cl_kernel, clReleaseKernel>;
using MemObject = Handle<cl_mem, clReleaseMemObject>;
using EventHandle = Handle<cl_event, clReleaseEvent>;

class OpenCLBackend final : public Backend {
public:
    OpenCLBackend(cl_platform_id platform, cl_device_id device, DeviceInfo info);
    ~OpenCLBackend() override;

    const DeviceInfo& info() const override { return info_; }
    std::unique_ptr<RawBuffer> alloc_raw(std::size_t bytes, std::string_view what) override;
    /// A buffer of CL_MEM_ALLOC_HOST_PTR mapped for the host: NVIDIA's OpenCL page-locks it, so copies between it
    /// and the device run at the bus's speed, as cudaHostAlloc's do under CUDA (the trees between ranks, Python's
    /// arrays). Plain host memory where the platform refuses such a buffer (larger than CL_DEVICE_MAX_MEM_ALLOC_SIZE).
    void* alloc_host(std::size_t bytes) override;
    void free_host(void* p) noexcept override;
    /// Throws UsageError: OpenCL 1.2 buffers have no device addresses to take.
    std::unique_ptr<RawBuffer> wrap_device_memory(void* ptr, std::size_t bytes) override;
    void set_work_group_size(std::size_t wg) override;
    void synchronize() override;
    Event record() override;
    double elapsed_ms(const Event& start, const Event& stop) override;

    /// Native handles, for Boost.Compute references in benchmarks and tests.
    cl_context context() const noexcept { return context_.get(); }
    cl_command_queue queue() const noexcept { return queue_.get(); }
    cl_device_id device() const noexcept { return device_; }

    /// The program for the current work-group size, built on first use and cached (never inside a timing).
    cl_program program();

protected:
    void launch_raw(KernelId id, Grid grid, std::span<const KernelArg> args) override;
    void resolve_kernel(KernelId id) override;

private:
    /// Kernel @p id of the program for the current work-group size, created on first use and kept.
    cl_kernel kernel(KernelId id);

    cl_platform_id platform_;
    cl_device_id device_;
    DeviceInfo info_;
    Context context_;
    Queue queue_;
    std::map<std::size_t, Program> programs_;                           // by work-group size
    std::map<std::size_t, std::array<ClKernel, kernel_count>> kernels_; // by work-group size, then KernelId
    std::vector<std::string> new_stamps_; // first-compile stamps to write once the kernels have run (see program())
    std::mutex host_mutex_;
    std::map<void*, cl_mem> host_buffers_; // alloc_host's mapped buffers, by their host address
};

/// The embedded program text, or the files of $BANYAN_CL_DIR when that is set (development).
std::string program_source();

} // namespace banyan::opencl
