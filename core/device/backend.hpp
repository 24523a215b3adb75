/**
 * @file backend.hpp
 * @brief The device API: one Backend per opened device, with buffers, kernel launch, events and primitives.
 *
 * core/ sees devices only through this interface; backend_cuda/ and backend_opencl/ implement it. Kernels are
 * launched through typed handles (core/device/kernels.hpp): kernels::walkPrepare stands for the kernel of that name
 * in kernels_cu/ and in kernels_cl/, which take the same parameters, so the host logic that drives them is written
 * once, and a launch whose arguments do not match the declaration does not compile.
 */
#pragma once

#include "core/device/buffer.hpp"
#include "core/device/device_info.hpp"
#include "core/device/grid.hpp"
#include "core/device/kernels.hpp"
#include "core/device/peer_exchange.hpp"

#include <array>
#include <cstdint>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>

namespace banyan {

/// One kernel argument as a backend sets it: a device buffer or a scalar passed by value.
struct KernelArg {
    enum class Kind { buffer, scalar };
    Kind kind = Kind::scalar;
    const RawBuffer* buffer = nullptr;
    std::array<unsigned char, 16> value{};
    std::size_t size = 0;
};

template <class T> KernelArg kernel_arg(const Buffer<T>& b)
{
    KernelArg a;
    a.kind = KernelArg::Kind::buffer;
    a.buffer = &b.raw();
    return a;
}

template <KernelScalar T> KernelArg kernel_arg(const T& v)
{
    static_assert(sizeof(T) <= sizeof(KernelArg::value));
    KernelArg a;
    a.kind = KernelArg::Kind::scalar;
    std::memcpy(a.value.data(), &v, sizeof(T));
    a.size = sizeof(T);
    return a;
}

namespace detail {
template <class... T> struct TypeList {
};

/// Fails to compile where argument I (from 0), of type A, does not match parameter P; the compiler's note on this
/// instantiation names all three.
template <std::size_t I, class P, class A> constexpr bool check_kernel_arg()
{
    static_assert(kernel_arg_matches<P, A>(),
                  "kernel launch: argument I (type A) does not match parameter P of the kernel's declaration in "
                  "core/device/kernel_list.hpp: In<T> takes a Buffer<T>, Out<T> a non-const Buffer<T>, a scalar "
                  "exactly its type (bn_u32, not size_t or int: see to_u32)");
    return true;
}
template <class... P, class... A, std::size_t... I>
constexpr bool check_kernel_args(TypeList<P...>, TypeList<A...>, std::index_sequence<I...>)
{
    return (check_kernel_arg<I, P, A>() && ...);
}
} // namespace detail

/// A point in a backend's command stream, for device-side timing.
class EventImpl {
public:
    virtual ~EventImpl() = default;
};
using Event = std::shared_ptr<EventImpl>;

/// Where notices go: one-line messages for the user while the device does something slow and silent (compiling
/// kernels on first use). Nowhere by default; the banyan program sends them to stderr.
void set_notice_handler(std::function<void(const std::string&)> handler);
/// Passes @p text to the notice handler, if one is set.
void notice(const std::string& text);

class Backend {
public:
    virtual ~Backend() = default;
    Backend() = default;
    Backend(const Backend&) = delete;
    Backend& operator=(const Backend&) = delete;

    virtual const DeviceInfo& info() const = 0;

    // ---- memory ---------------------------------------------------------------------------------------
    /// @param what names the allocation in the error raised when the device is out of memory.
    virtual std::unique_ptr<RawBuffer> alloc_raw(std::size_t bytes, std::string_view what) = 0;
    /// A buffer over @p bytes of device memory at @p ptr that another library allocated on this device (a CUDA
    /// array of CuPy or PyTorch, handed over through DLPack): not owned, not counted by memory(); the memory must
    /// outlive the buffer, and the caller orders the other library's work on it before ours (by synchronising).
    /// Throws UsageError on a backend without device pointers (OpenCL 1.2).
    virtual std::unique_ptr<RawBuffer> wrap_device_memory(void* ptr, std::size_t bytes);

    /// @p bytes of host memory that the device copies to and from at full speed, for staging buffers kept between
    /// uses (CUDA: page-locked, cudaHostAlloc; OpenCL: a mapped CL_MEM_ALLOC_HOST_PTR buffer, which NVIDIA's
    /// platform page-locks; locking takes time, so allocate rarely); plain memory where the backend has nothing
    /// better. Release with free_host. Throws std::bad_alloc when none is left.
    virtual void* alloc_host(std::size_t bytes);
    virtual void free_host(void* p) noexcept;

