/**
 * @file run.cpp
 * @brief The run engine: the start from a plan, the step loop, the energy log, snapshots and checkpoints on their
 *        time grids (run.hpp). Where the outputs go: outputs.cpp; the plan: run_plan.cpp; checkpoints and restarts:
 * run_checkpoints.cpp.
 */
#include "core/simulation/run.hpp"

#include "core/error.hpp"
#include "core/gravity/precision.hpp"
#include "core/parallel/comm.hpp"
#include "core/parallel/input.hpp"
#include "core/parallel/parallel_files.hpp"
#include "core/simulation/checkpoint.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <thread>

namespace banyan {

namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t)
{
    return std::chrono::duration<double>(Clock::now() - t).count();
}

/// Grid time k of a grid starting at @p t0 with spacing @p every.
double grid_time(double t0, std::uint64_t k, double every)
{
    return t0 + static_cast<double>(k) * every;
}

/// Whether checkpoint grid point @p k lies at or before the step at time @p t (half a step of slack against
/// rounding: checkpoints are written at the end of the step nearest their time).
bool due(double t0, std::uint64_t k, double every, double t, double dt)
{
    return every > 0 && every != RunOptions::never && grid_time(t0, k, every) <= t + 0.5 * dt;
}

/// Moves grid index @p k past every grid point due at time @p t; returns whether one was due.
bool advance(std::uint64_t& k, double t0, double every, double t, double dt)
{
    const bool was_due = due(t0, k, every, t, dt);
    while (due(t0, k, every, t, dt))
        ++k;
    return was_due;
}

FileCounts counts_of(const Snapshot& s)
{
    return FileCounts{s.n_gas, s.n_dark, s.n_star, s.n_type2, s.n_type3, s.n_type5};
}

} // namespace

/// The initial particles as the run takes them: the fields of the input's rows, the particles in the device's
/// layout, and which of the whole input they are.
struct Run::Initial {
    Snapshot fields;       // the input's rows (all fields), or none for a share of a generated model
    Particles particles;   // in the device's layout
    std::size_t n = 0;     // particles in all ranks
    std::size_t first = 0; // this rank's first
    bool share = false;    // generated, this rank's share only
    bool rows = false;     // read from the input file, this rank's rows only
};

Run::Run(Backend& be, const RunOptions& options, RunHooks hooks, std::shared_ptr<RunOutputs> outputs, const Comm& comm)
    : be_(be), comm_(comm), opt_(options), hooks_(std::move(hooks)), outputs_(std::move(outputs))
{
}

Run::Run(Backend& be, RunPlan plan, RunHooks hooks, const Comm& comm)
    : Run(be, plan.options_, std::move(hooks), plan.outputs_, comm)
{
    start(plan, initial_particles(plan));
    first_outputs();
}

