/**
 * @file harness.cpp
 * @brief The harness of harness.hpp: the backend the main opened, sizes and work-group sizes, the seeded generator.
 */
#include "tests/support/harness.hpp"

#include <cstdlib>

namespace banyan::test {
namespace {
std::unique_ptr<Backend> g_backend;
std::unique_ptr<Backend> g_other;
std::mt19937_64 g_rng;
} // namespace

Backend& backend()
{
    return *g_backend;
}
Backend& other_backend()
{
    return *g_other;
}

bool on_gpu()
{
    return g_backend->info().gpu;
}

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
    if (g_backend->info().backend == "cuda") return {BANYAN_WG_DEFAULT};
    std::vector<std::size_t> s;
    for (std::size_t w : {32, 64, 128, 256})
        if (w <= g_backend->info().max_work_group) s.push_back(w);
    return s;
}

void restore_work_group_size()
{
    g_backend->set_work_group_size(BANYAN_WG_DEFAULT);
}

std::vector<bool> vendor_modes()
{
    if (g_backend->info().backend == "cuda") return {true, false};
    return {true};
}

std::mt19937_64& rng()
{
    return g_rng;
}

std::string take_backend_option(int argc, char** argv, std::vector<char*>& rest)
{
    std::string which;
    rest.assign(1, argv[0]);
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if (a == "--backend" && i + 1 < argc)
            which = argv[++i];
        else if (a.rfind("--backend=", 0) == 0)
            which = a.substr(10);
        else
            rest.push_back(argv[i]);
    }
    return which;
}

void set_backends(std::unique_ptr<Backend> be, std::unique_ptr<Backend> other)
{
    g_other.reset();
    g_backend.reset();
    g_backend = std::move(be);
    g_other = std::move(other);
}

std::uint64_t seed_rng()
{
    std::uint64_t seed = 20261122;
    if (const char* e = std::getenv("BANYAN_TEST_SEED"); e && *e) seed = std::strtoull(e, nullptr, 10);
    g_rng.seed(seed);
    return seed;
}

} // namespace banyan::test
