/**
 * @file comm.cpp
 * @brief Comm over MPI (BANYAN_HAVE_MPI) or as one rank. The only file of banyan that includes mpi.h.
 */
#include "core/parallel/comm.hpp"

#include "core/device/backend.hpp"
#include "core/error.hpp"
#include "core/files/atomic_file.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <fcntl.h>
#include <stdexcept>
#include <unistd.h>

#if defined(BANYAN_HAVE_MPI)
#include <mpi.h>
#endif

namespace banyan {

void* staging_alloc(Backend* be, std::size_t bytes)
{
    return be ? be->alloc_host(bytes) : ::operator new(bytes);
}

void staging_free(Backend* be, void* p) noexcept
{
    if (be)
        be->free_host(p);
    else
        ::operator delete(p);
}

namespace {

Comm g_world;
bool g_mpi = false; // whether init() started MPI

/// Largest piece of one message (MPI counts are int).
constexpr std::size_t piece = std::size_t{1} << 30;

#if defined(BANYAN_HAVE_MPI)
void check(int rc, const char* what)
{
    if (rc == MPI_SUCCESS) return;
    char text[MPI_MAX_ERROR_STRING];
    int len = 0;
    MPI_Error_string(rc, text, &len);
    throw std::runtime_error(fmt::format("MPI: {} failed: {}", what, std::string(text, static_cast<std::size_t>(len))));
}
#endif

} // namespace

#if defined(BANYAN_HAVE_MPI)
/// The MPI communicator of a Comm (a friend of it).
struct CommHandle {
    static MPI_Comm of(const Comm& c) { return c.mpi_ ? *static_cast<MPI_Comm*>(c.mpi_.get()) : MPI_COMM_WORLD; }
};
#endif

void Comm::init(int& argc, char**& argv)
{
#if defined(BANYAN_HAVE_MPI)
    if (!launched()) return; // then MPI_Init finds its peers; otherwise it is not called at all
    int provided = 0;
    check(MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided), "MPI_Init_thread");
    g_mpi = true;
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_rank(MPI_COMM_WORLD, &g_world.rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &g_world.size_);
    MPI_Comm node;
    check(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, g_world.rank_, MPI_INFO_NULL, &node),
          "MPI_Comm_split_type");
    MPI_Comm_rank(node, &g_world.node_rank_);
    MPI_Comm_size(node, &g_world.node_size_);
    MPI_Comm_free(&node);
#else
    (void)argc, (void)argv;
#endif
}

void Comm::finalize()
{
#if defined(BANYAN_HAVE_MPI)
    if (g_mpi) MPI_Finalize();
    g_mpi = false;
#endif
}

void Comm::abort(int code)
{
#if defined(BANYAN_HAVE_MPI)
    if (g_mpi) MPI_Abort(MPI_COMM_WORLD, code);
#endif
    std::_Exit(code);
}

Comm& Comm::world()
{
    return g_world;
}
bool Comm::started()
{
    return g_mpi;
}

bool Comm::launched()
{
    for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_SIZE", "PMI_RANK", "MPI_LOCALNRANKS",
                          "MV2_COMM_WORLD_SIZE", "I_MPI_HYDRA_HOST_FILE"})
        if (std::getenv(v)) return true;
    return false;
}

std::string Comm::library()
{
#if defined(BANYAN_HAVE_MPI)
    char text[MPI_MAX_LIBRARY_VERSION_STRING];
    int len = 0;
    MPI_Get_library_version(text, &len);
    std::string s(text, static_cast<std::size_t>(len));
    s = s.substr(0, s.find_first_of(",\n"));
    return g_mpi ? "MPI (" + s + ")" : "MPI built in, not started (no launcher): one rank";
#else
    return "no MPI (built without it): one rank";
#endif
}

