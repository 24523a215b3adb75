/**
 * @file rank_device.hpp
 * @brief Which device each rank of a parallel run opens: the ranks of one node take the node's GPUs in turn.
 */
#pragma once

#include "core/device/devices.hpp"
#include "core/parallel/comm.hpp"

namespace banyan {

/// The device rank @p comm.rank() opens for @p req. With one rank, or a device index given, @p req itself.
/// Otherwise the backend asked for (auto: the one whose device open_device would pick: the first backend with a GPU
/// in order of preference, else the first with a device) and its GPUs (else its devices),
/// rank i of a node taking device i mod (devices): several ranks share a device when there are fewer devices than
/// ranks (how a one-GPU machine and CI run many ranks).
DeviceRequest rank_device(DeviceRequest req, const Comm& comm);

} // namespace banyan
