/**
 * @file outputs.cpp
 * @brief A run's outputs: the output folder's files, or none (outputs.hpp).
 */
#include "core/simulation/outputs.hpp"

#include "core/error.hpp"
#include "core/files/atomic_file.hpp"
#include "core/simulation/checkpoint.hpp"

#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <unistd.h>

namespace banyan {

namespace fs = std::filesystem;

namespace {

/// Removes leftovers of atomic writes interrupted by a kill ("<name>.tmp.<pid>").
void remove_stale_temporaries(const std::string& dir)
{
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(dir, ec)) {
        const std::string name = e.path().filename().string();
        const bool ours = name.rfind("snapshot_", 0) == 0 || name.rfind("checkpoint.bin", 0) == 0;
        if (ours && name.find(".tmp.") != std::string::npos) fs::remove(e.path(), ec);
    }
}

/// Appends @p text to @p path in one write of whole lines: a kill leaves at most a cut last line, which a restart
/// truncates away.
void append_whole_lines(const std::string& path, const std::string& text)
{
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd < 0) throw std::runtime_error(fmt::format("cannot open {}: {}", path, std::strerror(errno)));
    std::size_t done = 0;
    while (done < text.size()) {
        const ssize_t w = ::write(fd, text.data() + done, text.size() - done);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) {
            const int err = errno;
            ::close(fd);
            throw std::runtime_error(fmt::format("writing {} failed: {}", path, io_reason(err)));
        }
        done += static_cast<std::size_t>(w);
    }
    ::close(fd);
}

class FileOutputs final : public RunOutputs {
public:
    explicit FileOutputs(std::string dir) : dir_(std::move(dir)) {}

    bool logs() const noexcept override { return true; }
    bool writes_snapshots() const noexcept override { return true; }
    void prepare(bool fresh) const override { prepare_output_dir(dir_, fresh); }

    void start_log(const Comm& comm) const override
    {
        if (comm.rank() != 0) return;
        remove_stale_temporaries(dir_);
        std::error_code ec;
        fs::resize_file(log_path(), 0, ec);
    }

    std::uint64_t resume_log(std::uint64_t log_bytes, const Comm& comm) const override
    {
        std::uint64_t kept = log_bytes;
        if (comm.rank() == 0) {
            remove_stale_temporaries(dir_);
            std::error_code ec;
            const auto size = fs::file_size(log_path(), ec);
            if (!ec && size > log_bytes) fs::resize_file(log_path(), log_bytes, ec);
            if (ec || size < log_bytes) kept = ec ? 0 : size; // a log removed or cut by hand: start it afresh
        }
        std::vector<std::byte> b(sizeof kept);
        std::memcpy(b.data(), &kept, sizeof kept);
        comm.broadcast(b, 0);
        std::memcpy(&kept, b.data(), sizeof kept);
        return kept;
    }

    void append_log(const std::string& text, const Comm& comm) const override
    {
        // Over several ranks every rank forms the same line (the sums are the same bits everywhere); rank 0
        // writes it.
        if (comm.rank() == 0) append_whole_lines(log_path(), text);
    }

    std::optional<std::string> snapshot_path(std::uint64_t number, SnapshotFormat format) const override
    {
        return (fs::path(dir_) / fmt::format("snapshot_{:05d}.{}", number, to_string(format))).string();
    }

    std::optional<std::string> checkpoint_path(const Comm& comm, const std::string& slot) const override
    {
        return checkpoint_rank_file(first_checkpoint(), static_cast<std::uint64_t>(comm.rank()), slot);
    }

    void keep_checkpoint_set(const Comm& comm, std::uint64_t ranks, const std::string& slot) const override
    {
        if (comm.rank() != 0) return;
        // Files named checkpoint.bin.rankR or checkpoint.bin.rankR.S, and of those only the set's are kept.
        const std::string prefix = "checkpoint.bin.rank";
        std::error_code ec;
        for (const auto& e : fs::directory_iterator(dir_, ec)) {
            const std::string name = e.path().filename().string();
            if (name.rfind(prefix, 0) != 0) continue;
            const std::size_t digits = name.find_first_not_of("0123456789", prefix.size());
            const std::string rank = name.substr(prefix.size(), digits - prefix.size());
            const std::string rest = digits == std::string::npos ? std::string() : name.substr(digits);
            if (rank.empty() || rank.size() > 9 || rank == "0" || !(rest.empty() || rest == ".a" || rest == ".b"))
                continue;
            const bool kept = std::stoull(rank) < ranks && rest == (slot.empty() ? slot : "." + slot);
            if (!kept) fs::remove(e.path(), ec);
        }
    }

private:
    std::string log_path() const { return (fs::path(dir_) / "energy.csv").string(); }
    std::string first_checkpoint() const { return (fs::path(dir_) / "checkpoint.bin").string(); }
    std::string dir_;
};

class NoOutputs final : public RunOutputs {
public:
    bool logs() const noexcept override { return false; }
    bool writes_snapshots() const noexcept override { return false; }
    void prepare(bool) const override {}
    void start_log(const Comm&) const override {}
    std::uint64_t resume_log(std::uint64_t log_bytes, const Comm&) const override { return log_bytes; }
    void append_log(const std::string&, const Comm&) const override {}
    std::optional<std::string> snapshot_path(std::uint64_t, SnapshotFormat) const override { return std::nullopt; }
    std::optional<std::string> checkpoint_path(const Comm&, const std::string&) const override { return std::nullopt; }
    void keep_checkpoint_set(const Comm&, std::uint64_t, const std::string&) const override {}
};

} // namespace

std::shared_ptr<RunOutputs> RunOutputs::files(std::string dir)
{
    return std::make_shared<FileOutputs>(std::move(dir));
}

std::shared_ptr<RunOutputs> RunOutputs::none()
{
    return std::make_shared<NoOutputs>();
}

void prepare_output_dir(const std::string& dir, bool fresh)
{
    std::error_code ec;
    if (!fresh && !fs::exists(fs::path(dir) / "checkpoint.bin"))
        throw UsageError(fmt::format("run: no checkpoint to continue from in {} ({} is missing)", dir,
                                     (fs::path(dir) / "checkpoint.bin").string()));
    fs::create_directories(dir, ec);
    if (ec || !fs::is_directory(dir))
        throw UsageError(fmt::format("run: cannot create the output folder {}: {}", dir,
                                     ec ? ec.message() : "it exists and is not a folder"));
    const std::string probe = fmt::format("{}/.banyan-write-test.{}", dir, ::getpid());
    {
        std::ofstream f(probe);
        if (!f || !(f << "x") || !f.flush())
            throw UsageError(fmt::format("run: the output folder {} is not writable: {}", dir, std::strerror(errno)));
    }
    fs::remove(probe, ec);
    if (fresh && fs::exists(fs::path(dir) / "checkpoint.bin"))
        throw UsageError(fmt::format("run: {} holds a run already (checkpoint.bin): continue it with "
                                     "`banyan run --restart {}`, or choose another --out",
                                     dir, dir));
}

} // namespace banyan
