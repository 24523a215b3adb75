/**
 * @file cmd_bench_primitives.cpp
 * @brief `banyan bench primitives` (placeholder until the benchmark lands).
 */
#include "cli.hpp"
#include "error.hpp"

namespace banyan::cli {

int run_bench_primitives(const std::vector<std::string>&) { throw UsageError("bench primitives: not built yet"); }

} // namespace banyan::cli
