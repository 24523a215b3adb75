/**
 * @file atomic_file.cpp
 * @brief Temporary-name-then-rename writes (POSIX rename is atomic within one file system), and what an output path
 *        may be: written through to devices and FIFOs, followed through links, refused where it is something else.
 */
#include "core/files/atomic_file.hpp"

#include "core/error.hpp"

#include <fmt/format.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <streambuf>
#include <sys/stat.h>
#include <unistd.h>
#include <vector>

namespace banyan {

namespace {

namespace fs = std::filesystem;

constexpr const char* allowed = "an output may be a regular file (replaced whole), a new name in an existing folder, "
                                "a character device such as /dev/null or a FIFO (written through), or a link to one";

constexpr int not_a_descriptor = -2, another_process = -1;

/// Where the bytes of an output go.
struct Output {
    enum Kind { replace, stream } kind = replace;
    std::string path;          ///< the regular file to replace (a link's final target), or the device or FIFO to open
    int fd = not_a_descriptor; ///< an open descriptor of this process that @p path names (/dev/stdout): written to
};

std::string reason(int err)
{
    return io_reason(err);
}

/// What is refused, in words; nullptr for what may be written.
const char* refused_kind(mode_t mode)
{
    if (S_ISDIR(mode)) return "a folder";
    if (S_ISBLK(mode)) return "a block device";
    if (S_ISSOCK(mode)) return "a socket";
    if (S_ISREG(mode) || S_ISCHR(mode) || S_ISFIFO(mode)) return nullptr;
    return "neither a regular file, a character device nor a FIFO";
}

[[noreturn]] void refuse(const std::string& path, const std::string& what)
{
    throw UsageError(fmt::format("cannot write {}: it is {}; {}", path, what, allowed));
}

/// For a link in a /proc/PID/fd folder (reached as such or through /dev/fd, /dev/stdout, ...), an open descriptor
/// whose "target" may be a pipe or a terminal rather than a path: its number when it is one of this process's,
/// another_process when not; otherwise not_a_descriptor.
int descriptor_of_link(const std::string& link)
{
    const fs::path parent = fs::path(link).parent_path();
    std::error_code ec;
    const fs::path folder = fs::canonical(parent.empty() ? fs::path(".") : parent, ec);
    if (ec || folder.string().rfind("/proc/", 0) != 0 || folder.filename() != "fd") return not_a_descriptor;
    if (folder != fs::path(fmt::format("/proc/{}/fd", ::getpid()))) return another_process;
    const std::string name = fs::path(link).filename().string();
    if (name.empty() || name.size() > 9 || name.find_first_not_of("0123456789") != std::string::npos)
        return another_process;
    return std::stoi(name);
}

/// The descriptor that following the link @p path passes through (/dev/stdout -> /proc/self/fd/1), as above.
int descriptor_of(const std::string& path)
{
    std::string hop = path;
    for (int i = 0; i < 40; ++i) {
        struct stat st {};
        if (::lstat(hop.c_str(), &st) != 0 || !S_ISLNK(st.st_mode)) break;
        if (const int fd = descriptor_of_link(hop); fd != not_a_descriptor) return fd;
        std::error_code ec;
        fs::path next = fs::read_symlink(hop, ec);
        if (ec) break;
        if (next.is_relative()) next = fs::path(hop).parent_path() / next;
        hop = next.string();
    }
    return not_a_descriptor;
}

/// Where the bytes for @p path go, or UsageError naming the path, what it is and what is allowed.
Output classify(const std::string& path)
{
    struct stat st {};
    if (::lstat(path.c_str(), &st) != 0) {
        const int err = errno;
        if (err == ENOENT) return {Output::replace, path}; // a new file (a missing folder shows at its creation)
        throw UsageError(fmt::format("cannot write {}: {}", path, reason(err)));
    }
    if (!S_ISLNK(st.st_mode)) {
        if (const char* what = refused_kind(st.st_mode)) refuse(path, what);
        return {S_ISREG(st.st_mode) ? Output::replace : Output::stream, path};
    }
    std::error_code ec;
    const std::string target = fs::read_symlink(path, ec).string();
    if (::stat(path.c_str(), &st) != 0) {
        const int err = errno;
        if (err == ENOENT)
            throw UsageError(fmt::format("cannot write {}: it is a dangling symbolic link (to {}, which does not "
                                         "exist); give the path to write, or make what the link names first",
                                         path, target));
        if (err == ELOOP) refuse(path, fmt::format("a symbolic link to {} in a loop of links", target));
        throw UsageError(fmt::format("cannot write {} (a symbolic link to {}): {}", path, target, reason(err)));
    }
    // One of this process's open descriptors (/dev/stdout): written as its own output is, whatever it leads to (a
    // terminal, a pipe, a socket, a file).
    const int fd = descriptor_of(path);
    if (fd >= 0) {
        const int flags = ::fcntl(fd, F_GETFL);
        if (flags < 0 || (flags & O_ACCMODE) == O_RDONLY)
            throw UsageError(fmt::format("cannot write {}: descriptor {} is {}", path, fd,
                                         flags < 0 ? "not open" : "open for reading only"));
        return {Output::stream, path, fd};
    }
    if (const char* what = refused_kind(st.st_mode))
        refuse(path, fmt::format("a symbolic link to {}, which is {}", target, what));
    if (fd == another_process) return {Output::stream, path, fd};
    if (!S_ISREG(st.st_mode)) return {Output::stream, path}; // a device or FIFO: open() follows the links
    // A regular file: replaced whole where it lies, so that the link stays a link.
    char* resolved = ::realpath(path.c_str(), nullptr);
    if (!resolved)
        throw UsageError(fmt::format("cannot write {} (a symbolic link to {}): {}", path, target, reason(errno)));
    Output o{Output::replace, resolved};
    std::free(resolved);
    return o;
}

/// A stream buffer writing into a file descriptor; the first failed write's errno is kept.
class FdBuf : public std::streambuf {
public:
    explicit FdBuf(int fd) : fd_(fd), buf_(std::size_t{1} << 20) { setp(buf_.data(), buf_.data() + buf_.size()); }

