/**
 * @file test_primitives.cpp
 * @brief The parallel primitives other than sort (scans, bounds, sum, compact, split, gather) against CPU
 *        references, on the backend under test.
 *
 * Integers and bounds are compared exactly. Sums in double precision are compared within 1e-12 * sum |x_i| of a
 * long double reference (the device adds in a different order; its error bound is ~(n / threads + log2 threads)
 * * 2^-53 * sum |x_i|, far below that), and exactly for integer-valued inputs, whose every partial sum is exact.
 * Sizes: test::edge_sizes up to test::max_size() at the default work-group size, up to 2^16 + 1 at the others;
 * on CUDA in both vendor modes. Outputs are poisoned first and have a few slack elements after n that must stay
 * poisoned, so that writes that are missing or out of bounds show.
 */
#include "tests/support/harness.hpp"

#include "core/error.hpp"

#include <doctest/doctest.h>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <string>

using namespace banyan;

namespace {

constexpr bn_u32 poison = 0xDEADBEEFu;
constexpr std::size_t slack = 5; // poisoned elements after n in every output

/// One configuration to run a primitive test in: work-group size, vendor mode, and the sizes to sweep there.
struct Config {
    std::size_t wg;
    bool vendor;
    std::vector<std::size_t> sizes;
    std::string name() const { return fmt::format("work-group {}, vendor primitives {}", wg, vendor ? "on" : "off"); }
};

/// Restores the backend's default work-group size and vendor mode, also when a test throws.
struct ConfigGuard {
    ~ConfigGuard()
    {
        test::restore_work_group_size();
        test::backend().set_vendor_primitives(true);
    }
};

/// The full size sweep at the default work-group size, a shorter one (still three scan levels at 32) elsewhere.
/// @param deep adds one size that needs three scan levels at the default work-group size too.
std::vector<Config> configs(bool deep)
{
    std::vector<Config> out;
    for (bool vendor : test::vendor_modes())
        for (std::size_t wg : test::work_group_sizes()) {
            Config c{wg, vendor, {}};
            if (wg == BANYAN_WG_DEFAULT) {
                c.sizes = test::edge_sizes(test::max_size());
                const std::size_t tile = wg * BANYAN_SCAN_ITEMS, three_levels = tile * tile + 1;
                if (deep && three_levels > test::max_size()) c.sizes.push_back(three_levels);
            } else {
                c.sizes = test::edge_sizes((std::size_t{1} << 16) + 1);
            }
            out.push_back(std::move(c));
        }
    return out;
}

/// Calls @p body(n) for every configuration (set on the backend) and every size of its sweep, both captured for a
/// failure's message; the backend's defaults are restored after, also when a test throws.
/// @param deep as for configs.
template <class F> void for_each_size(bool deep, F&& body)
{
    ConfigGuard guard;
    for (const auto& c : configs(deep)) {
        test::backend().set_work_group_size(c.wg);
        test::backend().set_vendor_primitives(c.vendor);
        for (std::size_t n : c.sizes) {
            CAPTURE(c.name());
            CAPTURE(n);
            body(n);
        }
    }
}

/// First index where a and b differ in [0, n), or n; with its values for the failure message.
template <class T> std::string mismatch(const std::vector<T>& got, const std::vector<T>& want, std::size_t n)
{
    for (std::size_t i = 0; i < n; ++i)
        if (std::memcmp(&got[i], &want[i], sizeof(T)) != 0) {
            if constexpr (std::is_integral_v<T>)
                return fmt::format("first mismatch at {}: got {}, want {}", i, got[i], want[i]);
            else
                return fmt::format("first mismatch at {}", i);
        }
    return {};
}

/// Whether got[from..to) all hold the poison value.
template <class T> bool still_poisoned(const std::vector<T>& got, std::size_t from, std::size_t to, T p)
{
    for (std::size_t i = from; i < to; ++i)
        if (std::memcmp(&got[i], &p, sizeof(T)) != 0) return false;
    return true;
}

std::vector<bn_u32> random_u32(std::size_t n)
{
    std::vector<bn_u32> v(n);
    for (auto& x : v)
        x = static_cast<bn_u32>(test::rng()());
    return v;
}

enum class Values { random, all_equal, few_distinct };

std::vector<bn_u32> scan_input(Values kind, std::size_t n)
{
    switch (kind) {
    case Values::random:
        return random_u32(n); // full 32-bit values: the sums wrap many times
    case Values::all_equal:
        return std::vector<bn_u32>(n, 0x9E3779B9u);
    case Values::few_distinct: {
        const bn_u32 pick[] = {0u, 1u, 0x80000000u, 5u};
        auto v = random_u32(n);
        for (auto& x : v)
            x = pick[x % 4];
        return v;
    }
    }
    return {};
}

/// Every kind of scan input, with the name a failure prints.
constexpr std::pair<Values, const char*> value_kinds[] = {
    {Values::random, "random"}, {Values::all_equal, "all equal"}, {Values::few_distinct, "few distinct"}};

enum class Flags { random, sparse, all, none, other_nonzero };

std::vector<bn_u32> flags_input(Flags kind, std::size_t n)
{
    auto v = random_u32(n);
    for (auto& x : v) {
        switch (kind) {
        case Flags::random:
            x &= 1u;
            break;
        case Flags::sparse:
            x = x % 37 == 0 ? 1u : 0u;
            break;
        case Flags::all:
            x = 1u;
            break;
        case Flags::none:
            x = 0u;
            break;
        case Flags::other_nonzero: { // nonzero values other than 1 must count as set
            const bn_u32 pick[] = {0u, 2u, 0x80000000u, 0xFFFFFFFFu, 0u, 1u, 0x100u, 0u};
            x = pick[x % 8];
            break;
        }
        }
    }
    return v;
}

/// Every kind of flags, with the name a failure prints.
constexpr std::pair<Flags, const char*> flag_kinds[] = {{Flags::random, "random"},
                                                        {Flags::sparse, "sparse"},
                                                        {Flags::all, "all set"},
                                                        {Flags::none, "none set"},
                                                        {Flags::other_nonzero, "nonzero other than 1"}};

/// A device buffer of n + slack elements: host values first, then poison.
template <class T> Buffer<T> upload_padded(const std::vector<T>& host, T fill)
{
    auto b = test::backend().alloc<T>(host.size() + slack, "test input");
    b.fill(fill);
    b.upload(host);
    return b;
}

template <class T> Buffer<T> poisoned(std::size_t n, T fill)
{
    auto b = test::backend().alloc<T>(n + slack, "test output");
    b.fill(fill);
    return b;
}

} // namespace

