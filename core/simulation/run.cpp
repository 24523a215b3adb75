/**
 * @file run.cpp
 * @brief The run loop of `banyan run`: outputs on time grids, the energy log, checkpoints and restarts.
 */
#include "core/simulation/run.hpp"

#include "core/device/devices.hpp"
#include "core/parallel/comm.hpp"
#include "core/parallel/parallel_files.hpp"
#include "core/error.hpp"
#include "core/gravity/precision.hpp"
#include "core/simulation/checkpoint.hpp"
#include "core/version.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <thread>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <unistd.h>

namespace banyan {

namespace fs = std::filesystem;

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

/// Whether grid point @p k lies at or before the step at time @p t (half a step of slack against rounding).
bool due(double t0, std::uint64_t k, double every, double t, double dt)
{
    return every > 0 && every != RunOptions::never && grid_time(t0, k, every) <= t + 0.5 * dt;
}

/// Removes leftovers of atomic writes interrupted by a kill ("<name>.tmp.<pid>").
void remove_stale_temporaries(const std::string& dir)
{
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(dir, ec)) {
        const std::string name = e.path().filename().string();
        const bool ours = name.rfind("snapshot_", 0) == 0 || name.rfind("checkpoint.bin", 0) == 0;
        if (ours && name.find(".tmp.") != std::string::npos) fs::remove(e.path(), ec);
    }
}

/// The checkpoint of a run over @p P ranks (files @p path, path.rank1, ..., path.rank{P-1}) cut anew for the ranks
/// of @p comm: this rank takes the rows [r T / P', (r + 1) T / P') of the particles of all files taken in rank
/// order (T in all, P' = comm.size()), and the same rows of the input's fields (file k holds those of the input's
/// rows [k T / P, (k + 1) T / P); over ranks none for generated particles, whose softening is snapshot_eps). Every
/// file must be of that run and step; only the files that hold rows of this rank are read. The header is file 0's;
/// no fields (Snapshot{}) where the files hold none.
Checkpoint read_cut_anew(const std::string& path, const std::string& dir, std::uint64_t P, const Comm& comm)
{
    std::vector<std::string> names(P);
    std::vector<std::size_t> n(P), nf(P);
    KeyValues head;
    for (std::uint64_t k = 0; k < P; ++k) {
        names[k] = k == 0 ? path : fmt::format("{}.rank{}", path, k);
        if (!fs::exists(names[k]))
            throw UsageError(
                fmt::format("run: the checkpoint in {} was written by {} ranks, but {} is missing", dir, P, names[k]));
        const KeyValues kv = read_checkpoint_header(names[k]);
        auto u = [&](const char* key) { return u64_of(kv, key, names[k]); };
        if ((kv.count("ranks") ? u("ranks") : 1) != P || (kv.count("rank") ? u("rank") : 0) != k)
            throw UsageError(
                fmt::format("{}: not the checkpoint of rank {} of the {} ranks that wrote {}", names[k], k, P, path));
        if (k == 0) head = kv;
        if (u("step") != u64_of(head, "step", path))
            throw UsageError(fmt::format("run: the checkpoint files in {} are of different steps ({} and {}): the run "
                                         "was killed while writing them",
                                         dir, u64_of(head, "step", path), u("step")));
        n[k] = u("particles");
        nf[k] = P == 1 ? n[k] : kv.count("rank_rows") ? u("n_gas") + u("n_dark") + u("n_star") : 0;
    }
    std::size_t total = 0, fields = 0;
    for (std::uint64_t k = 0; k < P; ++k)
        total += n[k], fields += nf[k];
    if (fields != 0 && fields != total)
        throw UsageError(fmt::format("run: the checkpoint files in {} hold the fields of {} rows for {} particles", dir,
                                     fields, total));
    const std::size_t Q = static_cast<std::size_t>(comm.size()), r = static_cast<std::size_t>(comm.rank());
    const std::size_t a = r * total / Q, b = (r + 1) * total / Q;
    auto overlap = [&](std::size_t at, std::size_t count) {
        const std::size_t lo = std::clamp(a, at, at + count), hi = std::clamp(b, at, at + count);
        return Rows{lo - at, hi - lo};
    };
    Checkpoint c;
    SimulationState& st = c.state;
    st.units = checkpoint_units(head, path);
    c.header = std::move(head);
    Snapshot& f = c.fields;
    auto append = [](auto& to, const auto& from) { to.insert(to.end(), from.begin(), from.end()); };
    for (std::size_t k = 0, p_at = 0, f_at = 0; k < P; p_at += n[k], f_at += nf[k], ++k) {
        const CheckpointRows rows{overlap(p_at, n[k]), fields ? overlap(f_at, nf[k]) : Rows{0, 0}};
        if (rows.particles.count == 0 && rows.fields.count == 0) continue;
        Checkpoint part = read_checkpoint(names[k], rows);
        SimulationState& s = part.state;
        if (s.units.k != st.units.k || s.units.j != st.units.j)
            throw UsageError(fmt::format("{}: internal units other than those of {}", names[k], path));
        append(st.pos, s.pos), append(st.vel, s.vel), append(st.acc, s.acc), append(st.ids, s.ids);
        append(st.rungs, s.rungs);
        const Snapshot& g = part.fields;
        f.n_gas += g.n_gas, f.n_dark += g.n_dark, f.n_star += g.n_star;
        append(f.eps, g.eps), append(f.gas_rho, g.gas_rho), append(f.gas_temp, g.gas_temp);
        append(f.gas_metals, g.gas_metals), append(f.star_metals, g.star_metals), append(f.star_tform, g.star_tform);
        append(f.ids, g.ids);
    }
    const std::size_t kept = f.size();
    if (!f.ids.empty() && f.ids.size() != kept)
        throw UsageError(fmt::format("run: the checkpoint files in {} hold the input's ids for some rows only", dir));
    f.mass.assign(kept, 0.f), f.pos.assign(3 * kept, 0.f), f.vel.assign(3 * kept, 0.f), f.phi.assign(kept, 0.f);
    return c;
}

} // namespace

