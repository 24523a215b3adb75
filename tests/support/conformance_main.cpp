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
#include "tests/support/harness.hpp"

#include "core/device/devices.hpp"
#include "core/error.hpp"

#include <doctest/doctest.h>
#include <fmt/format.h>

#include <cstdio>
#include <string>
#include <vector>

int main(int argc, char** argv)
{
    using namespace banyan::test;
    std::vector<char*> rest;
    const std::string which = take_backend_option(argc, argv, rest);
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
            auto cuda = banyan::open_device(banyan::DeviceRequest{"cuda", -1});
            set_backends(std::move(cuda), banyan::open_device(banyan::DeviceRequest{"opencl", -1}));
        } catch (const std::exception& e) {
            fmt::print("SKIPPED: cross-backend tests need a CUDA device and an OpenCL GPU: {}\n", e.what());
            return 77;
        }
        if (!other_backend().info().gpu) {
            fmt::print("SKIPPED: cross-backend tests need an OpenCL GPU; the first OpenCL device is {}\n",
                       other_backend().info().name);
            return 77;
        }
        fmt::print("cross-backend: CUDA {} and OpenCL {}\n", backend().info().name, other_backend().info().name);
    } else {
        ctx.setOption("test-suite-exclude", "static,cross");
        try {
            set_backends(banyan::open_device(banyan::DeviceRequest{which, -1}));
        } catch (const std::exception& e) {
            fmt::print("SKIPPED: backend {} is absent: {}\n", which, e.what());
            return 77;
        }
    }
    const auto& info = backend().info();
    const std::uint64_t seed = seed_rng();
    fmt::print("conformance on {} device {}: {} ({}), seed {}\n", info.backend, info.index, info.name, info.version,
               seed);
    std::fflush(stdout);

    ctx.applyCommandLine(static_cast<int>(rest.size()), rest.data());
    const int rc = ctx.run();
    set_backends(nullptr);
    return rc;
}