Run::Initial Run::initial_particles(RunPlan& plan) const
{
    Initial ic;
    // Generated particles over several ranks: each rank makes only its share, the same bits as those particles of
    // the whole (generated_share), and holds no other.
    ic.share = !plan.input_ && !plan.device_ && comm_.parallel();
    ic.rows = plan.first_row_.has_value();
    ic.first = plan.first_row();
    if (plan.device_) {
        // The fields a snapshot and a checkpoint keep beside the device's particles (filled when one is written).
        ic.fields = Snapshot::dark(plan.device_->n);
        ic.fields.time = plan.device_->time;
        std::fill(ic.fields.eps.begin(), ic.fields.eps.end(), static_cast<float>(opt_.eps));
        ic.fields.ids = std::move(plan.device_->ids);
    } else if (plan.input_) {
        ic.fields = std::move(*plan.input_);
        ic.particles = std::move(plan.particles_);
    } else if (ic.share) {
        const std::size_t n = opt_.n;
        const std::size_t P = static_cast<std::size_t>(comm_.size()), r = static_cast<std::size_t>(comm_.rank());
        ic.n = n, ic.first = r * n / P;
        // Each particle from its own random stream; the sums that centre the model added up over the ranks; the
        // ranks of a node share its hardware threads.
        const unsigned threads =
            std::max(1u, std::thread::hardware_concurrency() / static_cast<unsigned>(std::max(comm_.node_size(), 1)));
        ic.particles = generated_share(opt_, Share{ic.first, (r + 1) * n / P - ic.first,
                                                   [this](std::span<std::uint64_t> v) { comm_.sum(v); }, threads});
        ic.fields = Snapshot::dark(0);
        if (galaxy_ic(opt_.ic)) {
            const auto t = GalaxyGenerator(galaxy_setup(opt_)).type_counts();
            ic.fields.n_type2 = t[1], ic.fields.n_type3 = t[2], ic.fields.n_type5 = t[3];
        }
        // A share is judged on its own: its values are made finite, its precision range is this rank's.
        check_input({.what = "initial conditions", .total = n, .first = ic.first, .pos_mass = ic.particles.pos}, opt_,
                    comm_);
    } else {
        ic.fields = initial_conditions(opt_); // a model: judged here, as a file's particles were in plan_run
        ic.particles = to_particles(ic.fields);
        check_input({.what = "initial conditions",
                     .time = ic.fields.time,
                     .total = ic.fields.size(),
                     .values = &ic.fields,
                     .pos_mass = ic.particles.pos,
                     .sized_by_n = true},
                    opt_, comm_);
    }
    if (!ic.share) ic.n = ic.rows ? plan.whole_.size() : ic.fields.size();
    return ic;
}

void Run::start(RunPlan& plan, Initial ic)
{
    Snapshot& f = ic.fields;
    snapshot_eps_ = ic.share ? static_cast<float>(opt_.eps) : common_softening(f, comm_).value_or(opt_.eps);
    // A run numbers its particles 0 .. N-1 in the input's order (the device's ids); the input's own ids (HDF5
    // ParticleIDs), when it has some, are a field of its rows like eps: written into every HDF5 snapshot and kept by
    // the checkpoints. Rows without them on any rank (a file whose types do not all carry them): none anywhere.
    if (comm_.any(f.size() > 0 && f.ids.empty())) f.ids.clear();
    f.acc.clear();
    f.units = parse_units(opt_.units);
    end_step_ = steps_between(f.time, opt_.t_end, opt_.dt);
    sim_ = std::make_unique<Simulation>(be_, opt_.simulation(), comm_);
    const std::size_t P = static_cast<std::size_t>(comm_.size()), r = static_cast<std::size_t>(comm_.rank());
    const std::size_t a = ic.share || ic.rows ? ic.first : r * ic.n / P, b = (r + 1) * ic.n / P;
    Particles& p = ic.particles;
    if (!ic.share && !ic.rows && comm_.parallel()) { // given whole to every rank: this rank's part
        p.pos = std::vector<bn_f4>(p.pos.begin() + static_cast<std::ptrdiff_t>(a),
                                   p.pos.begin() + static_cast<std::ptrdiff_t>(b));
        p.vel = std::vector<bn_f4>(p.vel.begin() + static_cast<std::ptrdiff_t>(a),
                                   p.vel.begin() + static_cast<std::ptrdiff_t>(b));
    }
    // The fields that never change of this rank's rows [a, b), the block it writes of every snapshot
    // (parallel_files.hpp): read alone, cut from the whole, or all of them on one rank; none for generated
    // particles over ranks (snapshot_eps_).
    whole_ = ic.rows ? plan.whole_ : ic.share ? FileCounts{0, ic.n, 0, f.n_type2, f.n_type3, f.n_type5} : counts_of(f);
    if (comm_.parallel()) {
        Snapshot kept = ic.share ? Snapshot{} : ic.rows ? std::move(f) : rows_of(f, Rows{a, b - a});
        kept.mass.clear(), kept.pos.clear(), kept.vel.clear(), kept.phi.clear(); // the particles' own
        if (ic.share) kept.time = f.time, kept.units = f.units;
        template_ = std::move(kept);
    } else {
        template_ = std::move(f);
    }
    if (plan.device_) {
        sim_->start_on_device(ic.n, template_.time, plan.device_->units, plan.device_->put);
        return;
    }
    const InternalUnits units =
        comm_.parallel() ? system_units(p.pos, opt_.eps, comm_) : InternalUnits::for_system(p.pos, opt_.eps);
    sim_->start_slice(std::move(p), template_.time, a, units); // frees them before the first forces
}

