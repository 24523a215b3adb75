/**
 * @file buffer.hpp
 * @brief Move-only typed device buffers over a backend's untyped allocation.
 */
#pragma once

#include "core/device_shared.h"

#include <cstddef>
#include <memory>
#include <span>
#include <type_traits>
#include <vector>

namespace banyan {

static_assert(sizeof(bn_f4) == 16 && alignof(bn_f4) == 16, "bn_f4 must match CUDA float4 / OpenCL float4");
static_assert(sizeof(bn_u64) == 8 && sizeof(bn_u32) == 4);
static_assert(sizeof(bn_u2) == 8 && alignof(bn_u2) == 8, "bn_u2 must match CUDA uint2 / OpenCL uint2");

/// The device memory a backend holds: what is allocated now and the most it has held at once (its high-water
/// mark, which is what decides whether a run fits). Buffers allocated through Backend::alloc are counted from
/// allocation to destruction; views are not (they own nothing).
struct MemoryMeter {
    std::size_t live = 0;
    std::size_t peak = 0;
    void add(std::size_t bytes) noexcept
    {
        live += bytes;
        if (live > peak) peak = live;
    }
    void remove(std::size_t bytes) noexcept { live -= bytes < live ? bytes : live; }
};

/// One device allocation, owned by a backend, or a view of part of one. All transfers are blocking with respect
/// to the host and ordered after every kernel launched before them on the same backend.
class RawBuffer {
public:
    virtual ~RawBuffer()
    {
        if (meter_) meter_->remove(metered_);
    }
    RawBuffer() = default;
    RawBuffer(const RawBuffer&) = delete;
    RawBuffer& operator=(const RawBuffer&) = delete;

    virtual std::size_t bytes() const = 0;
    /// @param[in] src host memory, @p bytes long, written at byte @p offset of the buffer.
    virtual void upload(const void* src, std::size_t bytes, std::size_t offset) = 0;
    /// @param[out] dst host memory, @p bytes long, read from byte @p offset of the buffer.
    virtual void download(void* dst, std::size_t bytes, std::size_t offset) const = 0;
    /// Repeats @p pattern (1, 2, 4, 8 or 16 bytes) over @p bytes bytes from @p offset (both multiples of it).
    virtual void fill(const void* pattern, std::size_t pattern_bytes, std::size_t offset, std::size_t bytes) = 0;
    /// Device-side copy of @p bytes from @p src at @p src_offset to this buffer at @p dst_offset.
    virtual void copy_from(const RawBuffer& src, std::size_t bytes, std::size_t src_offset, std::size_t dst_offset) = 0;
    /// Device-side copy of @p rows rows of @p row_bytes each from @p src (row r at src_offset + r * src_pitch) to
    /// this buffer (row r at dst_offset + r * dst_pitch): interleaves or splits arrays of records, e.g. (N, 3)
    /// positions and (N,) masses into x, y, z, m, without a kernel. Pitches are >= row_bytes.
    virtual void copy_rows_from(const RawBuffer& src, std::size_t rows, std::size_t row_bytes, std::size_t src_offset,
                                std::size_t src_pitch, std::size_t dst_offset, std::size_t dst_pitch) = 0;
    /// A buffer that aliases bytes [offset, offset + bytes) of this one: no allocation, not counted by the meter.
    /// This buffer must outlive the view. @p offset must be a multiple of DeviceInfo::view_align.
    virtual std::unique_ptr<RawBuffer> view(std::size_t offset, std::size_t bytes) const = 0;

    /// Counts this allocation in @p meter until destruction (Backend::alloc does it).
    void count_in(MemoryMeter& meter) noexcept
    {
        meter_ = &meter;
        metered_ = bytes();
        meter.add(metered_);
    }

private:
    MemoryMeter* meter_ = nullptr;
    std::size_t metered_ = 0;
};

[[noreturn]] void throw_buffer_range(std::size_t offset, std::size_t count, std::size_t size);

/// A move-only array of @p T on one device. Created by Backend::alloc<T>().
template <class T> class Buffer {
    static_assert(std::is_trivially_copyable_v<T>, "device buffers hold trivially copyable types");

public:
    using value_type = T;

    Buffer() = default;
    Buffer(std::unique_ptr<RawBuffer> raw, std::size_t size) : raw_(std::move(raw)), size_(size) {}
    Buffer(Buffer&&) noexcept = default;
    Buffer& operator=(Buffer&&) noexcept = default;

    std::size_t size() const noexcept { return size_; }
    bool empty() const noexcept { return size_ == 0; }
    std::size_t bytes() const noexcept { return size_ * sizeof(T); }
    RawBuffer& raw() const { return *raw_; }
    explicit operator bool() const noexcept { return raw_ != nullptr; }

    /// Writes @p src at element @p offset.
    void upload(std::span<const T> src, std::size_t offset = 0)
    {
        check_range(offset, src.size());
        if (!src.empty()) raw_->upload(src.data(), src.size_bytes(), offset * sizeof(T));
    }
    /// Reads @p dst.size() elements from element @p offset.
    void download(std::span<T> dst, std::size_t offset = 0) const
    {
        check_range(offset, dst.size());
        if (!dst.empty()) raw_->download(dst.data(), dst.size_bytes(), offset * sizeof(T));
    }
    /// Reads the first @p n elements (all by default).
    std::vector<T> download(std::size_t n = npos) const
    {
        std::vector<T> out(n == npos ? size_ : n);
        download(std::span<T>(out));
        return out;
    }
    /// One element, read back (synchronizes).
    T at(std::size_t i) const
    {
        T v;
        download(std::span<T>(&v, 1), i);
        return v;
    }
    /// Sets elements [offset, offset + count) to @p value (all by default).
    void fill(const T& value, std::size_t offset = 0, std::size_t count = npos)
    {
        if (count == npos) count = size_ - offset;
        check_range(offset, count);
        if (count) raw_->fill(&value, sizeof(T), offset * sizeof(T), count * sizeof(T));
    }
    /// A buffer of @p n elements of @p U that aliases this one from byte @p byte_offset (see RawBuffer::view): the
    /// way one allocation serves as scratch for phases that never overlap. This buffer must outlive the view.
    template <class U> Buffer<U> view_as(std::size_t byte_offset, std::size_t n) const
    {
        if (byte_offset > bytes() || n * sizeof(U) > bytes() - byte_offset)
            throw_buffer_range(byte_offset, n * sizeof(U), bytes());
        return Buffer<U>(raw_->view(byte_offset, n * sizeof(U)), n);
    }
    /// Device-side copy of @p count elements of @p src into this buffer.
    void copy_from(const Buffer& src, std::size_t count, std::size_t src_offset = 0, std::size_t dst_offset = 0)
    {
        src.check_range(src_offset, count);
        check_range(dst_offset, count);
        if (count) raw_->copy_from(src.raw(), count * sizeof(T), src_offset * sizeof(T), dst_offset * sizeof(T));
    }

    static constexpr std::size_t npos = static_cast<std::size_t>(-1);

private:
    void check_range(std::size_t offset, std::size_t count) const;
    template <class U> friend class Buffer;

    std::unique_ptr<RawBuffer> raw_;
    std::size_t size_ = 0;
};

template <class T> void Buffer<T>::check_range(std::size_t offset, std::size_t count) const
{
    if (offset > size_ || count > size_ - offset) throw_buffer_range(offset, count, size_);
}

} // namespace banyan
