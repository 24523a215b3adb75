/**
 * @file nccl_exchange.hpp
 * @brief The CUDA backend's transport between the devices of ranks: NCCL's point-to-point sends and receives
 *        (core/device/peer_exchange.hpp), over NVLink, PCIe or InfiniBand, whichever NCCL finds between two ranks.
 *        Built only where CMake found NCCL (BANYAN_HAVE_NCCL, cmake/FindNCCL.cmake).
 */
#pragma once

#include "core/device/peer_exchange.hpp"

#include <cuda_runtime_api.h>

#include <memory>

namespace banyan::cuda {

/// The NCCL transport of CUDA device @p device, whose groups exchange bytes after the work of @p work (the backend's
/// stream) and before what follows on it.
std::unique_ptr<PeerTransport> make_nccl_transport(int device, cudaStream_t work);

} // namespace banyan::cuda
