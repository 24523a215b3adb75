/**
 * @file run_plan.cpp
 * @brief The input of a run: the plan, and the one check of its initial particles (run_plan.hpp).
 */
#include "core/simulation/run_plan.hpp"

#include "core/error.hpp"
#include "core/files/tipsy.hpp"
#include "core/parallel/input.hpp"

#include <fmt/format.h>

namespace banyan {

void check_input(const InputParticles& in, const RunOptions& o, const Comm& comm)
{
    if (in.device && comm.parallel()) throw UsageError("run: particles on the device start a run on one rank only");
    check_count(in.total, in.what, comm.size());
    // A run's tipsy snapshots would be refused at the first one: refused before it starts.
    if (o.format == SnapshotFormat::tipsy && o.snapshot_every != RunOptions::never)
        check_tipsy_count(in.total, fmt::format("run: {}: tipsy snapshots", in.what));
    if (in.sized_by_n && in.total != o.n)
        throw UsageError(fmt::format("run: {} particles given for -n {}", in.total, o.n));
    if (in.device && !in.device->ids.empty() && in.device->ids.size() != in.total)
        throw UsageError(fmt::format("run: {} ids for {} particles", in.device->ids.size(), in.total));
    check_start_time(in.time, o.dt, in.what);
    if (!(o.t_end > in.time))
        throw UsageError(
            fmt::format("run: --t-end {} must be later than the start time {} of {}", o.t_end, in.time, in.what));
    if (const DeviceParticles* d = in.device)
        check_precision_range(d->extent, d->total_mass, d->min_mass, d->lightest, d->n, o.eps, in.what);
    else
        check_initial_particles(in.values, in.pos_mass, in.first, in.total, o.eps, in.what, in.over_ranks, comm);
}

RunPlan plan_run(RunRequest request, const Comm& comm)
{
    RunOptions& o = request.options;
    o.check(request.style);
    adopt_model_units(o);
    // A model's count before anything of its size is made (check_input judges it again with the particles).
    if (!request.device_particles && !request.particles && o.ic != "file")
        check_count(o.n, (request.style == OptionStyle::cli ? "run: " : "") + option_name("n", request.style),
                    comm.size());
    RunPlan plan;
    std::optional<std::size_t> first_row;
    if (request.device_particles) {
        DeviceParticles& d = *request.device_particles;
        check_input({.what = "initial conditions", .time = d.time, .total = d.n, .pos_mass = {}, .device = &d}, o,
                    comm);
        const InternalUnits u = InternalUnits::for_extent_and_mass(d.extent, d.total_mass, o.eps);
        if (u.k != d.units.k || u.j != d.units.j)
            throw std::logic_error("plan_run: particles on the device in other units than their extent and mass ask");
        plan.whole_ = FileCounts{0, d.n, 0, 0, 0, 0};
        plan.device_ = std::move(d);
    } else if (request.particles) {
        plan.input_ = std::move(request.particles);
    } else if (o.ic == "file") {
        InputFile f = read_input_file(o.in, {.eps_from_file = request.eps_from_file}, comm);
        if (f.softening) {
            o.eps = *f.softening;
            o.check(request.style); // the file's softening, judged as a given one would be
        }
        plan.whole_ = f.whole;
        if (f.by_rows) first_row = f.first_row;
        plan.input_ = std::move(f.rows);
        plan.particles_ = std::move(f.particles);
    }
    if (plan.input_) {
        const Snapshot& ic = *plan.input_;
        if (request.particles) {
            plan.whole_ = FileCounts{ic.n_gas, ic.n_dark, ic.n_star, ic.n_type2, ic.n_type3, ic.n_type5};
            plan.particles_ = to_particles(ic); // the one conversion of the front end's particles
        }
        adopt_units(o, ic);
        check_input({.what = o.ic == "file" ? o.in : "initial conditions",
                     .time = ic.time,
                     .total = plan.whole_.size(),
                     .first = first_row.value_or(0),
                     .values = &ic,
                     .pos_mass = plan.particles_.pos,
                     .sized_by_n = o.ic != "file",
                     .over_ranks = first_row.has_value()},
                    o, comm);
        plan.first_row_ = first_row;
    }
    plan.outputs_ = request.outputs ? std::move(request.outputs) : RunOutputs::files(o.out);
    plan.outputs_->prepare(true);
    plan.options_ = std::move(o);
    return plan;
}

} // namespace banyan
