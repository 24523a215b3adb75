/**
 * @file test_parallel_cli.cpp
 * @brief The commands under mpiexec as the program runs them (apps/): `banyan forces` over P ranks writes one .npy in
 *        the file's particle order, the direct sum bit for bit as one device computes it, the tree's within the
 *        tolerances of one rank's tree.
 *
 * Checks sit between collectives (CHECK, not REQUIRE), so that a failure on one rank never leaves the others waiting.
 */
#include "apps/cli/cli.hpp"
#include "apps/cli/progress.hpp"
#include "core/files/npy.hpp"
#include "core/files/tipsy.hpp"
#include "core/gravity/direct.hpp"
#include "core/gravity/forces.hpp"
#include "core/parallel/comm.hpp"
#include "core/models/plummer.hpp"
#include "tests/support/harness.hpp"
#include "tests/support/run_files.hpp"
#include "tests/parallel/mpi/force_errors.hpp"
#include "tests/parallel/mpi/shared_folder.hpp"

#include <doctest/doctest.h>
#include <fmt/format.h>

#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <unistd.h>

namespace banyan {
namespace {

namespace fs = std::filesystem;
using test::backend;
using test::quantile;

/// The rows of an (N, 4) float array as float4.
std::vector<bn_f4> as_f4(const std::vector<float>& rows)
{
    std::vector<bn_f4> v(rows.size() / 4);
    std::memcpy(v.data(), rows.data(), v.size() * sizeof(bn_f4));
    return v;
}

} // namespace

TEST_CASE("banyan forces over P ranks: one file in the input's order, direct bit for bit, tree as on one rank")
{
    const Comm& comm = Comm::world();
    const test::SharedFolder dir(comm);
    // Gas, dark and star particles (the command takes all three) from one Plummer sphere, written by rank 0.
    const std::size_t n = 3001;
    const float eps = 0.01f;
    const auto p = plummer(n, 4242).pos;
    const fs::path in = dir / "in.tipsy";
    if (comm.rank() == 0) {
        Snapshot s;
        s.n_gas = 500, s.n_dark = 2000, s.n_star = n - 2500;
        s.mass.resize(n), s.pos.resize(3 * n), s.vel.assign(3 * n, 0.f), s.eps.assign(n, eps), s.phi.assign(n, 0.f);
        s.gas_rho.assign(s.n_gas, 1.f), s.gas_temp.assign(s.n_gas, 1e4f), s.gas_metals.assign(s.n_gas, 0.f);
        s.star_metals.assign(s.n_star, 0.f), s.star_tform.assign(s.n_star, 0.f);
        for (std::size_t i = 0; i < n; ++i)
            s.mass[i] = p[i].w, s.pos[3 * i] = p[i].x, s.pos[3 * i + 1] = p[i].y, s.pos[3 * i + 2] = p[i].z;
        write_tipsy(in.string(), s);
    }
    comm.barrier();
    const DeviceInfo& d = backend().info();
    const std::vector<std::string> device = {"--backend", d.backend, "--device", std::to_string(d.index)};
    auto forces = [&](const std::string& out, std::vector<std::string> extra) {
        std::vector<std::string> args = {"--in", in.string(), "--out", (dir / out).string()};
        args.insert(args.end(), device.begin(), device.end());
        args.insert(args.end(), extra.begin(), extra.end());
        return cli::run_forces(args);
    };
    CHECK(forces("direct.npy", {"--direct"}) == 0);
    CHECK(forces("tree.npy", {"--theta", "0.75"}) == 0);
    comm.barrier();

    std::size_t rows = 0, cols = 0;
    // Direct: every rank summed its targets from all particles; the same sums, in the same order, as all at once.
    const auto direct = read_npy((dir / "direct.npy").string(), &rows, &cols);
    CHECK(rows == n);
    CHECK(cols == 4);
    auto pd = backend().upload<bn_f4>(p, "test.pos");
    auto ad = backend().alloc<bn_f4>(n, "test.acc");
    direct_forces(backend(), pd, n, eps, ad);
    const auto whole = ad.download(n);
    CHECK(std::memcmp(direct.data(), whole.data(), n * sizeof(bn_f4)) == 0);

    // Tree: particle i of the file is row i, with errors as one rank's tree makes them (tolerances as in
    // test_parallel_forces.cpp: the trees of P ranks accept other cells).
    const auto tree = read_npy((dir / "tree.npy").string(), &rows, &cols);
    CHECK(rows == n);
    const auto mine = test::force_errors(p, as_f4(tree), eps);
    const auto ref = test::force_errors(p, tree_forces(backend(), p, 0.75f, eps).acc, eps);
    INFO(fmt::format("P = {}: median {:.3e} (one rank {:.3e}), 99% {:.3e} ({:.3e}), max {:.3e} ({:.3e})", comm.size(),
                     quantile(mine, 0.5), quantile(ref, 0.5), quantile(mine, 0.99), quantile(ref, 0.99), mine.back(),
                     ref.back()));
    CHECK(quantile(mine, 0.5) <= 1.25 * quantile(ref, 0.5) + 1e-7);
    CHECK(quantile(mine, 0.99) <= 1.5 * quantile(ref, 0.99) + 1e-7);
    CHECK(mine.back() <= 2.5 * ref.back() + 1e-6);
    // Potentials in the right rows: within 1 % of the direct sum's (a row out of place would be far off).
    std::size_t off = 0;
    for (std::size_t i = 0; i < n; ++i)
        off += std::abs(tree[4 * i + 3] - direct[4 * i + 3]) > 0.01f * std::abs(direct[4 * i + 3]);
    CHECK(off == 0);
}

TEST_CASE("banyan bench forces over P ranks times --reps evaluations after --warmup untimed ones")
{
    // The two counts were once passed the wrong way round: --reps 5 timed one evaluation after five.
    const Comm& comm = Comm::world();
    const test::SharedFolder dir(comm);
    const DeviceInfo& d = backend().info();
    const fs::path json = dir / "bench.json";
    CHECK(cli::run_bench_forces({"--backend", d.backend, "--device", std::to_string(d.index), "--per-rank",
                                 "--min-log2", "10", "--max-log2", "10", "--theta", "0.75", "--reps", "3", "--warmup",
                                 "2", "--json", json.string()}) == 0);
    comm.barrier();
    const std::string text = test::file_bytes(json);
    CHECK(text.find("\"warmup\": 2,") != std::string::npos);
    CHECK(text.find("\"reps\": 3,") != std::string::npos);
}

TEST_CASE("the live progress line only on a terminal the user sees: never under an MPI launcher")
{
    // Open MPI gives its ranks a pseudo-terminal, whose output ends up in the launcher's pipes and files: isatty alone
    // said yes there, and carriage returns and ESC[K went into logs (issue 48). Here on a terminal of our own
    // (a pseudo-terminal), on a pipe, and under a launcher or its environment.
    const int master = ::posix_openpt(O_RDWR | O_NOCTTY);
    REQUIRE(master >= 0);
    REQUIRE(::grantpt(master) == 0);
    REQUIRE(::unlockpt(master) == 0);
    std::FILE* tty = std::fopen(::ptsname(master), "w");
    REQUIRE(tty != nullptr);
    int fds[2];
    REQUIRE(::pipe(fds) == 0);
    std::FILE* pipe = ::fdopen(fds[1], "w");
    CHECK(!cli::live_terminal(pipe));
    // This process: under mpiexec (every test but no_launcher) a launcher's, whose terminals are not the user's.
    CHECK(cli::live_terminal(tty) == !Comm::launched());
    CHECK(Comm::launched() == Comm::started());
    if (!Comm::launched()) {
        for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK"}) {
            INFO(v);
            ::setenv(v, "1", 1);
            CHECK(!cli::live_terminal(tty));
            ::unsetenv(v);
            CHECK(cli::live_terminal(tty));
        }
    }
    std::fclose(pipe), ::close(fds[0]);
    std::fclose(tty), ::close(master);
}