// ---- Output folder --------------------------------------------------------------------------------------------

void prepare_output_dir(const std::string& dir, bool fresh)
{
    std::error_code ec;
    if (!fresh && !fs::exists(fs::path(dir) / "checkpoint.bin"))
        throw UsageError(fmt::format("run: no checkpoint to continue from in {} ({} is missing)", dir,
                                     (fs::path(dir) / "checkpoint.bin").string()));
    fs::create_directories(dir, ec);
    if (ec || !fs::is_directory(dir))
        throw UsageError(fmt::format("run: cannot create the output folder {}: {}", dir,
                                     ec ? ec.message() : "it exists and is not a folder"));
    const std::string probe = fmt::format("{}/.banyan-write-test.{}", dir, ::getpid());
    {
        std::ofstream f(probe);
        if (!f || !(f << "x") || !f.flush())
            throw UsageError(fmt::format("run: the output folder {} is not writable: {}", dir, std::strerror(errno)));
    }
    fs::remove(probe, ec);
    if (fresh && fs::exists(fs::path(dir) / "checkpoint.bin"))
        throw UsageError(fmt::format("run: {} holds a run already (checkpoint.bin): continue it with "
                                     "`banyan run --restart {}`, or choose another --out",
                                     dir, dir));
}

// ---- The plan ------------------------------------------------------------------------------------------------

namespace {

/// check_initial_conditions for the rows [first, first + mine.size()) of @p o.in that this rank read: the values of
/// its rows, the start and end time, and the precision range of the particles of all ranks (collective).
void check_input_rows(const Snapshot& mine, std::span<const bn_f4> pos_mass, std::size_t first, std::size_t total,
                      const RunOptions& o, const Comm& comm)
{
    check_particle_values(mine, o.in, first);
    check_start_time(mine.time, o.dt, o.in);
    if (!(o.t_end > mine.time))
        throw UsageError(
            fmt::format("run: --t-end {} must be later than the start time {} of {}", o.t_end, mine.time, o.in));
    check_precision_range(pos_mass, first, total, o.eps, o.in, comm);
}

} // namespace

