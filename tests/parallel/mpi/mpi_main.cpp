/**
 * @file mpi_main.cpp
 * @brief Entry point of the multi-rank tests: `mpirun -n P banyan_mpi_tests --backend cuda|opencl [--device-transport]
 *        [doctest options]`.
 *
 * Every rank opens a device of the backend (rank_device: the ranks of a node take its GPUs in turn, sharing them when
 * there are fewer GPUs than ranks). When the backend or a device is absent on any rank, every rank exits 77
 * (CTest: skipped; Open MPI's mpirun returns 77 when every rank does). Rank 0 prints doctest's report; another rank's
 * report is printed only when it failed, by rank 0 at the end, each line marked with its rank. Every rank exits 1
 * when any rank failed. The tests reach the device through tests/support/harness.hpp, as the conformance suite does.
 *
 * The test suite "device transport" (tests/parallel/mpi/test_transport.cpp: the backend's own transport between
 * devices, NCCL under CUDA) runs alone, and only with --device-transport; every rank exits 77 (skipped) when that
 * transport does not open between these ranks (one rank, a backend or build without one, ranks that share a device),
 * saying why.
 *
 * Every rank must call the collectives in the same order, failing or not: check with CHECK between collectives, not
 * REQUIRE (a REQUIRE that fails on one rank leaves the others waiting in the next collective until the CTest
 * timeout). Started without a launcher, it runs as one rank without MPI.
 */
#define DOCTEST_CONFIG_IMPLEMENT
#include "core/device/devices.hpp"
#include "core/error.hpp"
#include "core/parallel/comm.hpp"
#include "core/parallel/rank_device.hpp"
#include "core/parallel/transport.hpp"
#include "tests/support/harness.hpp"

#include <doctest/doctest.h>
#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

namespace {

/// Every rank's @p text, in rank order (collective).
std::vector<std::string> gather_text(const banyan::Comm& comm, const std::string& text)
{
    std::vector<std::size_t> counts;
    const auto all = banyan::all_gather<char>(comm, std::span<const char>(text.data(), text.size()), &counts);
    std::vector<std::string> out;
    std::size_t at = 0;
    for (std::size_t n : counts) {
        out.emplace_back(all.data() + at, n);
        at += n;
    }
    return out;
}

int run(int argc, char** argv)
{
    using namespace banyan::test;
    const banyan::Comm& comm = banyan::Comm::world();
    std::vector<char*> rest;
    const std::string which = take_backend_option(argc, argv, rest);
    const auto transport_flag =
        std::find_if(rest.begin(), rest.end(), [](const char* a) { return std::string(a) == "--device-transport"; });
    const bool device_transport = transport_flag != rest.end();
    if (device_transport) rest.erase(transport_flag);
    if (which != "cuda" && which != "opencl") {
        if (comm.rank() == 0)
            fmt::print(stderr,
                       "usage: banyan_mpi_tests --backend cuda|opencl [--device-transport] [doctest options]\n");
        return 2;
    }

    // Skipped on every rank when any rank has no device (the ranks that do have one would wait for the others).
    std::string absent;
    try {
        set_backends(banyan::open_device(banyan::rank_device(banyan::DeviceRequest{which, -1}, comm)));
    } catch (const std::exception& e) {
        absent = e.what();
    }
    if (comm.any(!absent.empty())) {
        const auto why = gather_text(comm, absent);
        for (int r = 0; r < comm.size() && comm.rank() == 0; ++r) {
            if (why[static_cast<std::size_t>(r)].empty()) continue;
            fmt::print("SKIPPED: backend {} is absent{}: {}\n", which,
                       comm.parallel() ? fmt::format(" on rank {}", r) : "", why[static_cast<std::size_t>(r)]);
            break;
        }
        set_backends(nullptr);
        return 77;
    }
    if (device_transport) {
        // Opened once here to see whether it opens at all: the same decision on every rank (transport.cpp).
        std::string why = comm.parallel() ? "" : "one rank: nothing travels between ranks";
        try {
            if (comm.parallel()) banyan::open_peer_exchange(backend(), comm, banyan::Transport::device);
        } catch (const banyan::UsageError& e) {
            why = e.what();
        }
        if (!why.empty()) {
            if (comm.rank() == 0) fmt::print("SKIPPED: no transport from device to device: {}\n", why);
            set_backends(nullptr);
            return 77;
        }
    }
    const auto& info = backend().info();
    const std::uint64_t seed = seed_rng();
    if (comm.rank() == 0)
        fmt::print("multi-rank tests on {} rank{} ({}), rank 0 on {} device {}: {} ({}), seed {}\n", comm.size(),
                   comm.size() == 1 ? "" : "s", banyan::Comm::library(), info.backend, info.index, info.name,
                   info.version, seed);
    std::fflush(stdout);

    // Ranks other than 0 keep doctest's report to themselves until the end: printed only when they failed.
    doctest::Context ctx;
    ctx.setOption("no-colors", true); // mpirun hands the ranks a terminal of its own, whatever ours is
    std::ostringstream report;
    if (comm.rank() != 0) ctx.setCout(&report);
    ctx.addFilter(device_transport ? "test-suite" : "test-suite-exclude", "device transport");
    ctx.applyCommandLine(static_cast<int>(rest.size()), rest.data());
    const int rc = ctx.run();
    set_backends(nullptr);
    std::cout.flush();

    // Each rank's report when it failed, after a mark (empty when it passed).
    const auto reports = gather_text(comm, rc != 0 ? "!" + report.str() : std::string());
    const bool failed = comm.any(rc != 0);
    if (comm.rank() == 0 && failed) {
        std::string ranks;
        for (int r = 0; r < comm.size(); ++r) {
            const std::string& text = reports[static_cast<std::size_t>(r)];
            if (text.empty()) continue;
            ranks += fmt::format("{}{}", ranks.empty() ? "" : ", ", r);
            if (r == 0) continue; // printed as it ran
            std::istringstream lines(text.substr(1));
            for (std::string line; std::getline(lines, line);)
                fmt::print("[rank {}] {}\n", r, line);
        }
        fmt::print("banyan_mpi_tests: FAILED on rank{} {} of {}\n", ranks.find(',') == std::string::npos ? "" : "s",
                   ranks, comm.size());
    }
    std::fflush(stdout);
    return failed ? 1 : 0;
}

} // namespace

int main(int argc, char** argv)
{
    banyan::Comm::init(argc, argv);
    const int rc = run(argc, argv);
    banyan::Comm::finalize();
    return rc;
}
