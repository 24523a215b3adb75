/**
 * @file comm.hpp
 * @brief The ranks of a parallel run and what they say to each other: a thin layer over MPI (one rank per GPU),
 *        and a one-rank stand-in where banyan is built without MPI or started without a launcher.
 *
 * Only comm.cpp includes mpi.h: the rest of banyan sees ranks, sums, gathers, exchanges of bytes and one collective
 * file write, and runs unchanged on one rank. MPI is initialised only when a launcher started the process (mpirun,
 * srun, mpiexec: they set PMIX_RANK, OMPI_COMM_WORLD_SIZE, PMI_SIZE or similar); a plain `banyan run` never touches
 * MPI. Every collective below must be called by every rank in the same order; exchanges larger than MPI's int counts
 * are sent in pieces of at most 1 GiB.
 */
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <new>
#include <optional>
#include <type_traits>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace banyan {

class Backend;

/// Memory for HostBytes: from @p be's alloc_host (page-locked under CUDA, and under OpenCL where the platform pins
/// mapped buffers), or plain when @p be is null.
void* staging_alloc(Backend* be, std::size_t bytes);
void staging_free(Backend* be, void* p) noexcept;

/// The allocator of HostBytes. Its resize() leaves new elements uninitialised: host staging buffers of hundreds of
/// megabytes that are written over at once (downloads, received messages) are not zero-filled first. With a
/// backend, the memory is the backend's staging memory (Backend::alloc_host), which the device copies to and from
/// at the bus's speed.
template <class T> struct StagingAllocator {
    using value_type = T;
    using propagate_on_container_move_assignment = std::true_type;
    using propagate_on_container_swap = std::true_type;
    Backend* backend = nullptr;

    StagingAllocator() = default;
    explicit StagingAllocator(Backend* be) noexcept : backend(be) {}
    template <class U> StagingAllocator(const StagingAllocator<U>& o) noexcept : backend(o.backend) {}
    T* allocate(std::size_t n) { return static_cast<T*>(staging_alloc(backend, n * sizeof(T))); }
    void deallocate(T* p, std::size_t) noexcept { staging_free(backend, p); }
    template <class U> void construct(U* p) noexcept { ::new (static_cast<void*>(p)) U; }
    template <class U, class... A> void construct(U* p, A&&... a)
    {
        ::new (static_cast<void*>(p)) U(std::forward<A>(a)...);
    }
    template <class U> bool operator==(const StagingAllocator<U>& o) const noexcept { return backend == o.backend; }
};

/// Bytes staged on the host for the ranks' exchanges; kept between evaluations, so that pages are touched once.
using HostBytes = std::vector<std::byte, StagingAllocator<std::byte>>;

class Comm {
public:
    /// Starts MPI when a launcher started this process and banyan was built with MPI; otherwise one rank. Call once,
    /// first thing in main (MPI may consume its own arguments).
    static void init(int& argc, char**& argv);
    /// Ends MPI (when init started it). Call once, at the end of main.
    static void finalize();
    /// Stops every rank at once with @p code (a rank that failed while others wait in a collective).
    [[noreturn]] static void abort(int code);
    /// The ranks of this run (one rank when MPI is not in use).
    static Comm& world();
    /// Whether init() started MPI (a launcher started this process; `mpirun -n 1` too).
    static bool started();
    /// Whether an MPI launcher (mpirun, mpiexec, srun with PMI) started this process, built with MPI or not: its
    /// environment says so. init() starts MPI only then.
    static bool launched();

    int rank() const noexcept { return rank_; }
    int size() const noexcept { return size_; }
    bool parallel() const noexcept { return size_ > 1; }
    /// The rank among the ranks of this node, and how many ranks the node runs (MPI_COMM_TYPE_SHARED): rank i of a
    /// node takes the node's device i mod (devices).
    int node_rank() const noexcept { return node_rank_; }
    int node_size() const noexcept { return node_size_; }
    /// "MPI (Open MPI v4.1.6)" and the like, or "no MPI" (for logs).
    static std::string library();

    /// The first @p p ranks of this one (1 <= p <= size()) as a Comm of their own, on those ranks; std::nullopt on
    /// the others. Collective: every rank calls it. For work on fewer ranks than were started (the tests of a
    /// restart on another number of ranks).
    std::optional<Comm> first(int p) const;

