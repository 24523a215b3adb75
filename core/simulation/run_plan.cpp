/**
 * @file run_plan.cpp
 * @brief The input of a run: the plan, and the one check of its initial particles (run_plan.hpp).
 */
#include "core/simulation/run_plan.hpp"

#include "core/error.hpp"
#include "core/parallel/parallel_files.hpp"

#include <fmt/format.h>

namespace banyan {

namespace {

/// A run's particle count: 1 .. 2^31 - 1.
void check_count(std::size_t n, const std::string& what)
{
    if (n == 0) throw UsageError(fmt::format("{}: no particles (N = 0); at least one is needed", what));
    if (n > 0x7FFFFFFFull)
        throw UsageError(fmt::format("{}: {} particles is more than the 2^31 - 1 supported", what, n));
}

} // namespace

void check_input(const InputParticles& in, const RunOptions& o, const Comm& comm)
{
    if (in.device && comm.parallel()) throw UsageError("run: particles on the device start a run on one rank only");
    check_count(in.total, in.what);
    if (in.sized_by_n && in.total != o.n)
        throw UsageError(fmt::format("run: {} particles given for -n {}", in.total, o.n));
    if (in.device && !in.device->ids.empty() && in.device->ids.size() != in.total)
        throw UsageError(fmt::format("run: {} ids for {} particles", in.device->ids.size(), in.total));
    if (in.values) check_particle_values(*in.values, in.what, in.first);
    check_start_time(in.time, o.dt, in.what);
    if (!(o.t_end > in.time))
        throw UsageError(
            fmt::format("run: --t-end {} must be later than the start time {} of {}", o.t_end, in.time, in.what));
    if (const DeviceParticles* d = in.device)
        check_precision_range(d->extent, d->total_mass, d->min_mass, d->lightest, d->n, o.eps, in.what);
    else if (in.over_ranks)
        check_precision_range(in.pos_mass, in.first, in.total, o.eps, in.what, comm);
    else
        check_precision_range(in.pos_mass, o.eps, in.what);
}

namespace {

/// The input file's particles of this rank: over several ranks each reads only its rows [r N / P, (r + 1) N / P)
/// (tipsy from their offset, HDF5 by hyperslabs; the first decomposition moves them where they belong), on one
/// rank the whole file (@p whole: the file's counts, over ranks); with eps_from_file the softening they carry becomes
/// the run's.
Snapshot read_input(RunRequest& request, FileCounts& whole, std::optional<std::size_t>& first_row, const Comm& comm)
{
    RunOptions& o = request.options;
    SnapshotMeta meta;
    Snapshot input;
    if (comm.parallel()) {
        read_snapshot(o.in, nullptr, true, nullptr, Rows{0, 0}, &whole);
        const std::size_t n = whole.size();
        check_count(n, o.in); // before any rows are read
        const std::size_t P = static_cast<std::size_t>(comm.size()), r = static_cast<std::size_t>(comm.rank());
        first_row = r * n / P;
        input = read_snapshot(o.in, &meta, true, nullptr, Rows{r * n / P, (r + 1) * n / P - r * n / P});
        // A rank whose rows hold no collisionless type says yes.
        meta.has_softening = !comm.any(!meta.has_softening);
    } else {
        input = initial_conditions(o, &meta);
    }
    if (request.eps_from_file) {
        check_softenings(input, o.in, first_row.value_or(0));
        o.eps = softening_from_file(meta, o.in, "run", common_softening(input, comm));
        o.check(request.style); // the file's softening, judged as a given one would be
    }
    return input;
}

} // namespace

RunPlan plan_run(RunRequest request, const Comm& comm)
{
    RunOptions& o = request.options;
    o.check(request.style);
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
        plan.input_ = read_input(request, plan.whole_, first_row, comm);
    }
    if (plan.input_) {
        const Snapshot& ic = *plan.input_;
        if (!first_row) plan.whole_ = FileCounts{ic.n_gas, ic.n_dark, ic.n_star, ic.n_type2, ic.n_type3, ic.n_type5};
        adopt_units(o, ic);
        plan.particles_ = to_particles(ic); // the one conversion of the input into the device's layout
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