std::optional<Comm> Comm::first(int p) const
{
    if (p < 1 || p > size_) throw std::invalid_argument(fmt::format("Comm::first({}) of {} ranks", p, size_));
    Comm c = *this;
#if defined(BANYAN_HAVE_MPI)
    if (g_mpi) {
        auto handle = std::shared_ptr<MPI_Comm>(new MPI_Comm(MPI_COMM_NULL), [](MPI_Comm* m) {
            int finalized = 0;
            MPI_Finalized(&finalized);
            if (!finalized && *m != MPI_COMM_NULL) MPI_Comm_free(m);
            delete m;
        });
        check(MPI_Comm_split(CommHandle::of(*this), rank_ < p ? 0 : MPI_UNDEFINED, rank_, handle.get()),
              "MPI_Comm_split");
        if (*handle != MPI_COMM_NULL) MPI_Comm_set_errhandler(*handle, MPI_ERRORS_RETURN);
        c.mpi_ = std::move(handle);
    }
#endif
    if (rank_ >= p) return std::nullopt;
    c.size_ = p;
    return c;
}

void Comm::barrier() const
{
#if defined(BANYAN_HAVE_MPI)
    if (g_mpi) check(MPI_Barrier(CommHandle::of(*this)), "MPI_Barrier");
#endif
}

void Comm::sum(std::span<double> v) const
{
    if (size_ == 1 || v.empty()) return;
    // Gathered and added in rank order on every rank: the same bits on every rank and in every run.
    const auto all = banyan::all_gather<double>(*this, std::span<const double>(v));
    for (std::size_t k = 0; k < v.size(); ++k) {
        double s = 0;
        for (int r = 0; r < size_; ++r)
            s += all[static_cast<std::size_t>(r) * v.size() + k];
        v[k] = s;
    }
}

#if defined(BANYAN_HAVE_MPI)
namespace {
template <class T> MPI_Datatype mpi_type();
template <> MPI_Datatype mpi_type<float>()
{
    return MPI_FLOAT;
}
template <> MPI_Datatype mpi_type<double>()
{
    return MPI_DOUBLE;
}
template <> MPI_Datatype mpi_type<std::uint64_t>()
{
    return MPI_UINT64_T;
}

template <class T> void reduce(std::span<T> v, MPI_Op op, MPI_Comm comm)
{
    if (v.empty()) return;
    check(MPI_Allreduce(MPI_IN_PLACE, v.data(), static_cast<int>(v.size()), mpi_type<T>(), op, comm), "MPI_Allreduce");
}
} // namespace
#define BANYAN_REDUCE(v, op)                                                                                           \
    if (size_ > 1) reduce(v, op, CommHandle::of(*this))
#else
#define BANYAN_REDUCE(v, op) (void)v
#endif

void Comm::sum(std::span<std::uint64_t> v) const
{
    BANYAN_REDUCE(v, MPI_SUM);
}
void Comm::min(std::span<float> v) const
{
    BANYAN_REDUCE(v, MPI_MIN);
}
void Comm::max(std::span<float> v) const
{
    BANYAN_REDUCE(v, MPI_MAX);
}
void Comm::max(std::span<double> v) const
{
    BANYAN_REDUCE(v, MPI_MAX);
}
void Comm::max(std::span<std::uint64_t> v) const
{
    BANYAN_REDUCE(v, MPI_MAX);
}
#undef BANYAN_REDUCE

bool Comm::any(bool flag) const
{
    std::uint64_t f = flag ? 1 : 0;
    max(std::span<std::uint64_t>(&f, 1));
    return f != 0;
}

std::uint64_t Comm::exclusive_prefix(std::uint64_t v) const
{
    if (size_ == 1) return 0;
    const auto all = banyan::all_gather<std::uint64_t>(*this, std::span<const std::uint64_t>(&v, 1));
    std::uint64_t s = 0;
    for (int r = 0; r < rank_; ++r)
        s += all[static_cast<std::size_t>(r)];
    return s;
}

