/**
 * @file atomic_file.cpp
 * @brief Temporary-name-then-rename writes (POSIX rename is atomic within one file system).
 */
#include "core/files/atomic_file.hpp"

#include <fmt/format.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <fstream>
#include <stdexcept>
#include <unistd.h>

namespace banyan {

void rename_durably(const std::string& tmp, const std::string& path)
{
    // Make the data durable before the rename makes it visible.
    const int fd = ::open(tmp.c_str(), O_RDONLY);
    if (fd >= 0) {
        ::fsync(fd);
        ::close(fd);
    }
    if (std::rename(tmp.c_str(), path.c_str()) != 0)
        throw std::runtime_error(fmt::format("cannot rename {} to {}: {}", tmp, path, std::strerror(errno)));
}

void write_file_atomically(const std::string& path, const std::function<void(std::ostream&)>& write)
{
    const std::string tmp = fmt::format("{}.tmp.{}", path, ::getpid());
    try {
        {
            std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
            if (!out) throw std::runtime_error(fmt::format("cannot create {}: {}", tmp, std::strerror(errno)));
            write(out);
            out.flush();
            if (!out) throw std::runtime_error(fmt::format("writing {} failed: {}", tmp, std::strerror(errno)));
        }
        rename_durably(tmp, path);
    } catch (...) {
        std::remove(tmp.c_str());
        throw;
    }
}

} // namespace banyan
