/**
 * @file cli.hpp
 * @brief A small option parser for banyan's subcommands: --name value, --name=value, flags, and --help text.
 */
#pragma once

#include "core/models/galaxy.hpp"

#include "core/device/devices.hpp"
#include "core/files/snapshot.hpp"

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace banyan::cli {

/// The options one subcommand accepts. Declare them, then parse(); unknown options are a UsageError.
class Options {
public:
    Options(std::string command, std::string summary) : command_(std::move(command)), summary_(std::move(summary)) {}

    /// An option that takes a value; @p fallback is shown in --help and returned when it is absent.
    Options& value(const std::string& name, const std::string& meta, const std::string& help,
                   std::optional<std::string> fallback = std::nullopt);
    /// An option without a value.
    Options& flag(const std::string& name, const std::string& help);
    /// The standard --backend / --device options.
    Options& device_options();
    /// Marks the option @p name, declared before, as one that a restart (`banyan run --restart`) takes too; every
    /// other option defines the run, which its checkpoint holds.
    Options& on_restart(const std::string& name);

    /// Parses args (after the subcommand words). Returns false when --help was given (help already printed).
    bool parse(const std::vector<std::string>& args);

    bool has(const std::string& name) const;
    /// The options given that are not marked on_restart, in the order they were declared.
    std::vector<std::string> given_not_on_restart() const;
    /// The options marked on_restart, in the order they were declared.
    std::vector<std::string> on_restart_names() const;
    std::string str(const std::string& name) const;
    long long integer(const std::string& name) const;
    /// integer(), refused with a UsageError naming the option unless it lies in [lo, hi].
    int integer_in(const std::string& name, long long lo, long long hi) const;
    double number(const std::string& name) const;
    std::vector<long long> integer_list(const std::string& name) const;
    DeviceRequest device_request() const;

    std::string help() const;

private:
    struct Spec {
        std::string meta, help;
        std::optional<std::string> fallback;
        bool takes_value;
        bool on_restart = false;
    };
    std::string command_, summary_;
    std::vector<std::string> order_;
    std::map<std::string, Spec> specs_;
    std::map<std::string, std::string> given_;
};

/// One subcommand of the banyan program.
struct Command {
    std::string name;    ///< e.g. "devices" or "bench primitives"
    std::string summary; ///< one line for `banyan --help`
    std::function<int(const std::vector<std::string>& args)> run;
};

/// Every subcommand, in the order `banyan --help` lists them.
const std::vector<Command>& commands();

int run_devices(const std::vector<std::string>& args);
int run_bench_primitives(const std::vector<std::string>& args);
int run_bench_tree(const std::vector<std::string>& args);
int run_bench_galaxy(const std::vector<std::string>& args);

/// The options of a galaxy model (--galaxy, the preset, and --halo-mass ... over it), as `banyan run --ic galaxy`
/// and `banyan bench galaxy` take them; and their values (UsageError naming @p command and the option).
void add_galaxy_model_options(Options& opt);
GalaxyModel galaxy_model_option_values(const Options& opt, const std::string& command);
int run_forces(const std::vector<std::string>& args);
int run_accuracy(const std::vector<std::string>& args);
int run_bench_forces(const std::vector<std::string>& args);
int run_run(const std::vector<std::string>& args);
int run_render(const std::vector<std::string>& args);

} // namespace banyan::cli
