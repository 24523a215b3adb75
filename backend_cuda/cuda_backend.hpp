/**
 * @file cuda_backend.hpp
 * @brief The CUDA implementation of banyan::Backend (runtime API, one stream per device).
 */
#pragma once

#include "core/device/backend.hpp"
#include "core/device/backend_registry.hpp"

#include <cuda_runtime_api.h>

namespace banyan {

/// Adds the CUDA backend ("cuda") to @p registry: called by the build's register_backends
/// (cmake/BackendRegistry.cmake).
void register_cuda_backend(BackendRegistry& registry);

} // namespace banyan

namespace banyan::cuda {

/// The backend's name (--backend cuda, DeviceInfo::backend).
inline constexpr const char* backend_name = "cuda";

class CudaBackend final : public Backend {
public:
    explicit CudaBackend(int device, DeviceInfo info);
    ~CudaBackend() override;

    const DeviceInfo& info() const override { return info_; }
    std::unique_ptr<RawBuffer> alloc_raw(std::size_t bytes, std::string_view what) override;
    std::unique_ptr<RawBuffer> wrap_device_memory(void* ptr, std::size_t bytes) override;
    void* alloc_host(std::size_t bytes) override;
    void free_host(void* p) noexcept override;
    void set_work_group_size(std::size_t wg) override;
    void synchronize() override;
    /// NCCL where banyan was built with it (nccl_exchange.hpp), else none.
    PeerTransport* peer_transport() override;
    Event record() override;
    double elapsed_ms(const Event& start, const Event& stop) override;

    // CUB where it is faster than our kernels (vendor_scan.cu, vendor_sort.cu); each falls back to Backend's portable
    // version when vendor_primitives() is off.
    void exclusive_scan(const Buffer<bn_u32>& in, Buffer<bn_u32>& out, std::size_t n) override;
    void inclusive_scan(const Buffer<bn_u32>& in, Buffer<bn_u32>& out, std::size_t n) override;
    void compact(const Buffer<bn_u32>& in, const Buffer<bn_u32>& flags, std::size_t n, Buffer<bn_u32>& out,
                 Buffer<bn_u32>& count) override;
    void sort_pairs(const Buffer<bn_u64>& keys_in, const Buffer<bn_u32>& values_in, Buffer<bn_u64>& keys_out,
                    Buffer<bn_u32>& values_out, std::size_t n, int begin_bit, int end_bit) override;
    bool sort_pairs_double(Buffer<bn_u64>& keys, Buffer<bn_u32>& values, Buffer<bn_u64>& keys_alt,
                           Buffer<bn_u32>& values_alt, std::size_t n, int begin_bit, int end_bit) override;

    cudaStream_t stream() const noexcept { return stream_; }
    int device() const noexcept { return device_; }

protected:
    void launch_raw(KernelId id, Grid grid, std::span<const KernelArg> args) override;
    void resolve_kernel(KernelId id) override;

private:
    int device_;
    DeviceInfo info_;
    cudaStream_t stream_ = nullptr;
    std::unique_ptr<PeerTransport> peers_; // made on first use
};

/// The device pointer behind a buffer of this backend.
void* device_ptr(const RawBuffer& b) noexcept;
template <class T> T* device_ptr(const Buffer<T>& b) noexcept
{
    return static_cast<T*>(device_ptr(b.raw()));
}

} // namespace banyan::cuda
