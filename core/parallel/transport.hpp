/**
 * @file transport.hpp
 * @brief How the local essential trees travel between the ranks of a run: GPU to GPU through the backend's
 *        transport (core/device/peer_exchange.hpp: NCCL under CUDA, when banyan is built with it), or through host
 *        memory (Comm::exchange over MPI: downloaded, sent, uploaded), and which of the two a run takes. The
 *        particles that change rank in the balance go through host memory either way (docs/parallel.md says why).
 *
 * Either way the same bytes land in the same places, so the forces are the same to the bit (tests/parallel/mpi). The
 * device path needs a backend with a transport, more than one rank and a device of its own for every rank (NCCL refuses
 * a device twice in one group); the host path works with any MPI, any backend and ranks that share a device.
 */
#pragma once

#include "core/device/backend.hpp"
#include "core/device/peer_exchange.hpp"
#include "core/parallel/comm.hpp"

#include <memory>
#include <string>
#include <string_view>

namespace banyan {

enum class Transport {
    automatic, ///< GPU to GPU where the backend, the ranks and their devices allow it, else through host memory
    host,      ///< through host memory
    device,    ///< GPU to GPU, or an error saying why it cannot be
};

/// "auto", "host" or "device"; a UsageError naming @p what and the three otherwise.
Transport parse_transport(std::string_view text, std::string_view what);
/// The environment's choice: BANYAN_TRANSPORT, automatic when it is unset or empty.
Transport default_transport();

/// The group of @p comm's ranks whose devices send each other bytes for @p transport, or null: through host memory
/// (host; one rank, where nothing travels; automatic where the device path cannot be). UsageError for device where it
/// cannot be, naming why, and where the ranks ask for different transports. Collective.
std::unique_ptr<PeerExchange> open_peer_exchange(Backend& be, const Comm& comm, Transport transport);

/// The path of the trees, for the logs: "trees: GPU to GPU through NCCL 2.28.9" for @p peers, else
/// "trees: through host memory (MPI)".
std::string transport_text(const PeerExchange* peers);

} // namespace banyan