    /// Allocates @p n elements, counted by memory() until the buffer is destroyed.
    template <class T> Buffer<T> alloc(std::size_t n, std::string_view what)
    {
        auto raw = alloc_raw(n * sizeof(T), what);
        raw->count_in(meter_);
        return Buffer<T>(std::move(raw), n);
    }
    /// Device memory held through alloc() now, and the most held at once since the last reset_peak().
    const MemoryMeter& memory() const noexcept { return meter_; }
    /// Starts a new high-water mark from what is held now.
    void reset_peak() noexcept { meter_.peak = meter_.live; }
    template <class T> Buffer<T> upload(std::span<const T> host, std::string_view what)
    {
        auto b = alloc<T>(host.size(), what);
        b.upload(host);
        return b;
    }

    // ---- between ranks --------------------------------------------------------------------------------
    /// The transport that moves bytes from this device to the devices of other ranks without host memory (NCCL
    /// under CUDA, when built with it), or null when the backend has none: then they go through host memory.
    virtual PeerTransport* peer_transport() { return nullptr; }

    // ---- kernels --------------------------------------------------------------------------------------
    /// Launches @p kernel (kernels::name, core/device/kernels.hpp) over @p grid with @p args in order; compiles only
    /// when the arguments match its declaration (KernelArgs). A grid of zero groups launches nothing.
    template <class... P, class... A> void launch(const Kernel<P...>& kernel, Grid grid, A&&... args)
    {
        static_assert(sizeof...(A) == sizeof...(P),
                      "kernel launch: the number of arguments differs from the kernel's declaration "
                      "(core/device/kernel_list.hpp)");
        if constexpr (sizeof...(A) == sizeof...(P)) {
            static_assert(detail::check_kernel_args(detail::TypeList<P...>{}, detail::TypeList<A...>{},
                                                    std::index_sequence_for<A...>{}));
            if (grid.groups == 0) return;
            const std::array<KernelArg, sizeof...(A)> list{kernel_arg(args)...};
            launch_raw(kernel.id, grid, list);
        }
    }

    /// Resolves the kernel declared as @p name on this device, as its first launch would (building the OpenCL
    /// program if need be). Throws DeviceError naming it when no kernel of that name is declared or this backend has
    /// none. For checks and diagnostics: launches go through the typed handles.
    void require_kernel(std::string_view name);

    /// Work-group size of the primitive kernels (BANYAN_WG in device_shared.h). OpenCL can rebuild its programs
    /// for 32, 64, 128 or 256; CUDA supports only BANYAN_WG_DEFAULT and throws UsageError for another.
    std::size_t work_group_size() const noexcept { return work_group_size_; }
    virtual void set_work_group_size(std::size_t wg) = 0;

    /// Blocks until every command issued so far has finished.
    virtual void synchronize() = 0;

    // ---- timing ---------------------------------------------------------------------------------------
    /// Records a point in the command stream. elapsed_ms(a, b) waits for b and returns device time a -> b.
    virtual Event record() = 0;
    virtual double elapsed_ms(const Event& start, const Event& stop) = 0;

    // ---- primitives (core/device/primitives.cpp has the portable versions; CUDA may override with CUB) -----------
    /// out[i] = in[0] + ... + in[i-1]. @p out may be @p in. n may be 0.
    virtual void exclusive_scan(const Buffer<bn_u32>& in, Buffer<bn_u32>& out, std::size_t n);
    /// out[i] = in[0] + ... + in[i]. @p out may be @p in.
    virtual void inclusive_scan(const Buffer<bn_u32>& in, Buffer<bn_u32>& out, std::size_t n);
    /// out[0] = componentwise minimum, out[1] = componentwise maximum of in[0..n), all four components. n >= 1.
    virtual void reduce_bounds(const Buffer<bn_f4>& in, std::size_t n, Buffer<bn_f4>& out);
    /// out[0] = sum of in[0..n) in double precision (0 for n = 0).
    virtual void reduce_sum(const Buffer<double>& in, std::size_t n, Buffer<double>& out);
    /// Keeps in[i] where flags[i] != 0, in order, at the front of @p out; count[0] = how many were kept.
    virtual void compact(const Buffer<bn_u32>& in, const Buffer<bn_u32>& flags, std::size_t n, Buffer<bn_u32>& out,
                         Buffer<bn_u32>& count);
    /// Stable partition: items with flags[i] != 0 first, then the others, order kept on both sides;
    /// count[0] = how many were flagged.
    virtual void split(const Buffer<bn_u32>& in, const Buffer<bn_u32>& flags, std::size_t n, Buffer<bn_u32>& out,
                       Buffer<bn_u32>& count);
    /// Stable LSD radix sort of (key, value) pairs by bits [begin_bit, end_bit) of the keys. The inputs are left
    /// as they were; outputs must not alias inputs.
    virtual void sort_pairs(const Buffer<bn_u64>& keys_in, const Buffer<bn_u32>& values_in, Buffer<bn_u64>& keys_out,
                            Buffer<bn_u32>& values_out, std::size_t n, int begin_bit, int end_bit);
    /// The same sort without scratch memory of its own beyond small histograms: (keys_alt, values_alt) are its
    /// double buffer. The sorted pairs end in (keys, values), or in the alternates when it returns true; both
    /// pairs are overwritten. This is the sort the octree uses (its memory is counted in its workspace).
    virtual bool sort_pairs_double(Buffer<bn_u64>& keys, Buffer<bn_u32>& values, Buffer<bn_u64>& keys_alt,
                                   Buffer<bn_u32>& values_alt, std::size_t n, int begin_bit, int end_bit);
    /// out[i] = in[perm[i]] for i < n, bit for bit. T must be 4, 8 or 16 bytes.
    template <class T> void gather(const Buffer<T>& in, const Buffer<bn_u32>& perm, std::size_t n, Buffer<T>& out)
    {
        static_assert(sizeof(T) == 4 || sizeof(T) == 8 || sizeof(T) == 16, "gather moves 4, 8 or 16 bytes");
        check_gather(perm, n, out.bytes(), sizeof(T));
        const Grid grid = grid_for(*this, n);
        if constexpr (sizeof(T) == 4)
            launch(kernels::gather32, grid, in, perm, to_u32(n), out);
        else if constexpr (sizeof(T) == 8)
            launch(kernels::gather64, grid, in, perm, to_u32(n), out);
        else
            launch(kernels::gather128, grid, in, perm, to_u32(n), out);
    }

