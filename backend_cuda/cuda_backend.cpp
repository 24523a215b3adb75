/**
 * @file cuda_backend.cpp
 * @brief CUDA devices, buffers, launch through the kernel registry (indexed by KernelId), and event timing.
 */
#include "backend_cuda/cuda_backend.hpp"

#include "backend_cuda/cuda_check.hpp"
#include "backend_cuda/kernel_registry.hpp"
#include "backend_cuda/nccl_exchange.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <new>
#include <string>

namespace banyan::cuda {

void throw_error(const char* call, cudaError_t code, const char* file, int line, std::string detail)
{
    throw DeviceError("CUDA", call, static_cast<long>(code), cudaGetErrorName(code), file, line,
                      detail.empty() ? cudaGetErrorString(code) : detail + ": " + cudaGetErrorString(code));
}

namespace {

std::array<const void*, kernel_count>& registry()
{
    static std::array<const void*, kernel_count> table{}; // filled by static initializers in kernels_cu/
    return table;
}

class CudaBuffer final : public RawBuffer {
public:
    CudaBuffer(void* ptr, std::size_t bytes, cudaStream_t s, bool owns = true)
        : ptr_(ptr), bytes_(bytes), stream_(s), owns_(owns)
    {
    }
    ~CudaBuffer() override
    {
        if (ptr_ && owns_) cudaFree(ptr_); // never throws; an error here would be sticky and reported by the next call
    }
    std::unique_ptr<RawBuffer> view(std::size_t offset, std::size_t n) const override
    {
        if (offset % 256 != 0 || offset > bytes_ || n > bytes_ - offset)
            throw std::invalid_argument("CudaBuffer::view: offset not aligned or range outside the buffer");
        return std::make_unique<CudaBuffer>(static_cast<char*>(ptr_) + offset, n, stream_, false);
    }
    std::size_t bytes() const override { return bytes_; }
    void* ptr() const { return ptr_; }