void Run::first_outputs()
{
    // Step 0: a fresh log, the first snapshot and a checkpoint, so that a kill from now on loses nothing.
    const auto t0 = Clock::now();
    outputs_->start_log(comm_); // an energy.csv of an earlier, checkpoint-less attempt
    log_bytes_ = 0;
    output_seconds_ += seconds_since(t0);
    record();
    const double t = sim_->time();
    next_snapshot_ = next_checkpoint_ = 1; // grid point 0 is now
    pass_snapshot_times();
    advance(next_checkpoint_, t, opt_.checkpoint_every, t, opt_.dt);
    write_snapshot();
    write_checkpoint();
}

std::string Run::kept_outputs() const
{
    if (!last_checkpoint_) return "no checkpoint was written yet";
    return fmt::format("the checkpoint of step {} (t = {}), the snapshots and the energy log up to it are kept in {}",
                       last_checkpoint_->first, last_checkpoint_->second, opt_.out);
}

void Run::fail_non_finite(const std::string& what) const
{
    const std::string kept = kept_outputs();
    throw NumericalError(fmt::format(
        "run: the simulation went non-finite at step {} (t = {}): {}. Nothing after the last good output was "
        "written: {}. Likely causes: forces or potentials beyond float's range in the input's units, particles "
        "closer than the softening allows, or a time step too long for the closest encounters (README, \"Limits\")",
        sim_->steps(), sim_->time(), what, kept));
}

void Run::check_state(const std::vector<bn_f4>& pos, const std::vector<bn_f4>& vel, const std::vector<bn_f4>& acc,
                      const std::vector<std::uint64_t>& ids) const
{
    const std::pair<const char*, const std::vector<bn_f4>*> arrays[] = {
        {"position and mass", &pos}, {"velocity", &vel}, {"acceleration and potential", &acc}};
    for (const auto& [name, v] : arrays)
        if (const std::size_t i = first_non_finite(*v); i < v->size())
            fail_non_finite(fmt::format("particle {} of the input has the {} ({}, {}, {}, {})",
                                        ids.empty() ? i : ids[i], name, (*v)[i].x, (*v)[i].y, (*v)[i].z, (*v)[i].w));
}

RunRecord Run::measure()
{
    const Energies e = sim_->energies();
    if (!all_finite(e))
        fail_non_finite(fmt::format("kinetic energy {}, potential energy {}, momentum ({}, {}, {})", e.kinetic,
                                    e.potential, e.momentum[0], e.momentum[1], e.momentum[2]));
    const double e0 = sim_->steps() == 0 && !sim_->off_grid() ? e.total() : e0_; // at the start: this energy
    RunRecord r;
    r.step = log_step();
    r.time = sim_->time();
    r.energies = e;
    r.de = e0 != 0.0 ? (e0 - e.total()) / e0 + 0.0 : 0.0;              // + 0.0: no "-0" in the log
    r.max_de = std::fabs(r.de) <= max_de_ ? max_de_ : std::fabs(r.de); // a NaN is kept, never hidden by std::max
    if (const auto pair = tracked_pair(opt_)) {
        const auto c = sim_->track((*pair)[0], (*pair)[1]);
        const double dx = double(c[1].x) - c[0].x, dy = double(c[1].y) - c[0].y, dz = double(c[1].z) - c[0].z;
        r.centre_distance = std::sqrt(dx * dx + dy * dy + dz * dz);
    }
    return r;
}

const RunRecord& Run::record()
{
    const RunRecord r = measure();
    const auto t0 = Clock::now();
    if (sim_->steps() == 0 && !sim_->off_grid()) e0_ = r.energies.total();
    max_de_ = r.max_de;
    if (outputs_->logs()) {
        // Every rank forms the same line and counts its length; the outputs write it once.
        const std::string text = log_line(r);
        outputs_->append_log(text, comm_);
        log_bytes_ += text.size();
    }
    last_ = r;
    output_seconds_ += seconds_since(t0);
    if (hooks_.on_log) hooks_.on_log(r);
    return last_;
}

