/**
 * @file run_options.hpp
 * @brief What defines a run of `banyan run` (its options, stored in every checkpoint), its initial conditions, and
 *        the arithmetic of its time grid.
 */
#pragma once

#include "core/files/key_values.hpp"
#include "core/files/particles.hpp"
#include "core/files/snapshot_file.hpp"
#include "core/files/snapshot.hpp"
#include "core/models/galaxy.hpp"
#include "core/models/initial_conditions.hpp"
#include "core/simulation/simulation.hpp"

#include <array>
#include <cstdint>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace banyan {

/// How the front end that took the options spells them in messages: `banyan run --t-end` (cli) or the Python
/// module's keyword t_end (python). The options are checked once, by RunOptions::check, for every front end.
enum class OptionStyle { cli, python };

/// The option @p key (RunOptions' text key, "t_end") as @p style spells it: "--t-end" (and "-n"), or "t_end".
std::string option_name(std::string_view key, OptionStyle style);

/// Everything that defines a run (stored in its checkpoints).
struct RunOptions {
    /// plummer | hernquist | disc | uniform | uniform-cold | merger | galaxy | galaxy-merger | file
    std::string ic = "plummer";
    std::string in;          ///< the snapshot file (HDF5 or tipsy) of ic == "file"
    std::uint64_t n = 65536; ///< particles (ic != "file")
    std::uint64_t seed = 1;
    double theta = 0.75;
    std::string opening = "paper"; ///< opening criterion: paper | bmax (parse_opening)
    double alpha = 0;              ///< relative criterion on top (SimulationOptions::alpha); 0: off
    double eps = 0.05;
    double dt = 1.0 / 64; ///< the time step; with block steps the largest one
    /// Time steps: "shared" (every particle moves with dt) or "block" (each with dt / 2^k, its rung k from its
    /// acceleration: SimulationOptions::block).
    std::string steps = "shared";
    double eta = 0.025; ///< block steps: the step criterion's accuracy parameter
    /// Block steps: how a rung is chosen, "symmetric" (at the step's start and its predicted end, the default) or
    /// "gadget" (at its start alone; SimulationOptions::rung_rule).
    std::string rung_rule = "symmetric";
    /// Block steps: the deepest rung allowed (<= BANYAN_MAX_RUNG). As wide as the front ends' integers, so that check()
    /// sees the value given (a narrower type would wrap or clip it first).
    std::uint64_t max_rung = 16;
    double t_end = 10;
    std::uint64_t log_every = 16; ///< steps between lines of the energy log
    double snapshot_every = 1;    ///< time between snapshots (0: only at the start and the end; never: none)
    /// Snapshot times as a list (GADGET's OutputListFilename), increasing, in place of snapshot_every's grid (which
    /// is then 0): a snapshot at each that lies inside the run, beside those at the start and the end. Empty: the
    /// grid of snapshot_every.
    std::vector<double> snapshot_times;
    double checkpoint_every = 1; ///< time between checkpoints (0: only at the start, the end and when stopped)
    /// The value of snapshot_every or checkpoint_every that writes none at all (`--snapshot-every never`): for
    /// benchmarks and for runs whose outputs would not fit the disk (a billion particles are 38 GB a snapshot).
    /// An interval no time reaches, so that no finite number (a negative one least of all) stands for it.
    static constexpr double never = std::numeric_limits<double>::infinity();
    MergerOptions merger;
    /// --ic galaxy and galaxy-merger: the (first) galaxy's model in kpc and Msun, and the merger's orbit.
    GalaxyModel galaxy;
    GalaxyOrbit orbit;
    bool direct = false; ///< direct summation instead of the tree (small N, tests)
    std::string out = "banyan-run";
    /// Snapshot files: HDF5 (GADGET-4 layout) or tipsy. A checkpoint written before the option existed reads as
    /// tipsy, the format its run wrote.
    SnapshotFormat format = SnapshotFormat::hdf5;
    /// Physical units as `--units` gives them ("kpc,1e10Msun"; parse_units), empty for N-body units. A run from a
    /// file that states units takes the file's (adopt_units).
    std::string units;