RunPlan plan_run(RunRequest request, const Comm& comm)
{
    RunOptions& o = request.options;
    o.check(request.style);
    RunPlan plan;
    if (request.device_particles) {
        DeviceParticles& d = *request.device_particles;
        const std::string what = "initial conditions";
        if (comm.parallel()) throw UsageError("run: particles on the device start a run on one rank only");
        if (d.n == 0) throw UsageError("run: no particles (N = 0); at least one is needed");
        if (d.n > 0x7FFFFFFFull)
            throw UsageError(fmt::format("run: {} particles is more than the 2^31 - 1 supported", d.n));
        if (!d.ids.empty() && d.ids.size() != d.n)
            throw UsageError(fmt::format("run: {} ids for {} particles", d.ids.size(), d.n));
        check_start_time(d.time, o.dt, what);
        if (!(o.t_end > d.time))
            throw UsageError(fmt::format("run: --t-end {} must be later than the start time {}", o.t_end, d.time));
        check_precision_range(d.extent, d.total_mass, d.min_mass, d.lightest, d.n, o.eps, what);
        const InternalUnits u = InternalUnits::for_extent_and_mass(d.extent, d.total_mass, o.eps);
        if (u.k != d.units.k || u.j != d.units.j)
            throw std::logic_error("plan_run: particles on the device in other units than their extent and mass ask");
        plan.whole_ = FileCounts{0, d.n, 0, 0, 0, 0};
        plan.device_ = std::move(d);
    } else if (request.particles) {
        plan.input_ = std::move(request.particles);
    } else if (o.ic == "file") {
        SnapshotMeta meta;
        if (comm.parallel()) {
            // Each rank reads only its rows [r N / P, (r + 1) N / P) of the file (tipsy from their offset, HDF5 by
            // hyperslabs); the first decomposition moves them where they belong.
            read_snapshot(o.in, nullptr, true, nullptr, Rows{0, 0}, &plan.whole_);
            const std::size_t n = plan.whole_.size();
            if (n == 0) throw UsageError(fmt::format("{}: no particles (N = 0); at least one is needed", o.in));
            if (n > 0x7FFFFFFFull)
                throw UsageError(fmt::format("{}: {} particles is more than the 2^31 - 1 supported", o.in, n));
            const std::size_t P = static_cast<std::size_t>(comm.size()), r = static_cast<std::size_t>(comm.rank());
            plan.first_row_ = r * n / P;
            plan.input_ = read_snapshot(o.in, &meta, true, nullptr, Rows{r * n / P, (r + 1) * n / P - r * n / P});
            // A rank whose rows hold no collisionless type says yes.
            meta.has_softening = !comm.any(!meta.has_softening);
        } else {
            plan.input_ = initial_conditions(o, &meta);
        }
        if (request.eps_from_file) {
            check_softenings(*plan.input_, o.in, plan.first_row());
            o.eps = softening_from_file(meta, o.in, "run", common_softening(*plan.input_, comm));
            o.check(request.style); // the file's softening, judged as a given one would be
        }
    }
    if (plan.input_) {
        const Snapshot& ic = *plan.input_;
        if (!plan.first_row_)
            plan.whole_ = FileCounts{ic.n_gas, ic.n_dark, ic.n_star, ic.n_type2, ic.n_type3, ic.n_type5};
        adopt_units(o, ic);
        plan.particles_ = to_particles(ic); // the one conversion of the input into the device's layout
        if (plan.first_row_)
            check_input_rows(ic, plan.particles_.pos, *plan.first_row_, plan.whole_.size(), o, comm);
        else
            check_initial_conditions(ic, plan.particles_.pos, o);
    }
    if (request.outputs == RunOutputs::files) prepare_output_dir(o.out, true);
    plan.options_ = std::move(o);
    plan.outputs_ = request.outputs;
    return plan;
}

// ---- The run --------------------------------------------------------------------------------------------------

Run::Run(Backend& be, const RunOptions& options, RunHooks hooks, RunOutputs outputs, const Comm& comm)
    : be_(be), comm_(comm), opt_(options), hooks_(std::move(hooks)), outputs_(outputs)
{
}

