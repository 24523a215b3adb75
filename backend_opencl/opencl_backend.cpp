/**
 * @file opencl_backend.cpp
 * @brief OpenCL devices, buffers, program cache, kernel table and launch, and event timing.
 */
#include "backend_opencl/opencl_backend.hpp"

#include "core/error.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string_view>
#include <vector>

namespace banyan::opencl_embedded {
extern const char* const program_text;
extern const char* const file_names[];
} // namespace banyan::opencl_embedded

namespace banyan::opencl {

const char* error_name(cl_int code) noexcept
{
    switch (code) {
#define BANYAN_CL_ERR(x)                                                                                               \
    case x:                                                                                                            \
        return #x;
        BANYAN_CL_ERR(CL_DEVICE_NOT_FOUND)
        BANYAN_CL_ERR(CL_DEVICE_NOT_AVAILABLE)
        BANYAN_CL_ERR(CL_COMPILER_NOT_AVAILABLE)
        BANYAN_CL_ERR(CL_MEM_OBJECT_ALLOCATION_FAILURE)
        BANYAN_CL_ERR(CL_OUT_OF_RESOURCES)
        BANYAN_CL_ERR(CL_OUT_OF_HOST_MEMORY)
        BANYAN_CL_ERR(CL_PROFILING_INFO_NOT_AVAILABLE)
        BANYAN_CL_ERR(CL_MEM_COPY_OVERLAP)
        BANYAN_CL_ERR(CL_BUILD_PROGRAM_FAILURE)
        BANYAN_CL_ERR(CL_MAP_FAILURE)
        BANYAN_CL_ERR(CL_MISALIGNED_SUB_BUFFER_OFFSET)
        BANYAN_CL_ERR(CL_INVALID_VALUE)
        BANYAN_CL_ERR(CL_INVALID_DEVICE_TYPE)
        BANYAN_CL_ERR(CL_INVALID_PLATFORM)
        BANYAN_CL_ERR(CL_INVALID_DEVICE)
        BANYAN_CL_ERR(CL_INVALID_CONTEXT)
        BANYAN_CL_ERR(CL_INVALID_QUEUE_PROPERTIES)
        BANYAN_CL_ERR(CL_INVALID_COMMAND_QUEUE)
        BANYAN_CL_ERR(CL_INVALID_HOST_PTR)
        BANYAN_CL_ERR(CL_INVALID_MEM_OBJECT)
        BANYAN_CL_ERR(CL_INVALID_BUFFER_SIZE)
        BANYAN_CL_ERR(CL_INVALID_BINARY)
        BANYAN_CL_ERR(CL_INVALID_BUILD_OPTIONS)
        BANYAN_CL_ERR(CL_INVALID_PROGRAM)
        BANYAN_CL_ERR(CL_INVALID_PROGRAM_EXECUTABLE)
        BANYAN_CL_ERR(CL_INVALID_KERNEL_NAME)
        BANYAN_CL_ERR(CL_INVALID_KERNEL_DEFINITION)
        BANYAN_CL_ERR(CL_INVALID_KERNEL)
        BANYAN_CL_ERR(CL_INVALID_ARG_INDEX)
        BANYAN_CL_ERR(CL_INVALID_ARG_VALUE)
        BANYAN_CL_ERR(CL_INVALID_ARG_SIZE)
        BANYAN_CL_ERR(CL_INVALID_KERNEL_ARGS)
        BANYAN_CL_ERR(CL_INVALID_WORK_DIMENSION)
        BANYAN_CL_ERR(CL_INVALID_WORK_GROUP_SIZE)
        BANYAN_CL_ERR(CL_INVALID_WORK_ITEM_SIZE)
        BANYAN_CL_ERR(CL_INVALID_GLOBAL_OFFSET)
        BANYAN_CL_ERR(CL_INVALID_EVENT_WAIT_LIST)
        BANYAN_CL_ERR(CL_INVALID_EVENT)
        BANYAN_CL_ERR(CL_INVALID_OPERATION)
        BANYAN_CL_ERR(CL_INVALID_GLOBAL_WORK_SIZE)
#undef BANYAN_CL_ERR
    case -1001:
        return "CL_PLATFORM_NOT_FOUND_KHR";
    default:
        return "unknown OpenCL error";
    }
}

void throw_error(const char* call, cl_int code, const char* file, int line, std::string detail)
{
    throw DeviceError("OpenCL", call, code, error_name(code), file, line, std::move(detail));
}

namespace {

std::string device_string(cl_device_id d, cl_device_info what)
{
    std::size_t n = 0;
    BANYAN_CL_CHECK(clGetDeviceInfo(d, what, 0, nullptr, &n));
    std::string s(n, '\0');
    BANYAN_CL_CHECK(clGetDeviceInfo(d, what, n, s.data(), nullptr));
    while (!s.empty() && (s.back() == '\0' || s.back() == ' '))
        s.pop_back();
    return s;
}

std::string platform_string(cl_platform_id p, cl_platform_info what)
{
    std::size_t n = 0;
    BANYAN_CL_CHECK(clGetPlatformInfo(p, what, 0, nullptr, &n));
    std::string s(n, '\0');
    BANYAN_CL_CHECK(clGetPlatformInfo(p, what, n, s.data(), nullptr));
    while (!s.empty() && s.back() == '\0')
        s.pop_back();
    return s;
}

template <class T> T device_value(cl_device_id d, cl_device_info what)
{
    T v{};
    BANYAN_CL_CHECK(clGetDeviceInfo(d, what, sizeof(T), &v, nullptr));
    return v;
}

struct Found {
    cl_platform_id platform;
    cl_device_id device;
    DeviceInfo info;
};

/// Every OpenCL device of every platform, GPUs first (a stable order, so --device N means the same each run).
std::vector<Found> enumerate(std::string* why_none)
{
    cl_uint np = 0;
    const cl_int rc = clGetPlatformIDs(0, nullptr, &np);
    if (rc != CL_SUCCESS || np == 0) {
        if (why_none)
            *why_none = rc == CL_SUCCESS || rc == -1001
                            ? "no OpenCL platform found (install an ICD such as pocl-opencl-icd)"
                            : fmt::format("clGetPlatformIDs failed with {}", error_name(rc));
        return {};
    }
    std::vector<cl_platform_id> platforms(np);
    BANYAN_CL_CHECK(clGetPlatformIDs(np, platforms.data(), nullptr));
    std::vector<Found> all;
    for (cl_platform_id p : platforms) {
        cl_uint nd = 0;
        if (clGetDeviceIDs(p, CL_DEVICE_TYPE_ALL, 0, nullptr, &nd) != CL_SUCCESS || nd == 0) continue;
        std::vector<cl_device_id> devs(nd);
        BANYAN_CL_CHECK(clGetDeviceIDs(p, CL_DEVICE_TYPE_ALL, nd, devs.data(), nullptr));
        for (cl_device_id d : devs) {
            DeviceInfo info;
            info.backend = backend_name;
            info.name = device_string(d, CL_DEVICE_NAME);
            info.vendor = platform_string(p, CL_PLATFORM_NAME);
            info.version = device_string(d, CL_DEVICE_VERSION);
            info.gpu = (device_value<cl_device_type>(d, CL_DEVICE_TYPE) & CL_DEVICE_TYPE_GPU) != 0;
            info.memory_bytes = device_value<cl_ulong>(d, CL_DEVICE_GLOBAL_MEM_SIZE);
            info.max_alloc_bytes = device_value<cl_ulong>(d, CL_DEVICE_MAX_MEM_ALLOC_SIZE);
            info.view_align = std::max<std::size_t>(device_value<cl_uint>(d, CL_DEVICE_MEM_BASE_ADDR_ALIGN) / 8, 16);
            info.compute_units = device_value<cl_uint>(d, CL_DEVICE_MAX_COMPUTE_UNITS);
            info.max_work_group = device_value<std::size_t>(d, CL_DEVICE_MAX_WORK_GROUP_SIZE);
            all.push_back({p, d, std::move(info)});
        }
    }
    std::stable_sort(all.begin(), all.end(), [](const Found& a, const Found& b) { return a.info.gpu > b.info.gpu; });
    for (std::size_t i = 0; i < all.size(); ++i)
        all[i].info.index = static_cast<int>(i);
    if (all.empty() && why_none) *why_none = "OpenCL platforms found, but no devices on them";
    return all;
}

class ClBuffer final : public RawBuffer {
public:
    /// @p root: the allocation a sub-buffer views (itself for an allocation); @p origin: where in it.
    ClBuffer(cl_mem mem, std::size_t bytes, cl_command_queue q, cl_mem root = nullptr, std::size_t origin = 0)
        : mem_(mem), bytes_(bytes), queue_(q), root_(root ? root : mem), origin_(origin)
    {
    }
    std::size_t bytes() const override { return bytes_; }
    cl_mem mem() const { return mem_.get(); }