std::string Run::log_line(const RunRecord& r) const
{
    std::string text;
    if (log_bytes_ == 0) {
        text = "step,time,kinetic,potential,total,dE,max_abs_dE,px,py,pz,Lx,Ly,Lz";
        text += tracked() ? ",centre_distance\n" : "\n";
    }
    const Energies& e = r.energies;
    const auto& p = e.momentum;
    const auto& l = e.angular_momentum;
    text += fmt::format("{},{},{},{},{},{},{},{},{},{},{},{},{}", r.step, r.time, e.kinetic, e.potential, e.total(),
                        r.de, r.max_de, p[0], p[1], p[2], l[0], l[1], l[2]);
    text += tracked() ? fmt::format(",{}\n", r.centre_distance) : "\n";
    return text;
}

void Run::write_snapshot()
{
    if (opt_.snapshot_every == RunOptions::never) return;
    const std::optional<std::string> path = outputs_->snapshot_path(snapshots_written_, opt_.format);
    if (!path) return;
    const auto t0 = Clock::now();
    write_snapshot(*path, opt_.format);
    ++snapshots_written_;
    output_seconds_ += seconds_since(t0);
    if (hooks_.on_file) hooks_.on_file(*path);
}

void Run::write_snapshot(const std::string& path, SnapshotFormat format)
{
    // One path on one rank and on many: the collective writers give the same bytes at any rank count.
    const bool with_acc = snapshot_format_info(format).keeps_accelerations;
    SnapshotMeta meta;
    meta.parameters = opt_.to_text();
    RankParticles mine;
    std::uint64_t lost = 0;
    if (with_acc) {
        // The exact state has the accelerations too, in device order with the ids, as rank_particles gives.
        SimulationState st = sim_->save();
        st.units.from_internal(st.pos);
        st.units.velocities_from_internal(st.vel);
        lost = st.units.forces_from_internal(st.acc);
        mine.ids = std::move(st.ids), mine.pos = std::move(st.pos), mine.vel = std::move(st.vel);
        mine.acc = std::move(st.acc);
        mine.phi.resize(mine.acc.size());
        for (std::size_t i = 0; i < mine.acc.size(); ++i)
            mine.phi[i] = mine.acc[i].w;
    } else {
        lost = sim_->rank_particles(mine);
    }
    comm_.sum(std::span<std::uint64_t>(&lost, 1));
    if (lost)
        fail_non_finite(fmt::format("{} accelerations or potentials lie beyond float's range in the input's "
                                    "units, where a snapshot holds them",
                                    lost));
    std::vector<bn_f4> acc(mine.phi.size());
    for (std::size_t i = 0; i < acc.size(); ++i)
        acc[i] = bn_f4{0, 0, 0, mine.phi[i]};
    check_state(mine.pos, mine.vel, with_acc ? mine.acc : acc, mine.ids);
    write_snapshot_parallel(comm_, format, path, sim_->time(), whole_, mine, template_, snapshot_eps_, template_.units,
                            meta);
}

const Snapshot& Run::snapshot(bool with_acc)
{
    if (comm_.parallel()) throw std::logic_error("Run::snapshot is for runs on one rank");
    std::vector<bn_f4> pos, vel, acc;
    if (const std::size_t lost = sim_->input_order(pos, vel, acc))
        fail_non_finite(fmt::format("{} accelerations or potentials lie beyond float's range in the input's units, "
                                    "where a snapshot holds them",
                                    lost));
    check_state(pos, vel, acc, {});
    Snapshot& s = template_;
    s.time = sim_->time();
    set_particles(s, pos, vel, acc, with_acc);
    return s;
}

void Run::set_end(double t_end)
{
    opt_.t_end = t_end;
    end_step_ = steps_between(sim_->t_begin(), t_end, opt_.dt);
}