TEST_CASE("exclusive and inclusive scans match the CPU, also in place")
{
    auto& be = test::backend();
    for_each_size(true, [&](std::size_t n) {
        for (const auto& [kind, kind_name] : value_kinds) {
            CAPTURE(kind_name);
            const auto host = scan_input(kind, n);
            std::vector<bn_u32> excl(n), incl(n);
            bn_u32 run = 0;
            for (std::size_t i = 0; i < n; ++i) {
                excl[i] = run;
                run += host[i];
                incl[i] = run;
            }
            const auto in = upload_padded(host, poison);
            for (bool inclusive : {false, true}) {
                CAPTURE(inclusive);
                const auto& want = inclusive ? incl : excl;
                auto out = poisoned(n, poison);
                if (inclusive)
                    be.inclusive_scan(in, out, n);
                else
                    be.exclusive_scan(in, out, n);
                auto got = out.download();
                CHECK_MESSAGE(mismatch(got, want, n).empty(), mismatch(got, want, n));
                CHECK(still_poisoned(got, n, n + slack, poison));
                CHECK(in.download(n) == host); // the input is left as it was

                if (kind != Values::few_distinct) continue;
                auto inplace = upload_padded(host, poison);
                if (inclusive)
                    be.inclusive_scan(inplace, inplace, n);
                else
                    be.exclusive_scan(inplace, inplace, n);
                got = inplace.download();
                CHECK_MESSAGE(mismatch(got, want, n).empty(), "in place: " << mismatch(got, want, n));
                CHECK(still_poisoned(got, n, n + slack, poison));
            }
        }
    });
}

