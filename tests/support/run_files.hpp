/**
 * @file run_files.hpp
 * @brief Helpers of the tests that run simulations and compare their states and files (test_simulation.cpp,
 *        test_block_steps.cpp, the multi-rank runs of tests/parallel/mpi/): a temporary output folder, a file's
 *        bytes, bit-for-bit equal particle arrays and particle fields, and a run stopped as Ctrl-C stops it.
 */
#pragma once

#include "core/device_shared.h"
#include "core/files/snapshot.hpp"
#include "core/simulation/run.hpp"
#include "core/simulation/run_options.hpp"
#include "core/simulation/simulation.hpp"

#include <doctest/doctest.h>

#include <fmt/format.h>
#include <unistd.h>

#include <csignal>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

namespace banyan::test {

/// A fresh, empty folder under the system's temporary folder, removed at the end of the scope.
struct TempDir {
    std::filesystem::path path;
    explicit TempDir(const std::string& name)
        : path(std::filesystem::temp_directory_path() / fmt::format("banyan-test-{}-{}", ::getpid(), name))
    {
        std::filesystem::remove_all(path);
    }
    ~TempDir()
    {
        std::error_code ec;
        std::filesystem::remove_all(path, ec);
    }
    std::string str() const { return path.string(); }
};

/// The bytes of the file at @p p (empty when it cannot be read).
inline std::string file_bytes(const std::filesystem::path& p)
{
    std::ifstream f(p, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

/// Whether @p a and @p b hold the same values bit for bit.
inline bool same_bits(const std::vector<bn_f4>& a, const std::vector<bn_f4>& b)
{
    return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(bn_f4)) == 0);
}

/// Checks that two saved states hold the same particles to the bit: positions, velocities, accelerations and ids.
inline void check_same_state(const SimulationState& a, const SimulationState& b)
{
    CHECK(same_bits(a.pos, b.pos));
    CHECK(same_bits(a.vel, b.vel));
    CHECK(same_bits(a.acc, b.acc));
    CHECK(a.ids == b.ids);
}

/// A Plummer run into the folder @p out to @p t_end in steps of 1/64, its energy logged every 4 steps, a snapshot and a
/// checkpoint every 1/8.
inline RunOptions short_run(const std::filesystem::path& out, double t_end)
{
    RunOptions o;
    o.ic = "plummer";
    o.dt = 1.0 / 64;
    o.t_end = t_end;
    o.log_every = 4;
    o.snapshot_every = 0.125;
    o.checkpoint_every = 0.125;
    o.out = out.string();
    return o;
}

/// Checks that snapshot @p s holds the gas and stars of @p in (test::make_gas_and_stars) with their fields, and every
/// particle's softening (gas: its smoothing length).
inline void check_gas_and_stars(const Snapshot& s, const Snapshot& in)
{
    CHECK(s.n_gas == in.n_gas);
    CHECK(s.n_star == in.n_star);
    CHECK(s.eps == in.eps);
    CHECK(s.gas_rho == in.gas_rho);
    CHECK(s.gas_temp == in.gas_temp);
    CHECK(s.gas_metals == in.gas_metals);
    CHECK(s.star_metals == in.star_metals);
    CHECK(s.star_tform == in.star_tform);
}

/// Runs the Run that @p make builds (with the hooks it is handed) until step @p step has ended, where it stops as
/// Ctrl-C stops a run; checks that it says so (Run::Outcome::stopped) and returns its step count then.
inline std::uint64_t run_stopped_at(std::uint64_t step, const std::function<std::unique_ptr<Run>(RunHooks)>& make)
{
    volatile std::sig_atomic_t stop = 0;
    Run* self = nullptr;
    RunHooks hooks;
    hooks.on_step = [&] {
        if (self->step_count() == step) stop = 1;
    };
    const std::unique_ptr<Run> r = make(std::move(hooks));
    self = r.get();
    CHECK(r->run(&stop) == Run::Outcome::stopped);
    return r->step_count();
}

} // namespace banyan::test