    void barrier() const;

    /// Element-wise sums, minima and maxima over all ranks, in place. Sums of doubles are formed in rank order on
    /// every rank (gathered, then added 0, 1, ..., P-1), so that they are the same bits whatever MPI's reduction
    /// tree: a run is reproducible on the same number of ranks.
    void sum(std::span<double> v) const;
    void sum(std::span<std::uint64_t> v) const;
    void min(std::span<float> v) const;
    void max(std::span<float> v) const;
    void max(std::span<double> v) const;
    void max(std::span<std::uint64_t> v) const;
    /// Whether @p flag holds on any rank.
    bool any(bool flag) const;
    /// Sum over the ranks below this one.
    std::uint64_t exclusive_prefix(std::uint64_t v) const;

    /// Every rank's bytes, concatenated in rank order; counts[r] = bytes from rank r when given.
    std::vector<std::byte> all_gather(std::span<const std::byte> mine,
                                      std::vector<std::size_t>* counts = nullptr) const;
    /// Rank @p root's @p data on every rank (resized there).
    void broadcast(std::vector<std::byte>& data, int root) const;
    /// Personalised exchange: rank r's bytes for rank q are send[send_offsets[q], send_offsets[q + 1]); returns what
    /// every rank sent to this one, in rank order, with recv_offsets (P + 1 entries) marking each rank's part.
    std::vector<std::byte> exchange(std::span<const std::byte> send, std::span<const std::size_t> send_offsets,
                                    std::vector<std::size_t>& recv_offsets) const;
    /// The same into @p recv (resized, not cleared first): a buffer kept from one exchange to the next.
    void exchange(std::span<const std::byte> send, std::span<const std::size_t> send_offsets, HostBytes& recv,
                  std::vector<std::size_t>& recv_offsets) const;

    /// Writes one file together: every rank writes its @p bytes at byte @p offset (parts must not overlap) into
    /// @p path, which is created or truncated to @p total_bytes. Collective; one rank, plain POSIX writes.
    void write_file(const std::string& path, std::uint64_t total_bytes, std::uint64_t offset,
                    std::span<const std::byte> bytes) const;

private:
    friend struct CommHandle; // comm.cpp: the MPI communicator behind a Comm
    int rank_ = 0, size_ = 1, node_rank_ = 0, node_size_ = 1;
    std::shared_ptr<void> mpi_; // a communicator made by first(); none: MPI_COMM_WORLD
};

/// Typed helpers over Comm's byte exchanges.
template <class T>
std::vector<T> all_gather(const Comm& comm, std::span<const T> mine, std::vector<std::size_t>* counts = nullptr)
{
    std::vector<std::size_t> bytes;
    const auto raw = comm.all_gather(std::as_bytes(mine), &bytes);
    std::vector<T> out(raw.size() / sizeof(T));
    if (!raw.empty()) std::memcpy(out.data(), raw.data(), raw.size());
    if (counts) {
        counts->resize(bytes.size());
        for (std::size_t r = 0; r < bytes.size(); ++r)
            (*counts)[r] = bytes[r] / sizeof(T);
    }
    return out;
}

/// What Comm::exchange sends: the bytes, and the offsets of the ranks' parts in them (ranks + 1 entries).
struct Packed {
    std::vector<std::byte> bytes;
    std::vector<std::size_t> offsets;
};

/// Records of @p bytes each packed for Comm::exchange: record i goes to rank @p dest[i] (of @p ranks), written by
/// @p write(i, at) at @p at; each rank's records in the order of i.
template <class Write>
Packed pack_by_rank(std::span<const std::size_t> dest, std::size_t ranks, std::size_t bytes, Write&& write)
{
    Packed p{std::vector<std::byte>(dest.size() * bytes), std::vector<std::size_t>(ranks + 1, 0)};
    for (const std::size_t q : dest)
        ++p.offsets[q + 1];
    for (std::size_t q = 0; q < ranks; ++q)
        p.offsets[q + 1] += p.offsets[q];
    std::vector<std::size_t> fill(p.offsets.begin(), p.offsets.end() - 1);
    for (std::size_t i = 0; i < dest.size(); ++i)
        write(i, p.bytes.data() + fill[dest[i]]++ * bytes);
    for (auto& o : p.offsets)
        o *= bytes;
    return p;
}

} // namespace banyan
