/**
 * @file main.cpp
 * @brief The banyan program: dispatches to subcommands and turns errors into messages and exit codes.
 *
 * Exit codes: 0 success, 1 device failure or another error at run time, 2 bad usage or bad input, 3 numbers
 * that left single precision's range (NaN or infinity: the results are not written); `banyan run` stopped by
 * SIGINT or SIGTERM: 130 or 143.
 */
#include "apps/cli/cli.hpp"
#include "core/parallel/comm.hpp"
#include "core/device/backend.hpp"
#include "core/error.hpp"
#include "core/version.hpp"

#include <fmt/format.h>

#ifdef __GLIBC__
#include <malloc.h>
#endif

#include <csignal>
#include <cstdio>
#include <exception>
#include <new>
#include <string>
#include <string_view>
#include <utility>

namespace banyan::cli {

const std::vector<Command>& commands()
{
    static const std::vector<Command> list{
        {"devices", "list every device of every backend compiled in", run_devices},
        {"bench primitives", "time sort, scan and compaction against CUB and Boost.Compute", run_bench_primitives},
        {"bench tree", "time each phase of the tree build on Plummer spheres, and its device memory", run_bench_tree},
        {"run",
         "a whole simulation from generated initial conditions (--ic plummer, hernquist, disc, uniform, "
         "uniform-cold, merger, galaxy, galaxy-merger) or a snapshot (--in FILE: HDF5 or tipsy); HDF5 (default) or "
         "tipsy snapshots, energy log, checkpoints; physical --units, --steps block, over ranks under mpirun",
         run_run},
        {"forces", "accelerations and potentials of an HDF5 or tipsy snapshot's particles (tree or direct) to .npy",
         run_forces},
        {"accuracy",
         "tree forces against double-precision direct sums: models (plummer, hernquist, disc) or --in FILE; error "
         "against time",
         run_accuracy},
        {"bench forces",
         "time build + multipoles + tree walk on models (plummer, hernquist, disc) or --in FILE; interactions, flop "
         "rate",
         run_bench_forces},
        {"bench galaxy", "an isolated galaxy run for a few rotations: do its radii, thickness, rotation and Q stay put",
         run_bench_galaxy},
        {"render", "an HDF5 or tipsy snapshot's projected surface density (log scale, colour bar) as a PNG image",
         run_render},
    };
    return list;
}

} // namespace banyan::cli

namespace {

/// "  name   summary", the summary wrapped at spaces into lines of at most 96 characters under its first.
void print_summary_line(const banyan::cli::Command& c, std::FILE* out = stdout)
{
    std::string_view rest = c.summary;
    std::string name = c.name;
    while (!rest.empty()) {
        std::size_t cut = rest.size();
        if (cut > 96) {
            cut = rest.rfind(' ', 96);
            if (cut == std::string_view::npos || cut == 0) cut = 96;
        }
        fmt::print(out, "  {:<20} {}\n", name, rest.substr(0, cut));
        rest.remove_prefix(cut);
        while (!rest.empty() && rest.front() == ' ')
            rest.remove_prefix(1);
        name.clear();
    }
}

void print_usage()
{
    fmt::print("banyan {}: a gravitational N-body tree-code that runs entirely on the GPU (CUDA and OpenCL)\n\n"
               "usage: banyan <command> [options]    banyan <command> --help    banyan --version\n\ncommands:\n",
               banyan::version);
    for (const auto& c : banyan::cli::commands())
        print_summary_line(c);
    fmt::print("\nfiles: reads HDF5 snapshots (GADGET-2/4 or SWIFT layout, all particle types) and tipsy files, told\n"
               "apart by their first bytes; `run` writes HDF5 snapshots in the GADGET-4 layout (pynbody and yt open\n"
               "them; physical units with --units kpc,1e10Msun) or tipsy (--format tipsy).\n"
               "\nexamples:\n"
               "  banyan run -n 1048576 --t-end 10 --out plummer-1M      a Plummer sphere, N-body units\n"
               "  banyan run --ic galaxy-merger --out merger             the paper's galaxy merger (kpc, 1e10 Msun)\n"
               "  banyan run --in snap.hdf5 --t-end 100 --out mine       from your own HDF5 or tipsy snapshot\n"
               "  mpirun -n 4 banyan run -n 268435456 --out big          over 4 ranks (one GPU each)\n"
               "  banyan forces --in snap.hdf5 --out acc.npy             one force evaluation of a snapshot\n"
               "  banyan render mine/snapshot_00010.hdf5 --out t10.png   a quick look\n");
    fmt::print("\nenvironment: BANYAN_BACKEND, BANYAN_DEVICE (device selection), BANYAN_CL_DIR (read OpenCL\n"
               "kernels from this folder instead of the embedded copy), BANYAN_TRANSPORT (auto, host or device: how\n"
               "the trees go between ranks under mpirun)\n");
}

/// The commands whose first word is @p word and which have more words ("bench" -> "bench primitives", ...).
std::vector<const banyan::cli::Command*> group_of(const std::string& word)
{
    std::vector<const banyan::cli::Command*> group;
    for (const auto& c : banyan::cli::commands())
        if (c.name.size() > word.size() && c.name.compare(0, word.size(), word) == 0 && c.name[word.size()] == ' ')
            group.push_back(&c);
    return group;
}

} // namespace

