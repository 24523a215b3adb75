/**
 * @file devices.hpp
 * @brief Device discovery across every backend of this build (backend_registry.hpp), and selection by backend and
 *        index.
 */
#pragma once

#include "core/device/backend.hpp"
#include "core/device/device_info.hpp"

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace banyan {

/// A backend of this build, with its devices (empty, plus a reason, when none is usable).
struct BackendDevices {
    std::string backend; ///< its name (BackendEntry::name)
    std::vector<DeviceInfo> devices;
    std::string unavailable_reason; ///< why there are no devices (no driver, no platform, ...)
};

/// Every backend, in order of preference (backend_registry.hpp); one not compiled in has no devices and says so.
std::vector<BackendDevices> discover_devices();

/// What the user asked for: --backend auto or a backend's name, and --device N (-1: the best on that backend).
/// Empty fields are filled from BANYAN_BACKEND and BANYAN_DEVICE.
struct DeviceRequest {
    std::string backend;
    int device = -1;
};

/// Fills unset fields of @p req from the environment; defaults to auto / best. UsageError, listing auto and the
/// backends' names, for a backend this build does not know.
DeviceRequest resolve_request(DeviceRequest req);

/// Opens the device @p req names. `auto` picks the first GPU of the backends in order of preference, else the first
/// device of the first backend that has one (a CPU).
/// Throws UsageError, listing what is present, when the backend or device does not exist.
std::unique_ptr<Backend> open_device(const DeviceRequest& req);

/// One line that names a device: "backend #index name" (e.g. "opencl #0 NVIDIA H200"), as checkpoints record it.
std::string device_label(const DeviceInfo& d);

/// The request that opens the device @p label names (device_label's form), when a device of that backend, index
/// and name is present; nullopt otherwise (absent, or not a label).
std::optional<DeviceRequest> find_device(std::string_view label);

/// Opens every device of every backend present (for `--backend all` in benchmarks).
std::vector<std::unique_ptr<Backend>> open_all_devices();

} // namespace banyan
