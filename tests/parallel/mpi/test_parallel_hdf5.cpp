/**
 * @file test_parallel_hdf5.cpp
 * @brief Snapshots written by P ranks (core/parallel/parallel_files.hpp, write_hdf5_parallel in turns,
 *        write_tipsy_parallel): the same bytes as one rank's write_hdf5 and write_tipsy of the same particles,
 *        whatever P and however the particles are spread over the ranks, GADGET types 2, 3, 5, gas and stars
 *        included; and a run over P ranks in HDF5 that holds the input's particles in order and continues bit for
 *        bit after a restart.
 *
 * Checks sit between collectives (CHECK, not REQUIRE), so that a failure on one rank never leaves the others waiting.
 */
#include "core/files/hdf5_snapshot.hpp"
#include "core/files/snapshot_file.hpp"
#include "core/files/tipsy.hpp"
#include "core/parallel/comm.hpp"
#include "core/parallel/parallel_files.hpp"
#include "core/simulation/run.hpp"
#include "core/simulation/run_options.hpp"
#include "tests/support/harness.hpp"
#include "tests/support/run_files.hpp"
#include "tests/parallel/mpi/shared_folder.hpp"

#include <doctest/doctest.h>
#include <fmt/format.h>

#include <random>

namespace banyan {

namespace fs = std::filesystem;

TEST_CASE("snapshots written by P ranks have the bytes of one rank's, gas and stars included")
{
    const Comm& comm = Comm::world();
    const test::SharedFolder dir(comm);
    const std::size_t P = static_cast<std::size_t>(comm.size()), me = static_cast<std::size_t>(comm.rank());
    // Collisionless types only (the softening given: fields of no rows), and gas and stars (each rank gives the
    // fields of its block of rows, as a run that read its rows of the input does).
    for (const bool with_gas : {false, true}) {
        const std::array<std::uint64_t, 6> counts = with_gas ? std::array<std::uint64_t, 6>{120, 500, 200, 51, 80, 50}
                                                             : std::array<std::uint64_t, 6>{0, 700, 200, 51, 0, 50};
        const std::size_t n = 1001;
        const float eps = 0.03125f;
        std::mt19937_64 g(17);
        std::uniform_real_distribution<float> u(-3.f, 3.f);
        Snapshot s = Snapshot::dark(n);
        s.n_gas = counts[0], s.n_star = counts[4], s.n_dark = n - s.n_gas - s.n_star;
        s.time = 0.75;
        s.n_type2 = counts[2], s.n_type3 = counts[3], s.n_type5 = counts[5];
        s.units = parse_units("pc,Msun");
        s.acc.resize(3 * n);
        for (std::size_t i = 0; i < n; ++i) {
            s.mass[i] = 1.f + std::fabs(u(g));
            s.phi[i] = u(g);
            s.eps[i] = with_gas ? 0.01f + std::fabs(u(g)) : eps;
            for (int k = 0; k < 3; ++k)
                s.pos[3 * i + k] = u(g), s.vel[3 * i + k] = u(g), s.acc[3 * i + k] = u(g);
        }
        for (std::size_t i = 0; i < s.n_gas; ++i)
            s.gas_rho.push_back(u(g)), s.gas_temp.push_back(u(g)), s.gas_metals.push_back(u(g));
        for (std::size_t i = 0; i < s.n_star; ++i)
            s.star_metals.push_back(u(g)), s.star_tform.push_back(u(g));
        SnapshotMeta meta;
        meta.parameters = "n=1001\nsnapshot_format=hdf5\n";
        // Every rank makes the same particles, then keeps a scattered share of them (not a block: the writer must
        // sort them into the file's order).
        RankParticles mine;
        for (std::size_t i = 0; i < n; ++i) {
            if ((i * 7 + 3) % P != me) continue;
            mine.ids.push_back(static_cast<bn_u32>(i));
            mine.pos.push_back({s.pos[3 * i], s.pos[3 * i + 1], s.pos[3 * i + 2], s.mass[i]});
            mine.vel.push_back({s.vel[3 * i], s.vel[3 * i + 1], s.vel[3 * i + 2], 0.f});
            mine.acc.push_back({s.acc[3 * i], s.acc[3 * i + 1], s.acc[3 * i + 2], s.phi[i]});
            mine.phi.push_back(s.phi[i]);
        }
        const Snapshot fields = with_gas ? rows_of(s, Rows{me * n / P, (me + 1) * n / P - me * n / P}) : Snapshot{};
        const FileCounts whole{s.n_gas, s.n_dark, s.n_star, s.n_type2, s.n_type3, s.n_type5};
        const fs::path many = dir / "many.hdf5", one = dir / "one.hdf5";
        write_hdf5_parallel(comm, many.string(), s.time, whole, mine, fields, eps, s.units, meta);
        if (comm.rank() == 0) write_hdf5(one.string(), s, meta);
        comm.barrier();
        const std::string a = test::file_bytes(many), b = test::file_bytes(one);
        CHECK(!a.empty());
        CHECK(a == b);
        const Snapshot r = read_hdf5(many.string());
        CHECK(r.pos == s.pos);
        CHECK(r.vel == s.vel);
        CHECK(r.acc == s.acc);
        CHECK(r.phi == s.phi);
        CHECK(r.mass == s.mass);
        CHECK(r.eps == s.eps);
        CHECK(r.gas_rho == s.gas_rho);
        CHECK(r.gas_metals == s.gas_metals);
        CHECK(r.star_tform == s.star_tform);
        CHECK(r.n_type2 == 200);
        CHECK(r.n_type3 == 51);
        CHECK(r.n_type5 == 50);
        CHECK(r.ids.size() == n);
        CHECK((r.ids.empty() || r.ids.back() == n - 1));
        CHECK(same_units(r.units, s.units));
        // Tipsy the same way (no types beyond gas, dark and star; no accelerations).
        const fs::path many_t = dir / "many.tipsy", one_t = dir / "one.tipsy";
        write_tipsy_parallel(comm, many_t.string(), s.time, whole, mine, fields, eps);
        if (comm.rank() == 0) write_tipsy(one_t.string(), s);
        comm.barrier();
        CHECK(!test::file_bytes(many_t).empty());
        CHECK(test::file_bytes(many_t) == test::file_bytes(one_t));
        for (const auto& e : fs::directory_iterator(dir))
            CHECK(e.path().string().find(".tmp") == std::string::npos);
        comm.barrier();
    }
}

TEST_CASE("a run over P ranks writes HDF5 snapshots of the input's particles and restarts bit for bit")
{
    const Comm& comm = Comm::world();
    const test::SharedFolder dir(comm);
    auto options = [&](const char* name, double t_end) {
        RunOptions o = test::short_run(dir / name, t_end);
        o.n = 1200;
        o.seed = 6;
        o.units = "kpc,1e10Msun";
        return o;
    };
    for (const auto& [name, t_end] : {std::pair{"straight", 0.375}, std::pair{"split", 0.125}}) {
        const RunOptions o = options(name, t_end);
        Run(test::backend(), plan_run({o})).run();
    }
    Run::resume(test::backend(), (dir / "split").string(), 0.375)->run();
    comm.barrier();
    const Snapshot ic = initial_conditions(options("straight", 0.375));
    const Snapshot s0 = read_snapshot((dir / "straight" / "snapshot_00000.hdf5").string());
    CHECK(s0.pos == ic.pos);
    CHECK(s0.vel == ic.vel);
    CHECK(s0.mass == ic.mass);
    CHECK(s0.acc.size() == 3 * ic.size());
    CHECK(same_units(s0.units, parse_units("kpc,1e10Msun")));
    CHECK(test::file_bytes(dir / "straight" / "energy.csv") == test::file_bytes(dir / "split" / "energy.csv"));
    CHECK(test::file_bytes(dir / "straight" / "snapshot_00003.hdf5") ==
          test::file_bytes(dir / "split" / "snapshot_00003.hdf5"));
    CHECK(!test::file_bytes(dir / "split" / "snapshot_00003.hdf5").empty());
}

} // namespace banyan
