/**
 * @file vendor_scan.cu
 * @brief CudaBackend's scans and compaction through CUB (single-pass decoupled look-back, faster than the portable
 *        reduce-then-scan), with the portable versions of core/device/primitives.cpp when vendor_primitives() is off.
 *
 * Everything runs on the backend's stream; CUB's temporary storage comes from Backend::scratch(), so it is
 * allocated once and reused. Nothing waits for the device: the compaction's count is written by CUB on the device.
 */
#include "backend_cuda/cuda_backend.hpp"
#include "backend_cuda/cuda_check.hpp"

#include <cub/device/device_scan.cuh>
#include <cub/device/device_select.cuh>

#include <algorithm>
#include <cstdint>

namespace banyan::cuda {

namespace {

/// CUB's temporary storage: a scratch buffer of at least @p bytes (never a null pointer, which CUB would take for
/// a size query).
void* cub_temp(Backend& be, std::size_t bytes)
{
    return device_ptr(be.scratch_buffer<unsigned char>("cub.temp", std::max<std::size_t>(bytes, 16)));
}

} // namespace

void CudaBackend::exclusive_scan(const Buffer<bn_u32>& in, Buffer<bn_u32>& out, std::size_t n)
{
    if (!vendor_primitives() || n > in.size() || n > out.size() || n > 0x7fffffffu) {
        Backend::exclusive_scan(in, out, n); // also reports bad sizes
        return;
    }
    if (n == 0) return;
    const bn_u32* d_in = device_ptr(in);
    bn_u32* d_out = device_ptr(out);
    const int items = static_cast<int>(n);
    std::size_t bytes = 0;
    BANYAN_CUDA_CHECK(cub::DeviceScan::ExclusiveSum(nullptr, bytes, d_in, d_out, items, stream()));
    void* temp = cub_temp(*this, bytes);
    BANYAN_CUDA_CHECK(cub::DeviceScan::ExclusiveSum(temp, bytes, d_in, d_out, items, stream())); // in == out is fine
}

void CudaBackend::inclusive_scan(const Buffer<bn_u32>& in, Buffer<bn_u32>& out, std::size_t n)
{
    if (!vendor_primitives() || n > in.size() || n > out.size() || n > 0x7fffffffu) {
        Backend::inclusive_scan(in, out, n);
        return;
    }
    if (n == 0) return;
    const bn_u32* d_in = device_ptr(in);
    bn_u32* d_out = device_ptr(out);
    const int items = static_cast<int>(n);
    std::size_t bytes = 0;
    BANYAN_CUDA_CHECK(cub::DeviceScan::InclusiveSum(nullptr, bytes, d_in, d_out, items, stream()));
    void* temp = cub_temp(*this, bytes);
    BANYAN_CUDA_CHECK(cub::DeviceScan::InclusiveSum(temp, bytes, d_in, d_out, items, stream()));
}

void CudaBackend::compact(const Buffer<bn_u32>& in, const Buffer<bn_u32>& flags, std::size_t n, Buffer<bn_u32>& out,
                          Buffer<bn_u32>& count)
{
    if (!vendor_primitives() || n == 0 || n > in.size() || n > flags.size() || n > out.size() || count.size() < 1 ||
        n > 0x7fffffffu) {
        Backend::compact(in, flags, n, out, count); // n = 0 writes count[0] = 0; bad sizes are reported
        return;
    }
    const bn_u32* d_in = device_ptr(in);
    const bn_u32* d_flags = device_ptr(flags); // CUB reads each flag as static_cast<bool>: any nonzero selects
    bn_u32* d_out = device_ptr(out);
    bn_u32* d_count = device_ptr(count);
    const auto items = static_cast<std::int64_t>(n);
    std::size_t bytes = 0;
    BANYAN_CUDA_CHECK(cub::DeviceSelect::Flagged(nullptr, bytes, d_in, d_flags, d_out, d_count, items, stream()));
    void* temp = cub_temp(*this, bytes);
    BANYAN_CUDA_CHECK(cub::DeviceSelect::Flagged(temp, bytes, d_in, d_flags, d_out, d_count, items, stream()));
}

} // namespace banyan::cuda