TEST_CASE("compact and split keep order, count on the device, and treat any nonzero flag as set")
{
    auto& be = test::backend();
    for_each_size(true, [&](std::size_t n) {
        for (const auto& [fk, fk_name] : flag_kinds) {
            // The largest sizes only with random flags: the others are covered at every smaller size.
            if (n > (std::size_t{1} << 18) && fk != Flags::random && fk != Flags::other_nonzero) continue;
            CAPTURE(fk_name);
            const auto values = random_u32(n);
            const auto flags = flags_input(fk, n);
            std::vector<bn_u32> kept, rest;
            for (std::size_t i = 0; i < n; ++i)
                (flags[i] ? kept : rest).push_back(values[i]);
            std::vector<bn_u32> parted = kept;
            parted.insert(parted.end(), rest.begin(), rest.end());

            const auto in = upload_padded(values, poison);
            const auto fl = upload_padded(flags, 1u); // flags after n are set: they must be ignored
            for (bool split : {false, true}) {
                CAPTURE(split);
                auto out = poisoned(n, poison);
                auto count = poisoned<bn_u32>(0, poison);
                if (split)
                    be.split(in, fl, n, out, count);
                else
                    be.compact(in, fl, n, out, count);
                const auto got = out.download();
                const auto cnt = count.download();
                CHECK(cnt[0] == kept.size());
                CHECK(still_poisoned(cnt, 1, cnt.size(), poison));
                if (split) {
                    CHECK_MESSAGE(mismatch(got, parted, n).empty(), mismatch(got, parted, n));
                    CHECK(still_poisoned(got, n, n + slack, poison));
                } else {
                    CHECK_MESSAGE(mismatch(got, kept, kept.size()).empty(), mismatch(got, kept, kept.size()));
                    CHECK(still_poisoned(got, kept.size(), n + slack, poison));
                }
            }
        }
    });
}

TEST_CASE("reduce_bounds gives the exact componentwise minimum and maximum")
{
    auto& be = test::backend();
    const bn_f4 p{-7.f, -7.f, -7.f, -7.f};
    for_each_size(false, [&](std::size_t n) {
        if (n == 0) return; // needs n >= 1
        for (int kind = 0; kind < 3; ++kind) {
            CAPTURE(kind);
            std::uniform_real_distribution<float> wide(-1000.f, 1000.f);
            std::vector<bn_f4> host(n);
            for (auto& x : host) {
                if (kind == 0)
                    x = {wide(test::rng()), wide(test::rng()), wide(test::rng()) * 1e-3f, wide(test::rng()) + 5000.f};
                else if (kind == 1)
                    x = {3.5f, -2.25f, 0.f, 1e30f};
                else
                    x = {float(test::rng()() % 3), -float(test::rng()() % 5), 1.f, float(test::rng()() % 2)};
            }
            bn_f4 lo = host[0], hi = host[0];
            for (const auto& x : host) {
                lo = {std::min(lo.x, x.x), std::min(lo.y, x.y), std::min(lo.z, x.z), std::min(lo.w, x.w)};
                hi = {std::max(hi.x, x.x), std::max(hi.y, x.y), std::max(hi.z, x.z), std::max(hi.w, x.w)};
            }
            const auto in = be.upload<bn_f4>(host, "bounds in");
            auto out = be.alloc<bn_f4>(3, "bounds out");
            out.fill(p);
            be.reduce_bounds(in, n, out);
            const auto got = out.download();
            CHECK((got[0].x == lo.x && got[0].y == lo.y && got[0].z == lo.z && got[0].w == lo.w));
            CHECK((got[1].x == hi.x && got[1].y == hi.y && got[1].z == hi.z && got[1].w == hi.w));
            CHECK((got[2].x == p.x && got[2].y == p.y && got[2].z == p.z && got[2].w == p.w));
        }
    });
}

