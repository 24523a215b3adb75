/**
 * @file run_checkpoints.cpp
 * @brief A run's checkpoints (run.hpp): writing them, their text block, and continuing a run from one, on as many
 *        ranks as wrote it (bit for bit) or on another number (the particles of all files cut anew).
 */
#include "core/simulation/run.hpp"

#include "core/device/devices.hpp"
#include "core/error.hpp"
#include "core/files/atomic_file.hpp"
#include "core/parallel/input.hpp"
#include "core/parallel/parallel_files.hpp"
#include "core/simulation/checkpoint.hpp"
#include "core/version.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>

namespace banyan {

namespace fs = std::filesystem;

namespace {

/// For the tests of kills (tests/parallel/mpi/checkpoint_kills.sh): whether BANYAN_TEST_CRASH_AT is "RANK:POINT:STEP"
/// for this rank of @p comm at @p point of the checkpoint write of step @p step.
bool crash_due(const Comm& comm, const char* point, std::uint64_t step)
{
    static const char* const at = std::getenv("BANYAN_TEST_CRASH_AT");
    return at && fmt::format("{}:{}:{}", comm.rank(), point, step) == at;
}

/// Kills this process there (SIGKILL: nothing is flushed, removed or said), as a kill from outside would.
void crash_at(const Comm& comm, const char* point, std::uint64_t step)
{
    if (crash_due(comm, point, step)) std::raise(SIGKILL);
}

/// What makes the files of a checkpoint set one run's: its options (but the end time, which a restart may move), the
/// version that wrote it, its start time and energy at the start (a fingerprint of its initial particles and of the
/// forces of the build that ran it, the same bits on every rank), and its ranks and particles. A rank file of
/// another run or build differs here; one of the same run holds the same state at the same step.
std::string run_identity(const KeyValues& kv, const std::string& path)
{
    RunOptions o = RunOptions::from_text(kv);
    o.t_end = 0;
    std::string id = o.to_text();
    for (const char* key : {"banyan_version", "t_begin", "e0", "ranks", "particles_total"})
        id += fmt::format("{}={}\n", key, kv.count(key) ? value_of(kv, key, path) : std::string());
    return id;
}

/// The refusal of a set of checkpoint files in @p dir whose file @p odd is of another run than @p path's.
UsageError other_run(const std::string& odd, const std::string& path, const std::string& dir)
{
    return UsageError(fmt::format("run: {} and {} are of different runs (their options, banyan version or energy at "
                                  "the start differ): a rank file of another run or build is among the checkpoint "
                                  "files in {}",
                                  odd, path, dir));
}

/// Every rank's file of a checkpoint set in @p slot that as many ranks continue as wrote it (@p mine this rank's,
/// @p path rank 0's) is of rank 0's run, and its rank's: refused at once, naming the first that is not, rather than
/// read until its particles' ids collide with the others'. Collective.
void check_rank_files(const std::string& path, const std::string& mine, const std::string& slot, const std::string& dir,
                      const Comm& comm)
{
    const KeyValues kv = read_checkpoint_header(mine);
    std::uint8_t odd = 0; // 1: not the file of this rank, 2: of another run
    if ((kv.count("rank") ? u64_of(kv, "rank", mine) : 0) != static_cast<std::uint64_t>(comm.rank()) ||
        checkpoint_slot(kv, mine) != slot)
        odd = 1;
    else if (run_identity(kv, mine) != run_identity(read_checkpoint_header(path), path))
        odd = 2;
    const auto all = all_gather<std::uint8_t>(comm, std::span<const std::uint8_t>(&odd, 1));
    for (std::size_t k = 0; k < all.size(); ++k) {
        const std::string name = checkpoint_rank_file(path, k, slot);
        if (all[k] == 1)
            throw UsageError(fmt::format("{}: not the checkpoint of rank {} of the {} ranks that wrote {}", name, k,
                                         all.size(), path));
        if (all[k] == 2) throw other_run(name, path, dir);
    }
}

/// The checkpoint set of a run over @p P ranks in @p slot (files @p path, path.rank1.SLOT, ...) cut anew for the ranks
/// of @p comm: this rank takes the rows [r T / P', (r + 1) T / P') of the particles of all files taken in rank
/// order (T in all, P' = comm.size()), and the same rows of the input's fields (file k holds those of the input's
/// rows [k T / P, (k + 1) T / P); over ranks none for generated particles, whose softening is snapshot_eps). Every
/// file must be of that run and step; only the files that hold rows of this rank are read. The header is file 0's;
/// no fields (Snapshot{}) where the files hold none.
Checkpoint read_cut_anew(const std::string& path, const std::string& dir, std::uint64_t P, const std::string& slot,
                         const Comm& comm)
{
    std::vector<std::string> names(P);
    std::vector<std::size_t> n(P), nf(P);
    KeyValues head;
    std::string identity;
    for (std::uint64_t k = 0; k < P; ++k) {
        names[k] = checkpoint_rank_file(path, k, slot);
        if (!fs::exists(names[k]))
            throw UsageError(
                fmt::format("run: the checkpoint in {} was written by {} ranks, but {} is missing", dir, P, names[k]));
        const KeyValues kv = read_checkpoint_header(names[k]);
        auto u = [&](const char* key) { return u64_of(kv, key, names[k]); };
        if ((kv.count("ranks") ? u("ranks") : 1) != P || (kv.count("rank") ? u("rank") : 0) != k ||
            checkpoint_slot(kv, names[k]) != slot)
            throw UsageError(
                fmt::format("{}: not the checkpoint of rank {} of the {} ranks that wrote {}", names[k], k, P, path));
        if (k == 0) head = kv, identity = run_identity(kv, path);
        if (run_identity(kv, names[k]) != identity) throw other_run(names[k], path, dir);
        // The step, between substeps the tick, and off the grid the time.
        auto at = [](const KeyValues& h, const std::string& name) {
            const std::uint64_t tick = h.count("tick") ? u64_of(h, "tick", name) : 0;
            return fmt::format("{}{}{}", u64_of(h, "step", name), tick ? fmt::format(" tick {}", tick) : "",
                               h.count("at") ? " at t = " + value_of(h, "at", name) : "");
        };
        if (at(kv, names[k]) != at(head, path))
            throw UsageError(fmt::format("run: the checkpoint files in {} are of different steps ({} and {}): the run "
                                         "was killed while writing them",
                                         dir, at(head, path), at(kv, names[k])));
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

/// The box "lo.x,lo.y,lo.z,hi.x,hi.y,hi.z" of a checkpoint's frame line (floats in shortest round-trip form).
std::array<bn_f4, 2> frame_of(const std::string& text, const std::string& path)
{
    float v[6];
    std::size_t at = 0;
    for (int k = 0; k < 6; ++k) {
        const std::size_t comma = k < 5 ? text.find(',', at) : text.size();
        const std::string item = comma == std::string::npos ? std::string() : text.substr(at, comma - at);
        char* end = nullptr;
        v[k] = item.empty() ? NAN : std::strtof(item.c_str(), &end);
        if (item.empty() || end != item.c_str() + item.size() || !std::isfinite(v[k]))
            throw UsageError(fmt::format("{}: frame={} is not six finite numbers", path, text));
        at = comma + 1;
    }
    if (!(v[0] <= v[3] && v[1] <= v[4] && v[2] <= v[5]))
        throw UsageError(fmt::format("{}: frame={} is not a box (low corner, then high)", path, text));
    return {bn_f4{v[0], v[1], v[2], 0.0f}, bn_f4{v[3], v[4], v[5], 0.0f}};
}

/// A set of a release before slots (rank R's file checkpoint.bin.rankR, renamed into place one by one) that a kill
/// between the ranks' renames left of two steps: where every file that lags has its whole successor (the newest
/// step, of its rank of the same run, checksum intact) still under its temporary name "<file>.tmp.<pid>", the
/// commit the kill cut short is finished (renamed into place). Otherwise nothing changes, and the set is refused as
/// one of different steps. Rank 0 of @p comm does it; collective.
void finish_old_commit(const std::string& path, const std::string& dir, const KeyValues& first, const Comm& comm)
{
    const std::uint64_t P = first.count("ranks") ? u64_of(first, "ranks", path) : 1;
    if (first.count("slot") || P < 2 || P > 1'000'000) return;
    if (comm.rank() == 0) {
        std::vector<std::string> names(P);
        std::vector<std::uint64_t> steps(P);
        for (std::uint64_t k = 0; k < P; ++k) {
            names[k] = checkpoint_rank_file(path, k, {});
            try {
                steps[k] = u64_of(read_checkpoint_header(names[k]), "step", names[k]);
            } catch (const UsageError&) {
                steps.clear(); // a file missing or foreign: refused as such later
                break;
            }
        }
        const std::uint64_t newest = steps.empty() ? 0 : *std::max_element(steps.begin(), steps.end());
        // The whole file of rank k, step newest, under a temporary name beside its place.
        auto successor = [&](std::uint64_t k) -> std::string {
            const std::string prefix = fs::path(names[k]).filename().string() + ".tmp.";
            std::error_code ec;
            for (const auto& e : fs::directory_iterator(dir, ec)) {
                const std::string name = e.path().filename().string();
                if (name.rfind(prefix, 0) != 0) continue;
                try {
                    const std::string tmp = e.path().string();
                    const KeyValues kv = read_checkpoint_header(tmp);
                    auto u = [&](const char* key) { return kv.count(key) ? u64_of(kv, key, tmp) : 0; };
                    if (u("step") != newest || u("ranks") != P || u("rank") != k || kv.count("slot") ||
                        run_identity(kv, tmp) != run_identity(first, path))
                        continue;
                    read_checkpoint(tmp, CheckpointRows{{0, 0}, {0, 0}}); // its checksum: the whole file read
                    return tmp;
                } catch (const UsageError&) {
                }
            }
            return {};
        };
        std::vector<std::pair<std::string, std::string>> renames;
        for (std::uint64_t k = 0; k < steps.size(); ++k) {
            if (steps[k] == newest) continue;
            const std::string tmp = successor(k);
            if (tmp.empty()) {
                renames.clear();
                break;
            }
            renames.emplace_back(tmp, names[k]);
        }
        for (const auto& [tmp, name] : renames)
            rename_durably(tmp, name);
        if (!renames.empty())
            notice(fmt::format("run: the checkpoint files in {} were of different steps (a kill between their "
                               "renames); the {} whole file{} of step {} left under temporary names now complete the "
                               "set of step {}",
                               dir, renames.size(), renames.size() == 1 ? "" : "s", newest, newest));
    }
    comm.barrier();
}

} // namespace

std::string Run::checkpoint_text_now(const SimulationState& st, const std::string& slot) const
{
    // Over several ranks each writes its own file of the set in @p slot (rank 0: checkpoint.bin, rank r:
    // checkpoint.bin.rankR.SLOT); a restart checks that all are of one step.
    std::string ranks = comm_.parallel()
                            ? fmt::format("ranks={}\nrank={}\nslot={}\nwork={}\nparticles_total={}\nsnapshot_eps={}\n"
                                          "n_gas_total={}\nn_star_total={}\nrank_rows=1\n",
                                          comm_.size(), comm_.rank(), slot, st.work, sim_->total_size(), snapshot_eps_,
                                          whole_.n_gas, whole_.n_star)
                            : std::string();
    if (st.frame) { // between substeps over ranks: the box the trees are built in until the step's end
        const auto& [lo, hi] = *st.frame;
        ranks += fmt::format("frame={},{},{},{},{},{}\n", lo.x, lo.y, lo.z, hi.x, hi.y, hi.z);
    }
    const RunProgress progress{e0_, max_de_, next_snapshot_, snapshots_written_, next_checkpoint_, log_bytes_, last_};
    return checkpoint_text(opt_, st, progress, be_, whole_) + ranks;
}

void Run::write_checkpoint()
{
    if (opt_.checkpoint_every == RunOptions::never) return;
    // The new set goes to the slot that the set on disk does not use, which stays whole until the new one is.
    const std::string slot = checkpoint_slot_ == "a" ? "b" : "a";
    const std::optional<std::string> path = outputs_->checkpoint_path(comm_, slot);
    if (!path) return;
    const auto t0 = std::chrono::steady_clock::now();
    const SimulationState st = sim_->save();
    check_state(st.pos, st.vel, st.acc, st.ids);
    const std::string text = checkpoint_text_now(st, slot);
    // Each rank writes its file (the fields of its rows: rank_rows=1) through a temporary name. Rank 0's names the
    // set and keeps its temporary name until every rank's file is whole on disk; its rename then replaces the whole
    // set at once. A kill at any moment leaves one whole set that checkpoint.bin names: the previous or the new.
    const std::string file = comm_.rank() == 0 ? temporary_path(*path, "set") : *path;
    comm_.barrier();
    crash_at(comm_, "start", st.step);
    if (crash_due(comm_, "torn", st.step)) {
        // What a kill in the middle of this rank's write leaves: half of its temporary file.
        const std::string tmp = fmt::format("{}.tmp.torn", file);
        banyan::write_checkpoint(tmp, text, st, template_);
        fs::resize_file(tmp, fs::file_size(tmp) / 2);
        std::raise(SIGKILL);
    }
    banyan::write_checkpoint(file, text, st, template_);
    crash_at(comm_, "written", st.step);
    comm_.barrier();
    crash_at(comm_, "all_written", st.step);
    if (comm_.rank() == 0) {
        try {
            rename_durably(file, *path);
        } catch (...) {
            std::remove(file.c_str());
            throw;
        }
    }
    crash_at(comm_, "committed", st.step);
    outputs_->keep_checkpoint_set(comm_, static_cast<std::uint64_t>(comm_.size()), slot);
    crash_at(comm_, "cleaned", st.step);
    comm_.barrier(); // on every rank the new set is the checkpoint from here on
    checkpoint_slot_ = slot;
    last_checkpoint_ = {st.step, sim_->time()};
    output_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (hooks_.on_file) hooks_.on_file(*path);
}

void Run::save(const std::string& path)
{
    if (comm_.parallel()) throw UsageError("run: save(path) is for runs on one rank");
    const SimulationState st = sim_->save();
    check_state(st.pos, st.vel, st.acc, st.ids);
    banyan::write_checkpoint(path, checkpoint_text_now(st, {}), st, template_);
}

std::string checkpoint_text(const RunOptions& options, const SimulationState& state, const RunProgress& progress,
                            const Backend& be, const FileCounts& types)
{
    const RunProgress& p = progress;
    // Off the grid (a step cut short at an output or end time), where; the end of a cut part paused between
    // substeps; the length of step block rungs were chosen for, where it is not dt. Absent on the grid.
    std::string off_grid;
    if (state.at) off_grid += fmt::format("at={}\n", *state.at);
    if (state.until) off_grid += fmt::format("until={}\n", *state.until);
    if (state.rung_span > 0) off_grid += fmt::format("rung_span={}\n", state.rung_span);
    return options.to_text() + off_grid +
           fmt::format("banyan_version={}\nstep={}\nt_begin={}\ne0={}\nmax_de={}\nnext_snapshot={}\n"
                       "snapshots_written={}\nnext_checkpoint={}\nlog_bytes={}\nwork_group_size={}\ndevice={}\n"
                       "last_log_step={}\nlast_log_time={}\nlast_de={}\nlast_centre_distance={}\n"
                       "n_type2={}\nn_type3={}\nn_type5={}\ntick={}\n",
                       version, state.step, state.t_begin, p.e0, p.max_de, p.next_snapshot, p.snapshots_written,
                       p.next_checkpoint, p.log_bytes, be.work_group_size(), device_label(be.info()), p.last.step,
                       p.last.time, p.last.de, p.last.centre_distance, types.n_type2, types.n_type3, types.n_type5,
                       state.tick);
}

std::string checkpoint_device(const std::string& dir)
{
    const std::string path = (fs::path(dir) / "checkpoint.bin").string();
    return value_of(read_checkpoint_header(path), "device", path);
}

void Run::restore_bookkeeping(Checkpoint& c, std::uint64_t ranks, bool other_ranks, const std::string& path,
                              const std::string& dir)
{
    const KeyValues& kv = c.header;
    auto u = [&](const char* k) { return u64_of(kv, k, path); };
    auto d = [&](const char* k) { return double_of(kv, k, path); };
    SimulationState& st = c.state;
    // Written by one rank: its counts are the whole input's, and its fields all of them.
    const bool from_one = ranks == 1;
    if (comm_.parallel()) {
        st.work = other_ranks ? 0.0 : d("work");
        snapshot_eps_ =
            from_one ? common_softening(c.fields, comm_).value_or(opt_.eps) : static_cast<float>(d("snapshot_eps"));
        // Every rank's file must be of the same step, tick and time off the grid (releases before slots renamed the
        // ranks' files one by one, and a kill between the renames left a mixed set).
        const std::uint64_t at = st.at ? std::bit_cast<std::uint64_t>(*st.at) : 0;
        std::uint64_t lo[3] = {~st.step, ~st.tick, ~at}, hi[3] = {st.step, st.tick, at};
        comm_.max(std::span<std::uint64_t>(hi));
        comm_.max(std::span<std::uint64_t>(lo));
        if (~lo[0] != hi[0] || ~lo[1] != hi[1] || ~lo[2] != hi[2])
            throw UsageError(fmt::format("run: the checkpoint files in {} are of different steps ({} to {}{}): the "
                                         "run was killed while writing them",
                                         dir, ~lo[0], hi[0],
                                         ~lo[0] == hi[0] ? fmt::format(", ticks {} to {}", ~lo[1], hi[1]) : ""));
    } else {
        // From several ranks of generated particles, whose files hold no fields: all dark, of their softening.
        if (c.fields.size() != c.state.pos.size()) {
            const std::size_t n = c.state.pos.size();
            c.fields = Snapshot::dark(n);
            c.fields.eps.assign(n, static_cast<float>(d("snapshot_eps")));
        }
        snapshot_eps_ = common_softening(c.fields).value_or(opt_.eps);
    }
    e0_ = d("e0");
    max_de_ = d("max_de");
    next_snapshot_ = u("next_snapshot");
    snapshots_written_ = u("snapshots_written");
    next_checkpoint_ = u("next_checkpoint");
    last_checkpoint_ = {st.step, st.at.value_or(st.t_begin + static_cast<double>(st.step) * opt_.dt)};
    log_bytes_ = u("log_bytes");
    // Over ranks each file holds the fields of its rank's rows (rank_rows; before it, those of no rows: the run had
    // dark-matter particles only and snapshot_eps_ gave their softening).
    auto count_of = [&](const char* k) -> std::size_t { return kv.count(k) ? u(k) : 0; };
    if (comm_.parallel()) {
        template_ = other_ranks || kv.count("rank_rows") ? std::move(c.fields) : Snapshot{};
        template_.mass.clear(), template_.pos.clear(), template_.vel.clear(), template_.phi.clear();
        const std::size_t total = u(from_one ? "particles" : "particles_total");
        const std::size_t gas = count_of(from_one ? "n_gas" : "n_gas_total");
        const std::size_t star = count_of(from_one ? "n_star" : "n_star_total");
        if (gas + star > total)
            throw UsageError(fmt::format("{}: n_gas_total and n_star_total add up to more than the particles", path));
        whole_ = FileCounts{gas, total - gas - star, star};
    } else {
        template_ = std::move(c.fields);
        whole_ = FileCounts{template_.n_gas, template_.n_dark, template_.n_star};
    }
    template_.time = st.t_begin;
    template_.units = parse_units(opt_.units, path + ": units");
    // GADGET types 2, 3, 5 of an HDF5 input (checkpoints before them: none).
    whole_.n_type2 = count_of("n_type2"), whole_.n_type3 = count_of("n_type3");
    whole_.n_type5 = count_of("n_type5");
    if (!comm_.parallel())
        template_.n_type2 = whole_.n_type2, template_.n_type3 = whole_.n_type3, template_.n_type5 = whole_.n_type5;
    if (whole_.n_type2 + whole_.n_type3 + whole_.n_type5 > whole_.n_dark)
        throw UsageError(fmt::format("{}: n_type2, n_type3 and n_type5 add up to more than the dark particles", path));
}

std::unique_ptr<Run> Run::resume(Backend& be, const std::string& where, std::optional<double> t_end, RunHooks hooks,
                                 std::shared_ptr<RunOutputs> outputs, const Comm& comm)
{
    // A run folder (its checkpoint.bin), or with outputs given (Simulation's, none) also a checkpoint file of any
    // name (Simulation.save).
    const bool folder = !outputs || fs::is_directory(where);
    const std::string parent = fs::path(where).parent_path().string();
    const std::string dir = folder ? where : parent.empty() ? std::string(".") : parent;
    const std::string path = folder ? (fs::path(where) / "checkpoint.bin").string() : where;
    if (folder && !fs::exists(path))
        throw UsageError(fmt::format("run: no checkpoint to continue from in {} ({} is missing)", dir, path));
    // On as many ranks as wrote it, each reads its own file and continues bit for bit; on another number, the
    // particles of all files are cut anew (read_cut_anew) and decomposed afresh.
    KeyValues first = read_checkpoint_header(path);
    if (folder) {
        finish_old_commit(path, dir, first, comm);
        first = read_checkpoint_header(path); // rank 0's file may be another now
    }
    const std::uint64_t ranks = first.count("ranks") ? u64_of(first, "ranks", path) : 1;
    const bool other_ranks = ranks != static_cast<std::uint64_t>(comm.size());
    if (ranks == 0 || ranks > 1'000'000) throw UsageError(fmt::format("{}: ranks={} is out of range", path, ranks));
    // The set checkpoint.bin names: its ranks' files in its slot.
    const std::string slot = checkpoint_slot(first, path);
    const std::string mine = checkpoint_rank_file(path, static_cast<std::uint64_t>(comm.rank()), slot);
    if (!other_ranks && comm.parallel()) check_rank_files(path, mine, slot, dir, comm);
    Checkpoint c = other_ranks ? read_cut_anew(path, dir, ranks, slot, comm) : read_checkpoint(mine);
    const KeyValues& kv = c.header;
    if (other_ranks && comm.rank() == 0)
        notice(
            fmt::format("run: the checkpoint in {} was written by {} rank{}; continuing on {}: the particles are "
                        "decomposed anew and their forces computed afresh (from here on not bit for bit the run on {})",
                        dir, ranks, ranks == 1 ? "" : "s", comm.size(), ranks));
    RunOptions opt = RunOptions::from_text(kv);
    opt.out = dir;
    if (t_end) opt.t_end = *t_end;
    if (!outputs) outputs = RunOutputs::files(dir);
    auto run = std::unique_ptr<Run>(new Run(be, opt, std::move(hooks), outputs, comm));
    Run& r = *run;
    auto u = [&](const char* k) { return u64_of(kv, k, path); };
    auto d = [&](const char* k) { return double_of(kv, k, path); };
    SimulationState& st = c.state;
    st.step = u("step");
    st.t_begin = d("t_begin");
    // Between substeps of a block step (checkpoints before them: at a step's end); over ranks, with the frame. Off
    // the grid (Simulation::restore checks that these lie inside the step).
    st.tick = kv.count("tick") ? u("tick") : 0;
    if (kv.count("frame")) st.frame = frame_of(value_of(kv, "frame", path), path);
    if (kv.count("at")) st.at = d("at");
    if (kv.count("until")) st.until = d("until");
    if (kv.count("rung_span")) st.rung_span = d("rung_span");
    r.restore_bookkeeping(c, ranks, other_ranks, path, dir);
    r.checkpoint_slot_ = slot;
    const std::size_t wg = u("work_group_size");

    opt.check();
    check_start_time(st.t_begin, opt.dt, path);
    if (st.step > 1'000'000'000'000'000ull) throw UsageError(fmt::format("{}: step {} is out of range", path, st.step));
    const double now = st.at.value_or(st.t_begin + static_cast<double>(st.step) * opt.dt);
    if (t_end && !(*t_end > now - 0.5 * opt.dt))
        throw UsageError(fmt::format("run: --t-end {} is before the checkpoint's time {}", *t_end, now));
    r.end_step_ = steps_between(st.t_begin, opt.t_end, opt.dt);
    // The step the checkpoint paused must be finished: its grid point, or the time a cut put its end at.
    const double step_end = st.until.value_or(st.t_begin + static_cast<double>(st.step + 1) * opt.dt);
    if (st.tick &&
        (st.until ? opt.t_end < step_end - time_tolerance(st.t_begin, step_end, opt.dt) : r.end_step_ <= st.step))
        throw UsageError(fmt::format("run: --t-end {} ends before the step in progress at the checkpoint, which "
                                     "ends at t = {}",
                                     opt.t_end, step_end));
    outputs->prepare(false);
    // Bit-for-bit continuation needs the kernels of the same work-group size (OpenCL may vary it).
    if (wg != be.work_group_size()) be.set_work_group_size(wg);
    r.sim_ = std::make_unique<Simulation>(be, opt.simulation(), comm);
    r.sim_->restore(st, other_ranks);
    r.last_.step = u("last_log_step");
    r.last_.time = d("last_log_time");
    r.last_.de = d("last_de");
    r.last_.max_de = r.max_de_;
    r.last_.centre_distance = d("last_centre_distance");

    // Lines logged after the checkpoint (and a line cut by a kill) go: the steps they came from run again. So do
    // the rank files of other sets (one whose write a kill cut short, one the set replaced).
    r.log_bytes_ = outputs->resume_log(r.log_bytes_, comm);
    outputs->keep_checkpoint_set(comm, ranks, slot);
    return run;
}

} // namespace banyan
