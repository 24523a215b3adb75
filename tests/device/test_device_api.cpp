/**
 * @file test_device_api.cpp
 * @brief Buffers, transfers, fill, copy, errors and timers of the device API, on the backend under test.
 */
#include "tests/support/harness.hpp"

#include "core/device/backend_registry.hpp"
#include "core/device/devices.hpp"
#include "core/parallel/comm.hpp"
#include "core/error.hpp"

#include <doctest/doctest.h>

#include <algorithm>
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
    for (std::size_t i = 0; i < host.size(); ++i)
        CHECK(back[i] == ((i >= 10 && i < 30) ? 0xdeadbeefu : host[i]));

    auto b = be.alloc<bn_u32>(1000, "b");
    b.fill(1u);
    b.copy_from(a, 100, 5, 50);
    back = b.download();
    for (std::size_t i = 0; i < 1000; ++i)
        CHECK(back[i] == ((i >= 50 && i < 150) ? a.at(i - 45) : 1u));

    bn_f4 v{1.5f, -2.f, 3.f, 4.25f};
    auto f = be.alloc<bn_f4>(33, "f");
    f.fill(v);
    for (const auto& x : f.download())
        CHECK((x.x == 1.5f && x.y == -2.f && x.z == 3.f && x.w == 4.25f));

    auto empty = be.alloc<bn_u64>(0, "empty");
    CHECK(empty.size() == 0);
    CHECK(empty.download().empty());
}

TEST_CASE("staging memory of the backend carries uploads and downloads, and grows in a vector keeping its bytes")
{
    // The CUDA backend's is page-locked (cudaHostAlloc), the others' plain: the same bytes either way.
    auto& be = test::backend();
    const std::size_t n = 1 << 16;
    auto* p = static_cast<bn_u32*>(be.alloc_host(n * sizeof(bn_u32)));
    for (std::size_t i = 0; i < n; ++i)
        p[i] = static_cast<bn_u32>(i * 2654435761u);
    auto d = be.alloc<bn_u32>(n, "d");
    d.raw().upload(p, n * sizeof(bn_u32), 0);
    std::fill(p, p + n, 0u);
    d.raw().download(p + 1, (n - 1) * sizeof(bn_u32), 0);
    bool same = true;
    for (std::size_t i = 1; i < n; ++i)
        same = same && p[i] == static_cast<bn_u32>((i - 1) * 2654435761u);
    CHECK(same);
    be.free_host(p);

    HostBytes v{StagingAllocator<std::byte>(&be)};
    for (std::size_t k = 0; k < 20; ++k)
        v.push_back(static_cast<std::byte>(k));
    v.resize(1 << 20); // reallocates through the backend
    bool kept = true;
    for (std::size_t k = 0; k < 20; ++k)
        kept = kept && v[k] == static_cast<std::byte>(k);
    CHECK(kept);
    CHECK(v.get_allocator().backend == &be);
}

