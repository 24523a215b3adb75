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
    const auto all = discover_devices();
    auto devices_of = [&](BackendKind kind) {
        std::vector<int> any, gpus;
        for (const auto& b : all)
            if (b.backend == kind)
                for (const auto& d : b.devices) {
                    any.push_back(d.index);
                    if (d.gpu) gpus.push_back(d.index);
                }
        return gpus.empty() ? any : gpus;
    };
    std::string backend = req.backend;
    if (backend == "auto") {
        bool cuda_gpu = false;
        for (const auto& b : all)
            for (const auto& d : b.devices)
                cuda_gpu = cuda_gpu || (b.backend == BackendKind::cuda && d.gpu);
        backend = cuda_gpu ? "cuda" : "opencl";
    }
    const auto list = devices_of(backend == "cuda" ? BackendKind::cuda : BackendKind::opencl);
    if (list.empty()) return DeviceRequest{backend, -1}; // open_device names what is missing
    return DeviceRequest{backend, list[static_cast<std::size_t>(comm.node_rank()) % list.size()]};
}

} // namespace banyan