    /// Throws UsageError naming the first bad option as @p style spells it. The one check of a run's options: the
    /// CLI, the Python module and restarts (a checkpoint's options) all come through here.
    void check(OptionStyle style = OptionStyle::cli) const;
    /// key=value lines; from_text(to_text()) gives the same options, doubles to the bit (all but out: a run is
    /// continued in the folder its checkpoint is in, wherever that has moved).
    std::string to_text() const;
    static RunOptions from_text(const KeyValues& kv);
    SimulationOptions simulation() const;
};

/// Whether @p ic names a galaxy model (galaxy, galaxy-merger), made by GalaxyGenerator.
bool galaxy_ic(const std::string& ic);

/// What GalaxyGenerator makes for the galaxy options of @p options, in its units (model units without --units).
GalaxySetup galaxy_setup(const RunOptions& options);

/// The input indices of the two particles whose distance the energy log follows: the central particles of a merger
/// (ic merger) or the black holes of a galaxy merger; nothing otherwise.
std::optional<std::array<std::uint64_t, 2>> tracked_pair(const RunOptions& options);

/// The initial particles of @p options (generated, or read from options.in, HDF5 or tipsy, and checked). @p meta,
/// when given, receives what the file says beside its particles (SnapshotMeta; defaults for generated ones).
Snapshot initial_conditions(const RunOptions& options, SnapshotMeta* meta = nullptr);

/// The particles @p share of the generated initial conditions of @p options (not "file"), the same bits as those of
/// initial_conditions(options): what one MPI rank makes, holding only its share (but "disc", made whole first: its
/// velocities need every particle's radius).
Particles generated_share(const RunOptions& options, Share share);

/// Takes the units of initial conditions @p ic into @p options: a file that states units sets options.units when
/// it is empty; a file whose units differ from the --units given is refused (UsageError: banyan does not convert).
void adopt_units(RunOptions& options, const Snapshot& ic);

/// A galaxy model without --units is made in its model units, kpc and 10^10 Msun with G = 1: @p options then say so
/// (galaxy_model_units), so that its files state physical units (pynbody and yt read kpc and Msun, never N-body or
/// cosmological ones) and its checkpoints and images carry them. Other models and given units are left as they are.
void adopt_model_units(RunOptions& options);

/// Parses a time step or time such as "0.015625" or "1/64" (a fraction of two numbers). Throws UsageError.
double parse_time(const std::string& text, const std::string& option);

/// Refuses a start time that is not finite or lies more than 10^12 steps of @p dt from 0, where the time grids of a
/// run lose their resolution (t + dt / 2 rounds to t). Throws UsageError naming @p what.
void check_start_time(double t, double dt, const std::string& what);

/// Steps from @p t_begin to @p t_end at @p dt (rounded up; a ratio within 1e-9 of a whole number counts as it; 0 for
/// an end before the start). A @p t_end that is not finite or more than 10^15 steps away is a UsageError.
std::uint64_t steps_between(double t_begin, double t_end, double dt);

/// Where time @p t lies on the grid t_begin + k dt: on grid point @p step (to steps_between's rounding), or inside
/// step @p step (between grid points step - 1 and step), where a run cuts that step short to reach @p t. A time
/// before the start is grid point 0; one more than 10^15 steps on, inside a step no run reaches.
struct GridPlace {
    std::uint64_t step = 0;
    bool on_grid = true;
};
GridPlace grid_place(double t_begin, double t, double dt);

/// How close two times near @p t count as the same on the grid of @p dt from @p t_begin: steps_between's 1e-9 of a
/// step (of the ratio (t - t_begin) / dt, beyond one step).
double time_tolerance(double t_begin, double t, double dt);

/// Parses a list of snapshot times: "0.5,1,2.5" (each a number or a fraction such as 1/64), or the name of a file
/// of them, one per line (GADGET's output list: a time first on each line; what follows it on the line, such as
/// GADGET-4's flag, and lines starting with '#' are ignored). Returns them sorted; refuses an empty list, a time
/// that is not finite and a time given twice, naming @p option. Throws UsageError.
std::vector<double> parse_time_list(const std::string& text, const std::string& option);

} // namespace banyan
