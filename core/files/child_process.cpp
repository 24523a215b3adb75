/**
 * @file child_process.cpp
 * @brief in_child_process (child_process.hpp): fork, run, _exit in the child; waitpid and a crash signal mapped to
 *        UsageError in the parent.
 *
 * Forking a process that has threads (PoCL's workers, CUDA's, MPI's progress threads) leaves the child with one
 * thread, and POSIX allows it only async-signal-safe calls until it execs. The child here calls malloc and a library
 * (HDF5) all the same, the accepted practical pattern: glibc's fork takes malloc's locks so the child's heap is
 * consistent, and banyan's other threads are not inside HDF5 while a file is read (were one, the child would wait
 * on its lock: the time limit ends that). The child touches nothing else (no MPI, no device, no stream buffers) and
 * leaves by _exit, so no atexit handler, destructor or flush of this process runs twice. With MPI over RDMA, memory
 * registered with the network may be absent from the child (MADV_DONTFORK); the child never touches MPI's buffers.
 */
#include "core/files/child_process.hpp"

#include "core/error.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>

#if defined(__unix__) || defined(__APPLE__)
#include <csignal>
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>
#if defined(__linux__)
#include <sys/prctl.h>
#endif
#define BANYAN_HAVE_FORK 1
#endif

namespace banyan {

#ifdef BANYAN_HAVE_FORK

namespace {

/// The child's exit statuses: @p fn returned, @p fn threw (not 1, a sanitizer's exit status after its report).
constexpr int status_returned = 0, status_threw = 100;

/// In the child: no core file, nothing on stderr, crash signals to their default action, then @p fn.
[[noreturn]] void run_child(const std::function<void()>& fn)
{
    const struct rlimit no_core = {0, 0};
    ::setrlimit(RLIMIT_CORE, &no_core);
#if defined(__linux__)
    ::prctl(PR_SET_DUMPABLE, 0, 0, 0, 0); // no dump even where core_pattern pipes to a handler (systemd-coredump)
#endif
    // A handler this process installed (doctest's prints a report) must not hide the crash from the parent.
    struct sigaction dfl = {};
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    sigset_t crashes;
    sigemptyset(&crashes);
    for (const int sig : {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT}) {
        ::sigaction(sig, &dfl, nullptr);
        sigaddset(&crashes, sig);
    }
    ::sigprocmask(SIG_UNBLOCK, &crashes, nullptr);
    // What a crashing library or glibc's heap checks print would only repeat the parent's message, less clearly.
    if (const int null = ::open("/dev/null", O_WRONLY); null >= 0) ::dup2(null, STDERR_FILENO);
    int status = status_threw;
    try {
        fn();
        status = status_returned;
    } catch (...) {
    }
    ::_exit(status);
}

} // namespace

ChildEnd in_child_process(const std::function<void()>& fn, const std::string& what, double timeout_s)
{
    const pid_t pid = ::fork();
    if (pid < 0)
        return ChildEnd::unknown; // no memory for another process, or a process limit: the caller goes on without
    if (pid == 0) run_child(fn);
    // Polled, with naps from 20 us up to 1 ms: a header read takes a millisecond or two, a blocking wait has no time
    // limit, and one set by a signal (SIGCHLD, SIGALRM) would take a signal that belongs to the program.
    const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
    std::chrono::microseconds nap(20);
    int status = 0;
    for (;;) {
        const pid_t got = ::waitpid(pid, &status, WNOHANG);
        if (got == pid) break;
        if (got < 0 && errno != EINTR) return ChildEnd::unknown; // ECHILD: SIGCHLD is ignored, the child reaped unseen
        if (std::chrono::steady_clock::now() > end) {
            ::kill(pid, SIGKILL);
            while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
            }
            return ChildEnd::unknown;
        }
        std::this_thread::sleep_for(nap);
        nap = std::min(2 * nap, std::chrono::microseconds(1000));
    }
    const auto stopped = [](int sig) { return sig == SIGINT || sig == SIGTERM || sig == SIGHUP; };
    if (WIFEXITED(status)) {
        const int code = WEXITSTATUS(status);
        if (code == status_returned) return ChildEnd::returned;
        if (code == status_threw) return ChildEnd::threw;
        if (code > 128 && stopped(code - 128)) return ChildEnd::unknown; // a handler's _exit(128 + signal)
        throw UsageError(fmt::format("{} (exit status {})", what, code));
    }
    if (!WIFSIGNALED(status) || stopped(WTERMSIG(status))) return ChildEnd::unknown;
    const int sig = WTERMSIG(status);
    const char* name = ::strsignal(sig);
    throw UsageError(fmt::format("{} ({}, signal {})", what, name ? name : "unknown signal", sig));
}

#else

ChildEnd in_child_process(const std::function<void()>&, const std::string&, double)
{
    return ChildEnd::unknown; // no fork here: the caller does the work in this process
}

#endif

} // namespace banyan