    int error() const { return error_; }

protected:
    int_type overflow(int_type c) override
    {
        if (!drain()) return traits_type::eof();
        if (!traits_type::eq_int_type(c, traits_type::eof())) {
            *pptr() = traits_type::to_char_type(c);
            pbump(1);
        }
        return traits_type::not_eof(c);
    }

    int sync() override { return drain() ? 0 : -1; }

    std::streamsize xsputn(const char* s, std::streamsize n) override
    {
        if (n < static_cast<std::streamsize>(buf_.size())) return std::streambuf::xsputn(s, n);
        return drain() && write_all(s, static_cast<std::size_t>(n)) ? n : 0; // large blocks: not copied
    }

private:
    bool drain()
    {
        if (pptr() > pbase() && !write_all(pbase(), static_cast<std::size_t>(pptr() - pbase()))) return false;
        setp(buf_.data(), buf_.data() + buf_.size());
        return true;
    }

    bool write_all(const char* p, std::size_t n)
    {
        while (error_ == 0 && n > 0) {
            const ssize_t w = ::write(fd_, p, n);
            if (w < 0 && errno == EINTR) continue;
            if (w <= 0) {
                error_ = w < 0 ? errno : EIO;
                break;
            }
            p += w;
            n -= static_cast<std::size_t>(w);
        }
        return error_ == 0;
    }

