/**
 * @file peer_exchange.hpp
 * @brief Bytes from device memory on one rank straight into device memory on others, without a stop in host
 *        memory: the transport a backend may offer between the ranks of a run (NCCL under CUDA, when banyan is
 *        built with it), for the local essential trees of a parallel run (core/parallel/transport.hpp).
 *
 * A backend knows no communicator (core/parallel/ sits above core/device/), so a group of ranks is opened in two
 * steps that core/parallel/transport.cpp runs over MPI: one rank makes a key (PeerTransport::new_key), the ranks pass
 * it around, and every rank joins with it (PeerTransport::join). Both sides of every message know its size
 * beforehand (the sizes go over MPI first): a transport moves payloads only.
 */
#pragma once

#include "core/device/buffer.hpp"

#include <cstddef>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace banyan {

/// @p bytes from byte @p offset of @p buffer to rank @p peer. The buffer must hold peer_read_slack bytes more
/// behind each message: NCCL reads what it sends in whole 16-byte words (NVIDIA/nccl#265; it never writes past a
/// message), which compute-sanitizer reports, and which could fault at the end of an allocation.
struct PeerSend {
    int peer = 0;
    const RawBuffer* buffer = nullptr;
    std::size_t offset = 0, bytes = 0;
};

/// Readable bytes a PeerSend's buffer holds behind its last message.
inline constexpr std::size_t peer_read_slack = 16;

/// @p bytes from rank @p peer into byte @p offset of @p buffer.
struct PeerRecv {
    int peer = 0;
    RawBuffer* buffer = nullptr;
    std::size_t offset = 0, bytes = 0;
};

/// A group of ranks whose devices send each other bytes.
class PeerExchange {
public:
    virtual ~PeerExchange() = default;
    /// What carries the bytes, for the logs: "NCCL 2.28.9".
    virtual std::string name() const = 0;
    /// Sends and receives every message at once. Collective: every rank of the group calls it, with or without
    /// messages. The messages between two ranks pair up in the order given (the k-th send from q to r lands in the
    /// k-th receive of r from q, of the same size); a message of 0 bytes is skipped on both sides; no rank sends to
    /// itself. The sends read what the backend's work issued before wrote; the receives are in place for the work
    /// issued after, and the call returns once they are.
    virtual void exchange(std::span<const PeerSend> sends, std::span<const PeerRecv> recvs) = 0;
};

/// The transport of one backend (Backend::peer_transport), which opens groups.
class PeerTransport {
public:
    virtual ~PeerTransport() = default;
    /// Its name and version, for the logs: "NCCL 2.28.9".
    virtual std::string name() const = 0;
    /// This rank's device as the node knows it (its PCI address), so that ranks that share one are told apart
    /// before a group is opened (NCCL refuses a device twice in one group).
    virtual std::string device_address() const = 0;
    /// The key of a new group, made on one rank.
    virtual std::vector<std::byte> new_key() = 0;
    /// This rank as rank @p rank of the @p ranks ranks that joined with @p key (collective over them).
    virtual std::unique_ptr<PeerExchange> join(std::span<const std::byte> key, int rank, int ranks) = 0;
};

} // namespace banyan