TEST_CASE("row copies interleave (N, 3) and (N,) arrays into records and split them again")
{
    auto& be = test::backend();
    const std::size_t n = 1001; // odd, so that no row count is a power of two
    std::vector<float> xyz(3 * n), m(n);
    for (std::size_t i = 0; i < 3 * n; ++i)
        xyz[i] = static_cast<float>(i) * 0.5f - 7.f;
    for (std::size_t i = 0; i < n; ++i)
        m[i] = 1.f / static_cast<float>(i + 1);
    auto dx = be.upload<float>(xyz, "rows.xyz");
    auto dm = be.upload<float>(m, "rows.m");
    auto rec = be.alloc<bn_f4>(n + 2, "rows.rec");
    rec.fill(bn_f4{-1.f, -1.f, -1.f, -1.f});
    // Records 1 .. n: x, y, z from the (N, 3) array, m from the (N,) one (a byte offset that is no multiple of 16).
    rec.raw().copy_rows_from(dx.raw(), n, 12, 0, 12, 16, 16);
    rec.raw().copy_rows_from(dm.raw(), n, 4, 0, 4, 16 + 12, 16);
    const auto r = rec.download();
    CHECK((r[0].x == -1.f && r[0].w == -1.f && r[n + 1].x == -1.f && r[n + 1].w == -1.f)); // untouched around
    bool same = true;
    for (std::size_t i = 0; i < n; ++i)
        same = same && r[i + 1].x == xyz[3 * i] && r[i + 1].y == xyz[3 * i + 1] && r[i + 1].z == xyz[3 * i + 2] &&
               r[i + 1].w == m[i];
    CHECK(same);
    // And back: the records' x, y, z into an (N, 3) array, their w into an (N,) one, from an offset of 4 bytes.
    auto back_xyz = be.alloc<float>(3 * n, "rows.back_xyz");
    auto back_m = be.alloc<float>(n + 1, "rows.back_m");
    back_m.fill(0.f);
    back_xyz.raw().copy_rows_from(rec.raw(), n, 12, 16, 16, 0, 12);
    back_m.raw().copy_rows_from(rec.raw(), n, 4, 16 + 12, 16, 4, 4);
    CHECK(back_xyz.download() == xyz);
    const auto bm = back_m.download();
    CHECK(bm[0] == 0.f);
    CHECK(std::vector<float>(bm.begin() + 1, bm.end()) == m);
}

TEST_CASE("the memory meter counts allocations until they are freed, and keeps the high-water mark")
{
    auto& be = test::backend();
    be.release_scratch();
    be.reset_peak();
    const std::size_t base = be.memory().live;
    {
        auto a = be.alloc<bn_u32>(1000, "test.meter.a");
        CHECK(be.memory().live == base + 4000);
        {
            auto b = be.alloc<bn_f4>(100, "test.meter.b");
            CHECK(be.memory().live == base + 4000 + 1600);
            // Views own nothing and are not counted.
            auto v = b.view_as<bn_u32>(0, 8);
            CHECK(be.memory().live == base + 5600);
        }
        CHECK(be.memory().live == base + 4000);
        CHECK(be.memory().peak == base + 5600);
    }
    CHECK(be.memory().live == base);
    CHECK(be.memory().peak == base + 5600);
    be.reset_peak();
    CHECK(be.memory().peak == base);
}

TEST_CASE("views alias their buffer: writes through one show in the other, and kernels see the offset")
{
    auto& be = test::backend();
    const std::size_t align = std::max<std::size_t>(be.info().view_align, 16);
    const std::size_t n = 3 * align / 4; // three aligned views of align bytes in 4-byte words
    std::vector<bn_u32> host(n);
    std::iota(host.begin(), host.end(), 0u);
    auto whole = be.upload<bn_u32>(host, "test.view.whole");
    auto middle = whole.view_as<bn_u32>(align, align / 4);
    CHECK(middle.download() == std::vector<bn_u32>(host.begin() + align / 4, host.begin() + align / 2));
    middle.fill(7u);
    auto back = whole.download();
    CHECK(back[align / 4 - 1] == align / 4 - 1);
    CHECK(back[align / 4] == 7u);
    CHECK(back[align / 2 - 1] == 7u);
    CHECK(back[align / 2] == align / 2);
    // A kernel writing through a view (exclusive scan of ones) lands at the view's place only.
    auto last = whole.view_as<bn_u32>(2 * align, align / 4);
    last.fill(1u);
    be.exclusive_scan(last, last, align / 4);
    back = whole.download();
    CHECK(back[align / 2 - 1] == 7u); // the middle view, untouched
    for (std::size_t i = 0; i < align / 4; ++i)
        REQUIRE(back[align / 2 + i] == i);
    // A view of a view starts where the outer view starts.
    auto inner = middle.view_as<bn_u32>(0, 1);
    CHECK(inner.at(0) == 7u);
    CHECK_THROWS_AS(whole.view_as<bn_u32>(0, n + 1), std::out_of_range);
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
    CHECK(label == info.backend + " #" + std::to_string(info.index) + " " + info.name);
    const auto found = find_device(label);
    REQUIRE(found.has_value());
    CHECK(found->backend == info.backend);
    CHECK(found->device == info.index);
    CHECK_FALSE(find_device(info.backend + " #999 " + info.name).has_value());
    CHECK_FALSE(find_device(label + " (another name)").has_value());
    CHECK_FALSE(find_device("").has_value());
}