    void upload(const void* src, std::size_t n, std::size_t offset) override
    {
        if (!n) return;
        BANYAN_CUDA_CHECK(cudaMemcpyAsync(static_cast<char*>(ptr_) + offset, src, n, cudaMemcpyHostToDevice, stream_));
        BANYAN_CUDA_CHECK(cudaStreamSynchronize(stream_));
    }
    void download(void* dst, std::size_t n, std::size_t offset) const override
    {
        if (!n) return;
        BANYAN_CUDA_CHECK(cudaMemcpyAsync(dst, static_cast<char*>(ptr_) + offset, n, cudaMemcpyDeviceToHost, stream_));
        BANYAN_CUDA_CHECK(cudaStreamSynchronize(stream_));
    }
    void fill(const void* pattern, std::size_t pattern_bytes, std::size_t offset, std::size_t n) override;
    void copy_from(const RawBuffer& src, std::size_t n, std::size_t src_offset, std::size_t dst_offset) override
    {
        if (!n) return;
        const auto& s = static_cast<const CudaBuffer&>(src);
        BANYAN_CUDA_CHECK(cudaMemcpyAsync(static_cast<char*>(ptr_) + dst_offset,
                                          static_cast<const char*>(s.ptr()) + src_offset, n, cudaMemcpyDeviceToDevice,
                                          stream_));
    }
    void copy_rows_from(const RawBuffer& src, std::size_t rows, std::size_t row_bytes, std::size_t src_offset,
                        std::size_t src_pitch, std::size_t dst_offset, std::size_t dst_pitch) override
    {
        if (!rows || !row_bytes) return;
        const auto& s = static_cast<const CudaBuffer&>(src);
        BANYAN_CUDA_CHECK(cudaMemcpy2DAsync(static_cast<char*>(ptr_) + dst_offset, dst_pitch,
                                            static_cast<const char*>(s.ptr()) + src_offset, src_pitch, row_bytes, rows,
                                            cudaMemcpyDeviceToDevice, stream_));
    }

private:
    void* ptr_;
    std::size_t bytes_;
    cudaStream_t stream_;
    bool owns_;
};

struct CudaEvent final : EventImpl {
    cudaEvent_t event = nullptr;
    ~CudaEvent() override
    {
        if (event) cudaEventDestroy(event);
    }
};

} // namespace

void register_kernel(KernelId id, const void* host_stub)
{
    registry()[index_of(id)] = host_stub;
}

const void* kernel_stub(KernelId id) noexcept
{
    return registry()[index_of(id)];
}

void* device_ptr(const RawBuffer& b) noexcept
{
    return static_cast<const CudaBuffer&>(b).ptr();
}

void CudaBuffer::fill(const void* pattern, std::size_t pattern_bytes, std::size_t offset, std::size_t n)
{
    if (!n) return;
    // Byte patterns go through cudaMemsetAsync; wider ones through a small registered kernel.
    const unsigned char* p = static_cast<const unsigned char*>(pattern);
    bool uniform = true;
    for (std::size_t i = 1; i < pattern_bytes; ++i)
        uniform = uniform && p[i] == p[0];
    if (uniform) {
        BANYAN_CUDA_CHECK(cudaMemsetAsync(static_cast<char*>(ptr_) + offset, p[0], n, stream_));
        return;
    }
    // Build the pattern once on the host for a small block, then double it on the device.
    const std::size_t first = std::min<std::size_t>(n, 1 << 16) / pattern_bytes * pattern_bytes;
    std::string block(first, '\0');
    for (std::size_t i = 0; i < first; i += pattern_bytes)
        std::memcpy(block.data() + i, pattern, pattern_bytes);
    char* base = static_cast<char*>(ptr_) + offset;
    BANYAN_CUDA_CHECK(cudaMemcpyAsync(base, block.data(), first, cudaMemcpyHostToDevice, stream_));
    BANYAN_CUDA_CHECK(cudaStreamSynchronize(stream_)); // the host block dies at return
    for (std::size_t done = first; done < n;) {
        const std::size_t m = std::min(done, n - done);
        BANYAN_CUDA_CHECK(cudaMemcpyAsync(base + done, base, m, cudaMemcpyDeviceToDevice, stream_));
        done += m;
    }
}

CudaBackend::CudaBackend(int device, DeviceInfo info) : device_(device), info_(std::move(info))
{
    BANYAN_CUDA_CHECK(cudaSetDevice(device_));
    BANYAN_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
}

CudaBackend::~CudaBackend()
{
    if (stream_) cudaStreamDestroy(stream_);
}

std::unique_ptr<RawBuffer> CudaBackend::wrap_device_memory(void* ptr, std::size_t bytes)
{
    cudaPointerAttributes a{};
    BANYAN_CUDA_CHECK(cudaPointerGetAttributes(&a, ptr));
    if (a.type != cudaMemoryTypeDevice && a.type != cudaMemoryTypeManaged)
        throw UsageError("cuda: the memory handed over is not device memory");
    if (a.device != device_)
        throw UsageError(fmt::format("cuda: the memory handed over is on CUDA device {}, this backend runs on "
                                     "device {}",
                                     a.device, device_));
    return std::make_unique<CudaBuffer>(ptr, bytes, stream_, false);
}

void* CudaBackend::alloc_host(std::size_t bytes)
{
    // Portable: page-locked for every device of the process, whichever is current.
    void* p = nullptr;
    if (cudaHostAlloc(&p, bytes ? bytes : 1, cudaHostAllocPortable) != cudaSuccess) {
        cudaGetLastError(); // not sticky
        throw std::bad_alloc();
    }
    return p;
}

void CudaBackend::free_host(void* p) noexcept
{
    if (p) cudaFreeHost(p);
}

std::unique_ptr<RawBuffer> CudaBackend::alloc_raw(std::size_t bytes, std::string_view what)
{
    BANYAN_CUDA_CHECK(cudaSetDevice(device_));
    void* p = nullptr;
    if (bytes) {
        const cudaError_t rc = cudaMalloc(&p, bytes);
        if (rc != cudaSuccess) {
            cudaGetLastError(); // an allocation failure is not sticky: clear it
            std::size_t free_b = 0, total_b = 0;
            cudaMemGetInfo(&free_b, &total_b);
            throw_error("cudaMalloc", rc, __FILE__, __LINE__,
                        fmt::format("allocating '{}' of {} bytes ({} bytes free of {})", what, bytes, free_b, total_b));
        }
    }
    return std::make_unique<CudaBuffer>(p, bytes, stream_);
}

void CudaBackend::resolve_kernel(KernelId id)
{
    if (!kernel_stub(id))
        throw DeviceError("CUDA", "launch", static_cast<long>(cudaErrorInvalidDeviceFunction),
                          "cudaErrorInvalidDeviceFunction", __FILE__, __LINE__,
                          fmt::format("kernel '{}' is declared but kernels_cu/ registers none (BANYAN_CUDA_KERNEL)",
                                      kernel_name(id)));
}

void CudaBackend::launch_raw(KernelId id, Grid grid, std::span<const KernelArg> args)
{
    const void* fn = kernel_stub(id);
    if (!fn) resolve_kernel(id); // throws, naming the kernel
    void* ptrs[32];
    void* values[32];
    if (args.size() > 32) throw UsageError("more than 32 kernel arguments");
    for (std::size_t i = 0; i < args.size(); ++i) {
        if (args[i].kind == KernelArg::Kind::buffer) {
            ptrs[i] = device_ptr(*args[i].buffer);
            values[i] = &ptrs[i];
        } else {
            values[i] = const_cast<unsigned char*>(args[i].value.data());
        }
    }
    const dim3 blocks(static_cast<unsigned>(grid.groups));
    const dim3 threads(static_cast<unsigned>(grid.local));
    const cudaError_t rc = cudaLaunchKernel(fn, blocks, threads, values, 0, stream_);
    if (rc != cudaSuccess)
        throw_error("cudaLaunchKernel", rc, __FILE__, __LINE__,
                    fmt::format("kernel '{}', {} blocks of {}", kernel_name(id), grid.groups, grid.local));
}

void CudaBackend::set_work_group_size(std::size_t wg)
{
    if (wg != BANYAN_WG_DEFAULT)
        throw UsageError(fmt::format("the CUDA backend's kernels are built for work-group size {} only, not {}",
                                     BANYAN_WG_DEFAULT, wg));
}

void CudaBackend::synchronize()
{
    BANYAN_CUDA_CHECK(cudaStreamSynchronize(stream_));
}

PeerTransport* CudaBackend::peer_transport()
{
#if defined(BANYAN_HAVE_NCCL)
    if (!peers_) peers_ = make_nccl_transport(device_, stream_);
#endif
    return peers_.get();
}

Event CudaBackend::record()
{
    auto ev = std::make_shared<CudaEvent>();
    BANYAN_CUDA_CHECK(cudaEventCreate(&ev->event));
    BANYAN_CUDA_CHECK(cudaEventRecord(ev->event, stream_));
    return ev;
}

double CudaBackend::elapsed_ms(const Event& start, const Event& stop)
{
    auto& a = static_cast<CudaEvent&>(*start);
    auto& b = static_cast<CudaEvent&>(*stop);
    BANYAN_CUDA_CHECK(cudaEventSynchronize(b.event));
    float ms = 0;
    BANYAN_CUDA_CHECK(cudaEventElapsedTime(&ms, a.event, b.event));
    return ms;
}

} // namespace banyan::cuda