    std::unique_ptr<RawBuffer> view(std::size_t offset, std::size_t n) const override
    {
        if (offset > bytes_ || n > bytes_ - offset)
            throw std::invalid_argument("ClBuffer::view: range outside the buffer");
        // A sub-buffer of a sub-buffer is not allowed: views of views are made from the root allocation.
        const cl_buffer_region region{origin_ + offset, std::max<std::size_t>(n, 1)};
        cl_int rc = CL_SUCCESS;
        cl_mem sub = clCreateSubBuffer(root_, CL_MEM_READ_WRITE, CL_BUFFER_CREATE_TYPE_REGION, &region, &rc);
        if (rc != CL_SUCCESS)
            throw_error("clCreateSubBuffer", rc, __FILE__, __LINE__,
                        fmt::format("a view of {} bytes at byte {} (misaligned offsets give "
                                    "CL_MISALIGNED_SUB_BUFFER_OFFSET)",
                                    n, region.origin));
        // The view holds a reference to the allocation, so that releasing them in either order is safe (not every
        // implementation keeps a sub-buffer's parent alive by itself).
        clRetainMemObject(root_);
        auto view = std::make_unique<ClBuffer>(sub, n, queue_, root_, region.origin);
        view->retained_root_ = MemObject(root_);
        return view;
    }