TEST_CASE("an unknown kernel name is a DeviceError naming it; every declared kernel resolves on this backend")
{
    auto& be = test::backend();
    try {
        be.require_kernel("noSuchKernel");
        FAIL("looking up a missing kernel succeeded");
    } catch (const DeviceError& e) {
        CHECK(std::string(e.what()).find("noSuchKernel") != std::string::npos);
    }
    // What a first launch resolves: the CUDA registration, or the OpenCL kernel object of the current program.
    for (const auto& k : kernel_decls) {
        CAPTURE(k.name);
        CHECK_NOTHROW(be.require_kernel(k.name));
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
        CHECK(all[0].backend == "cuda");
        CHECK(all[1].backend == "opencl");
        for (const auto& b : all) {
            INFO("backend ", b.backend, ": ", b.unavailable_reason);
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

    TEST_CASE("the registry holds every backend the build knows, in order of preference, built or not")
    {
        const BackendRegistry& reg = backend_registry();
        CHECK(reg.names() == std::vector<std::string>{"cuda", "opencl"});
        const BackendEntry* cuda = reg.find("cuda");
        const BackendEntry* opencl = reg.find("opencl");
        REQUIRE(cuda);
        REQUIRE(opencl);
        CHECK(reg.find("metal") == nullptr);
#ifdef BANYAN_HAVE_CUDA
        CHECK(cuda->built());
        CHECK(cuda->title == "CUDA");
#else
        CHECK_FALSE(cuda->built());
        CHECK(cuda->absent_reason == "not compiled into this build (no CUDA compiler, or built without it)");
#endif
#ifdef BANYAN_HAVE_OPENCL
        CHECK(opencl->built());
        CHECK(opencl->title == "OpenCL");
#else
        CHECK_FALSE(opencl->built());
        CHECK(opencl->absent_reason == "not compiled into this build");
#endif
        // What discovery lists for each: the registry's names, in its order.
        const auto all = discover_devices();
        REQUIRE(all.size() == reg.entries().size());
        for (std::size_t i = 0; i < all.size(); ++i) {
            CHECK(all[i].backend == reg.entries()[i].name);
            for (const auto& d : all[i].devices)
                CHECK(d.backend == all[i].backend);
        }
        // A name is registered once.
        BackendRegistry mine;
        mine.add_absent("one", "absent");
        CHECK_THROWS_AS(mine.add_absent("one", "again"), std::logic_error);
    }

    TEST_CASE("requests name the backends the registry knows, in its words")
    {
        CHECK_THROWS_WITH_AS(resolve_request(DeviceRequest{"metal", -1}),
                             "unknown backend 'metal': expected auto, cuda or opencl", UsageError);
        CHECK(resolve_request(DeviceRequest{"cuda", 0}).backend == "cuda");
        CHECK(resolve_request(DeviceRequest{"opencl", 0}).backend == "opencl");
        CHECK_THROWS_WITH_AS(open_device(DeviceRequest{"auto", 0}),
                             "--device needs --backend cuda or --backend opencl (device indices are per backend)",
                             UsageError);
#ifndef BANYAN_HAVE_CUDA
        try {
            open_device(DeviceRequest{"cuda", -1});
            FAIL("opened a backend that is not built");
        } catch (const UsageError& e) {
            CHECK(std::string(e.what()).starts_with("backend cuda has no devices (not compiled into this build (no "
                                                    "CUDA compiler, or built without it)). Present:\n  cuda: no "
                                                    "devices (not compiled into this build"));
        }
#endif
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
