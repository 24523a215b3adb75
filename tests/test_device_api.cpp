/**
 * @file test_device_api.cpp
 * @brief Buffers, transfers, fill, copy, errors and timers of the device API, on the backend under test.
 */
#include "tests/harness.hpp"

#include "core/device/devices.hpp"
#include "core/error.hpp"

#include <doctest/doctest.h>

#include <filesystem>
#include <numeric>

using namespace banyan;
namespace fs = std::filesystem;

TEST_CASE("buffers round-trip, fill and copy")
{
    auto& be = test::backend();
    std::vector<bn_u32> host(1000);
    std::iota(host.begin(), host.end(), 7u);
    auto a = be.upload<bn_u32>(host, "a");
    CHECK(a.size() == 1000);
    CHECK(a.download() == host);

    a.fill(0xdeadbeefu, 10, 20);
    auto back = a.download();
    for (std::size_t i = 0; i < host.size(); ++i) CHECK(back[i] == ((i >= 10 && i < 30) ? 0xdeadbeefu : host[i]));

    auto b = be.alloc<bn_u32>(1000, "b");
    b.fill(1u);
    b.copy_from(a, 100, 5, 50);
    back = b.download();
    for (std::size_t i = 0; i < 1000; ++i) CHECK(back[i] == ((i >= 50 && i < 150) ? a.at(i - 45) : 1u));

    bn_f4 v{1.5f, -2.f, 3.f, 4.25f};
    auto f = be.alloc<bn_f4>(33, "f");
    f.fill(v);
    for (const auto& x : f.download()) CHECK((x.x == 1.5f && x.y == -2.f && x.z == 3.f && x.w == 4.25f));

    auto empty = be.alloc<bn_u64>(0, "empty");
    CHECK(empty.size() == 0);
    CHECK(empty.download().empty());
}

TEST_CASE("buffer moves leave the source empty")
{
    auto b = test::backend().alloc<double>(10, "moved");
    auto c = std::move(b);
    CHECK(c.size() == 10);
    CHECK_FALSE(static_cast<bool>(b)); // NOLINT(bugprone-use-after-move): that is what is tested
}

TEST_CASE("out-of-range transfers throw")
{
    auto b = test::backend().alloc<bn_u32>(4, "small");
    std::vector<bn_u32> five(5);
    CHECK_THROWS_AS(b.upload(five), std::out_of_range);
    CHECK_THROWS_AS(b.download(std::span<bn_u32>(five)), std::out_of_range);
}

TEST_CASE("an allocation larger than the device names itself in the error")
{
    auto& be = test::backend();
    const std::size_t too_much = be.info().memory_bytes * 2 + (std::size_t{1} << 30);
    try {
        auto b = be.alloc_raw(too_much, "the impossible buffer");
        FAIL("allocation of twice the device memory succeeded");
    } catch (const DeviceError& e) {
        CHECK(std::string(e.what()).find("the impossible buffer") != std::string::npos);
    }
}

TEST_CASE("a device label names the device it came from (restarts find their device by it)")
{
    const DeviceInfo& info = test::backend().info();
    const std::string label = device_label(info);
    CHECK(label == std::string(to_string(info.backend)) + " #" + std::to_string(info.index) + " " + info.name);
    const auto found = find_device(label);
    REQUIRE(found.has_value());
    CHECK(found->backend == to_string(info.backend));
    CHECK(found->device == info.index);
    CHECK_FALSE(find_device(std::string(to_string(info.backend)) + " #999 " + info.name).has_value());
    CHECK_FALSE(find_device(label + " (another name)").has_value());
    CHECK_FALSE(find_device("").has_value());
}

TEST_CASE("an unknown kernel name is a DeviceError naming it")
{
    auto b = test::backend().alloc<bn_u32>(1, "x");
    try {
        test::backend().launch("noSuchKernel", Grid{1, 64}, b);
        test::backend().synchronize();
        FAIL("launching a missing kernel succeeded");
    } catch (const DeviceError& e) {
        CHECK(std::string(e.what()).find("noSuchKernel") != std::string::npos);
    }
}

TEST_CASE("event timers measure non-negative, ordered intervals")
{
    auto& be = test::backend();
    auto a = be.record();
    auto buf = be.alloc<bn_u32>(1 << 20, "timed");
    buf.fill(3u);
    auto b = be.record();
    auto c = be.record();
    const double ab = be.elapsed_ms(a, b), ac = be.elapsed_ms(a, c);
    CHECK(ab >= 0.0);
    CHECK(ac >= ab);
}

TEST_SUITE("static")
{
    TEST_CASE("every backend is listed, and one without devices says why in words a user can act on")
    {
        const auto all = discover_devices();
        REQUIRE(all.size() == 2);
        CHECK(all[0].backend == BackendKind::cuda);
        CHECK(all[1].backend == BackendKind::opencl);
        for (const auto& b : all) {
            INFO("backend ", to_string(b.backend), ": ", b.unavailable_reason);
            if (b.devices.empty()) CHECK(!b.unavailable_reason.empty());
        }
        // Without an NVIDIA driver the CUDA runtime calls the driver "insufficient"; banyan must not repeat that.
        if (!fs::exists("/proc/driver/nvidia/version") && all[0].devices.empty()) {
            CHECK(all[0].unavailable_reason.find("insufficient") == std::string::npos);
#ifdef BANYAN_HAVE_CUDA
            CHECK(all[0].unavailable_reason == "no NVIDIA GPU or driver found");
#endif
        }
    }

    TEST_CASE("notices reach the handler that is set, and nowhere once it is cleared")
    {
        std::vector<std::string> seen;
        set_notice_handler([&](const std::string& t) { seen.push_back(t); });
        notice("compiling");
        set_notice_handler(nullptr);
        notice("dropped");
        CHECK(seen == std::vector<std::string>{"compiling"});
    }
}
