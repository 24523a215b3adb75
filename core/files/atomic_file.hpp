/**
 * @file atomic_file.hpp
 * @brief Writing an output file so that a crash mid-write never leaves a half file: write a temporary name in the
 *        same folder, flush it to disk, then rename it over the final name.
 *
 * What an output path may be, for every writer (snapshots, images, checkpoints, .npy, benchmark results):
 *  - a regular file, or a name not there yet: written to "<path>.tmp.<pid>", synced, renamed over @p path;
 *  - a character device or a FIFO (/dev/null, a terminal, a named pipe): the bytes are written through to it, with
 *    no temporary file, no rename and no sync; the device or FIFO stays what it was;
 *  - /dev/stdout, /dev/stderr, /dev/fd/N, /proc/self/fd/N (one of this process's open descriptors): the bytes go
 *    to that descriptor, after what was printed to it so far, whatever it leads to (a terminal, a pipe, a socket,
 *    or a regular file, which `banyan ... --out /dev/stdout > file` fills rather than replaces); another process's
 *    /proc/PID/fd/N is opened and appended to;
 *  - a symbolic link (or a chain of them): what it finally points to is written as above, and the link stays a
 *    link; a link to a regular file has that file replaced whole (the temporary file in the target's folder), so
 *    `latest.png -> run7/frame.png` updates run7/frame.png;
 *  - refused, with the path, what it is and what is allowed named: a folder, a block device, a socket, a dangling
 *    link (named with its target) or a loop of links.
 * Refusals, and an output that cannot be opened or created (a missing or unwritable folder), throw UsageError (the
 * command-line tool exits 2); a write that fails once begun (a full disk) throws std::runtime_error. No failure
 * leaves a temporary file behind.
 */
#pragma once

#include <functional>
#include <ostream>
#include <string>

namespace banyan {

/// Calls @p write with a stream to @p path as above: "<path>.tmp.<pid>" synced and renamed over a regular file, or
/// straight into a device or FIFO. On any failure the temporary file is removed and the exception names the path
/// and the reason; a regular file at @p path is untouched (a device or FIFO may have had part of the bytes).
void write_file_atomically(const std::string& path, const std::function<void(std::ostream&)>& write);

/// The temporary name for writers that fill it themselves before rename_durably (HDF5, several ranks), with
/// @p tag in it (the process id, "parallel"): beside the regular file @p path is or names (a link's target),
/// "<file>.tmp.<tag>"; for a device or FIFO, in the system's temporary folder. Refusals as above (UsageError).
std::string temporary_path(const std::string& path, const std::string& tag);

/// The last step of such a write, for writers that fill the temporary file otherwise (HDF5, several ranks): syncs
/// @p tmp to disk, then renames it to @p path (to a link's target, the link kept). Where @p path is a device or a
/// FIFO, @p tmp's bytes are copied into it and @p tmp is removed. Refusals as above (UsageError); a failed rename
/// throws std::runtime_error "cannot rename TMP to PATH: REASON". On failure, removing @p tmp is the caller's.
void rename_durably(const std::string& tmp, const std::string& path);

/// What a failed write's @p err means, for messages: strerror's text, and for EFBIG that a file-size limit (ulimit -f;
/// the program ignores SIGXFSZ so that such a write fails as a full disk's does) or the file system's largest file was
/// reached.
std::string io_reason(int err);

} // namespace banyan