namespace {

/// The error's exit code; under several ranks every rank stops at once (the others may wait in a collective).
int failed(int code)
{
    if (banyan::Comm::world().parallel()) {
        std::fflush(stdout);
        std::fflush(stderr);
        banyan::Comm::abort(code);
    }
    return code;
}

/// banyan's error messages, marked with the rank under several ranks.
std::string prefix()
{
    const auto& c = banyan::Comm::world();
    return c.parallel() ? fmt::format("banyan (rank {} of {})", c.rank(), c.size()) : "banyan";
}

/// What the exception in flight says, and the exit code it gives: 2 bad usage, 3 a numerical failure, 1 any other.
/// Call inside a catch block; what is not a std::exception goes on.
std::pair<std::string, int> current_error()
{
    try {
        throw;
    } catch (const banyan::UsageError& e) {
        return {e.what(), 2};
    } catch (const banyan::NumericalError& e) {
        return {e.what(), 3};
    } catch (const std::bad_alloc&) {
        return {"out of host memory (the particles' arrays on the host do not fit)", 1};
    } catch (const banyan::DeviceError& e) {
        return {fmt::format("device failure: {}", e.what()), 1};
    } catch (const std::exception& e) {
        return {fmt::format("error: {}", e.what()), 1};
    }
}

int run_command(int argc, char** argv)
{
    std::vector<std::string> args(argv + 1, argv + argc);
    if (args.empty() || args[0] == "--help" || args[0] == "-h" || args[0] == "help") {
        print_usage();
        return args.empty() ? 2 : 0;
    }
    if (args[0] == "--version" || args[0] == "-V") {
        fmt::print("banyan {}\n", banyan::version);
        return 0;
    }
    banyan::set_notice_handler([](const std::string& text) {
        fmt::print(stderr, "banyan: {}\n", text);
        std::fflush(stderr);
    });
    try {
        // Longest match of the command words ("bench primitives" before "bench").
        const banyan::cli::Command* best = nullptr;
        std::size_t best_words = 0;
        for (const auto& c : banyan::cli::commands()) {
            std::vector<std::string> words;
            for (std::size_t p = 0, q; p <= c.name.size(); p = q + 1) {
                q = c.name.find(' ', p);
                if (q == std::string::npos) q = c.name.size();
                words.push_back(c.name.substr(p, q - p));
            }
            if (words.size() > args.size() || words.size() <= best_words) continue;
            if (std::equal(words.begin(), words.end(), args.begin())) {
                best = &c;
                best_words = words.size();
            }
        }
        if (!best && !group_of(args[0]).empty()) {
            // "banyan bench" or "banyan bench --help": the commands of the group.
            const bool help = args.size() > 1 && (args[1] == "--help" || args[1] == "-h");
            std::FILE* out = help ? stdout : stderr;
            if (!help && args.size() > 1) fmt::print(out, "banyan: unknown command '{} {}'\n\n", args[0], args[1]);
            fmt::print(out, "usage: banyan {} <what> [options]    banyan {} <what> --help\n\n", args[0], args[0]);
            for (const auto* c : group_of(args[0]))
                print_summary_line(*c, out);
            return help ? 0 : 2;
        }
        if (!best) {
            fmt::print(stderr, "banyan: unknown command '{}'\n\n", fmt::join(args.begin(), args.begin() + 1, " "));
            print_usage();
            return 2;
        }
        return best->run(std::vector<std::string>(args.begin() + static_cast<long>(best_words), args.end()));
    } catch (...) {
        const auto [message, code] = current_error();
        fmt::print(stderr, "{}: {}\n", prefix(), message);
        return failed(code);
    }
}

} // namespace

int main(int argc, char** argv)
{
#ifdef __GLIBC__
    // Every host block of a megabyte or more in pages of its own, handed back to the system when freed. glibc's
    // default threshold rises to 32 MB after the first large free, and the blocks below it (the trees sent and
    // received, the balance's pieces, a CPU device's buffers) then stay resident after they are freed: 87 MiB more
    // at the peak of a rank of 4 at 2^24 particles (docs/benchmarks.md, "host memory at the start").
    mallopt(M_MMAP_THRESHOLD, 1 << 20);
#endif

    // A file-size limit (ulimit -f) then fails the write that crosses it with EFBIG, which the writers report as
    // they report a full disk (naming the file, the temporary removed), instead of killing the program unseen.
    std::signal(SIGXFSZ, SIG_IGN);

    // MPI starts only under a launcher (mpirun); otherwise this is one rank and nothing changes.
    banyan::Comm::init(argc, argv);
    const int rc = run_command(argc, argv);
    banyan::Comm::finalize();
    return rc;
}
