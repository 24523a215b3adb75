/**
 * @file simulation.hpp
 * @brief A whole N-body simulation on the device (paper sections 3.1 and 4.2): shared-time-step leapfrog, the tree
 *        rebuilt and walked every step, energies and momenta summed on the device, and the exact device state for
 *        checkpoints.
 *
 * The host touches particle data only to upload the initial conditions, to download outputs (snapshots, in the
 * order of the input) and to save or restore the exact device state. The kernels are kernels_cu/integrate.cu and
 * kernels_cl/integrate.cl; forces come from core/gravity/forces.hpp (or core/gravity/direct.hpp, for tests).
 */
#pragma once

#include "core/device/backend.hpp"
#include "core/files/particles.hpp"
#include "core/gravity/forces.hpp"
#include "core/gravity/precision.hpp"
#include "core/parallel/comm.hpp"
#include "core/parallel/parallel_forces.hpp"
#include "core/parallel/parallel_files.hpp"
#include "core/tree/octree.hpp"

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace banyan {

/// Block time steps: how each particle's rung is chosen (SimulationOptions::rung_rule).
enum class RungRule { gadget, symmetric };

/// What defines a simulation on the device. Checked where a front end hands it over (RunOptions::check); the
/// Simulation checks only its opening criterion again (OpeningCriterion::check), whose alpha the first force
/// evaluation does not use.
struct SimulationOptions {
    /// The opening criterion: the build's kind, theta in [0, 1] (opening_angle_ok), and the relative criterion alpha on
    /// top from the second force evaluation on, with each particle's |a| of the step before (kept in vel.w); alpha 0:
    /// off. The relative criterion runs on one rank only.
    OpeningCriterion opening;
    float eps = 0.05f;    ///< Plummer softening
    double dt = 1.0 / 64; ///< the shared time step, > 0
    /// Forces by direct summation (single precision, core/gravity/direct.hpp) instead of the tree; the particles then
    /// stay in their input order. For tests (momentum conservation, the integrator against a CPU reference).
    bool direct = false;
    /// Block (hierarchical) time steps instead of one shared step: each particle moves with dt / 2^k, its rung k
    /// chosen from its acceleration (bn_block_rung in device_shared.h: dt_i = sqrt(2 eta eps / |a_i|), rounded down
    /// to a power of two), and step() advances every particle by dt in substeps.
    bool block = false;
    double eta = 0.025; ///< the step criterion's accuracy parameter, > 0
    /// How a rung is chosen. symmetric (the default): the step must satisfy the criterion at its start and at its
    /// predicted end, where the field is summed again (Simulation::probe_rungs; Makino et al. 2006): 3 to 45 times
    /// less energy drift than GADGET's rule at the same dt and eta (docs/benchmarks.md, "Block time steps") for a
    /// walk of the active particles near their step's limit more per substep; over ranks that walk takes the trees
    /// the other ranks sent for the substep's force walk. gadget: from the acceleration at the step's start alone
    /// (GADGET-4's rule), kept for comparison and for runs tuned with it.
    RungRule rung_rule = RungRule::symmetric;
    unsigned max_rung =
        16; ///< the deepest rung allowed, <= BANYAN_MAX_RUNG; a particle that asks for more stops the run
    /// Block time steps on one rank: a substep with at most this many active particles sums their forces directly
    /// from all particles (core/gravity/direct.hpp) instead of building and walking the tree; 0: never. The default
    /// is about where the two cost the same at 2^20 particles on an H200 (docs/benchmarks.md, "Block time steps";
    /// GADGET-4 sums directly below 500 active particles too).
    std::size_t direct_substeps = 512;
};

/// Block time steps: how the particles spread over the rungs and what the substeps cost.
struct BlockStats {
    /// Particles on each rung now (at the end of the last substep; at the end of a step, the rungs of the next).
    std::array<std::uint64_t, BANYAN_MAX_RUNG + 1> rungs{};
    unsigned deepest = 0;             ///< the deepest rung any particle has been on since the start
    std::uint64_t steps = 0;          ///< full steps of dt taken (since start or restore, as all of these)
    double span = 0;                  ///< the time the substeps covered, in steps of dt (a cut step: its part)
    std::uint64_t substeps = 0;       ///< force evaluations (substeps) taken
    std::uint64_t active_updates = 0; ///< particles given new forces, summed over substeps
    /// Per level of the substeps (the shallowest active rung; level 0 ends a full step): substeps, active particles,
    /// and device time in the build, the walk and the kicks and drifts, in milliseconds.
    struct Level {
        std::uint64_t substeps = 0, active = 0;
        std::uint64_t direct = 0; ///< of the substeps, those whose forces were summed directly (direct_substeps)
        double build = 0, forces = 0, integrate = 0;
    };
    std::array<Level, BANYAN_MAX_RUNG + 1> levels{};
};

/// Energies and momenta of the particles on the device, summed in double precision.
struct Energies {
    double kinetic = 0;   ///< sum m v^2 / 2
    double potential = 0; ///< sum m phi / 2 (phi from the last force evaluation)
    double total() const noexcept { return kinetic + potential; }
    std::array<double, 3> momentum{};         ///< sum m v
    std::array<double, 3> angular_momentum{}; ///< sum m x cross v
};

/// Device time spent in each phase, in milliseconds, summed over steps.
struct PhaseTimes {
    double build = 0;         ///< the octree: keys, sort, levels, links, groups, multipoles
    double forces = 0;        ///< the tree walk (or direct summation)
    double integrate = 0;     ///< kick and drift
    double energies = 0;      ///< energy and momentum sums
    double exchange = 0;      ///< several ranks: decomposition, particle exchange, local essential trees (wall time)
    ParallelTimings parallel; ///< several ranks: this rank's phases of the force evaluations (wall time), summed
};

/// The exact state of a simulation on the device, in device order and internal units: enough to continue it bit for
/// bit.
struct SimulationState {
    std::uint64_t step = 0;         ///< steps taken since time t_begin
    double t_begin = 0;             ///< time of step 0
    std::vector<bn_f4> pos;         ///< x, y, z, mass
    std::vector<bn_f4> vel;         ///< vx, vy, vz, 0
    std::vector<bn_f4> acc;         ///< ax, ay, az, potential of the last force evaluation (at the current positions)
    std::vector<std::uint64_t> ids; ///< ids[i]: the input index of the particle at device position i
    std::vector<bn_u32> rungs; ///< block time steps: rungs[i], the rung the next step starts with (empty otherwise)
    InternalUnits units;       ///< the units pos, vel and acc are in (precision.hpp), fixed at the start
    double work = 0;           ///< several ranks: the measured work that weighs the next decomposition
    /// Block time steps: how far into step + 1 the state was saved, in ticks of dt / 2^max_rung (0: at the step's
    /// start, every particle synchronised). Between substeps only the particles whose steps end there are
    /// synchronised; the others are mid-step (their opening kick given) and their entries of acc, which the next
    /// substep does not read, are 0. Simulation::step() continues the step where it was saved.
    std::uint64_t tick = 0;
    /// Several ranks, saved between substeps: the box the trees are built in until the step's end (Octree::
    /// set_frame_box), which the balance at the step's start chose from positions the state no longer holds.
    std::optional<std::array<bn_f4, 2>> frame;
    /// A time off the grid t_begin + k dt: where a step cut short at an output or end time left the state, inside
    /// step + 1 (with tick > 0, where the part of the step in progress began). Absent on the grid.
    std::optional<double> at;
    /// With tick > 0: where the part of step + 1 in progress ends, when a cut puts it off the grid.
    std::optional<double> until;
    /// Block time steps: the length of step the rungs were chosen for (0: dt). A cut step's are chosen anew.
    double rung_span = 0;
};

/// Over several ranks (core/parallel/), each rank holds a share of the particles, which changes every step (the
/// domain decomposition moves particles between ranks); sums (energies, momenta) are over all ranks, and every
/// call below is collective. On one rank it is the simulation of one GPU.
class Simulation {
public:
    Simulation(Backend& be, const SimulationOptions& options, const Comm& comm = Comm::world());
    Simulation(const Simulation&) = delete;
    Simulation& operator=(const Simulation&) = delete;

    /// Starts from particles in input order (particle i gets id i) at time @p t_begin: uploads them, builds the
    /// tree and computes the first forces. The device holds them in internal units (precision.hpp), chosen here
    /// for the whole run; every result below is given in the input's units.
    void start(std::span<const bn_f4> pos, std::span<const bn_f4> vel, double t_begin);
    /// Several ranks: starts from this rank's slice of the input, particles @p first_id .. first_id + size - 1 of
    /// it (a slice may be empty), in the internal @p units chosen for the whole input. Takes @p mine and frees its
    /// host memory once it is on the device, before the first forces: host memory sets how many particles a rank
    /// can start.
    void start_slice(Particles mine, double t_begin, std::size_t first_id, const InternalUnits& units);
    /// One rank: starts from @p n particles that @p put writes onto the device itself, into the tree's (x, y, z, m)
    /// and (vx, vy, vz, -) arrays in input order, already in internal @p units (the Python module's CUDA arrays:
    /// nothing goes through the host).
    void start_on_device(std::size_t n, double t_begin, const InternalUnits& units,
                         const std::function<void(Buffer<bn_f4>& pos, Buffer<bn_f4>& vel)>& put);
    /// Continues from a saved state exactly (no force evaluation: the saved accelerations are used). With
    /// @p other_ranks, a state saved by another number of ranks, each rank given any share of its particles: they
    /// are balanced over the ranks and their forces computed afresh at their saved positions (the continuation is
    /// no longer the straight run's bit for bit).
    void restore(const SimulationState& state, bool other_ranks = false);
    /// Downloads the exact device state.
    SimulationState save();

    /// One kick-drift-kick step: v += a dt/2, x += v dt, rebuild the tree, new forces, v += a dt/2. With block time
    /// steps, every particle advances by dt in substeps (block_step()); at the end all are synchronised again.
    /// @p until, a time inside the step (after time(), before the next grid point t_begin + (steps() + 1) dt), cuts
    /// it there: a kick-drift-kick of the shorter length, which ends exactly at @p until (an output or end time off
    /// the grid), and the next step() goes on to the grid point (both are leapfrog steps, time-symmetric; with block
    /// time steps the same rungs of the shorter step). steps() counts grid points reached.
    /// Block time steps: @p pause is asked on every rank after each substep but the last, and when it says yes on
    /// any rank (the ranks agree through the sum of the rung histogram they exchange anyway), the step pauses
    /// there: step() returns false, steps() is unchanged, tick() says where, and save() keeps the state for a
    /// restart; the next step() continues the step (and ignores @p until). A long step (65,536 substeps at
    /// --max-rung 16) then stops within a substep of a signal. Returns true when the step is complete.
    bool step(const std::function<bool()>& pause = {}, std::optional<double> until = {});
    /// Block time steps: ticks (of dt / 2^max_rung) of the step in progress done so far; 0 between steps.
    std::uint64_t tick() const noexcept { return tick_; }
    /// The ticks of one step: 2^max_rung with block time steps, else 1.
    std::uint64_t ticks_per_step() const noexcept { return options_.block ? std::uint64_t{1} << options_.max_rung : 1; }

    /// Block time steps: the rungs and the substeps' costs so far (zero with a shared step).
    const BlockStats& block_stats() const noexcept { return block_; }

    /// Energies and momenta at the current time (velocities and positions are synchronised after every step).
    Energies energies();

    /// Positions, velocities and accelerations (with potentials) in the order of the input (particle id order).
    /// Returns how many accelerations and potentials left float's normal range in the input's units.
    std::size_t input_order(std::vector<bn_f4>& pos, std::vector<bn_f4>& vel, std::vector<bn_f4>& acc);
    /// The same on the device, in internal units (units()): @p take gets them a chunk at a time, m particles from
    /// input index @p first, as rows of bn_f4 at the start of each buffer (valid during the call). input_order's
    /// way, and the Python module's into CUDA arrays.
    void for_input_order(const std::function<void(std::size_t first, std::size_t m, const Buffer<bn_f4>& pos,
                                                  const Buffer<bn_f4>& vel, const Buffer<bn_f4>& acc)>& take);
    /// The internal units the device holds the particles in.
    const InternalUnits& units() const noexcept { return units_; }

    /// This rank's particles (device order) with their ids, in the input's units: what a snapshot over several ranks
    /// writes (parallel_files.hpp). Returns how many accelerations and potentials left float's range.
    std::size_t rank_particles(RankParticles& out);

    /// Positions of the particles with ids @p a and @p b (both < total_size()).
    std::array<bn_f4, 2> track(std::uint64_t a, std::uint64_t b);

    /// This rank's particles, and all ranks' together.
    std::size_t size() const noexcept { return n_; }
    std::size_t total_size() const noexcept { return total_; }
    const Comm& comm() const noexcept { return comm_; }
    std::uint64_t steps() const noexcept { return step_; }
    double t_begin() const noexcept { return t_begin_; }
    /// t_begin + steps * dt, computed afresh (no sum of rounded steps drifts); off the grid (a step cut short by
    /// step()'s until), the time it was cut at. Between substeps: where the step in progress began.
    double time() const noexcept { return at_ ? *at_ : grid_time(step_); }
    /// Whether the time is off the grid t_begin + k dt (a step cut short: steps() + 1 is under way).
    bool off_grid() const noexcept { return at_.has_value(); }
    /// Where the step under way ends: at the grid point t_begin + (steps() + 1) dt, or with tick() > 0 where a cut
    /// puts it.
    double step_end() const noexcept { return until_ ? *until_ : grid_time(step_ + 1); }
    /// Grid point @p k: t_begin + k dt.
    double grid_time(std::uint64_t k) const noexcept { return t_begin_ + static_cast<double>(k) * options_.dt; }
    const SimulationOptions& options() const noexcept { return options_; }
    /// Device time per phase so far. Reads the time of the last step's closing kick, which step() does not wait
    /// for.
    const PhaseTimes& times() const;
    /// How the trees travel between the ranks, for the logs (ParallelForces::transport).
    std::string transport() const { return forces_.transport(); }

    // For tests: the device arrays (device order).
    Octree& tree() noexcept { return tree_; }
    /// Accelerations and potentials of the last force evaluation (the tree walk's results, or direct summation's).
    const Buffer<bn_f4>& acc() const noexcept { return options_.direct ? direct_acc_ : forces_.forces().acc(); }
    const TreeForces& forces() const noexcept { return forces_.forces(); }

private:
    /// start()'s and start_slice()'s first half: the particles onto the device, in internal @p units.
    void load(std::span<const bn_f4> pos, std::span<const bn_f4> vel, double t_begin, std::size_t first_id,
              const InternalUnits& units);
    /// What every start does before the particles arrive: counts, time, units, the tree's arrays sized for @p n, and
    /// their ids, @p first_id on (shifted by id_base_).
    void prepare(std::size_t n, double t_begin, const InternalUnits& units, std::size_t first_id);
    /// Keeps the ids' high words on the device when some id (shifted by id_base_) reaches 2^32.
    void keep_high_ids();
    /// The input indices of this rank's particles, in device order.
    std::vector<std::uint64_t> input_ids() const;
    /// Their second half: the first forces (and the first rungs).
    void begin();
    /// Builds the tree and walks it; @p relative: with the relative criterion when options().alpha > 0 (every
    /// evaluation but the first, which has no accelerations of a step before); @p rebalance: over ranks, particles
    /// move between ranks first (with block time steps only at the end of a step).
    void compute_forces(bool relative, bool rebalance = true);
    Buffer<bn_f4>& acc_mut() { return options_.direct ? direct_acc_ : forces_.forces().bind_acc(tree_); }

    /// Sets the units and the softening and time step in them.
    void set_units(const InternalUnits& units);
    /// The length of the step under way in internal units: dt_, or a cut step's (step()).
    double span() const;
    /// The kick-drift-kick of one shared step of @p h (internal units).
    void shared_step(double h);
    /// The substeps of one step of @p h (internal units: dt, or a cut step's) with block time steps (Quinn et al.
    /// 1997, GADGET-4's form of it), from tick_ on; false when @p pause stopped it between two substeps (step()).
    bool block_step(const std::function<bool()>& pause, double h);
    /// Block time steps: the closing half kick of the particles with rung >= @p level (when @p kick), their new
    /// rungs for steps of @p h (internal units), probed at their ends by the symmetric rule (when @p probe), and the
    /// rung histogram read back; refuses a particle that asks for more than max_rung. @p pause: in, whether this
    /// rank asks to pause; out, whether any rank does (summed with the histogram). @p direct: the substep's forces
    /// were summed directly (the tree is not built for the current positions), so a probe is too. Returns the
    /// kernels' device time in milliseconds.
    double block_kick(bn_u32 level, bool kick, bool probe, double h, bool* pause = nullptr, bool direct = false);
    /// The forces of the @p active particles of rung >= @p level by direct summation (direct_forces_listed).
    void direct_substep(bn_u32 level, std::uint64_t active);
    /// The indices of the particles with keys[i] >= @p level into direct_list_ (their count in direct_total_).
    void list_particles(const Buffer<bn_u32>& keys, bn_u32 level);
    /// This rank's energy terms (BANYAN_ENERGY_TERMS, internal units) into totals_ on the device; needs n_ > 0.
    void energy_sums();
    /// The energy terms of all particles, summed over ranks: every rank must call it. Adds the kernels' device time
    /// to *@p ms when given.
    std::array<double, BANYAN_ENERGY_TERMS> energy_terms(double* ms);
    /// RungRule::symmetric, after block_kick's choice from the start: for each active particle (rung >= level) the
    /// field at its predicted step end (its motion relative to the centre of mass, from the energy sums in totals_),
    /// directly summed when @p direct, else by a walk of the tree (built at the current positions); a particle whose
    /// end asks for a deeper rung goes one deeper. Leaves the accelerations as they were and every particle's rung
    /// counted in rung_hist_.
    void probe_rungs(bn_u32 level, double h, bool direct);
    /// Throws the error that names, of the particles whose rung is beyond max_rung, the one of largest |a|, and the
    /// rung the run needs for it in steps of @p h (internal units).
    [[noreturn]] void refuse_rung(double h);
    /// Adds the time of a pending closing kick to times_ (it is done by then: the next walk or times() waits).
    void settle_kick() const;

    Backend& be_;
    const Comm& comm_;
    SimulationOptions options_;
    InternalUnits units_;
    float eps_ = 0; // options_.eps in internal units
    double dt_ = 0; // options_.dt in internal units
    Octree tree_;
    ParallelForces forces_; // on one rank: the build and walk of one GPU
    std::size_t n_ = 0, total_ = 0;
    /// The device's id of input particle i is id_base_ + i. 0, but for the test knob BANYAN_TEST_ID_BASE, which shifts
    /// a few thousand particles' ids across 2^32 so that their high words take the paths of a run of more than 2^32
    /// particles (docs/parallel.md, "Particle ids"); everything the device's ids leave it as (states, snapshots,
    /// messages) is the input index, the same bits with the knob as without.
    std::uint64_t id_base_ = 0;
    std::uint64_t step_ = 0;
    std::uint64_t tick_ = 0; // block time steps: ticks of step step_ + 1 done (tick())
    double t_begin_ = 0;
    std::optional<double> at_;    // off the grid: the time (SimulationState::at)
    std::optional<double> until_; // the end of a cut step under way (SimulationState::until)
    double rung_span_ = 0;        // block time steps: the step length the rungs were chosen for (user units)
    mutable PhaseTimes times_;
    mutable Event kick_begin_, kick_end_; // the last closing kick, timed but not yet read
    Buffer<bn_f4> direct_acc_;            // direct summation's results (the tree walk's live in the tree's workspace)
    Buffer<double> partials_, totals_;    // energy sums
    Buffer<bn_f4> tracked_;
    Buffer<bn_u32> rung_hist_; // block time steps: the histogram integrateBlockKick writes
    // Block time steps' direct substeps: indices, ones, flags, the active particles' list and its length.
    Buffer<bn_u32> direct_index_, direct_ones_, direct_flags_, direct_list_, direct_total_;
    Buffer<bn_f4> direct_partial_; // their partial sums over slices of the sources
    // RungRule::symmetric: the predicted positions, the particles still to be probed, the accelerations kept.
    Buffer<bn_f4> probe_pos_, probe_acc_;
    Buffer<bn_u32> probe_pending_;
    // Its walks, apart from the force walk's: their longer level lists (the groups' boxes around the predicted
    // positions) must not size the force walk's spill buffer and so its work-groups.
    std::unique_ptr<TreeForces> probe_walk_;
    BlockStats block_;
};

/// The particles on each occupied rung, "rungs 0:1000 1:200 2:3".
std::string rung_text(const BlockStats& b);
/// How many times fewer particle force evaluations the block steps of @p b took than a shared step at the smallest
/// step any particle used (dt / 2^deepest) would have over the same time: N 2^deepest span / active_updates.
double shared_step_ratio(const BlockStats& b);

/// Whether every energy and momentum of @p e is finite. The sums run over every particle's mass, position, velocity
/// and potential, so a particle with a NaN or infinite value makes them non-finite too.
bool all_finite(const Energies& e);

} // namespace banyan
