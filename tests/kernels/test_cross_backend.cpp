/**
 * @file test_cross_backend.cpp
 * @brief CUDA and OpenCL on the same machine give the same results, bit for bit where the issue asks for it.
 *
 * Test suite "cross": run by `banyan_tests --backend cross` (CTest: cross_backend), which needs a CUDA device and an
 * OpenCL GPU in one process and is reported as skipped when either is absent.
 */
#include "tests/support/harness.hpp"

#include "core/tree/octree.hpp"
#include "core/models/plummer.hpp"

#include <doctest/doctest.h>

#include <cstring>

using namespace banyan;

namespace {

template <class T> bool same_bits(const Buffer<T>& a, const Buffer<T>& b, std::size_t n)
{
    const auto x = a.download(n), y = b.download(n);
    return std::memcmp(x.data(), y.data(), n * sizeof(T)) == 0;
}

} // namespace

TEST_SUITE("cross")
{
    TEST_CASE("CUDA and OpenCL build bit-identical trees from the same input")
    {
        for (std::size_t n : {std::size_t{1000}, std::size_t{1} << 16, std::size_t{1} << 20}) {
            INFO("Plummer N = ", n);
            const Particles p = plummer(n, 7 + n);
            Octree a(test::backend()), b(test::other_backend());
            a.set_particles(p.pos, p.vel);
            b.set_particles(p.pos, p.vel);
            a.build();
            b.build();
            REQUIRE(a.cells() == b.cells());
            REQUIRE(a.groups() == b.groups());
            CHECK(a.level_begin() == b.level_begin());
            const std::size_t c = a.cells(), g = a.groups();
            CHECK(same_bits(a.keys(), b.keys(), n));
            CHECK(same_bits(a.ids(), b.ids(), n));
            CHECK(same_bits(a.pos(), b.pos(), n));
            CHECK(same_bits(a.frame(), b.frame(), 1));
            CHECK(same_bits(a.cell_key(), b.cell_key(), c));
            CHECK(same_bits(a.cell_level(), b.cell_level(), c));
            CHECK(same_bits(a.cell_parent(), b.cell_parent(), c));
            CHECK(same_bits(a.cell_first(), b.cell_first(), c));
            CHECK(same_bits(a.cell_count(), b.cell_count(), c));
            CHECK(same_bits(a.cell_pbegin(), b.cell_pbegin(), c));
            CHECK(same_bits(a.cell_pcount(), b.cell_pcount(), c));
            CHECK(same_bits(a.cell_com(), b.cell_com(), c));
            CHECK(same_bits(a.cell_quad0(), b.cell_quad0(), c));
            CHECK(same_bits(a.cell_quad1(), b.cell_quad1(), c));
            CHECK(same_bits(a.group_first(), b.group_first(), g));
            CHECK(same_bits(a.group_count(), b.group_count(), g));
            CHECK(same_bits(a.group_lo(), b.group_lo(), g));
            CHECK(same_bits(a.group_hi(), b.group_hi(), g));
        }
    }
}