TEST_CASE("the progress line shows dE/E once a step has logged one, never a perfect 0 before")
{
    // "dE/E +0.00e+00" until the first energy evaluation read as perfect conservation (issue 48).
    const Comm& comm = Comm::world();
    const test::SharedFolder dir(comm);
    RunOptions o = test::short_run(dir / "run", 3.0 / 64);
    o.n = 1000;
    o.log_every = 2;
    RunRequest request(o);
    request.outputs = RunOutputs::none(); // no files; the line of step 2 asked for below
    Run run(backend(), plan_run(std::move(request), comm), {}, comm);
    const std::string start = cli::Progress::status(run);
    CHECK(start.find("step 0/3  t 0") == 0);
    CHECK(start.find("dE/E") == std::string::npos);
    CHECK(start.find("particles/s") == std::string::npos); // no rate before a step
    run.step();
    run.step();
    run.record();
    const std::string later = cli::Progress::status(run);
    CHECK(later.find("step 2/3") == 0);
    CHECK(later.find("dE/E ") != std::string::npos);
    CHECK(later.find("particles/s") != std::string::npos);
    CHECK(later.find(" at t ") == std::string::npos); // the value is of the time shown
    run.step();
    CHECK(cli::Progress::status(run).find(" at t 0.03125") != std::string::npos); // of the line before
}

TEST_CASE("sizes in units that show them")
{
    CHECK(cli::bytes_text(640) == "640 bytes");
    CHECK(cli::bytes_text(218 * 2048.0) == "436 KiB");
    CHECK(cli::bytes_text(3.5 * (1 << 20)) == "3.5 MiB");
    CHECK(cli::bytes_text(12.1 * (1 << 30)) == "12.1 GiB");
    CHECK(cli::clock_text(3725) == "1:02:05");
    CHECK(cli::clock_text(-1) == "?");
}

} // namespace banyan