    void upload(const void* src, std::size_t n, std::size_t offset) override
    {
        if (n) BANYAN_CL_CHECK(clEnqueueWriteBuffer(queue_, mem(), CL_TRUE, offset, n, src, 0, nullptr, nullptr));
    }
    void download(void* dst, std::size_t n, std::size_t offset) const override
    {
        if (n) BANYAN_CL_CHECK(clEnqueueReadBuffer(queue_, mem(), CL_TRUE, offset, n, dst, 0, nullptr, nullptr));
    }
    void fill(const void* pattern, std::size_t pattern_bytes, std::size_t offset, std::size_t n) override
    {
        if (n)
            BANYAN_CL_CHECK(clEnqueueFillBuffer(queue_, mem(), pattern, pattern_bytes, offset, n, 0, nullptr, nullptr));
    }
    void copy_from(const RawBuffer& src, std::size_t n, std::size_t src_offset, std::size_t dst_offset) override
    {
        if (n)
            BANYAN_CL_CHECK(clEnqueueCopyBuffer(queue_, static_cast<const ClBuffer&>(src).mem(), mem(), src_offset,
                                                dst_offset, n, 0, nullptr, nullptr));
    }
    void copy_rows_from(const RawBuffer& src, std::size_t rows, std::size_t row_bytes, std::size_t src_offset,
                        std::size_t src_pitch, std::size_t dst_offset, std::size_t dst_pitch) override
    {
        if (!rows || !row_bytes) return;
        // Origins in bytes (x), rows (y): the offsets go in x, so that any byte offset is allowed.
        const std::size_t src_origin[3] = {src_offset, 0, 0}, dst_origin[3] = {dst_offset, 0, 0};
        const std::size_t region[3] = {row_bytes, rows, 1};
        BANYAN_CL_CHECK(clEnqueueCopyBufferRect(queue_, static_cast<const ClBuffer&>(src).mem(), mem(), src_origin,
                                                dst_origin, region, src_pitch, 0, dst_pitch, 0, 0, nullptr, nullptr));
    }

private:
    MemObject retained_root_; // views only: declared first, so released after the sub-buffer (members go in reverse)
    MemObject mem_;
    std::size_t bytes_;
    cl_command_queue queue_;
    cl_mem root_;
    std::size_t origin_;
};

struct ClEvent final : EventImpl {
    EventHandle event;
};

} // namespace

/// The program has no include path: pastes each #include "x.h" of @p header (from its folder) in place, as
/// cmake/EmbedCl.cmake does for the embedded copy.
static std::string paste_includes(const std::string& body, const std::filesystem::path& header)
{
    static const std::regex include(R"re(#include "([A-Za-z0-9_]+\.h)")re");
    std::string out;
    std::size_t line = 1, done = 0;
    for (std::sregex_iterator it(body.begin(), body.end(), include), end; it != end; ++it) {
        const auto at = static_cast<std::size_t>(it->position(0));
        line += static_cast<std::size_t>(
            std::count(body.begin() + static_cast<long>(done), body.begin() + static_cast<long>(at), '\n'));
        std::ifstream in(header.parent_path() / (*it)[1].str());
        if (!in)
            throw UsageError(
                fmt::format("BANYAN_CL_DIR: cannot read {} (included by {})", (*it)[1].str(), header.string()));
        std::stringstream ss;
        ss << in.rdbuf();
        out += body.substr(done, at - done);
        out += fmt::format("#line 1 \"{}\"\n{}\n#line {} \"{}\"", (*it)[1].str(), ss.str(), line + 1,
                           header.filename().string());
        done = at + static_cast<std::size_t>(it->length(0));
    }
    return out + body.substr(done);
}

/// The stamp file that says banyan's kernels of this text and options were compiled for this device before, so the
/// driver's cache holds them: "<cache>/banyan/opencl-<hash>"; empty when there is no cache folder.
static std::string compile_stamp(const DeviceInfo& info, const std::string& source, const std::string& options)
{
    const char* xdg = std::getenv("XDG_CACHE_HOME");
    const char* home = std::getenv("HOME");
    std::filesystem::path dir;
    if (xdg && *xdg)
        dir = std::filesystem::path(xdg) / "banyan";
    else if (home && *home)
        dir = std::filesystem::path(home) / ".cache" / "banyan";
    else
        return {};
    const std::size_t h =
        std::hash<std::string>{}(info.name + '\n' + info.vendor + '\n' + info.version + '\n' + options + '\n' + source);
    return (dir / fmt::format("opencl-{:016x}", h)).string();
}

std::string program_source()
{
    const char* dir = std::getenv("BANYAN_CL_DIR");
    if (!dir || !*dir) return opencl_embedded::program_text;
    // Development: read the files of the embedded program from the source tree, in its order (cmake/EmbedCl.cmake):
    // the shared header it starts with (file_names[0], in core/, its includes pasted in place), then the kernels_cl/
    // files, the building blocks first.
    namespace fs = std::filesystem;
    const fs::path kdir(dir);
    std::vector<fs::path> files{kdir / ".." / "core" / opencl_embedded::file_names[0]};
    for (const char* const* name = opencl_embedded::file_names + 1; *name; ++name)
        files.push_back(kdir / *name);
    std::string text;
    for (const auto& f : files) {
        std::ifstream in(f);
        if (!in) throw UsageError(fmt::format("BANYAN_CL_DIR: cannot read {}", f.string()));
        std::stringstream ss;
        ss << in.rdbuf();
        std::string body = ss.str();
        if (f == files.front()) body = paste_includes(body, f);
        text += fmt::format("\n#line 1 \"{}\"\n{}\n", f.filename().string(), body);
    }
    return text;
}

OpenCLBackend::OpenCLBackend(cl_platform_id platform, cl_device_id device, DeviceInfo info)
    : platform_(platform), device_(device), info_(std::move(info))
{
    cl_int rc = CL_SUCCESS;
    const cl_context_properties props[] = {CL_CONTEXT_PLATFORM, reinterpret_cast<cl_context_properties>(platform_), 0};
    context_ = Context(clCreateContext(props, 1, &device_, nullptr, nullptr, &rc));
    BANYAN_CL_CHECK(rc);
    queue_ = Queue(clCreateCommandQueue(context_.get(), device_, CL_QUEUE_PROFILING_ENABLE, &rc));
    BANYAN_CL_CHECK(rc);
    work_group_size_ = std::min<std::size_t>(BANYAN_WG_DEFAULT, info_.max_work_group);
}

OpenCLBackend::~OpenCLBackend()
{
    // Kernels have been compiled (and used) by now: later processes need no notice. A failed stamp costs a notice.
    for (const auto& stamp : new_stamps_) {
        std::error_code ec;
        std::filesystem::create_directories(std::filesystem::path(stamp).parent_path(), ec);
        std::ofstream(stamp) << "banyan OpenCL kernels compiled for " << info_.name << "\n";
    }
    for (const auto& [p, mem] : host_buffers_) { // staging memory nobody gave back
        clEnqueueUnmapMemObject(queue_.get(), mem, p, 0, nullptr, nullptr);
        clFinish(queue_.get());
        clReleaseMemObject(mem);
    }
}

void* OpenCLBackend::alloc_host(std::size_t bytes)
{
    const std::size_t real = bytes ? bytes : 1;
    cl_int rc = CL_SUCCESS;
    cl_mem mem = real <= info_.max_alloc_bytes
                     ? clCreateBuffer(context_.get(), CL_MEM_READ_WRITE | CL_MEM_ALLOC_HOST_PTR, real, nullptr, &rc)
                     : nullptr;
    void* p = nullptr;
    if (mem && rc == CL_SUCCESS)
        p = clEnqueueMapBuffer(queue_.get(), mem, CL_TRUE, CL_MAP_READ | CL_MAP_WRITE, 0, real, 0, nullptr, nullptr,
                               &rc);
    if (!p || rc != CL_SUCCESS) {
        if (mem) clReleaseMemObject(mem);
        return Backend::alloc_host(bytes);
    }
    const std::lock_guard lock(host_mutex_);
    host_buffers_.emplace(p, mem);
    return p;
}

void OpenCLBackend::free_host(void* p) noexcept
{
    cl_mem mem = nullptr;
    {
        const std::lock_guard lock(host_mutex_);
        const auto it = host_buffers_.find(p);
        if (it != host_buffers_.end()) mem = it->second, host_buffers_.erase(it);
    }
    if (!mem) return Backend::free_host(p); // plain memory (or none)
    clEnqueueUnmapMemObject(queue_.get(), mem, p, 0, nullptr, nullptr);
    clFinish(queue_.get());
    clReleaseMemObject(mem);
}

std::unique_ptr<RawBuffer> OpenCLBackend::wrap_device_memory(void*, std::size_t)
{
    throw UsageError(fmt::format("the {} backend cannot take memory that another library allocated on the device "
                                 "(DLPack); give host arrays, or use the CUDA backend",
                                 info_.backend));
}

std::unique_ptr<RawBuffer> OpenCLBackend::alloc_raw(std::size_t bytes, std::string_view what)
{
    // OpenCL refuses zero-sized buffers; an empty Buffer still owns a small allocation.
    const std::size_t real = std::max<std::size_t>(bytes, 16);
    if (real > info_.memory_bytes || (info_.max_alloc_bytes && real > info_.max_alloc_bytes))
        throw DeviceError("OpenCL", fmt::format("allocation of '{}'", what), CL_MEM_OBJECT_ALLOCATION_FAILURE,
                          "out of device memory", __FILE__, __LINE__,
                          fmt::format("'{}' needs {} bytes; the device allows {} bytes in one allocation and has "
                                      "{} bytes in all",
                                      what, bytes, info_.max_alloc_bytes, info_.memory_bytes));
    cl_int rc = CL_SUCCESS;
    cl_mem mem = clCreateBuffer(context_.get(), CL_MEM_READ_WRITE, real, nullptr, &rc);
    if (rc != CL_SUCCESS)
        throw_error("clCreateBuffer", rc, __FILE__, __LINE__, fmt::format("allocating '{}' of {} bytes", what, bytes));
    auto buf = std::make_unique<ClBuffer>(mem, bytes, queue_.get());
    // Touch the buffer so that out-of-memory shows here, naming the allocation, not at a later launch.
    const unsigned char zero = 0;
    rc = clEnqueueFillBuffer(queue_.get(), mem, &zero, 1, 0, 1, 0, nullptr, nullptr);
    if (rc == CL_SUCCESS) rc = clFinish(queue_.get());
    if (rc != CL_SUCCESS)
        throw_error("clEnqueueFillBuffer", rc, __FILE__, __LINE__,
                    fmt::format("allocating '{}' of {} bytes (out of device memory?)", what, bytes));
    return buf;
}

cl_program OpenCLBackend::program()
{
    auto it = programs_.find(work_group_size_);
    if (it != programs_.end()) return it->second.get();
    const std::string src = program_source();
    const char* text = src.c_str();
    cl_int rc = CL_SUCCESS;
    Program prog(clCreateProgramWithSource(context_.get(), 1, &text, nullptr, &rc));
    BANYAN_CL_CHECK(rc);
    // Denormals flush to zero, as the CUDA walk's rsqrt does (device_shared.h): without it NVIDIA's rsqrt rescales
    // its argument around the hardware instruction, and the walk ran 10 % slower than with it (H200, 2^20 disc).
    // What banyan computes in single precision stays far above 1e-38 in internal units.
    const std::string options = fmt::format("-cl-std=CL1.2 -cl-denorms-are-zero -DBANYAN_WG={}", work_group_size_);
    // The driver compiles the kernels on first use (PoCL: at their first launches, about 20 s on a CPU) and caches
    // them; say so the first time, since nothing else is printed meanwhile. The stamp is written once they ran.
    const std::string stamp = compile_stamp(info_, src, options);
    if (stamp.empty() || !std::filesystem::exists(stamp)) {
        notice(fmt::format("compiling the OpenCL kernels for {} (first use; cached for later runs)", info_.name));
        if (!stamp.empty()) new_stamps_.push_back(stamp);
    }
    rc = clBuildProgram(prog.get(), 1, &device_, options.c_str(), nullptr, nullptr);
    if (rc != CL_SUCCESS) {
        std::size_t n = 0;
        clGetProgramBuildInfo(prog.get(), device_, CL_PROGRAM_BUILD_LOG, 0, nullptr, &n);
        std::string log(n, '\0');
        clGetProgramBuildInfo(prog.get(), device_, CL_PROGRAM_BUILD_LOG, n, log.data(), nullptr);
        throw_error("clBuildProgram", rc, __FILE__, __LINE__, fmt::format("options: {}\nbuild log:\n{}", options, log));
    }
    return programs_.emplace(work_group_size_, std::move(prog)).first->second.get();
}

cl_kernel OpenCLBackend::kernel(KernelId id)
{
    ClKernel& k = kernels_[work_group_size_][index_of(id)];
    if (k.get()) return k.get();
    const std::string name(kernel_name(id));
    cl_int rc = CL_SUCCESS;
    ClKernel made(clCreateKernel(program(), name.c_str(), &rc));
    if (rc != CL_SUCCESS) throw_error("clCreateKernel", rc, __FILE__, __LINE__, fmt::format("kernel '{}'", name));
    k = std::move(made);
    return k.get();
}

void OpenCLBackend::resolve_kernel(KernelId id)
{
    kernel(id);
}

void OpenCLBackend::launch_raw(KernelId id, Grid grid, std::span<const KernelArg> args)
{
    cl_kernel k = kernel(id);
    for (std::size_t i = 0; i < args.size(); ++i) {
        const KernelArg& a = args[i];
        cl_int rc;
        if (a.kind == KernelArg::Kind::buffer) {
            const cl_mem m = static_cast<const ClBuffer*>(a.buffer)->mem();
            rc = clSetKernelArg(k, static_cast<cl_uint>(i), sizeof(cl_mem), &m);
        } else {
            rc = clSetKernelArg(k, static_cast<cl_uint>(i), a.size, a.value.data());
        }
        if (rc != CL_SUCCESS)
            throw_error("clSetKernelArg", rc, __FILE__, __LINE__,
                        fmt::format("kernel '{}', argument {}", kernel_name(id), i));
    }
    const std::size_t local = grid.local;
    const std::size_t global = grid.groups * grid.local;
    const cl_int rc = clEnqueueNDRangeKernel(queue_.get(), k, 1, nullptr, &global, &local, 0, nullptr, nullptr);
    if (rc != CL_SUCCESS)
        throw_error("clEnqueueNDRangeKernel", rc, __FILE__, __LINE__,
                    fmt::format("kernel '{}', {} groups of {}", kernel_name(id), grid.groups, grid.local));
}

void OpenCLBackend::set_work_group_size(std::size_t wg)
{
    if (wg != 32 && wg != 64 && wg != 128 && wg != 256)
        throw UsageError(fmt::format("work-group size {} is not one of 32, 64, 128, 256", wg));
    if (wg > info_.max_work_group)
        throw UsageError(fmt::format("work-group size {} exceeds the device's maximum {}", wg, info_.max_work_group));
    work_group_size_ = wg;
}

void OpenCLBackend::synchronize()
{
    BANYAN_CL_CHECK(clFinish(queue_.get()));
}

Event OpenCLBackend::record()
{
    auto ev = std::make_shared<ClEvent>();
    cl_event e = nullptr;
    BANYAN_CL_CHECK(clEnqueueMarkerWithWaitList(queue_.get(), 0, nullptr, &e));
    ev->event = EventHandle(e);
    return ev;
}

double OpenCLBackend::elapsed_ms(const Event& start, const Event& stop)
{
    auto& a = static_cast<ClEvent&>(*start);
    auto& b = static_cast<ClEvent&>(*stop);
    cl_event both[2] = {a.event.get(), b.event.get()};
    BANYAN_CL_CHECK(clWaitForEvents(2, both));
    cl_ulong t0 = 0, t1 = 0;
    BANYAN_CL_CHECK(clGetEventProfilingInfo(a.event.get(), CL_PROFILING_COMMAND_END, sizeof t0, &t0, nullptr));
    BANYAN_CL_CHECK(clGetEventProfilingInfo(b.event.get(), CL_PROFILING_COMMAND_END, sizeof t1, &t1, nullptr));
    return t1 >= t0 ? double(t1 - t0) * 1e-6 : 0.0;
}

} // namespace banyan::opencl

namespace banyan {

namespace {

BackendDevices opencl_discover()
{
    BackendDevices out{opencl::backend_name, {}, {}};
    try {
        for (auto& f : opencl::enumerate(&out.unavailable_reason))
            out.devices.push_back(std::move(f.info));
    } catch (const DeviceError& e) {
        out.unavailable_reason = e.what();
    }
    return out;
}

std::unique_ptr<Backend> opencl_open(int index)
{
    auto all = opencl::enumerate(nullptr);
    if (index < 0 || index >= static_cast<int>(all.size())) throw UsageError(fmt::format("no OpenCL device {}", index));
    auto& f = all[static_cast<std::size_t>(index)];
    return std::make_unique<opencl::OpenCLBackend>(f.platform, f.device, std::move(f.info));
}

} // namespace

void register_opencl_backend(BackendRegistry& registry)
{
    registry.add({.name = opencl::backend_name,
                  .title = "OpenCL",
                  .discover = opencl_discover,
                  .open = opencl_open,
                  .absent_reason = {}});
}

} // namespace banyan
