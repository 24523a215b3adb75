/**
 * @file devices.cpp
 * @brief Discovery across the backends compiled in, and `auto` / explicit device selection.
 */
#include "core/device/devices.hpp"

#include "core/device/backend_registry.hpp"
#include "core/error.hpp"
#include "core/numbers.hpp"

#include <fmt/format.h>

#include <cstdlib>

namespace banyan {

std::vector<BackendDevices> discover_devices()
{
    // Every backend has an entry; one that is not compiled in says so (and has no devices).
    std::vector<BackendDevices> all;
#ifdef BANYAN_HAVE_CUDA
    all.push_back(cuda_discover());
#else
    all.push_back({BackendKind::cuda, {}, "not compiled into this build (no CUDA compiler, or built without it)"});
#endif
#ifdef BANYAN_HAVE_OPENCL
    all.push_back(opencl_discover());
#else
    all.push_back({BackendKind::opencl, {}, "not compiled into this build"});
#endif
    return all;
}

DeviceRequest resolve_request(DeviceRequest req)
{
    if (req.backend.empty()) {
        const char* env = std::getenv("BANYAN_BACKEND");
        req.backend = env && *env ? env : "auto";
    }
    if (req.device < 0) {
        if (const char* env = std::getenv("BANYAN_DEVICE"); env && *env) {
            const auto v = parse_whole(env);
            if (!v || *v < 0 || *v > 1'000'000)
                throw UsageError(fmt::format("BANYAN_DEVICE='{}' is not a device index", env));
            req.device = static_cast<int>(*v);
        }
    }
    if (req.backend != "auto" && req.backend != "cuda" && req.backend != "opencl")
        throw UsageError(fmt::format("unknown backend '{}': expected auto, cuda or opencl", req.backend));
    return req;
}

namespace {

std::string describe_present(const std::vector<BackendDevices>& all)
{
    std::string s;
    for (const auto& b : all) {
        s += fmt::format("\n  {}: ", to_string(b.backend));
        if (b.devices.empty()) s += "no devices (" + b.unavailable_reason + ")";
        for (const auto& d : b.devices)
            s += fmt::format("[{}] {}{}  ", d.index, d.name, d.gpu ? " (GPU)" : "");
    }
    return s;
}

std::unique_ptr<Backend> open_on(BackendKind kind, int index)
{
#ifdef BANYAN_HAVE_CUDA
    if (kind == BackendKind::cuda) return cuda_open(index);
#endif
#ifdef BANYAN_HAVE_OPENCL
    if (kind == BackendKind::opencl) return opencl_open(index);
#endif
    (void)index;
    throw UsageError(fmt::format("backend {} is not compiled in", to_string(kind)));
}

} // namespace

std::unique_ptr<Backend> open_device(const DeviceRequest& request)
{
    const DeviceRequest req = resolve_request(request);
    const auto all = discover_devices();
    if (req.backend == "auto" && req.device < 0) {
        // CUDA GPU, else OpenCL GPU, else any OpenCL device (a CPU through PoCL).
        for (const auto& b : all)
            if (b.backend == BackendKind::cuda && !b.devices.empty()) return open_on(BackendKind::cuda, 0);
        for (const auto& b : all)
            for (const auto& d : b.devices)
                if (b.backend == BackendKind::opencl && d.gpu) return open_on(BackendKind::opencl, d.index);
        for (const auto& b : all)
            if (!b.devices.empty()) return open_on(b.backend, b.devices.front().index);
        throw UsageError("no device found on any backend:" + describe_present(all));
    }
    if (req.backend == "auto")
        throw UsageError("--device needs --backend cuda or --backend opencl (device indices are per backend)");
    const BackendKind kind = req.backend == "cuda" ? BackendKind::cuda : BackendKind::opencl;
    for (const auto& b : all) {
        if (b.backend != kind) continue;
        if (b.devices.empty())
            throw UsageError(fmt::format("backend {} has no devices ({}). Present:{}", req.backend,
                                         b.unavailable_reason, describe_present(all)));
        const int index = req.device < 0 ? 0 : req.device;
        if (index >= static_cast<int>(b.devices.size()))
            throw UsageError(
                fmt::format("backend {} has no device {}. Present:{}", req.backend, index, describe_present(all)));
        return open_on(kind, index);
    }
    throw UsageError(
        fmt::format("backend {} is unknown to this build. Present:{}", req.backend, describe_present(all)));
}

std::string device_label(const DeviceInfo& d)
{
    return fmt::format("{} #{} {}", to_string(d.backend), d.index, d.name);
}

std::optional<DeviceRequest> find_device(std::string_view label)
{
    for (const auto& b : discover_devices())
        for (const auto& d : b.devices)
            if (device_label(d) == label) return DeviceRequest{std::string(to_string(b.backend)), d.index};
    return std::nullopt;
}

std::vector<std::unique_ptr<Backend>> open_all_devices()
{
    std::vector<std::unique_ptr<Backend>> out;
    for (const auto& b : discover_devices())
        for (const auto& d : b.devices)
            out.push_back(open_on(b.backend, d.index));
    return out;
}

} // namespace banyan
