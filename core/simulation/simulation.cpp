/**
 * @file simulation.cpp
 * @brief Drives one simulation on the device: the leapfrog's kernels around the tree build and walk, the energy
 *        sums, the way back to the input order, and saving and restoring the exact state.
 *
 * Determinism: every phase is a fixed function of the device arrays in their current order (the sort is stable,
 * the walk's sums and the energy sums run in a fixed order), so restoring the arrays of a saved state in the same
 * order continues the run bit for bit on the same device and backend.
 */
#include "core/simulation/simulation.hpp"

#include "core/gravity/direct.hpp"
#include "core/error.hpp"
#include "core/gravity/precision.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>

namespace banyan {

namespace {

std::size_t ceil_div(std::size_t a, std::size_t b)
{
    return (a + b - 1) / b;
}

/// Most work-groups of the energy sums (the totals kernel then reduces that many partials in one group).
constexpr std::size_t energy_max_groups = 256;

/// The shift of the device's ids (the test knob BANYAN_TEST_ID_BASE; 0 without it): see Simulation::id_base().
std::uint64_t id_base_from_environment()
{
    const char* text = std::getenv("BANYAN_TEST_ID_BASE");
    if (!text) return 0;
    std::uint64_t v = 0;
    const char* end = text + std::strlen(text);
    const auto [at, ec] = std::from_chars(text, end, v);
    if (ec != std::errc() || at != end || *text == '\0' || v >= (std::uint64_t{1} << 62))
        throw UsageError(fmt::format("BANYAN_TEST_ID_BASE={}: must be a whole number from 0 to 2^62 - 1", text));
    return v;
}

/// Block time steps: the shallowest rung whose step boundaries include tick @p t of a step of 2^max_rung ticks, i.e.
/// the level of the particles whose steps end (and start) there: 0 at the ends of the step, max_rung - ctz(t) within.
bn_u32 sync_level(std::uint64_t t, unsigned max_rung)
{
    t &= (std::uint64_t{1} << max_rung) - 1;
    return t == 0 ? 0u : static_cast<bn_u32>(max_rung - static_cast<unsigned>(std::countr_zero(t)));
}

} // namespace

Simulation::Simulation(Backend& be, const SimulationOptions& options, const Comm& comm)
    : be_(be), comm_(comm), options_(options), tree_(be), forces_(be, comm), id_base_(id_base_from_environment())
{
    // The library's own guard (the front ends checked RunOptions already): alpha would otherwise be judged only at
    // the second force evaluation, the first with the relative criterion.
    options.opening.check("simulation");
    if (options.block) {
        if (!(options.eta > 0.0 && std::isfinite(options.eta)))
            throw UsageError(fmt::format("simulation: eta must be > 0 and finite, got {}", options.eta));
        if (options.max_rung > BANYAN_MAX_RUNG)
            throw UsageError(
                fmt::format("simulation: max_rung must be at most {}, got {}", BANYAN_MAX_RUNG, options.max_rung));
        if (!(options.eps > 0.0f))
            throw UsageError("simulation: block time steps need a softening eps > 0 (the step criterion is "
                             "sqrt(2 eta eps / |a|))");
        tree_.keep_rungs(true);
        rung_hist_ = be_.alloc<bn_u32>(BANYAN_RUNG_BINS, "sim.rung_hist");
    }
    tree_.set_opening(options.opening.kind);
    partials_ = be_.alloc<double>(BANYAN_ENERGY_TERMS * energy_max_groups, "sim.energy_partials");
    totals_ = be_.alloc<double>(BANYAN_ENERGY_TERMS, "sim.energy_totals");
    tracked_ = be_.alloc<bn_f4>(2, "sim.tracked");
}

void Simulation::start(std::span<const bn_f4> pos, std::span<const bn_f4> vel, double t_begin)
{
    if (pos.empty()) throw UsageError("simulation: no particles");
    if (comm_.parallel()) throw std::logic_error("Simulation::start on several ranks: use start_slice");
    load(pos, vel, t_begin, 0, InternalUnits::for_system(pos, options_.eps));
    begin();
}

void Simulation::start_slice(Particles mine, double t_begin, std::size_t first_id, const InternalUnits& units)
{
    load(mine.pos, mine.vel, t_begin, first_id, units);
    mine = Particles();
    begin();
}

void Simulation::start_on_device(std::size_t n, double t_begin, const InternalUnits& units,
                                 const std::function<void(Buffer<bn_f4>& pos, Buffer<bn_f4>& vel)>& put)
{
    if (comm_.parallel()) throw std::logic_error("Simulation::start_on_device on several ranks");
    prepare(n, t_begin, units, 0);
    put(tree_.pos(), tree_.vel());
    begin();
}

void Simulation::load(std::span<const bn_f4> pos, std::span<const bn_f4> vel, double t_begin, std::size_t first_id,
                      const InternalUnits& units)
{
    if (vel.size() != pos.size())
        throw UsageError(fmt::format("simulation: {} positions but {} velocities", pos.size(), vel.size()));
    prepare(pos.size(), t_begin, units, first_id);
    // Into internal units a chunk at a time, straight into the tree's arrays: no second copy of the particles on
    // the host (a billion particles are 32 GB there).
    constexpr std::size_t chunk = std::size_t{1} << 20;
    std::vector<bn_f4> p, v;
    for (std::size_t first = 0; first < n_; first += chunk) {
        const std::size_t m = std::min(chunk, n_ - first);
        p.assign(pos.data() + first, pos.data() + first + m);
        v.assign(vel.data() + first, vel.data() + first + m);
        units_.to_internal(p);
        units_.velocities_to_internal(v);
        tree_.pos().upload(p, first);
        tree_.vel().upload(v, first);
    }
}

void Simulation::prepare(std::size_t n, double t_begin, const InternalUnits& units, std::size_t first_id)
{
    if (comm_.parallel() && options_.direct)
        throw UsageError("simulation: direct summation (a test mode) runs on one rank only");
    n_ = n;
    std::uint64_t total = n_;
    comm_.sum(std::span<std::uint64_t>(&total, 1));
    total_ = total;
    if (total_ == 0) throw UsageError("simulation: no particles");
    step_ = 0;
    tick_ = 0;
    t_begin_ = t_begin;
    at_.reset(), until_.reset();
    rung_span_ = options_.dt;
    times_ = {};
    kick_begin_ = kick_end_ = Event{};
    if (options_.direct) ensure_size(be_, direct_acc_, n_, "sim.direct_acc");
    set_units(units);
    keep_high_ids();
    tree_.resize(n_, true); // ids 0 .. n - 1
    if (const std::uint64_t first = id_base_ + first_id) {
        constexpr std::size_t chunk = std::size_t{1} << 20;
        std::vector<std::uint64_t> ids;
        for (std::size_t at = 0; at < n_; at += chunk) {
            ids.resize(std::min(chunk, n_ - at));
            for (std::size_t i = 0; i < ids.size(); ++i)
                ids[i] = first + at + i;
            tree_.set_ids(ids, at);
        }
    }
}

void Simulation::keep_high_ids()
{
    tree_.keep_high_ids(id_base_ + total_ - 1 > 0xFFFFFFFFull);
}

void Simulation::begin()
{
    compute_forces(false);
    if (!options_.direct)
        if (auto warning = check_tree_depth(tree_, units_, "the particles")) notice("warning: " + *warning);
    // Over ranks the forces' decomposition has put particles at one point on one rank.
    if (unsoftened(eps_)) check_coincident(tree_.pos().download(n_), input_ids(), "the particles");
    if (options_.block) {
        block_ = BlockStats{};
        tree_.rungs().fill(0u);          // read (as "active at level 0") before the first choice writes them
        block_kick(0, false, true, dt_); // every particle's first rung, from its first acceleration
    }
}

void Simulation::set_units(const InternalUnits& units)
{
    units_ = units;
    eps_ = static_cast<float>(units_.length_to_internal(options_.eps));
    dt_ = units_.time_to_internal(options_.dt);
}

void Simulation::restore(const SimulationState& s, bool other_ranks)
{
    const std::size_t n = s.pos.size();
    std::uint64_t total = n;
    comm_.sum(std::span<std::uint64_t>(&total, 1));
    if (total == 0 || s.vel.size() != n || s.acc.size() != n || s.ids.size() != n)
        throw UsageError(fmt::format("simulation: a saved state with {} positions, {} velocities, {} accelerations "
                                     "and {} ids",
                                     n, s.vel.size(), s.acc.size(), s.ids.size()));
    // Each id once: otherwise snapshots in input order would lose particles. Each rank checks a block of the ids
    // (records_of_my_block), so that none holds a flag per particle of the whole run.
    try {
        std::size_t first = 0, last = 0;
        records_of_my_block(comm_, total, s.ids, {}, 0, first, last);
    } catch (const std::runtime_error& e) {
        throw UsageError(fmt::format("simulation: the saved particle ids are not a permutation of 0 .. {} ({})",
                                     total - 1, e.what()));
    }
    if (s.tick && (!options_.block || s.tick >= ticks_per_step()))
        throw UsageError(
            fmt::format("simulation: a saved state at tick {} of a step{}", s.tick,
                        options_.block ? fmt::format(" of {} ticks", ticks_per_step()) : " without block time steps"));
    n_ = n;
    total_ = total;
    forces_.set_work(s.work);
    step_ = s.step;
    tick_ = s.tick;
    t_begin_ = s.t_begin;
    at_ = s.at;
    until_ = s.tick ? s.until : std::nullopt;
    rung_span_ = s.rung_span > 0 ? s.rung_span : options_.dt;
    // Off the grid, strictly inside step + 1 (where a cut step left it), and a cut part's end after its start.
    const auto inside = [&](const std::optional<double>& t, double after) {
        return !t || (std::isfinite(*t) && *t > after && *t < grid_time(step_ + 1));
    };
    if (!inside(at_, grid_time(step_)) || !inside(until_, time()) || !(std::isfinite(rung_span_) && rung_span_ > 0))
        throw UsageError(fmt::format("simulation: a saved state at step {} with the times at={}, until={} and "
                                     "rung_span={} that do not lie inside its step from t = {} to {}",
                                     step_, at_.value_or(0.0), until_.value_or(0.0), rung_span_, grid_time(step_),
                                     grid_time(step_ + 1)));
    times_ = {};
    kick_begin_ = kick_end_ = Event{};
    set_units(s.units);
    if (options_.direct) ensure_size(be_, direct_acc_, n_, "sim.direct_acc");
    keep_high_ids();
    std::vector<std::uint64_t> ids(s.ids);
    for (auto& id : ids)
        id += id_base_;
    tree_.set_particles(s.pos, s.vel, ids);
    ids = {};
    // A state saved at the end of a step, right after a balance: the trees until the next one are built in its
    // frame, as in the straight run. Between substeps, the frame the step's balance chose (saved with the state).
    if (comm_.parallel() && !other_ranks) {
        if (s.tick == 0)
            forces_.decomposition().adopt_frame(tree_);
        else if (s.frame)
            tree_.set_frame_box(s.frame);
        else
            throw UsageError("simulation: a state saved over ranks between substeps without the frame of its trees");
    }
    if (!other_ranks) acc_mut().upload(s.acc);
    if (options_.block) {
        if (s.rungs.size() != n)
            throw UsageError(fmt::format("simulation: a saved state of block time steps with {} rungs for {} particles",
                                         s.rungs.size(), n));
        for (std::size_t i = 0; i < n; ++i)
            if (s.rungs[i] > options_.max_rung)
                throw UsageError(
                    fmt::format("simulation: particle {} of the saved state is on rung {}, deeper than the "
                                "max_rung {} of the run",
                                s.ids[i], s.rungs[i], options_.max_rung));
        tree_.rungs().upload(s.rungs);
    }
    // Cut anew: the particles move to the ranks that hold their keys (rungs with them) and get their forces there;
    // the relative criterion reads the |a| saved in vel.w, as the step after the save would have.
    if (other_ranks) compute_forces(true);
    if (options_.block) {
        block_ = BlockStats{};
        block_kick(options_.max_rung + 1, false, false, dt_); // no particle is active: counts the rungs only
    }
}

SimulationState Simulation::save()
{
    SimulationState s;
    s.step = step_;
    s.t_begin = t_begin_;
    s.pos = tree_.pos().download(n_);
    s.vel = tree_.vel().download(n_);
    s.acc = acc().download(n_);
    s.ids = input_ids();
    if (options_.block) s.rungs = tree_.rungs().download(n_);
    s.units = units_;
    s.work = forces_.work();
    s.tick = tick_;
    s.at = at_;
    s.until = until_;
    if (rung_span_ != options_.dt) s.rung_span = rung_span_;
    if (tick_) {
        // Between substeps the walk gave accelerations to the particles whose steps ended here (rung >= the level
        // of the tick) only; the others' entries hold what the build left there, which nothing reads before their
        // next walk: saved as 0, so that a checkpoint holds no such bytes.
        const bn_u32 level = sync_level(tick_, options_.max_rung);
        for (std::size_t i = 0; i < n_; ++i)
            if (s.rungs[i] < level) s.acc[i] = bn_f4{0.0f, 0.0f, 0.0f, 0.0f};
        if (comm_.parallel()) s.frame = tree_.frame_box();
    }
    return s;
}

void Simulation::compute_forces(bool relative, bool rebalance)
{
    if (options_.direct) {
        const Event a = be_.record();
        direct_forces(be_, tree_.pos(), n_, eps_, direct_acc_);
        const Event b = be_.record();
        times_.forces += be_.elapsed_ms(a, b);
        return;
    }
    // The relative criterion needs |a| of the step before, which the kick-drift wrote into vel.w: not at the start.
    // Over ranks vel.w travels with its particle, and the local essential trees are cut for it too.
    OpeningCriterion criterion = options_.opening;
    if (!relative) criterion.alpha = 0.0f;
    forces_.forces().set_previous_accelerations(relative ? &tree_.vel() : nullptr);
    if (comm_.parallel()) {
        // Particles move between ranks here: this rank's count changes.
        ParallelTimings t;
        forces_.compute(tree_, criterion, eps_, &t, rebalance);
        n_ = tree_.size();
        times_.build += t.build;
        times_.forces += t.walk;
        times_.exchange += t.balance + t.let_build + t.let_exchange;
        times_.parallel += t;
        return;
    }
    // The build's time is read after the walk: reading it before would keep the walk from being queued behind it.
    const Event a = be_.record();
    tree_.build();
    const Event b = be_.record();
    double walk_ms = 0;
    forces_.forces().compute(tree_, criterion, eps_, &walk_ms); // the results stay where the walk wrote them
    times_.build += be_.elapsed_ms(a, b);
    times_.forces += walk_ms;
}

double Simulation::span() const
{
    // A whole step: dt_ itself (time_to_internal is exact, but a difference of two grid times need not be dt).
    return at_ || until_ ? units_.time_to_internal(step_end() - time()) : dt_;
}

bool Simulation::step(const std::function<bool()>& pause, std::optional<double> until)
{
    if (total_ == 0) throw std::logic_error("Simulation::step before start() or restore()");
    if (tick_ == 0 && until) {
        if (!(*until > time() && *until < grid_time(step_ + 1)))
            throw std::logic_error(fmt::format("Simulation::step: a cut at t = {} outside the step from {} to {}",
                                               *until, time(), grid_time(step_ + 1)));
        until_ = until;
    }
    const double h = span();
    if (options_.block) {
        if (!block_step(pause, h)) return false;
    } else {
        shared_step(h);
    }
    // At the cut (off the grid) or at the grid point.
    if (until_)
        at_ = until_, until_.reset();
    else
        at_.reset(), ++step_;
    return true;
}

void Simulation::shared_step(double h)
{
    const float dt = static_cast<float>(h);
    const float half = static_cast<float>(0.5 * h);
    const Event e0 = be_.record();
    if (n_)
        be_.launch(kernels::integrateKickDrift, grid_for(be_, n_), tree_.pos(), tree_.vel(), acc(), to_u32(n_), half,
                   dt);
    const Event e1 = be_.record();
    compute_forces(true); // waits for the walk: the kick-drift and the last step's kick are done
    times_.integrate += be_.elapsed_ms(e0, e1);
    settle_kick();
    // The closing kick is timed when the next step's walk or times() has waited anyway: waiting here would leave
    // the device idle while the host starts the next step.
    kick_begin_ = be_.record();
    if (n_) be_.launch(kernels::integrateKick, grid_for(be_, n_), tree_.vel(), acc(), to_u32(n_), half);
    kick_end_ = be_.record();
}

bool Simulation::block_step(const std::function<bool()>& pause, double h)
{
    // A step of dt is 2^max_rung ticks; rung k's steps are 2^(max_rung - k) ticks long. Each substep ends where the
    // deepest occupied rung's step does: every particle is drifted there, and the particles whose steps end there
    // (rung >= the level of that tick) get forces, their closing kick and their next rung (block_kick), then, at the
    // start of the next substep, their opening kick. With every particle on rung 0 this is the shared step's
    // kick-drift, walk and kick, operation for operation.
    const unsigned top = options_.max_rung;
    const std::uint64_t ticks = ticks_per_step();
    const float half_max = static_cast<float>(0.5 * h);
    // A step of another length than the rungs were chosen for (a cut step, or the first whole one after it): every
    // particle is synchronised here, with forces of the walk that ended the last step; its rung anew for this one,
    // from the start's criterion alone under either rule. A checkpoint holds no tree (nor, over ranks, the others'
    // trees) for a probe, and a run continued from one here must choose as the straight run does.
    const double length = step_end() - time();
    if (tick_ == 0 && (at_ || until_ ? length : options_.dt) != rung_span_) {
        times_.integrate += block_kick(0, false, false, h);
        rung_span_ = at_ || until_ ? length : options_.dt;
    }
    for (std::uint64_t& t = tick_; t < ticks;) {
        unsigned deepest = 0;
        for (unsigned k = 0; k <= top; ++k)
            if (block_.rungs[k]) deepest = k;
        const std::uint64_t span = ticks >> deepest;
        const std::uint64_t next = (t / span + 1) * span;
        const float drift = static_cast<float>(h * (static_cast<double>(next - t) / static_cast<double>(ticks)));
        const PhaseTimes before = times_;
        const Event e0 = be_.record();
        if (n_) // over ranks a rank may hold none
            be_.launch(kernels::integrateBlockKickDrift, grid_for(be_, n_), tree_.pos(), tree_.vel(), acc(),
                       tree_.rungs(), to_u32(n_), sync_level(t, top), half_max, drift);
        const Event e1 = be_.record();
        t = next;
        const bn_u32 level = sync_level(t, top);
        std::uint64_t active = 0;
        for (unsigned k = level; k <= top; ++k)
            active += block_.rungs[k];
        const bool direct = level > 0 && active <= options_.direct_substeps && !comm_.parallel() && !options_.direct;
        if (direct) {
            direct_substep(level, active);
        } else {
            // At the end of the step every group is active: the whole walk, without finding the active groups.
            // Over ranks the particles move between them only then, weighed by the work of the whole step's
            // substeps.
            forces_.forces().set_active(level > 0 ? &tree_.rungs() : nullptr, level);
            try {
                compute_forces(true, level == 0);
            } catch (...) {
                forces_.forces().set_active(nullptr, 0);
                throw;
            }
            forces_.forces().set_active(nullptr, 0);
        }
        bool paused = t < ticks && pause && pause();
        const double kick_ms = block_kick(level, true, true, h, &paused, direct);
        times_.integrate += be_.elapsed_ms(e0, e1) + kick_ms;
        auto& l = block_.levels[level];
        ++l.substeps;
        l.direct += direct ? 1 : 0;
        l.active += active;
        l.build += times_.build - before.build;
        l.forces += times_.forces - before.forces;
        l.integrate += times_.integrate - before.integrate;
        ++block_.substeps;
        block_.active_updates += active;
        if (paused) return false; // on every rank: the sum told all
    }
    tick_ = 0;
    if (!until_) ++block_.steps;
    block_.span += h / dt_;
    return true;
}

void Simulation::list_particles(const Buffer<bn_u32>& keys, bn_u32 level)
{
    // As walkGroupFlags finds active groups, with one particle to a "group"; compacted in device order.
    const bn_u32 n = to_u32(n_);
    if (direct_index_.size() < n_) {
        // Once: the indices and the counts of one, which stay (on CUDA a fill of 1s waits for the host).
        ensure_size(be_, direct_index_, n_, "sim.direct_index");
        ensure_size(be_, direct_ones_, n_, "sim.direct_ones");
        be_.launch(kernels::treeIota, grid_for(be_, n_), direct_index_, n);
        direct_ones_.fill(1u);
    }
    ensure_size(be_, direct_flags_, n_, "sim.direct_flags");
    ensure_size(be_, direct_list_, n_, "sim.direct_list");
    ensure_size(be_, direct_total_, 1, "sim.direct_total");
    be_.launch(kernels::walkGroupFlags, grid_for(be_, n_), direct_index_, direct_ones_, keys, n, level, direct_flags_);
    be_.compact(direct_index_, direct_flags_, n_, direct_list_, direct_total_);
}

void Simulation::direct_substep(bn_u32 level, std::uint64_t active)
{
    // The particles of rung >= level, then their forces from all particles at their drifted positions. The tree
    // and the particles' order stay as the last build left them.
    Buffer<bn_f4>& acc = acc_mut();
    const Event a = be_.record();
    list_particles(tree_.rungs(), level);
    direct_forces_listed(be_, tree_.pos(), n_, direct_list_, static_cast<std::size_t>(active), eps_, direct_partial_,
                         acc);
    const Event b = be_.record();
    times_.forces += be_.elapsed_ms(a, b);
}

double Simulation::block_kick(bn_u32 level, bool kick, bool probe, double h, bool* pause, bool direct)
{
    const unsigned top = options_.max_rung;
    const double c = 2.0 * options_.eta * static_cast<double>(eps_);
    rung_hist_.fill(0u);
    const Event a = be_.record();
    if (n_)
        be_.launch(kernels::integrateBlockKick, grid_for(be_, n_), tree_.vel(), acc(), tree_.rungs(), to_u32(n_), level,
                   static_cast<float>(0.5 * h), bn_u32{kick ? 1u : 0u}, h * h, c * c, bn_u32{top}, rung_hist_);
    if (probe && level <= top && options_.rung_rule == RungRule::symmetric) {
        // The probe's frame, the centre of mass's velocity: from the energy sums, left on the device on one rank;
        // over ranks summed on the host (every rank comes here) and put back.
        if (comm_.parallel()) {
            const std::array<double, BANYAN_ENERGY_TERMS> t = energy_terms(nullptr);
            totals_.upload(std::span<const double>(t));
        } else if (n_) {
            energy_sums();
        }
        if (n_) probe_rungs(level, h, direct);
    }
    const Event b = be_.record();
    std::array<bn_u32, BANYAN_RUNG_BINS> mine{};
    rung_hist_.download(std::span<bn_u32>(mine));
    // Over ranks the histogram of all particles: every rank then runs the same substeps. The last entry counts the
    // ranks that ask to pause, so that all pause at the same substep at no cost of its own.
    std::array<std::uint64_t, BANYAN_RUNG_BINS + 1> hist{};
    std::copy(mine.begin(), mine.end(), hist.begin());
    hist[BANYAN_RUNG_BINS] = pause && *pause ? 1 : 0;
    comm_.sum(std::span<std::uint64_t>(hist));
    if (pause) *pause = hist[BANYAN_RUNG_BINS] > 0;
    if (hist[top + 1]) refuse_rung(h);
    for (unsigned k = 0; k <= BANYAN_MAX_RUNG; ++k) {
        block_.rungs[k] = k <= top ? hist[k] : 0;
        if (block_.rungs[k]) block_.deepest = std::max(block_.deepest, k);
    }
    return be_.elapsed_ms(a, b);
}

void Simulation::probe_rungs(bn_u32 level, double h, bool direct)
{
    // Makino, Hut, Kaplan & Saygin (2006, New Astron. 12, 124): a step is time symmetric only if the criterion
    // holds at both of its ends. integrateBlockKick chose each active particle's rung from its acceleration here;
    // the end's is summed at the position the particle would reach (integrateBlockPredict: its own motion relative
    // to the centre of mass, whose velocity the energy sums in totals_ give, the others where they are: the same
    // rungs in any frame the run is in), and a particle it refuses goes one rung deeper (integrateBlockProbe),
    // probed again while probes are left. Only particles whose start does not allow a step four times as long are
    // probed (bn_block_probe_needed). The accelerations are kept aside: the probes' fields land where the forces
    // live.
    const unsigned top = options_.max_rung;
    const double c = 2.0 * options_.eta * static_cast<double>(eps_);
    const bn_u32 n = to_u32(n_);
    ensure_size(be_, probe_pos_, n_, "sim.probe_pos");
    ensure_size(be_, probe_acc_, n_, "sim.probe_acc");
    ensure_size(be_, probe_pending_, n_, "sim.probe_pending");
    probe_acc_.copy_from(acc_mut(), n_);
    // One probe: a second, at the end of the deeper step, changed no rung of the 4096-particle Hernquist test
    // (tests/simulation/test_block_steps.cpp) and costs a walk more (docs/benchmarks.md).
    constexpr int probes = 1;
    for (int round = 0; round < probes; ++round) {
        be_.launch(kernels::integrateBlockPredict, grid_for(be_, n_), tree_.pos(), tree_.vel(), probe_acc_,
                   tree_.rungs(), n, level, static_cast<float>(h), totals_, h * h, c * c, bn_u32{round == 0 ? 1u : 0u},
                   probe_pending_, probe_pos_);
        const Buffer<bn_f4>* field = nullptr;
        if (direct || options_.direct) {
            // The pending particles listed; the sources are the particles at probe_pos_ (where they are, the
            // probed ones where they would be).
            list_particles(probe_pending_, 1);
            Buffer<bn_f4>& acc = acc_mut();
            if (const std::size_t pending = direct_total_.at(0))
                direct_forces_listed(be_, probe_pos_, n_, direct_list_, pending, eps_, direct_partial_, acc);
            field = &acc;
        } else {
            // The tree built at the current positions, walked by the groups that hold a pending particle, with
            // boxes around the predicted positions; then the build's boxes back. Over ranks the trees the others
            // sent for this substep's walk are walked too, as they came (cut for the build's boxes).
            if (!probe_walk_) probe_walk_ = std::make_unique<TreeForces>(be_);
            TreeForces& walk = *probe_walk_;
            // Only |a| is wanted, to a few per cent: theta 1 (the coarsest the walk allows) ran the Hernquist
            // sphere of 2^20 in 0.81 of the time of the run's theta 0.75, its energy error a fifth larger (H200,
            // docs/benchmarks.md).
            OpeningCriterion criterion = options_.opening;
            criterion.theta = 1.0f;
            walk.set_previous_accelerations(criterion.alpha > 0.0f ? &tree_.vel() : nullptr);
            tree_.fit_group_boxes(probe_pos_);
            walk.set_active(&probe_pending_, 1);
            walk.set_sinks(&probe_pos_);
            try {
                walk.begin(tree_, criterion, eps_, comm_.parallel() ? &forces_.let().remote() : nullptr);
                walk.end(tree_);
            } catch (...) {
                tree_.fit_group_boxes(tree_.pos());
                throw;
            }
            tree_.fit_group_boxes(tree_.pos());
            field = &walk.acc();
        }
        rung_hist_.fill(0u);
        be_.launch(kernels::integrateBlockProbe, grid_for(be_, n_), *field, tree_.rungs(), probe_pending_, n, h * h,
                   c * c, bn_u32{top}, bn_u32{round + 1 == probes ? 1u : 0u}, rung_hist_);
    }
    // The force walk's views anew (the probe's walk may have grown the workspace), and its accelerations back.
    acc_mut().copy_from(probe_acc_, n_);
}

void Simulation::refuse_rung(double h)
{
    // The slow path of a run that stops: of the particles beyond the limit, the one with the largest acceleration
    // (over ranks the largest of all ranks', so that every rank names the same one).
    const auto rungs = tree_.rungs().download(n_);
    const auto all = acc().download(n_);
    std::size_t i = n_;
    double g2 = -1;
    for (std::size_t j = 0; j < n_; ++j) {
        const double x = all[j].x, y = all[j].y, z = all[j].z;
        if (rungs[j] > options_.max_rung && x * x + y * y + z * z > g2) i = j, g2 = x * x + y * y + z * z;
    }
    double best = g2;
    comm_.max(std::span<double>(&best, 1));
    // The owner's acceleration and id (the lowest rank among equals), summed over ranks where the others give 0.
    const bool owner = i < n_ && g2 == best;
    int first_owner = owner ? comm_.rank() : comm_.size();
    {
        std::uint64_t r = static_cast<std::uint64_t>(comm_.size() - first_owner);
        comm_.max(std::span<std::uint64_t>(&r, 1));
        first_owner = comm_.size() - static_cast<int>(r);
    }
    if (first_owner >= comm_.size()) throw std::logic_error("Simulation: the rung histogram and the rungs disagree");
    const bool named = owner && first_owner == comm_.rank();
    double shared[3] = {0, 0, 0};
    std::uint64_t id_rung[2] = {0, 0}; // its id, and the rung it was given (the symmetric rule's probe may have
                                       // put it deeper than its acceleration here asks for)
    if (named) {
        shared[0] = all[i].x, shared[1] = all[i].y, shared[2] = all[i].z;
        id_rung[0] = input_ids()[i], id_rung[1] = rungs[i];
    }
    comm_.sum(std::span<double>(shared));
    comm_.sum(std::span<std::uint64_t>(id_rung));
    const std::uint64_t id = id_rung[0];
    std::vector<bn_f4> a{
        bn_f4{static_cast<float>(shared[0]), static_cast<float>(shared[1]), static_cast<float>(shared[2]), 0.0f}};
    // The rung this particle asks for, by the kernels' own criterion (in internal units): the deepest any particle
    // asks for now, as it has the largest |a|; so the limit that lets the run go on from here (later steps may ask
    // for more).
    const double c = 2.0 * options_.eta * static_cast<double>(eps_);
    const unsigned at_start = bn_block_rung(a[0].x, a[0].y, a[0].z, h * h, c * c, 1000);
    const unsigned needed = std::max(at_start, static_cast<unsigned>(id_rung[1]));
    units_.forces_from_internal(a);
    const double g = std::sqrt(double(a[0].x) * a[0].x + double(a[0].y) * a[0].y + double(a[0].z) * a[0].z);
    const double wanted = std::sqrt(2.0 * options_.eta * options_.eps / g);
    const double step = std::ldexp(h, units_.time_exp()); // dt, or a step cut short at an output or end time
    const std::string remedy =
        needed <= BANYAN_MAX_RUNG
            ? fmt::format("the run needs --max-rung {0} (Python max_rung={0}) at least, or a shorter dt", needed)
            : fmt::format("that is rung {}, deeper than --max-rung (Python max_rung) can go ({}): take a dt of "
                          "{:.6g} or shorter (or a larger eps or eta)",
                          needed, BANYAN_MAX_RUNG, std::ldexp(step, BANYAN_MAX_RUNG - static_cast<int>(needed)));
    const double deepest = std::ldexp(step, -static_cast<int>(options_.max_rung));
    if (needed > at_start) // the symmetric rule's probe refused the deepest rung at the step's end
        throw NumericalError(fmt::format(
            "simulation: particle {} of the input, with |a| = {:.6g} in the step from t = {}, would reach an "
            "acceleration at the end of a step of the deepest rung {} (dt / 2^{} = {:.6g}) that asks for a shorter "
            "step (the step criterion sqrt(2 eta eps / |a|), eta {}, eps {}, at both ends: --rung-rule symmetric): "
            "{}",
            id, g, time(), options_.max_rung, options_.max_rung, deepest, options_.eta, options_.eps, remedy));
    throw NumericalError(fmt::format(
        "simulation: particle {} of the input has |a| = {:.6g} in the step from t = {}, so the step "
        "criterion sqrt(2 eta eps / |a|) (eta {}, eps {}) asks for a step of {:.6g}, shorter than the "
        "deepest rung {} allows (dt / 2^{} = {:.6g}): {}",
        id, g, time(), options_.eta, options_.eps, wanted, options_.max_rung, options_.max_rung, deepest, remedy));
}

void Simulation::settle_kick() const
{
    if (!kick_end_) return;
    times_.integrate += be_.elapsed_ms(kick_begin_, kick_end_);
    kick_begin_ = kick_end_ = Event{};
}

const PhaseTimes& Simulation::times() const
{
    settle_kick();
    return times_;
}

void Simulation::energy_sums()
{
    const std::size_t wg = be_.work_group_size();
    const std::size_t groups = std::min(ceil_div(n_, wg), energy_max_groups);
    be_.launch(kernels::integrateEnergyPartials, Grid{groups, wg}, tree_.pos(), tree_.vel(), acc(), to_u32(n_),
               partials_);
    be_.launch(kernels::integrateEnergyTotals, Grid{1, wg}, partials_, to_u32(groups), totals_);
}

std::array<double, BANYAN_ENERGY_TERMS> Simulation::energy_terms(double* ms)
{
    std::array<double, BANYAN_ENERGY_TERMS> t{};
    if (n_) {
        const Event a = be_.record();
        energy_sums();
        const Event b = be_.record();
        totals_.download(std::span<double>(t));
        if (ms) *ms += be_.elapsed_ms(a, b);
    }
    comm_.sum(std::span<double>(t)); // in rank order: the same bits on every rank
    return t;
}

Energies Simulation::energies()
{
    Energies e;
    const std::array<double, BANYAN_ENERGY_TERMS> t = energy_terms(&times_.energies);
    const int ke = units_.energy_exp(), pe = units_.momentum_exp(), le = units_.angular_momentum_exp();
    e.kinetic = std::ldexp(t[0], ke);
    e.potential = std::ldexp(t[1], ke);
    e.momentum = {std::ldexp(t[2], pe), std::ldexp(t[3], pe), std::ldexp(t[4], pe)};
    e.angular_momentum = {std::ldexp(t[5], le), std::ldexp(t[6], le), std::ldexp(t[7], le)};
    return e;
}

std::size_t Simulation::input_order(std::vector<bn_f4>& pos, std::vector<bn_f4>& vel, std::vector<bn_f4>& acc_out)
{
    pos.resize(n_), vel.resize(n_), acc_out.resize(n_);
    for_input_order(
        [&](std::size_t first, std::size_t m, const Buffer<bn_f4>& p, const Buffer<bn_f4>& v, const Buffer<bn_f4>& a) {
            p.download(std::span<bn_f4>(pos.data() + first, m));
            v.download(std::span<bn_f4>(vel.data() + first, m));
            a.download(std::span<bn_f4>(acc_out.data() + first, m));
        });
    units_.from_internal(pos);
    units_.velocities_from_internal(vel);
    return units_.forces_from_internal(acc_out);
}

void Simulation::for_input_order(const std::function<void(std::size_t first, std::size_t m, const Buffer<bn_f4>& pos,
                                                          const Buffer<bn_f4>& vel, const Buffer<bn_f4>& acc)>& take)
{
    // In chunks of ids through the part of the tree's workspace that the accelerations leave free (slots 4 and
    // up; direct summation keeps its own): a snapshot costs no device memory of its own.
    const std::size_t align = std::max<std::size_t>(be_.info().view_align, 16);
    const std::size_t first_slot = options_.direct ? 0 : 4;
    auto& ws = tree_.workspace(0);
    const std::size_t room = ws.size() - first_slot * tree_.slot_bytes();
    const std::size_t part = room / 3 / align * align; // bytes of each of the three outputs
    const std::size_t chunk = std::min(n_, part / sizeof(bn_f4));
    if (chunk == 0) throw std::logic_error("Simulation::input_order: no room in the workspace");
    WorkspaceLayout layout = tree_.workspace_layout("the way back to input order");
    if (!options_.direct) layout.slots<bn_f4>("accelerations", 0, n_);
    const auto pos_at = layout.slots<bn_f4>("positions", first_slot, part / sizeof(bn_f4));
    const auto vel_at = layout.next<bn_f4>("velocities", part / sizeof(bn_f4));
    const auto acc_at = layout.next<bn_f4>("accelerations in input order", part / sizeof(bn_f4));
    auto out_pos = layout.view(ws, pos_at), out_vel = layout.view(ws, vel_at), out_acc = layout.view(ws, acc_at);
    for (std::size_t first = 0; first < n_; first += chunk) {
        const std::size_t m = std::min(chunk, n_ - first);
        // The kernel subtracts the low words (ids[i] - first, wrapped): with the ids of one rank, fewer than 2^31
        // consecutive ones, that is the index from the first whatever their high words.
        be_.launch(kernels::integrateToInputOrder, grid_for(be_, n_), tree_.pos(), tree_.vel(), acc(), tree_.ids(),
                   to_u32(n_), static_cast<bn_u32>(id_base_ + first), to_u32(m), out_pos, out_vel, out_acc);
        take(first, m, out_pos, out_vel, out_acc);
    }
}

std::array<bn_f4, 2> Simulation::track(std::uint64_t a, std::uint64_t b)
{
    if (a >= total_ || b >= total_)
        throw UsageError(fmt::format("simulation: cannot track particles {} and {} of {}", a, b, total_));
    const float nan = std::numeric_limits<float>::quiet_NaN();
    std::vector<bn_f4> v(2, bn_f4{nan, nan, nan, nan});
    if (n_ && !tree_.high_ids_kept()) {
        tracked_.fill(v[0]);
        be_.launch(kernels::integrateTrack, grid_for(be_, n_), tree_.pos(), tree_.ids(), to_u32(n_),
                   static_cast<bn_u32>(id_base_ + a), static_cast<bn_u32>(id_base_ + b), tracked_);
        v = tracked_.download(2);
    } else if (n_) {
        // Ids of 2^32 or more: the kernel compares low words, which repeat among more than 2^32 particles. The
        // host looks for both words, a piece of the ids at a time (a run this large is spread over many ranks).
        constexpr std::size_t piece = std::size_t{1} << 20;
        std::vector<bn_u32> low, high;
        const std::uint64_t want[2] = {id_base_ + a, id_base_ + b};
        for (std::size_t at = 0; at < n_; at += piece) {
            const std::size_t m = std::min(piece, n_ - at);
            low.resize(m), high.resize(m);
            tree_.ids().download(std::span<bn_u32>(low), at);
            tree_.id_high().download(std::span<bn_u32>(high), at);
            for (std::size_t i = 0; i < m; ++i)
                for (int k = 0; k < 2; ++k)
                    if ((std::uint64_t{high[i]} << 32 | low[i]) == want[k])
                        v[static_cast<std::size_t>(k)] = tree_.pos().at(at + i);
        }
    }
    // Each particle is on one rank; the others hold NaN.
    const auto all = all_gather<bn_f4>(comm_, std::span<const bn_f4>(v));
    for (std::size_t i = 0; i < all.size(); ++i)
        if (!std::isnan(all[i].x)) v[i % 2] = all[i];
    units_.from_internal(v);
    return {v[0], v[1]};
}

std::vector<std::uint64_t> Simulation::input_ids() const
{
    std::vector<std::uint64_t> ids = tree_.download_ids();
    for (auto& id : ids)
        id -= id_base_;
    return ids;
}

std::size_t Simulation::rank_particles(RankParticles& out)
{
    out.ids = input_ids();
    out.pos = n_ ? tree_.pos().download(n_) : std::vector<bn_f4>{};
    out.vel = n_ ? tree_.vel().download(n_) : std::vector<bn_f4>{};
    std::vector<bn_f4> a = n_ ? acc().download(n_) : std::vector<bn_f4>{};
    units_.from_internal(out.pos);
    units_.velocities_from_internal(out.vel);
    const std::size_t lost = units_.forces_from_internal(a);
    out.phi.resize(n_);
    for (std::size_t i = 0; i < n_; ++i)
        out.phi[i] = a[i].w;
    return lost;
}

std::string rung_text(const BlockStats& b)
{
    std::string s = "rungs";
    for (std::size_t k = 0; k < b.rungs.size(); ++k)
        if (b.rungs[k]) s += fmt::format(" {}:{}", k, b.rungs[k]);
    return s;
}

double shared_step_ratio(const BlockStats& b)
{
    if (b.active_updates == 0) return 0.0;
    std::uint64_t n = 0;
    for (const auto r : b.rungs)
        n += r;
    return std::ldexp(double(n) * b.span, static_cast<int>(b.deepest)) / double(b.active_updates);
}

bool all_finite(const Energies& e)
{
    bool ok = std::isfinite(e.kinetic) && std::isfinite(e.potential);
    for (int k = 0; k < 3; ++k)
        ok = ok && std::isfinite(e.momentum[k]) && std::isfinite(e.angular_momentum[k]);
    return ok;
}

} // namespace banyan
