/**
 * @file cmd_devices.cpp
 * @brief `banyan devices`: every device of every backend compiled in, as a table.
 */
#include "apps/cli/cli.hpp"

#include <fmt/format.h>

namespace banyan::cli {

int run_devices(const std::vector<std::string>& args)
{
    Options opt("devices", "List every device of every backend compiled into this build, and which one\n"
                           "`--backend auto` would pick.");
    if (!opt.parse(args)) return 0;

    fmt::print("{:<8} {:>3}  {:<40} {:<4} {:>10} {:>5} {:>6}  {}\n", "backend", "#", "name", "type", "memory", "CUs",
               "max wg", "vendor / version");
    for (const auto& b : discover_devices()) {
        if (b.devices.empty()) {
            fmt::print("{:<8} {:>3}  (none: {})\n", b.backend, "-", b.unavailable_reason);
            continue;
        }
        for (const auto& d : b.devices)
            fmt::print("{:<8} {:>3}  {:<40} {:<4} {:>7.1f} GiB {:>5} {:>6}  {} / {}\n", d.backend, d.index,
                       d.name.substr(0, 40), d.gpu ? "GPU" : "CPU", double(d.memory_bytes) / (1 << 30), d.compute_units,
                       d.max_work_group, d.vendor, d.version);
    }
    try {
        auto best = open_device(DeviceRequest{"auto", -1});
        fmt::print("\nauto: {} device {} ({})\n", best->info().backend, best->info().index, best->info().name);
    } catch (const std::exception& e) {
        fmt::print("\nauto: no usable device: {}\n", e.what());
        return 1;
    }
    return 0;
}

} // namespace banyan::cli