Run::Run(Backend& be, RunPlan plan, RunHooks hooks, const Comm& comm)
    : Run(be, plan.options_, std::move(hooks), plan.outputs_, comm)
{
    Snapshot ic;
    Particles particles;
    // Generated particles over several ranks: each rank makes only its share, the same bits as those particles of
    // the whole (generated_share), and holds no other.
    const bool share = !plan.input_ && comm_.parallel();
    const bool rows = plan.first_row_.has_value(); // the input file's rows of this rank only
    const FileCounts whole = plan.whole_;
    std::size_t n = 0, first = plan.first_row();
    if (plan.device_) {
        // The fields a snapshot and a checkpoint keep beside the device's particles (filled when one is written).
        ic = Snapshot::dark(plan.device_->n);
        ic.time = plan.device_->time;
        std::fill(ic.eps.begin(), ic.eps.end(), static_cast<float>(opt_.eps));
        ic.ids = std::move(plan.device_->ids);
    } else if (plan.input_) {
        ic = std::move(*plan.input_);
        particles = std::move(plan.particles_);
    } else if (share) {
        n = opt_.n;
        const std::size_t P = static_cast<std::size_t>(comm_.size()), r = static_cast<std::size_t>(comm_.rank());
        first = r * n / P;
        // Each particle from its own random stream; the sums that centre the model added up over the ranks; the
        // ranks of a node share its hardware threads.
        const unsigned threads =
            std::max(1u, std::thread::hardware_concurrency() / static_cast<unsigned>(std::max(comm_.node_size(), 1)));
        particles = generated_share(
            opt_, Share{first, (r + 1) * n / P - first, [this](std::span<std::uint64_t> v) { comm_.sum(v); }, threads});
        ic = Snapshot::dark(0);
        if (galaxy_ic(opt_.ic)) {
            const auto t = GalaxyGenerator(galaxy_setup(opt_)).type_counts();
            ic.n_type2 = t[1], ic.n_type3 = t[2], ic.n_type5 = t[3];
        }
        if (!(opt_.t_end > 0.0))
            throw UsageError(
                fmt::format("run: --t-end {} must be later than the start time 0 of initial conditions", opt_.t_end));
        check_precision_range(particles.pos, opt_.eps, "initial conditions");
    } else {
        ic = initial_conditions(opt_); // a model: its particles are judged here, as a file's were in plan_run
        particles = to_particles(ic);
        check_initial_conditions(ic, particles.pos, opt_);
    }
    if (!share) n = rows ? whole.size() : ic.size();
    snapshot_eps_ = share ? static_cast<float>(opt_.eps) : common_softening(ic, comm_).value_or(opt_.eps);
    // A run numbers its particles 0 .. N-1 in the input's order (the device's ids); the input's own ids (HDF5
    // ParticleIDs), when it has some, are a field of its rows like eps: written into every HDF5 snapshot and kept by
    // the checkpoints. Rows without them on any rank (a file whose types do not all carry them): none anywhere.
    if (comm_.any(ic.size() > 0 && ic.ids.empty())) ic.ids.clear();
    ic.acc.clear();
    ic.units = parse_units(opt_.units);
    template_ = std::move(ic);
    end_step_ = steps_between(template_.time, opt_.t_end, opt_.dt);
    sim_ = std::make_unique<Simulation>(be_, opt_.simulation(), comm_);
    if (comm_.parallel()) {
        // Each rank keeps its slice (the first decomposition sorts them out): made alone, read alone from the
        // file, or cut from particles every rank was given.
        const std::size_t P = static_cast<std::size_t>(comm_.size()), r = static_cast<std::size_t>(comm_.rank());
        const std::size_t a = share || rows ? first : r * n / P;
        if (!share && !rows) { // given whole to every rank: this rank's part
            const std::size_t b = (r + 1) * n / P;
            particles.pos = std::vector<bn_f4>(particles.pos.begin() + static_cast<std::ptrdiff_t>(a),
                                               particles.pos.begin() + static_cast<std::ptrdiff_t>(b));
            particles.vel = std::vector<bn_f4>(particles.vel.begin() + static_cast<std::ptrdiff_t>(a),
                                               particles.vel.begin() + static_cast<std::ptrdiff_t>(b));
        }
        const InternalUnits units = system_units(particles.pos, opt_.eps, comm_);
        // The fields that never change of this rank's rows [a, b), the block it writes of every snapshot
        // (parallel_files.hpp): read alone, or cut from the whole; none for generated particles (snapshot_eps_).
        const Snapshot& t = template_;
        whole_ = rows    ? whole
                 : share ? FileCounts{0, n, 0, t.n_type2, t.n_type3, t.n_type5}
                         : FileCounts{t.n_gas, t.n_dark, t.n_star, t.n_type2, t.n_type3, t.n_type5};
        Snapshot kept = share ? Snapshot{} : rows ? std::move(template_) : rows_of(t, Rows{a, (r + 1) * n / P - a});
        kept.mass.clear(), kept.pos.clear(), kept.vel.clear(), kept.phi.clear(); // the particles' own
        if (share) kept.time = template_.time, kept.units = template_.units;
        template_ = std::move(kept);
        sim_->start_slice(std::move(particles), template_.time, a, units); // frees them before the first forces
    } else {
        whole_ = FileCounts{template_.n_gas,   template_.n_dark,  template_.n_star,
                            template_.n_type2, template_.n_type3, template_.n_type5};
        if (plan.device_) {
            sim_->start_on_device(n, template_.time, plan.device_->units, plan.device_->put);
        } else {
            const InternalUnits units = InternalUnits::for_system(particles.pos, opt_.eps);
            sim_->start_slice(std::move(particles), template_.time, 0, units);
        }
    }

    // Step 0: a fresh log, the first snapshot and a checkpoint, so that a kill from now on loses nothing.
    const auto t0 = Clock::now();
    std::error_code ec;
    if (writes_log()) fs::resize_file(log_path(), 0, ec); // an energy.csv of an earlier, checkpoint-less attempt
    log_bytes_ = 0;
    output_seconds_ += seconds_since(t0);
    record();
    const double t = sim_->time();
    next_snapshot_ = next_checkpoint_ = 1; // grid point 0 is now
    while (due(t, next_snapshot_, opt_.snapshot_every, t, opt_.dt))
        ++next_snapshot_;
    while (due(t, next_checkpoint_, opt_.checkpoint_every, t, opt_.dt))
        ++next_checkpoint_;
    write_snapshot();
    write_checkpoint();
}

std::string Run::checkpoint_path() const
{
    return (fs::path(opt_.out) / "checkpoint.bin").string();
}

std::string Run::rank_checkpoint_path() const
{
    return comm_.rank() == 0 ? checkpoint_path() : fmt::format("{}.rank{}", checkpoint_path(), comm_.rank());
}

bool Run::writes_log() const
{
    return files() && comm_.rank() == 0;
}
std::string Run::log_path() const
{
    return (fs::path(opt_.out) / "energy.csv").string();
}