std::vector<std::byte> Comm::all_gather(std::span<const std::byte> mine, std::vector<std::size_t>* counts) const
{
    if (size_ == 1) {
        if (counts) counts->assign(1, mine.size());
        return {mine.begin(), mine.end()};
    }
    // Every rank sends the same bytes to every rank: an exchange with one part repeated (pieces of <= 1 GiB).
    std::vector<std::byte> send;
    std::vector<std::size_t> offsets(static_cast<std::size_t>(size_) + 1, 0);
    send.reserve(mine.size() * static_cast<std::size_t>(size_));
    for (int r = 0; r < size_; ++r) {
        send.insert(send.end(), mine.begin(), mine.end());
        offsets[static_cast<std::size_t>(r) + 1] = send.size();
    }
    std::vector<std::size_t> recv_offsets;
    auto out = exchange(send, offsets, recv_offsets);
    if (counts) {
        counts->resize(static_cast<std::size_t>(size_));
        for (int r = 0; r < size_; ++r)
            (*counts)[static_cast<std::size_t>(r)] =
                recv_offsets[static_cast<std::size_t>(r) + 1] - recv_offsets[static_cast<std::size_t>(r)];
    }
    return out;
}

void Comm::broadcast(std::vector<std::byte>& data, int root) const
{
#if defined(BANYAN_HAVE_MPI)
    if (size_ == 1) return;
    std::uint64_t n = data.size();
    const MPI_Comm comm = CommHandle::of(*this);
    check(MPI_Bcast(&n, 1, MPI_UINT64_T, root, comm), "MPI_Bcast");
    data.resize(n);
    for (std::size_t done = 0; done < n; done += piece) {
        const int m = static_cast<int>(std::min(piece, n - done));
        check(MPI_Bcast(data.data() + done, m, MPI_BYTE, root, comm), "MPI_Bcast");
    }
#else
    (void)data, (void)root;
#endif
}

namespace {

/// Comm::exchange into either kind of byte vector.
template <class Bytes>
void exchange_into(const Comm& comm, std::span<const std::byte> send, std::span<const std::size_t> send_offsets,
                   Bytes& recv, std::vector<std::size_t>& recv_offsets)
{
    const std::size_t P = static_cast<std::size_t>(comm.size());
    if (send_offsets.size() != P + 1 || send_offsets[P] > send.size())
        throw std::invalid_argument("Comm::exchange: send_offsets must have one entry per rank and one more");
    const std::size_t me = static_cast<std::size_t>(comm.rank());
    std::vector<std::uint64_t> out_bytes(P), in_bytes(P);
    for (std::size_t q = 0; q < P; ++q)
        out_bytes[q] = send_offsets[q + 1] - send_offsets[q];
#if defined(BANYAN_HAVE_MPI)
    if (P > 1)
        check(MPI_Alltoall(out_bytes.data(), 1, MPI_UINT64_T, in_bytes.data(), 1, MPI_UINT64_T, CommHandle::of(comm)),
              "MPI_Alltoall");
    else
        in_bytes = out_bytes;
#else
    in_bytes = out_bytes;
#endif
    recv_offsets.assign(P + 1, 0);
    for (std::size_t q = 0; q < P; ++q)
        recv_offsets[q + 1] = recv_offsets[q] + in_bytes[q];
    recv.resize(recv_offsets[P]);
    // Our own part without MPI; the others as messages of at most 1 GiB each, all posted at once. Both sides know
    // every byte count, so the pieces match one to one.
    std::copy(send.begin() + static_cast<std::ptrdiff_t>(send_offsets[me]),
              send.begin() + static_cast<std::ptrdiff_t>(send_offsets[me + 1]),
              recv.begin() + static_cast<std::ptrdiff_t>(recv_offsets[me]));
#if defined(BANYAN_HAVE_MPI)
    std::vector<MPI_Request> requests;
    auto post = [&](bool sending, std::size_t q, std::size_t bytes, std::size_t at) {
        for (std::size_t done = 0; done < bytes; done += piece) {
            const int m = static_cast<int>(std::min(piece, bytes - done));
            requests.emplace_back();
            if (sending)
                check(MPI_Isend(send.data() + at + done, m, MPI_BYTE, static_cast<int>(q), 77, CommHandle::of(comm),
                                &requests.back()),
                      "MPI_Isend");
            else
                check(MPI_Irecv(recv.data() + at + done, m, MPI_BYTE, static_cast<int>(q), 77, CommHandle::of(comm),
                                &requests.back()),
                      "MPI_Irecv");
        }
    };
    for (std::size_t q = 0; q < P; ++q)
        if (q != me) post(false, q, in_bytes[q], recv_offsets[q]);
    for (std::size_t q = 0; q < P; ++q)
        if (q != me) post(true, q, out_bytes[q], send_offsets[q]);
    if (!requests.empty())
        check(MPI_Waitall(static_cast<int>(requests.size()), requests.data(), MPI_STATUSES_IGNORE), "MPI_Waitall");
#endif
}

} // namespace