std::uint64_t Run::log_step() const noexcept
{
    return sim_->steps() + (sim_->off_grid() ? 1 : 0);
}

bool Run::reached(double t) const
{
    const GridPlace g = grid_place(sim_->t_begin(), t, opt_.dt);
    return sim_->tick() == 0 &&
           (sim_->steps() >= g.step || (!g.on_grid && sim_->time() >= t - time_tolerance(sim_->t_begin(), t, opt_.dt)));
}

bool Run::finished() const
{
    return reached(opt_.t_end);
}

std::optional<double> Run::snapshot_time(std::uint64_t k) const
{
    if (!opt_.snapshot_times.empty())
        return k >= 1 && k <= opt_.snapshot_times.size() ? std::optional(opt_.snapshot_times[k - 1]) : std::nullopt;
    if (!(opt_.snapshot_every > 0) || opt_.snapshot_every == RunOptions::never) return std::nullopt;
    return grid_time(sim_->t_begin(), k, opt_.snapshot_every);
}

bool Run::pass_snapshot_times()
{
    bool passed = false;
    for (auto t = snapshot_time(next_snapshot_); t && reached(*t); t = snapshot_time(++next_snapshot_))
        passed = true;
    return passed;
}

std::optional<double> Run::cut_time() const
{
    // The end time and, where snapshots are written, the next snapshot's time, when they lie inside the step under
    // way (off its grid points: a time on one is reached by whole steps).
    std::optional<double> cut;
    auto consider = [&](std::optional<double> t) {
        if (!t || reached(*t)) return;
        const GridPlace g = grid_place(sim_->t_begin(), *t, opt_.dt);
        if (!g.on_grid && g.step == sim_->steps() + 1) cut = std::min(*t, cut.value_or(*t));
    };
    consider(opt_.t_end);
    if (outputs_->writes_snapshots() && opt_.snapshot_every != RunOptions::never)
        consider(snapshot_time(next_snapshot_));
    return cut;
}

Run::Outcome Run::run(const volatile std::sig_atomic_t* stop)
{
    while (!finished()) {
        // Every rank stops at the same step, or substep (a signal may reach the ranks at different moments).
        if (comm_.any(stop && *stop) || !step(stop)) {
            write_checkpoint();
            return Outcome::stopped;
        }
    }
    return Outcome::finished;
}

bool Run::step(const volatile std::sig_atomic_t* stop)
{
    const auto t0 = Clock::now();
    auto pause = [&] {
        if (hooks_.on_substep) hooks_.on_substep();
        return stop && *stop;
    };
    try {
        if (!sim_->step(pause, sim_->tick() ? std::nullopt : cut_time())) {
            session_seconds_ += seconds_since(t0);
            return false;
        }
    } catch (const DeviceError&) {
        // Out of device memory when the tree outgrows its arrays (another process took the memory), or any
        // other device failure: say what survives, then let the error (which names the allocation) go on.
        notice(fmt::format("run: a device failure at step {} (t = {}); {}", sim_->steps() + 1, sim_->step_end(),
                           kept_outputs()));
        throw;
    }
    const double t_begin = sim_->t_begin();
    const std::uint64_t s = sim_->steps();
    const double t = sim_->time();
    const bool last = finished();
    // Without files the front end asks for energies itself (record()); the time grids still advance, so that a
    // checkpoint saved from it continues its outputs where a run's would. A step cut short at a snapshot's time
    // logs no line of its own (the log's lines are every log_every whole steps).
    if (outputs_->logs() && ((!sim_->off_grid() && s % opt_.log_every == 0) || last)) record();
    const bool snap = pass_snapshot_times();
    if (snap || last) write_snapshot();
    const bool ckpt = due(t_begin, next_checkpoint_, opt_.checkpoint_every, t, opt_.dt);
    while (due(t_begin, next_checkpoint_, opt_.checkpoint_every, t, opt_.dt))
        ++next_checkpoint_;
    if (ckpt || last) write_checkpoint();
    ++session_steps_;
    session_seconds_ += seconds_since(t0);
    if (hooks_.on_step) hooks_.on_step();
    return true;
}

} // namespace banyan