std::string Run::kept_outputs() const
{
    if (!last_checkpoint_step_) return "no checkpoint was written yet";
    return fmt::format("the checkpoint of step {} (t = {}), the snapshots and the energy log up to it are kept in {}",
                       *last_checkpoint_step_, sim_->t_begin() + static_cast<double>(*last_checkpoint_step_) * opt_.dt,
                       opt_.out);
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
                      const std::vector<bn_u32>& ids) const
{
    const std::pair<const char*, const std::vector<bn_f4>*> arrays[] = {
        {"position and mass", &pos}, {"velocity", &vel}, {"acceleration and potential", &acc}};
    for (const auto& [name, v] : arrays)
        if (const std::size_t i = first_non_finite(*v); i < v->size())
            fail_non_finite(fmt::format("particle {} of the input has the {} ({}, {}, {}, {})",
                                        ids.empty() ? i : ids[i], name, (*v)[i].x, (*v)[i].y, (*v)[i].z, (*v)[i].w));
}

const RunRecord& Run::record()
{
    const Energies e = sim_->energies();
    if (!all_finite(e))
        fail_non_finite(fmt::format("kinetic energy {}, potential energy {}, momentum ({}, {}, {})", e.kinetic,
                                    e.potential, e.momentum[0], e.momentum[1], e.momentum[2]));
    const auto t0 = Clock::now();
    if (sim_->steps() == 0) e0_ = e.total();
    RunRecord r;
    r.step = sim_->steps();
    r.time = sim_->time();
    r.energies = e;
    r.de = e0_ != 0.0 ? (e0_ - e.total()) / e0_ + 0.0 : 0.0;      // + 0.0: no "-0" in the log
    if (!(std::fabs(r.de) <= max_de_)) max_de_ = std::fabs(r.de); // a NaN is kept, never hidden by std::max
    r.max_de = max_de_;
    if (const auto pair = tracked_pair(opt_)) {
        const auto c = sim_->track(static_cast<std::uint32_t>((*pair)[0]), static_cast<std::uint32_t>((*pair)[1]));
        const double dx = double(c[1].x) - c[0].x, dy = double(c[1].y) - c[0].y, dz = double(c[1].z) - c[0].z;
        r.centre_distance = std::sqrt(dx * dx + dy * dy + dz * dz);
    }
    if (files()) {
        std::string text;
        if (log_bytes_ == 0) {
            text = "step,time,kinetic,potential,total,dE,max_abs_dE,px,py,pz,Lx,Ly,Lz";
            text += tracked() ? ",centre_distance\n" : "\n";
        }
        const auto& p = e.momentum;
        const auto& l = e.angular_momentum;
        text += fmt::format("{},{},{},{},{},{},{},{},{},{},{},{},{}", r.step, r.time, e.kinetic, e.potential, e.total(),
                            r.de, r.max_de, p[0], p[1], p[2], l[0], l[1], l[2]);
        text += tracked() ? fmt::format(",{}\n", r.centre_distance) : "\n";
        // Over several ranks every rank forms the same line (the sums are the same bits everywhere); rank 0 writes
        // it, and every rank counts its length.
        if (writes_log()) append_log(text);
        log_bytes_ += text.size();
    }
    last_ = r;
    output_seconds_ += seconds_since(t0);
    if (hooks_.on_log) hooks_.on_log(r);
    return last_;
}

void Run::append_log(const std::string& text)
{
    // One write of whole lines, appended: a kill leaves at most a cut last line, which a restart truncates away.
    const int fd = ::open(log_path().c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd < 0) throw std::runtime_error(fmt::format("cannot open {}: {}", log_path(), std::strerror(errno)));
    std::size_t done = 0;
    while (done < text.size()) {
        const ssize_t w = ::write(fd, text.data() + done, text.size() - done);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) {
            const int err = errno;
            ::close(fd);
            throw std::runtime_error(fmt::format("writing {} failed: {}", log_path(), std::strerror(err)));
        }
        done += static_cast<std::size_t>(w);
    }
    ::close(fd);
}

void Run::write_snapshot()
{
    if (!files() || opt_.snapshot_every == RunOptions::never) return;
    const auto t0 = Clock::now();
    const std::string path =
        (fs::path(opt_.out) / fmt::format("snapshot_{:05d}.{}", snapshots_written_, to_string(opt_.format))).string();
    write_snapshot(path, opt_.format);
    ++snapshots_written_;
    output_seconds_ += seconds_since(t0);
    if (hooks_.on_file) hooks_.on_file(path);
}

