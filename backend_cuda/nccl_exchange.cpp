/**
 * @file nccl_exchange.cpp
 * @brief The NCCL transport (nccl_exchange.hpp): one communicator per group of ranks, made from an ncclUniqueId that
 *        core/parallel/transport.cpp passes around over MPI; every exchange one ncclGroupStart / ncclSend, ncclRecv
 *        per message / ncclGroupEnd on a stream of its own, ordered after the backend's stream by events both ways.
 *        Compiled to nothing without NCCL (BANYAN_HAVE_NCCL, defined for this backend only).
 */
#include "backend_cuda/nccl_exchange.hpp"

#if defined(BANYAN_HAVE_NCCL)

#include "backend_cuda/cuda_backend.hpp"
#include "backend_cuda/cuda_check.hpp"

#include <fmt/format.h>
#include <nccl.h>

#include <cstring>
#include <exception>
#include <stdexcept>
#include <thread>

namespace banyan::cuda {

namespace {

const char* nccl_code_name(ncclResult_t rc)
{
    switch (rc) {
    case ncclSuccess:
        return "ncclSuccess";
    case ncclUnhandledCudaError:
        return "ncclUnhandledCudaError";
    case ncclSystemError:
        return "ncclSystemError";
    case ncclInternalError:
        return "ncclInternalError";
    case ncclInvalidArgument:
        return "ncclInvalidArgument";
    case ncclInvalidUsage:
        return "ncclInvalidUsage";
    case ncclRemoteError:
        return "ncclRemoteError";
    case ncclInProgress:
        return "ncclInProgress";
    default:
        return "ncclResult";
    }
}

/// Throws DeviceError for a failed NCCL call, with NCCL's last message for @p comm when there is one.
void check_nccl(ncclResult_t rc, const char* call, const char* file, int line, ncclComm_t comm = nullptr)
{
    if (rc == ncclSuccess) return;
    std::string detail = ncclGetErrorString(rc);
    if (const char* last = ncclGetLastError(comm); last && *last) detail += fmt::format(" ({})", last);
    throw DeviceError("NCCL", call, static_cast<long>(rc), nccl_code_name(rc), file, line, detail);
}

#define BANYAN_NCCL_CHECK(call, comm) check_nccl((call), #call, __FILE__, __LINE__, comm)

std::string nccl_name()
{
    int v = 0;
    if (ncclGetVersion(&v) != ncclSuccess) return "NCCL";
    return fmt::format("NCCL {}.{}.{}", v / 10000, v / 100 % 100, v % 100);
}

class NcclExchange final : public PeerExchange {
public:
    NcclExchange(int device, cudaStream_t work, const ncclUniqueId& id, int rank, int ranks)
        : device_(device), work_(work), rank_(rank), ranks_(ranks)
    {
        BANYAN_CUDA_CHECK(cudaSetDevice(device_));
        BANYAN_NCCL_CHECK(ncclCommInitRank(&comm_, ranks, id, rank), nullptr);
        try {
            BANYAN_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
            BANYAN_CUDA_CHECK(cudaEventCreateWithFlags(&ready_, cudaEventDisableTiming));
            BANYAN_CUDA_CHECK(cudaEventCreateWithFlags(&done_, cudaEventDisableTiming));
        } catch (...) {
            release(true);
            throw;
        }
    }
    ~NcclExchange() override
    {
        // Destroying a communicator waits for the other ranks of the node; while an error unwinds this rank, they
        // may never come: then abort it, which frees this rank's part alone.
        release(std::uncaught_exceptions() > 0);
    }

    std::string name() const override { return nccl_name(); }