    /// Whether primitives may use the vendor library (CUB on CUDA) where one is faster. On by default; the
    /// conformance suite turns it off to check our own kernels on CUDA too. No effect on OpenCL.
    void set_vendor_primitives(bool on) noexcept { vendor_primitives_ = on; }
    bool vendor_primitives() const noexcept { return vendor_primitives_; }

    /// Device memory held by scratch buffers of the primitives (for the memory report of benchmarks).
    std::size_t scratch_bytes() const;
    /// Frees every scratch buffer (benchmarks, so that each row's peak counts what that row needs).
    void release_scratch() { scratch_.clear(); }

    /// A scratch buffer of at least @p n elements (never 0) of @p T, kept between calls under @p slot (grown,
    /// never shrunk; one slot holds one type), for the primitives and phases in core/. Contents are undefined on
    /// return; the reference stays valid until the next request for the same slot.
    template <class T> Buffer<T>& scratch_buffer(const std::string& slot, std::size_t n)
    {
        auto& s = scratch_[slot];
        auto* typed = dynamic_cast<TypedScratch<T>*>(s.get());
        if (!typed || typed->buf.size() < n) {
            s.reset(); // free first, so growing does not need both at once
            auto fresh = std::make_unique<TypedScratch<T>>();
            const std::size_t m = n < 1 ? 1 : n;
            fresh->buf = alloc<T>(m + m / 4, "scratch:" + slot);
            typed = fresh.get();
            s = std::move(fresh);
        }
        return typed->buf;
    }

protected:
    /// Launches kernel @p id with @p args, already checked against its declaration by launch(). The backend resolves
    /// each id once (kernel_name(id) in its kernel folder) and keeps it in a table indexed by id.
    virtual void launch_raw(KernelId id, Grid grid, std::span<const KernelArg> args) = 0;
    /// Resolves kernel @p id now if it is not yet (see require_kernel); throws DeviceError naming it if it is missing.
    virtual void resolve_kernel(KernelId id) = 0;

    /// gather's checks of its sizes (UsageError).
    void check_gather(const Buffer<bn_u32>& perm, std::size_t n, std::size_t out_bytes, std::size_t elem_bytes) const;

    /// One pass of the portable radix sort: (src) -> (dst) by the @p bits-bit digit at @p shift.
    void radix_pass(const Buffer<bn_u64>& src_keys, const Buffer<bn_u32>& src_values, Buffer<bn_u64>& dst_keys,
                    Buffer<bn_u32>& dst_values, std::size_t n, int shift, int bits);

    std::size_t work_group_size_ = BANYAN_WG_DEFAULT;

private:
    struct TypedScratchBase {
        virtual ~TypedScratchBase() = default;
        virtual std::size_t bytes() const = 0;
    };
    template <class T> struct TypedScratch final : TypedScratchBase {
        Buffer<T> buf;
        std::size_t bytes() const override { return buf.bytes(); }
    };

    MemoryMeter meter_; // declared before the scratch buffers, which it counts: destroyed after them
    std::map<std::string, std::unique_ptr<TypedScratchBase>> scratch_;
    bool vendor_primitives_ = true;
};

/// Grows @p b to hold at least @p n elements (at least one; contents not kept), allocated on @p be under the name
/// @p what; a buffer that is large enough already is left alone.
template <class T> void ensure_size(Backend& be, Buffer<T>& b, std::size_t n, std::string_view what)
{
    if (b && b.size() >= n) return;
    b = Buffer<T>(); // free first, so growing does not need both at once
    b = be.alloc<T>(n < 1 ? 1 : n, what);
}

} // namespace banyan
