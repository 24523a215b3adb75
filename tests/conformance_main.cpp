/**
 * @file conformance_main.cpp
 * @brief Entry point of the conformance suite: `banyan_tests --backend cuda|opencl [doctest options]`.
 *
 * Opens the backend's best device (for OpenCL: a GPU first); when the backend is not compiled in or has no device,
 * prints why and exits 77, which CTest reports as skipped. `--backend none` runs only the device-free test suite
 * "static" (source checks); `--backend cross` runs the suite "cross" on a CUDA device and an OpenCL GPU together
 * (skipped unless both are present); a device backend runs everything else.
 */
#define DOCTEST_CONFIG_IMPLEMENT
#include "tests/harness.hpp"

#include "core/device/devices.hpp"
#include "core/error.hpp"

#include <doctest/doctest.h>
#include <fmt/format.h>

#include <cstdlib>
#include <memory>
#include <string>

namespace banyan::test {
namespace {
std::unique_ptr<Backend> g_backend;
std::unique_ptr<Backend> g_other;
std::mt19937_64 g_rng;
} // namespace

Backend& backend() { return *g_backend; }
Backend& other_backend() { return *g_other; }

bool on_gpu() { return g_backend->info().gpu; }

std::size_t max_size()
{
    if (const char* e = std::getenv("BANYAN_TEST_MAX_LOG2"); e && *e) return std::size_t{1} << std::atoi(e);
    return on_gpu() ? std::size_t{1} << 24 : std::size_t{1} << 20;
}

std::vector<std::size_t> edge_sizes(std::size_t limit)
{
    std::vector<std::size_t> s;
    for (std::size_t n : {0, 1, 63, 64, 65, 255, 256, 257})
        if (n <= limit) s.push_back(n);
    for (std::size_t k = 10; (std::size_t{1} << k) <= limit; k += 2) {
        s.push_back((std::size_t{1} << k) - 1);
        if ((std::size_t{1} << k) + 1 <= limit) s.push_back((std::size_t{1} << k) + 1);
    }
    if (s.back() != limit) s.push_back(limit);
    return s;
}

std::vector<std::size_t> work_group_sizes()
{
    if (g_backend->info().backend == BackendKind::cuda) return {BANYAN_WG_DEFAULT};
    std::vector<std::size_t> s;
    for (std::size_t w : {32, 64, 128, 256})
        if (w <= g_backend->info().max_work_group) s.push_back(w);
    return s;
}

void restore_work_group_size() { g_backend->set_work_group_size(BANYAN_WG_DEFAULT); }

std::vector<bool> vendor_modes()
{
    if (g_backend->info().backend == BackendKind::cuda) return {true, false};
    return {true};
}

std::mt19937_64& rng() { return g_rng; }

} // namespace banyan::test

int main(int argc, char** argv)
{
    std::string which;
    std::vector<char*> rest{argv[0]};
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if (a == "--backend" && i + 1 < argc) which = argv[++i];
        else if (a.rfind("--backend=", 0) == 0) which = a.substr(10);
        else rest.push_back(argv[i]);
    }
    if (which != "cuda" && which != "opencl" && which != "none" && which != "cross") {
        fmt::print(stderr, "usage: banyan_tests --backend cuda|opencl|none|cross [doctest options]\n");
        return 2;
    }
    doctest::Context ctx;
    if (which == "none") {
        ctx.setOption("test-suite", "static");
        ctx.applyCommandLine(static_cast<int>(rest.size()), rest.data());
        return ctx.run();
    }
    if (which == "cross") {
        ctx.setOption("test-suite", "cross");
        try {
            banyan::test::g_backend = banyan::open_device(banyan::DeviceRequest{"cuda", -1});
            banyan::test::g_other = banyan::open_device(banyan::DeviceRequest{"opencl", -1});
        } catch (const std::exception& e) {
            fmt::print("SKIPPED: cross-backend tests need a CUDA device and an OpenCL GPU: {}\n", e.what());
            return 77;
        }
        if (!banyan::test::g_other->info().gpu) {
            fmt::print("SKIPPED: cross-backend tests need an OpenCL GPU; the first OpenCL device is {}\n",
                       banyan::test::g_other->info().name);
            return 77;
        }
        fmt::print("cross-backend: CUDA {} and OpenCL {}\n", banyan::test::g_backend->info().name,
                   banyan::test::g_other->info().name);
    } else {
        ctx.setOption("test-suite-exclude", "static,cross");
        try {
            banyan::test::g_backend = banyan::open_device(banyan::DeviceRequest{which, -1});
        } catch (const std::exception& e) {
            fmt::print("SKIPPED: backend {} is absent: {}\n", which, e.what());
            return 77;
        }
    }
    const auto& info = banyan::test::g_backend->info();
    std::uint64_t seed = 20261122;
    if (const char* e = std::getenv("BANYAN_TEST_SEED"); e && *e) seed = std::strtoull(e, nullptr, 10);
    banyan::test::g_rng.seed(seed);
    fmt::print("conformance on {} device {}: {} ({}), seed {}\n", to_string(info.backend), info.index, info.name,
               info.version, seed);
    std::fflush(stdout);

    ctx.applyCommandLine(static_cast<int>(rest.size()), rest.data());
    const int rc = ctx.run();
    banyan::test::g_other.reset();
    banyan::test::g_backend.reset();
    return rc;
}