    void exchange(std::span<const PeerSend> sends, std::span<const PeerRecv> recvs) override
    {
        auto check = [&](int peer, const RawBuffer* b, std::size_t offset, std::size_t bytes) {
            if (peer < 0 || peer >= ranks_ || peer == rank_ || !b || offset > b->bytes() || bytes > b->bytes() - offset)
                throw std::invalid_argument(fmt::format("NCCL exchange: a message of {} bytes at {} with rank {} "
                                                        "(this is rank {} of {})",
                                                        bytes, offset, peer, rank_, ranks_));
        };
        for (const auto& s : sends)
            check(s.peer, s.buffer, s.offset, s.bytes);
        for (const auto& r : recvs)
            check(r.peer, r.buffer, r.offset, r.bytes);
        if (!comm_) throw std::logic_error("NCCL exchange: the communicator was aborted after an error");
        BANYAN_CUDA_CHECK(cudaSetDevice(device_));
        // The sends read what the backend's stream wrote; the stream goes on once the receives are in place.
        BANYAN_CUDA_CHECK(cudaEventRecord(ready_, work_));
        BANYAN_CUDA_CHECK(cudaStreamWaitEvent(stream_, ready_, 0));
        BANYAN_NCCL_CHECK(ncclGroupStart(), comm_);
        ncclResult_t rc = ncclSuccess;
        const char* failed = nullptr;
        for (const auto& s : sends) {
            if (!s.bytes || rc != ncclSuccess) continue;
            rc = ncclSend(static_cast<const char*>(device_ptr(*s.buffer)) + s.offset, s.bytes, ncclUint8, s.peer, comm_,
                          stream_);
            if (rc != ncclSuccess) failed = "ncclSend";
        }
        for (const auto& r : recvs) {
            if (!r.bytes || rc != ncclSuccess) continue;
            rc = ncclRecv(static_cast<char*>(device_ptr(*r.buffer)) + r.offset, r.bytes, ncclUint8, r.peer, comm_,
                          stream_);
            if (rc != ncclSuccess) failed = "ncclRecv";
        }
        const ncclResult_t end = ncclGroupEnd(); // closes the group in any case
        if (rc != ncclSuccess) check_nccl(rc, failed, __FILE__, __LINE__, comm_);
        BANYAN_NCCL_CHECK(end, comm_);
        BANYAN_CUDA_CHECK(cudaEventRecord(done_, stream_));
        BANYAN_CUDA_CHECK(cudaStreamWaitEvent(work_, done_, 0));
        // Until the messages are through, watch for an error on the way (a rank that failed, a broken link), which
        // would otherwise leave this rank waiting for ever.
        for (;;) {
            const cudaError_t q = cudaStreamQuery(stream_);
            if (q == cudaSuccess) break;
            if (q != cudaErrorNotReady) BANYAN_CUDA_CHECK(q);
            ncclResult_t async = ncclSuccess;
            BANYAN_NCCL_CHECK(ncclCommGetAsyncError(comm_, &async), comm_);
            if (async != ncclSuccess && async != ncclInProgress) {
                const std::string last = ncclGetLastError(comm_);
                release(true);
                throw DeviceError(
                    "NCCL", "ncclSend/ncclRecv", static_cast<long>(async), nccl_code_name(async), __FILE__, __LINE__,
                    fmt::format("{}{}", ncclGetErrorString(async), last.empty() ? "" : " (" + last + ")"));
            }
            std::this_thread::yield();
        }
    }

private:
    void release(bool abort) noexcept
    {
        if (comm_) (void)(abort ? ncclCommAbort(comm_) : ncclCommDestroy(comm_));
        comm_ = nullptr;
        if (done_) cudaEventDestroy(done_);
        if (ready_) cudaEventDestroy(ready_);
        if (stream_) cudaStreamDestroy(stream_);
        done_ = ready_ = nullptr;
        stream_ = nullptr;
    }

    int device_;
    cudaStream_t work_;
    int rank_, ranks_;
    ncclComm_t comm_ = nullptr;
    cudaStream_t stream_ = nullptr;
    cudaEvent_t ready_ = nullptr, done_ = nullptr;
};

class NcclTransport final : public PeerTransport {
public:
    NcclTransport(int device, cudaStream_t work) : device_(device), work_(work) {}

    std::string name() const override { return nccl_name(); }
    std::string device_address() const override
    {
        char bus[64] = {};
        BANYAN_CUDA_CHECK(cudaDeviceGetPCIBusId(bus, sizeof bus, device_));
        return bus;
    }
    std::vector<std::byte> new_key() override
    {
        ncclUniqueId id;
        BANYAN_NCCL_CHECK(ncclGetUniqueId(&id), nullptr);
        std::vector<std::byte> key(sizeof id);
        std::memcpy(key.data(), &id, sizeof id);
        return key;
    }
    std::unique_ptr<PeerExchange> join(std::span<const std::byte> key, int rank, int ranks) override
    {
        ncclUniqueId id;
        if (key.size() != sizeof id)
            throw std::invalid_argument(
                fmt::format("NCCL: a group's key has {} bytes, not the {} of an ncclUniqueId", key.size(), sizeof id));
        std::memcpy(&id, key.data(), sizeof id);
        return std::make_unique<NcclExchange>(device_, work_, id, rank, ranks);
    }

private:
    int device_;
    cudaStream_t work_;
};

} // namespace

std::unique_ptr<PeerTransport> make_nccl_transport(int device, cudaStream_t work)
{
    return std::make_unique<NcclTransport>(device, work);
}

} // namespace banyan::cuda

#endif // BANYAN_HAVE_NCCL