    int fd_;
    std::vector<char> buf_;
    int error_ = 0;
};

/// Streams @p write's bytes into the open @p fd (closed here), synced to disk if @p durable; runtime_error naming
/// @p shown when a write fails.
void fill(int fd, const std::string& shown, const std::function<void(std::ostream&)>& write, bool durable)
{
    try {
        FdBuf buf(fd);
        std::ostream out(&buf);
        write(out);
        out.flush();
        if (!out || buf.error() != 0)
            throw std::runtime_error(
                fmt::format("writing {} failed: {}", shown, buf.error() != 0 ? reason(buf.error()) : "stream error"));
        if (durable && ::fsync(fd) != 0)
            throw std::runtime_error(fmt::format("writing {} failed: {}", shown, reason(errno)));
    } catch (...) {
        ::close(fd);
        throw;
    }
    if (::close(fd) != 0) throw std::runtime_error(fmt::format("writing {} failed: {}", shown, reason(errno)));
}

/// Writes through to a character device or a FIFO (which waits for its reader), or to an open descriptor: one of
/// this process's shares its offset (what was printed to stdout so far comes first), another's is appended to.
void write_through(const std::string& path, const Output& o, const std::function<void(std::ostream&)>& write)
{
    if (o.fd >= 0) std::fflush(nullptr);
    const int fd = o.fd >= 0 ? ::fcntl(o.fd, F_DUPFD_CLOEXEC, 0)
                             : ::open(o.path.c_str(), O_WRONLY | O_CLOEXEC | (o.fd == another_process ? O_APPEND : 0));
    if (fd < 0) throw UsageError(fmt::format("cannot write {}: {}", path, reason(errno)));
    fill(fd, path, write, false);
}

/// @p tmp's bytes into @p out.
void copy_from(const std::string& tmp, std::ostream& out)
{
    std::ifstream in(tmp, std::ios::binary);
    if (!in) throw std::runtime_error(fmt::format("cannot read {}: {}", tmp, reason(errno)));
    std::vector<char> buf(std::size_t{1} << 20);
    while (in) {
        in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
        out.write(buf.data(), in.gcount());
    }
    if (in.bad()) throw std::runtime_error(fmt::format("reading {} failed", tmp));
}

} // namespace

std::string io_reason(int err)
{
    if (err == EFBIG)
        return fmt::format("{} (the file-size limit, ulimit -f, or the file system's largest file)",
                           std::strerror(err));
    return std::strerror(err);
}

std::string temporary_path(const std::string& path, const std::string& tag)
{
    const Output o = classify(path);
    if (o.kind == Output::replace) return fmt::format("{}.tmp.{}", o.path, tag);
    // A device or FIFO has no folder of its own to write in (/dev): the system's temporary folder instead.
    return (fs::temp_directory_path() / fmt::format("banyan-{}.tmp.{}", fs::path(path).filename().string(), tag))
        .string();
}

void rename_durably(const std::string& tmp, const std::string& path)
{
    const Output o = classify(path);
    if (o.kind == Output::stream) {
        write_through(path, o, [&](std::ostream& out) { copy_from(tmp, out); });
        std::remove(tmp.c_str());
        return;
    }
    // Make the data durable before the rename makes it visible.
    const int fd = ::open(tmp.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        ::fsync(fd);
        ::close(fd);
    }
    if (std::rename(tmp.c_str(), o.path.c_str()) == 0) return;
    const int err = errno;
    if (err == EXDEV && o.path != path) {
        // A link to a file on another file system: a temporary file beside the target, renamed there.
        write_file_atomically(o.path, [&](std::ostream& out) { copy_from(tmp, out); });
        std::remove(tmp.c_str());
        return;
    }
    throw std::runtime_error(fmt::format("cannot rename {} to {}: {}", tmp, o.path, reason(err)));
}

void write_file_atomically(const std::string& path, const std::function<void(std::ostream&)>& write)
{
    const Output o = classify(path);
    if (o.kind == Output::stream) return write_through(path, o, write);
    const std::string shown = o.path == path ? path : fmt::format("{} (the target of the link {})", o.path, path);
    const std::string tmp = fmt::format("{}.tmp.{}", o.path, ::getpid());
    bool created = false;
    try {
        const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0666);
        if (fd < 0) {
            const int err = errno;
            const fs::path parent = fs::path(o.path).parent_path();
            const std::string folder = parent.empty() ? std::string(".") : parent.string();
            throw UsageError(fmt::format("cannot write {}: cannot create a file in {}: {}", shown, folder,
                                         err == ENOENT ? "that folder does not exist" : reason(err)));
        }
        created = true;
        fill(fd, tmp, write, true);
        if (std::rename(tmp.c_str(), o.path.c_str()) != 0)
            throw std::runtime_error(fmt::format("cannot rename {} to {}: {}", tmp, o.path, reason(errno)));
    } catch (...) {
        if (created) std::remove(tmp.c_str());
        throw;
    }
}

} // namespace banyan