TEST_CASE("reduce_sum matches a long double sum (exactly for integer values)")
{
    auto& be = test::backend();
    for_each_size(false, [&](std::size_t n) {
        for (int kind = 0; kind < 3; ++kind) {
            CAPTURE(kind);
            std::uniform_real_distribution<double> u(-1.0, 1.0);
            std::vector<double> host(n);
            for (auto& x : host) {
                if (kind == 0)
                    x = u(test::rng()); // cancelling signs
                else if (kind == 1)
                    x = std::ldexp(1.0 + u(test::rng()), int(test::rng()() % 40) - 20);
                else
                    x = double(static_cast<std::int64_t>(test::rng()() % 2001) - 1000); // exact sums
            }
            long double ref = 0, mag = 0;
            for (double x : host) {
                ref += x;
                mag += std::fabs(x);
            }
            const auto in = be.upload<double>(host, "sum in");
            auto out = be.alloc<double>(2, "sum out");
            out.fill(-12345.0);
            be.reduce_sum(in, n, out);
            const auto got = out.download();
            if (kind == 2 || n == 0)
                CHECK(got[0] == static_cast<double>(ref));
            else
                CHECK(std::fabs(static_cast<long double>(got[0]) - ref) <= 1e-12L * mag);
            CHECK(got[1] == -12345.0);
        }
    });
}

TEST_CASE("gather moves 4, 8 and 16 byte elements bit for bit")
{
    auto& be = test::backend();
    for_each_size(false, [&](std::size_t n) {
        for (bool permutation : {true, false}) {
            CAPTURE(permutation);
            // A source larger than n, so indices reach past the output's size when they repeat.
            const std::size_t m = permutation ? n : n + n / 3 + 1;
            std::vector<bn_u32> perm(n);
            if (permutation) {
                std::iota(perm.begin(), perm.end(), 0u);
                std::shuffle(perm.begin(), perm.end(), test::rng());
            } else {
                for (auto& p : perm)
                    p = static_cast<bn_u32>(test::rng()() % m);
            }
            const auto dperm = be.upload<bn_u32>(perm, "perm");
            const auto src = random_u32(4 * m); // any bit pattern, NaNs included when read as floats

            auto check = [&](auto tag) {
                using T = decltype(tag);
                std::vector<T> in(m), want(n);
                if (m) std::memcpy(in.data(), src.data(), m * sizeof(T)); // m = 0: in.data() is null
                for (std::size_t i = 0; i < n; ++i)
                    want[i] = in[perm[i]];
                const auto din = be.upload<T>(in, "gather in");
                T pt;
                std::memset(&pt, 0xA5, sizeof pt);
                auto out = poisoned(n, pt);
                be.gather(din, dperm, n, out);
                const auto got = out.download();
                CHECK_MESSAGE(mismatch(got, want, n).empty(), sizeof(T) << " bytes: " << mismatch(got, want, n));
                CHECK(still_poisoned(got, n, n + slack, pt));
            };
            check(bn_u32{});
            check(bn_u64{});
            check(bn_f4{});
        }
    });
}

TEST_CASE("primitives reject buffers that are too small")
{
    auto& be = test::backend();
    auto small = be.alloc<bn_u32>(10, "small");
    auto big = be.alloc<bn_u32>(100, "big");
    auto count = be.alloc<bn_u32>(1, "count");
    CHECK_THROWS_AS(be.exclusive_scan(small, big, 50), UsageError);
    CHECK_THROWS_AS(be.inclusive_scan(big, small, 50), UsageError);
    CHECK_THROWS_AS(be.compact(big, small, 50, big, count), UsageError);
    CHECK_THROWS_AS(be.split(big, big, 50, small, count), UsageError);
    auto f4 = be.alloc<bn_f4>(4, "f4");
    auto one = be.alloc<bn_f4>(1, "one");
    CHECK_THROWS_AS(be.reduce_bounds(f4, 0, f4), UsageError);
    CHECK_THROWS_AS(be.reduce_bounds(f4, 4, one), UsageError);
}