void Run::write_snapshot(const std::string& path, SnapshotFormat format)
{
    const bool with_acc = snapshot_format_info(format).keeps_accelerations;
    SnapshotMeta meta;
    meta.parameters = opt_.to_text();
    const Comm& comm = comm_;
    if (comm.parallel()) {
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
        comm.sum(std::span<std::uint64_t>(&lost, 1));
        if (lost)
            fail_non_finite(fmt::format("{} accelerations or potentials lie beyond float's range in the input's "
                                        "units, where a snapshot holds them",
                                        lost));
        std::vector<bn_f4> acc(mine.phi.size());
        for (std::size_t i = 0; i < acc.size(); ++i)
            acc[i] = bn_f4{0, 0, 0, mine.phi[i]};
        check_state(mine.pos, mine.vel, with_acc ? mine.acc : acc, mine.ids);
        write_snapshot_parallel(comm, format, path, sim_->time(), whole_, mine, template_, snapshot_eps_,
                                template_.units, meta);
        return;
    }
    banyan::write_snapshot(path, snapshot(with_acc), format, meta);
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

std::string Run::checkpoint_text_now(const SimulationState& st) const
{
    // Over several ranks each writes its own file (rank 0: checkpoint.bin, rank r: checkpoint.bin.rankR); a
    // restart checks that all are of one step.
    const std::string ranks = comm_.parallel()
                                  ? fmt::format("ranks={}\nrank={}\nwork={}\nparticles_total={}\nsnapshot_eps={}\n"
                                                "n_gas_total={}\nn_star_total={}\nrank_rows=1\n",
                                                comm_.size(), comm_.rank(), st.work, sim_->total_size(), snapshot_eps_,
                                                whole_.n_gas, whole_.n_star)
                                  : std::string();
    const RunProgress progress{e0_, max_de_, next_snapshot_, snapshots_written_, next_checkpoint_, log_bytes_, last_};
    return checkpoint_text(opt_, st, progress, be_, whole_) + ranks;
}

void Run::write_checkpoint()
{
    if (!files() || opt_.checkpoint_every == RunOptions::never) return;
    const auto t0 = Clock::now();
    const SimulationState st = sim_->save();
    check_state(st.pos, st.vel, st.acc, st.ids);
    const std::string text = checkpoint_text_now(st);
    // Each rank's file through a temporary name, with the fields of its rows (rank_rows=1).
    if (comm_.parallel()) {
        comm_.barrier();
        banyan::write_checkpoint(rank_checkpoint_path(), text, st, template_);
        comm_.barrier();
    } else {
        banyan::write_checkpoint(checkpoint_path(), text, st, template_);
    }
    // The files of ranks beyond this run's, left by the run on more ranks that this one continues: the new set is
    // whole now.
    if (comm_.rank() == 0) {
        std::error_code ec;
        for (int k = comm_.size(); fs::remove(fmt::format("{}.rank{}", checkpoint_path(), k), ec);)
            ++k;
    }
    last_checkpoint_step_ = st.step;
    output_seconds_ += seconds_since(t0);
    if (hooks_.on_file) hooks_.on_file(checkpoint_path());
}

void Run::save(const std::string& path)
{
    if (comm_.parallel()) throw UsageError("run: save(path) is for runs on one rank");
    const SimulationState st = sim_->save();
    check_state(st.pos, st.vel, st.acc, st.ids);
    banyan::write_checkpoint(path, checkpoint_text_now(st), st, template_);
}

void Run::set_end(double t_end)
{
    opt_.t_end = t_end;
    end_step_ = steps_between(sim_->t_begin(), t_end, opt_.dt);
}

std::string checkpoint_text(const RunOptions& options, const SimulationState& state, const RunProgress& progress,
                            const Backend& be, const FileCounts& types)
{
    const RunProgress& p = progress;
    return options.to_text() +
           fmt::format("banyan_version={}\nstep={}\nt_begin={}\ne0={}\nmax_de={}\nnext_snapshot={}\n"
                       "snapshots_written={}\nnext_checkpoint={}\nlog_bytes={}\nwork_group_size={}\ndevice={}\n"
                       "last_log_step={}\nlast_log_time={}\nlast_de={}\nlast_centre_distance={}\n"
                       "n_type2={}\nn_type3={}\nn_type5={}\n",
                       version, state.step, state.t_begin, p.e0, p.max_de, p.next_snapshot, p.snapshots_written,
                       p.next_checkpoint, p.log_bytes, be.work_group_size(), device_label(be.info()), p.last.step,
                       p.last.time, p.last.de, p.last.centre_distance, types.n_type2, types.n_type3, types.n_type5);
}

std::string checkpoint_device(const std::string& dir)
{
    const std::string path = (fs::path(dir) / "checkpoint.bin").string();
    return value_of(read_checkpoint_header(path), "device", path);
}

std::unique_ptr<Run> Run::resume(Backend& be, const std::string& where, std::optional<double> t_end, RunHooks hooks,
                                 RunOutputs outputs, const Comm& comm)
{
    // A run folder (its checkpoint.bin), or with no outputs also a checkpoint file of any name (Simulation.save).
    const bool folder = outputs == RunOutputs::files || fs::is_directory(where);
    const std::string parent = fs::path(where).parent_path().string();
    const std::string dir = folder ? where : parent.empty() ? std::string(".") : parent;
    const std::string path = folder ? (fs::path(where) / "checkpoint.bin").string() : where;
    if (folder && !fs::exists(path))
        throw UsageError(fmt::format("run: no checkpoint to continue from in {} ({} is missing)", dir, path));
    // On as many ranks as wrote it, each reads its own file and continues bit for bit; on another number, the
    // particles of all files are cut anew (read_cut_anew) and decomposed afresh.
    const KeyValues first = read_checkpoint_header(path);
    const std::uint64_t ranks = first.count("ranks") ? u64_of(first, "ranks", path) : 1;
    const bool other_ranks = ranks != static_cast<std::uint64_t>(comm.size());
    if (ranks == 0 || ranks > 1'000'000) throw UsageError(fmt::format("{}: ranks={} is out of range", path, ranks));
    const std::string mine = comm.rank() == 0 ? path : fmt::format("{}.rank{}", path, comm.rank());
    Checkpoint c = other_ranks ? read_cut_anew(path, dir, ranks, comm) : read_checkpoint(mine);
    const KeyValues& kv = c.header;
    if (other_ranks && comm.rank() == 0)
        notice(
            fmt::format("run: the checkpoint in {} was written by {} rank{}; continuing on {}: the particles are "
                        "decomposed anew and their forces computed afresh (from here on not bit for bit the run on {})",
                        dir, ranks, ranks == 1 ? "" : "s", comm.size(), ranks));
    RunOptions opt = RunOptions::from_text(kv);
    opt.out = dir;
    if (t_end) opt.t_end = *t_end;
    auto run = std::unique_ptr<Run>(new Run(be, opt, std::move(hooks), outputs, comm));
    Run& r = *run;
    auto u = [&](const char* k) { return u64_of(kv, k, path); };
    auto d = [&](const char* k) { return double_of(kv, k, path); };
    SimulationState& st = c.state;
    st.step = u("step");
    st.t_begin = d("t_begin");
    // Written by one rank: its counts are the whole input's, and its fields all of them.
    const bool from_one = ranks == 1;
    if (comm.parallel()) {
        st.work = other_ranks ? 0.0 : d("work");
        r.snapshot_eps_ =
            from_one ? common_softening(c.fields, comm).value_or(opt.eps) : static_cast<float>(d("snapshot_eps"));
        // Every rank's file must be of the same step (a kill between the ranks' renames leaves a mixed set).
        std::uint64_t lo = st.step, hi = st.step;
        comm.max(std::span<std::uint64_t>(&hi, 1));
        lo = ~lo;
        comm.max(std::span<std::uint64_t>(&lo, 1));
        if (~lo != hi)
            throw UsageError(fmt::format("run: the checkpoint files in {} are of different steps ({} to {}): the run "
                                         "was killed while writing them",
                                         dir, ~lo, hi));
    } else {
        // From several ranks of generated particles, whose files hold no fields: all dark, of their softening.
        if (c.fields.size() != c.state.pos.size()) {
            const std::size_t n = c.state.pos.size();
            c.fields = Snapshot::dark(n);
            c.fields.eps.assign(n, static_cast<float>(d("snapshot_eps")));
        }
        r.snapshot_eps_ = common_softening(c.fields).value_or(opt.eps);
    }
    r.e0_ = d("e0");
    r.max_de_ = d("max_de");
    r.next_snapshot_ = u("next_snapshot");
    r.snapshots_written_ = u("snapshots_written");
    r.next_checkpoint_ = u("next_checkpoint");
    r.last_checkpoint_step_ = st.step;
    r.log_bytes_ = u("log_bytes");
    const std::size_t wg = u("work_group_size");
    // Over ranks each file holds the fields of its rank's rows (rank_rows; before it, those of no rows: the run had
    // dark-matter particles only and snapshot_eps_ gave their softening).
    auto count_of = [&](const char* k) -> std::size_t { return kv.count(k) ? u(k) : 0; };
    if (comm.parallel()) {
        r.template_ = other_ranks || kv.count("rank_rows") ? std::move(c.fields) : Snapshot{};
        r.template_.mass.clear(), r.template_.pos.clear(), r.template_.vel.clear(), r.template_.phi.clear();
        const std::size_t total = u(from_one ? "particles" : "particles_total");
        const std::size_t gas = count_of(from_one ? "n_gas" : "n_gas_total");
        const std::size_t star = count_of(from_one ? "n_star" : "n_star_total");
        if (gas + star > total)
            throw UsageError(fmt::format("{}: n_gas_total and n_star_total add up to more than the particles", path));
        r.whole_ = FileCounts{gas, total - gas - star, star};
    } else {
        r.template_ = std::move(c.fields);
        r.whole_ = FileCounts{r.template_.n_gas, r.template_.n_dark, r.template_.n_star};
    }
    r.template_.time = st.t_begin;
    r.template_.units = parse_units(opt.units, path + ": units");
    // GADGET types 2, 3, 5 of an HDF5 input (checkpoints before them: none).
    r.whole_.n_type2 = count_of("n_type2"), r.whole_.n_type3 = count_of("n_type3");
    r.whole_.n_type5 = count_of("n_type5");
    if (!comm.parallel())
        r.template_.n_type2 = r.whole_.n_type2, r.template_.n_type3 = r.whole_.n_type3,
        r.template_.n_type5 = r.whole_.n_type5;
    if (r.whole_.n_type2 + r.whole_.n_type3 + r.whole_.n_type5 > r.whole_.n_dark)
        throw UsageError(fmt::format("{}: n_type2, n_type3 and n_type5 add up to more than the dark particles", path));

    opt.check();
    check_start_time(st.t_begin, opt.dt, path);
    if (st.step > 1'000'000'000'000'000ull) throw UsageError(fmt::format("{}: step {} is out of range", path, st.step));
    if (t_end && !(*t_end > st.t_begin + static_cast<double>(st.step) * opt.dt - 0.5 * opt.dt))
        throw UsageError(fmt::format("run: --t-end {} is before the checkpoint's time {}", *t_end,
                                     st.t_begin + static_cast<double>(st.step) * opt.dt));
    if (outputs == RunOutputs::files) prepare_output_dir(dir, false);
    // Bit-for-bit continuation needs the kernels of the same work-group size (OpenCL may vary it).
    if (wg != be.work_group_size()) be.set_work_group_size(wg);
    r.end_step_ = steps_between(st.t_begin, opt.t_end, opt.dt);
    r.sim_ = std::make_unique<Simulation>(be, opt.simulation(), comm);
    r.sim_->restore(st, other_ranks);
    r.last_.step = u("last_log_step");
    r.last_.time = d("last_log_time");
    r.last_.de = d("last_de");
    r.last_.max_de = r.max_de_;
    r.last_.centre_distance = d("last_centre_distance");

    // Lines logged after the checkpoint (and a line cut by a kill) go: the steps they came from run again.
    if (outputs != RunOutputs::files) return run;
    std::uint64_t log_bytes = r.log_bytes_;
    if (comm.rank() == 0) {
        remove_stale_temporaries(dir);
        std::error_code ec;
        const auto size = fs::file_size(r.log_path(), ec);
        if (!ec && size > r.log_bytes_) fs::resize_file(r.log_path(), r.log_bytes_, ec);
        if (ec || size < r.log_bytes_) log_bytes = ec ? 0 : size; // a log removed or cut by hand: start it afresh
    }
    std::vector<std::byte> b(sizeof log_bytes);
    std::memcpy(b.data(), &log_bytes, sizeof log_bytes);
    comm.broadcast(b, 0);
    std::memcpy(&r.log_bytes_, b.data(), sizeof log_bytes);
    return run;
}

Run::Outcome Run::run(const volatile std::sig_atomic_t* stop)
{
    while (sim_->steps() < end_step_) {
        // Every rank stops at the same step (a signal may reach the ranks at different moments).
        if (comm_.any(stop && *stop)) {
            write_checkpoint();
            return Outcome::stopped;
        }
        step();
    }
    return Outcome::finished;
}

void Run::step()
{
    const auto t0 = Clock::now();
    try {
        sim_->step();
    } catch (const DeviceError&) {
        // Out of device memory when the tree outgrows its arrays (another process took the memory), or any
        // other device failure: say what survives, then let the error (which names the allocation) go on.
        notice(fmt::format("run: a device failure at step {} (t = {}); {}", sim_->steps() + 1, sim_->time() + opt_.dt,
                           kept_outputs()));
        throw;
    }
    const double t_begin = sim_->t_begin();
    const std::uint64_t s = sim_->steps();
    const double t = sim_->time();
    const bool last = s == end_step_;
    // Without files the front end asks for energies itself (record()); the time grids still advance, so that a
    // checkpoint saved from it continues its outputs where a run's would.
    if (files() && (s % opt_.log_every == 0 || last)) record();
    const bool snap = due(t_begin, next_snapshot_, opt_.snapshot_every, t, opt_.dt);
    while (due(t_begin, next_snapshot_, opt_.snapshot_every, t, opt_.dt))
        ++next_snapshot_;
    if (snap || last) write_snapshot();
    const bool ckpt = due(t_begin, next_checkpoint_, opt_.checkpoint_every, t, opt_.dt);
    while (due(t_begin, next_checkpoint_, opt_.checkpoint_every, t, opt_.dt))
        ++next_checkpoint_;
    if (ckpt || last) write_checkpoint();
    ++session_steps_;
    session_seconds_ += seconds_since(t0);
    if (hooks_.on_step) hooks_.on_step();
}

} // namespace banyan
