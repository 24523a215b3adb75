/**
 * @file backend.cpp
 * @brief Backend-independent parts of the device API: scratch buffers, names, kernel look-up, range errors,
 *        notices.
 */
#include "core/device/backend.hpp"

#include "core/device/backend_registry.hpp"
#include "core/error.hpp"

#include <fmt/format.h>

#include <mutex>
#include <new>

namespace banyan {

namespace {
std::mutex notice_mutex;
constexpr std::align_val_t host_align{64};
std::function<void(const std::string&)> notice_handler;
} // namespace

void set_notice_handler(std::function<void(const std::string&)> handler)
{
    std::lock_guard lock(notice_mutex);
    notice_handler = std::move(handler);
}

void notice(const std::string& text)
{
    std::lock_guard lock(notice_mutex);
    if (notice_handler) notice_handler(text);
}

void throw_buffer_range(std::size_t offset, std::size_t count, std::size_t size)
{
    throw std::out_of_range(
        fmt::format("buffer access [{}, {}) outside a buffer of {} elements", offset, offset + count, size));
}

std::size_t Backend::scratch_bytes() const
{
    std::size_t total = 0;
    for (const auto& [slot, b] : scratch_)
        total += b ? b->bytes() : 0;
    return total;
}

void Backend::require_kernel(std::string_view name)
{
    const auto id = find_kernel(name);
    if (!id) {
        const BackendEntry* b = backend_registry().find(info().backend);
        throw DeviceError(b ? b->title : info().backend, "kernel lookup", 0, "no such kernel", __FILE__, __LINE__,
                          fmt::format("no kernel named '{}' is declared in core/device/kernel_list.hpp", name));
    }
    resolve_kernel(*id);
}

void* Backend::alloc_host(std::size_t bytes)
{
    return ::operator new(bytes, host_align);
}

void Backend::free_host(void* p) noexcept
{
    ::operator delete(p, host_align);
}

std::unique_ptr<RawBuffer> Backend::wrap_device_memory(void*, std::size_t)
{
    throw UsageError(fmt::format("the {} backend cannot take memory that another library allocated on the device "
                                 "(DLPack); give host arrays",
                                 info().backend));
}

} // namespace banyan
