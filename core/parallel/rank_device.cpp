/**
 * @file rank_device.cpp
 * @brief The device of each rank (rank_device.hpp).
 */
#include "core/parallel/rank_device.hpp"

namespace banyan {

DeviceRequest rank_device(DeviceRequest req, const Comm& comm)
{
    req = resolve_request(req);
    if (!comm.parallel() || req.device >= 0) return req;
    const auto all = discover_devices(); // in order of preference
    std::string backend = req.backend;
    if (backend == "auto") {
        // The first backend with a GPU, else the first with a device, else the last: as open_device chooses (whose
        // errors name what is missing when nothing is present).
        auto first = [&](bool gpu) -> const BackendDevices* {
            for (const auto& b : all)
                for (const auto& d : b.devices)
                    if (d.gpu || !gpu) return &b;
            return nullptr;
        };
        const BackendDevices* chosen = first(true);
        if (!chosen) chosen = first(false);
        if (!chosen && !all.empty()) chosen = &all.back();
        if (chosen) backend = chosen->backend;
    }
    std::vector<int> any, gpus;
    for (const auto& b : all)
        if (b.backend == backend)
            for (const auto& d : b.devices) {
                any.push_back(d.index);
                if (d.gpu) gpus.push_back(d.index);
            }
    const auto& list = gpus.empty() ? any : gpus;
    if (list.empty()) return DeviceRequest{backend, -1}; // open_device names what is missing
    return DeviceRequest{backend, list[static_cast<std::size_t>(comm.node_rank()) % list.size()]};
}

} // namespace banyan