std::vector<std::byte> Comm::exchange(std::span<const std::byte> send, std::span<const std::size_t> send_offsets,
                                      std::vector<std::size_t>& recv_offsets) const
{
    std::vector<std::byte> recv;
    exchange_into(*this, send, send_offsets, recv, recv_offsets);
    return recv;
}

void Comm::exchange(std::span<const std::byte> send, std::span<const std::size_t> send_offsets, HostBytes& recv,
                    std::vector<std::size_t>& recv_offsets) const
{
    exchange_into(*this, send, send_offsets, recv, recv_offsets);
}

void Comm::write_file(const std::string& path, std::uint64_t total_bytes, std::uint64_t offset,
                      std::span<const std::byte> bytes) const
{
    if (offset + bytes.size() > total_bytes) throw std::invalid_argument("Comm::write_file: part beyond the file");
#if defined(BANYAN_HAVE_MPI)
    if (size_ > 1) {
        MPI_File f;
        // Rank 0 removes an old file first: MPI_MODE_CREATE does not truncate.
        if (rank_ == 0) ::unlink(path.c_str());
        barrier();
        int rc =
            MPI_File_open(CommHandle::of(*this), path.c_str(), MPI_MODE_CREATE | MPI_MODE_WRONLY, MPI_INFO_NULL, &f);
        if (rc != MPI_SUCCESS) throw std::runtime_error(fmt::format("cannot create {} (MPI-IO)", path));
        try {
            check(MPI_File_set_size(f, static_cast<MPI_Offset>(total_bytes)), "MPI_File_set_size");
            // Collective writes in rounds of <= 1 GiB per rank; ranks with less to write join with empty parts.
            std::uint64_t rounds = (bytes.size() + piece - 1) / piece;
            max(std::span<std::uint64_t>(&rounds, 1));
            for (std::uint64_t k = 0; k < rounds; ++k) {
                const std::size_t done = std::min<std::size_t>(k * piece, bytes.size());
                const int m = static_cast<int>(std::min(piece, bytes.size() - done));
                check(MPI_File_write_at_all(f, static_cast<MPI_Offset>(offset + done), bytes.data() + done, m, MPI_BYTE,
                                            MPI_STATUS_IGNORE),
                      "MPI_File_write_at_all");
            }
            check(MPI_File_sync(f), "MPI_File_sync");
        } catch (...) {
            MPI_File_close(&f);
            throw;
        }
        check(MPI_File_close(&f), "MPI_File_close");
        return;
    }
#endif
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) throw std::runtime_error(fmt::format("cannot create {}: {}", path, std::strerror(errno)));
    std::size_t done = 0;
    bool ok = ::ftruncate(fd, static_cast<off_t>(total_bytes)) == 0;
    while (ok && done < bytes.size()) {
        const ssize_t w = ::pwrite(fd, bytes.data() + done, bytes.size() - done, static_cast<off_t>(offset + done));
        if (w < 0 && errno == EINTR) continue;
        ok = w > 0;
        if (ok) done += static_cast<std::size_t>(w);
    }
    const int err = errno;
    ok = ok && ::fsync(fd) == 0;
    ::close(fd);
    if (!ok) throw std::runtime_error(fmt::format("writing {} failed: {}", path, io_reason(err)));
}

} // namespace banyan
