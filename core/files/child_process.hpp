/**
 * @file child_process.hpp
 * @brief A library call that may crash, run first in a child process: the HDF5 reader (hdf5_read.cpp) reads a
 *        file's metadata there, so that a damaged or crafted file that crashes the HDF5 library is refused (UsageError,
 *        exit 2) instead of killing banyan.
 */
#pragma once

#include <functional>
#include <string>

namespace banyan {

/// How the child of in_child_process ended.
enum class ChildEnd {
    returned, ///< @p fn returned
    threw,    ///< @p fn threw
    unknown,  ///< no judgement: no child could be made, or it ran out of time or was stopped (SIGINT, SIGTERM)
};

/// Runs @p fn in a child process (fork), which then ends at once (_exit: no atexit handlers, no destructors, no
/// flushed streams). Nothing @p fn does reaches this process, so @p fn is for a check only: the caller repeats the
/// work itself afterwards.
///
/// The child writes no core file and nothing to stderr, and dies by the default action of a crash signal (SIGSEGV,
/// SIGBUS, SIGILL, SIGFPE, SIGABRT), whatever handler this process installed (doctest's, a crash reporter's).
///
/// @param[in] fn         the work; it must touch nothing but its own library (no MPI, no device, no other thread's
///                       data)
/// @param[in] what       the start of the message when the child crashes, e.g. "x.hdf5: the HDF5 library crashed"
/// @param[in] timeout_s  how long the child may take; then it is killed and no judgement made (a child that waits
///                       for a lock another thread held at the fork would wait for ever)
/// @return how the child ended: ChildEnd::unknown, @p fn not run, where there is no fork (not POSIX) or it failed
/// @throws UsageError "<what> (<signal's name>, signal <number>)" when the child died of a signal other than SIGINT,
///         SIGTERM and SIGHUP, or "<what> (exit status <n>)" when it ended by an exit of its own (a sanitizer's
///         report, a library's exit()).
ChildEnd in_child_process(const std::function<void()>& fn, const std::string& what, double timeout_s = 60);

} // namespace banyan