namespace banyan {

namespace {

BackendDevices cuda_discover()
{
    BackendDevices out{cuda::backend_name, {}, {}};
    int count = 0;
    const cudaError_t rc = cudaGetDeviceCount(&count);
    int runtime = 0, driver = 0;
    cudaRuntimeGetVersion(&runtime);
    cudaDriverGetVersion(&driver); // 0 when no NVIDIA driver is installed
    if (rc != cudaSuccess) {
        cudaGetLastError();
        // The runtime calls a missing driver "insufficient"; say what the user has to look for instead.
        if (driver == 0 || rc == cudaErrorNoDevice)
            out.unavailable_reason = "no NVIDIA GPU or driver found";
        else if (rc == cudaErrorInsufficientDriver)
            out.unavailable_reason =
                fmt::format("the NVIDIA driver supports CUDA {}.{}, older than the CUDA {}.{} banyan was built with: "
                            "update the driver",
                            driver / 1000, driver % 1000 / 10, runtime / 1000, runtime % 1000 / 10);
        else
            out.unavailable_reason = fmt::format("{}: {}", cudaGetErrorName(rc), cudaGetErrorString(rc));
        return out;
    }
    for (int i = 0; i < count; ++i) {
        cudaDeviceProp p{};
        BANYAN_CUDA_CHECK(cudaGetDeviceProperties(&p, i));
        DeviceInfo d;
        d.backend = cuda::backend_name;
        d.index = i;
        d.name = p.name;
        d.vendor = "NVIDIA";
        d.version = fmt::format("sm_{}{}, runtime {}.{}, driver {}.{}", p.major, p.minor, runtime / 1000,
                                runtime % 1000 / 10, driver / 1000, driver % 1000 / 10);
        d.gpu = true;
        d.device_pointers = true;
        d.memory_bytes = p.totalGlobalMem;
        d.max_alloc_bytes = p.totalGlobalMem;
        d.view_align = 256;
        d.compute_units = static_cast<unsigned>(p.multiProcessorCount);
        d.max_work_group = static_cast<std::size_t>(p.maxThreadsPerBlock);
        out.devices.push_back(std::move(d));
    }
    if (count == 0) out.unavailable_reason = "no CUDA device";
    return out;
}

std::unique_ptr<Backend> cuda_open(int index)
{
    auto all = cuda_discover();
    if (index < 0 || index >= static_cast<int>(all.devices.size()))
        throw UsageError(fmt::format("no CUDA device {}", index));
    return std::make_unique<cuda::CudaBackend>(index, std::move(all.devices[static_cast<std::size_t>(index)]));
}

} // namespace

void register_cuda_backend(BackendRegistry& registry)
{
    registry.add({.name = cuda::backend_name,
                  .title = "CUDA",
                  .discover = cuda_discover,
                  .open = cuda_open,
                  .absent_reason = {}});
}

} // namespace banyan
