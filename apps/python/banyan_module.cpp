/**
 * @file banyan_module.cpp
 * @brief The compiled part of the Python module (`banyan._banyan`, nanobind): devices, one force evaluation, the
 *        field at points, and a whole simulation, over core/ as the CLI uses it.
 *
 * Arrays arrive here already checked and laid out by apps/python/banyan/__init__.py (float32, C order, the shapes
 * below, in internal units for the force calls and a Simulation from CUDA arrays): NumPy arrays for every call,
 * and CuPy or PyTorch arrays on a CUDA device for gravity_device, plan_simulation_device and Simulation.state_device.
 * Results are written into arrays the caller allocated, so no array changes owner across the boundary.
 * banyan's errors become Python exceptions with the CLI's messages: UsageError (a ValueError), NumericalError (an
 * ArithmeticError), DeviceError (a RuntimeError).
 */
#include "core/device/backend_registry.hpp"
#include "core/device/devices.hpp"
#include "core/device_shared.h"
#include "core/files/png_image.hpp"
#include "core/files/key_values.hpp"
#include "core/files/snapshot_file.hpp"
#include "core/files/units.hpp"
#include "core/render/render.hpp"
#include "core/error.hpp"
#include "core/gravity/direct.hpp"
#include "core/gravity/forces.hpp"
#include "core/gravity/precision.hpp"
#include "core/simulation/checkpoint.hpp"
#include "core/simulation/run.hpp"
#include "core/simulation/run_options.hpp"
#include "core/simulation/simulation.hpp"
#include "core/tree/opening.hpp"
#include "core/version.hpp"

#include <fmt/format.h>
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/array.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/map.h>
#include <nanobind/stl/string_view.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/unique_ptr.h>
#include <nanobind/stl/vector.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <tuple>

namespace nb = nanobind;
using namespace nb::literals;

namespace banyan::python {

// Host arrays of float32 in C order: (N, 3) vectors and (N,) scalars.
using Vec3In = nb::ndarray<const float, nb::shape<-1, 3>, nb::c_contig, nb::device::cpu>;
using ScalarIn = nb::ndarray<const float, nb::ndim<1>, nb::c_contig, nb::device::cpu>;
using Vec3Out = nb::ndarray<float, nb::shape<-1, 3>, nb::c_contig, nb::device::cpu>;
using ScalarOut = nb::ndarray<float, nb::ndim<1>, nb::c_contig, nb::device::cpu>;
using IdsIn = nb::ndarray<const std::uint64_t, nb::ndim<1>, nb::c_contig, nb::device::cpu>;
using IdsOut = nb::ndarray<std::uint64_t, nb::ndim<1>, nb::c_contig, nb::device::cpu>;
using TypesOut = nb::ndarray<std::int8_t, nb::ndim<1>, nb::c_contig, nb::device::cpu>;
// The same on a CUDA device (CuPy, PyTorch), through DLPack: the data stay where they are.
using Vec3Dev = nb::ndarray<const float, nb::shape<-1, 3>, nb::c_contig, nb::device::cuda>;
using ScalarDev = nb::ndarray<const float, nb::ndim<1>, nb::c_contig, nb::device::cuda>;
using Vec3DevOut = nb::ndarray<float, nb::shape<-1, 3>, nb::c_contig, nb::device::cuda>;
using ScalarDevOut = nb::ndarray<float, nb::ndim<1>, nb::c_contig, nb::device::cuda>;

/// An opened device: what banyan.devices() lists and every call below runs on. It keeps the tree, the walk and the
/// result buffer between calls, so that repeated force evaluations reuse their device memory (it grows to the
/// largest N seen) instead of allocating it anew each time. Every Python object on it (gravity's buffers here, each
/// Simulation's run) shares its Backend, whose kernels, queue or stream and scratch serve one caller at a time:
/// every call that touches the device holds a DeviceLock on it.
struct Device {
    std::unique_ptr<Backend> backend; // first: destroyed last, after the buffers below
    Octree tree;
    TreeForces forces;
    Buffer<bn_f4> pos, acc; // direct summation's particles; results in input order
    Buffer<bn_f4> stage;    // host arrays on their way in and out, as rows: 16 bytes per particle or point
    std::mutex busy;        // held by DeviceLock: one call at a time on the backend and the buffers above

    explicit Device(std::unique_ptr<Backend> be) : backend(std::move(be)), tree(*backend), forces(*backend) {}
    std::string label() const { return device_label(backend->info()); }

    /// Forces of @p n particles in internal units (@p units; eps in them too) that @p put writes into the array it
    /// is given, (x, y, z, m) each: accelerations and potentials in input order, in internal units. The caller
    /// holds a DeviceLock until it has read them.
    Buffer<bn_f4>& evaluate(std::size_t n, const std::function<void(Buffer<bn_f4>&)>& put, const InternalUnits& units,
                            double theta, double eps, bool direct)
    {
        if (!acc || acc.size() < n) acc = backend->alloc<bn_f4>(n, "python.acc");
        if (direct) {
            if (!pos || pos.size() < n) pos = backend->alloc<bn_f4>(n, "python.pos");
            put(pos);
            if (unsoftened(static_cast<float>(eps))) check_coincident(pos.download(n), {}, "pos");
            direct_forces(*backend, pos, n, static_cast<float>(eps), acc);
        } else {
            tree.resize(n, false);
            put(tree.pos());
            tree_forces_on_device(tree, forces, units, static_cast<float>(theta), static_cast<float>(eps), acc);
        }
        return acc;
    }
};

/// The right of this thread to use @p dev: released GIL first, then the device's mutex, so that a thread waiting
/// for the device holds no GIL (the one using the device may need it next: Ctrl-C, a result); the other way round
/// on leaving, the device unlocked before the GIL is taken back. Python threads (two Simulations, a Simulation and
/// gravity(), ...) thus take turns on one device, a call or a step at a time; separate devices run in parallel.
/// Hold it only around C++ work: nothing Python, and no wait for the GIL, while it is held.
class DeviceLock {
public:
    explicit DeviceLock(Device& dev) : lock_(dev.busy) {}
    DeviceLock(const DeviceLock&) = delete;
    DeviceLock& operator=(const DeviceLock&) = delete;

private:
    nb::gil_scoped_release unlocked_; // first: released before the wait, taken back after the unlock
    std::unique_lock<std::mutex> lock_;
};

std::unique_ptr<Device> open(const std::string& backend, int index)
{
    nb::gil_scoped_release unlocked; // opening compiles or loads the OpenCL program: seconds, the first time
    return std::make_unique<Device>(open_device(DeviceRequest{backend, index}));
}

nb::list devices()
{
    nb::list out;
    for (const BackendDevices& b : discover_devices()) {
        for (const DeviceInfo& d : b.devices) {
            nb::dict e;
            e["backend"] = d.backend;
            e["index"] = d.index;
            e["name"] = d.name;
            e["vendor"] = d.vendor;
            e["version"] = d.version;
            e["gpu"] = d.gpu;
            e["memory_bytes"] = d.memory_bytes;
            e["compute_units"] = d.compute_units;
            e["label"] = device_label(d);
            out.append(e);
        }
    }
    return out;
}

/// The (backend, index) of the device that wrote the checkpoint at @p path (a file or a run folder), when that
/// device is present here; None otherwise.
nb::object checkpoint_device(const std::string& path)
{
    namespace fs = std::filesystem;
    const std::string file = fs::is_directory(path) ? (fs::path(path) / "checkpoint.bin").string() : path;
    const KeyValues kv = read_checkpoint_header(file);
    const auto it = kv.find("device");
    if (it == kv.end()) return nb::none();
    const std::optional<DeviceRequest> req = find_device(it->second);
    if (!req) return nb::none();
    return nb::make_tuple(req->backend, req->device);
}

void check_theta_eps(double theta, double eps)
{
    if (!opening_angle_ok(theta))
        throw UsageError(fmt::format("theta must be in {}, got {}", opening_angle_range, theta));
    if (!(eps >= 0.0 && std::isfinite(eps))) throw UsageError(fmt::format("eps must be >= 0 and finite, got {}", eps));
}

/// Exponents of two of internal units (precision.hpp): (k, j, acceleration, potential, velocity).
nb::tuple unit_exponents(const InternalUnits& u)
{
    return nb::make_tuple(u.k, u.j, u.acceleration_exp(), u.potential_exp(), u.velocity_exp());
}

/// The internal units of a system of this extent, total mass and softening, as unit_exponents gives them.
/// banyan/__init__.py scales by them (exactly: powers of two).
nb::tuple internal_units(double extent, double mass, double eps)
{
    return unit_exponents(InternalUnits::for_extent_and_mass(extent, mass, eps));
}

/// A CUDA array's memory (CuPy, PyTorch) as a buffer of @p be, for row copies to and from banyan's buffers.
std::unique_ptr<RawBuffer> cuda_array(Backend& be, const void* data, std::size_t bytes)
{
    return be.wrap_device_memory(const_cast<void*>(data), bytes);
}

/// The arrays of one gravity or gravity_at call: all on the host or all on the CUDA device of the backend.
struct Arrays {
    const float *pos, *mass, *points; ///< (n, 3), (n,), (q, 3): q = 0 for gravity
    std::size_t n, q;
    float *acc, *pot; ///< (q or n, 3), (q or n,)
    bool on_device;
};

/// gravity (q = 0) or gravity_at (the points join the tree as massless particles: a massless cell takes its
/// geometric centre, tree_multipoles, so they feel every particle and move nothing), in internal units (the caller
/// scaled the arrays; @p eps too). The arrays reach the device as they are, (n, 3) and (n,) rows: CUDA arrays are
/// read where they lie, host arrays uploaded in one piece each into a staging buffer; row copies interleave them
/// into the tree's particle array (no kernel, no host loop). The results leave the same way. (Staging NumPy's
/// arrays through page-locked memory gained nothing measurable on the H200: docs/benchmarks.md, "Python".)
/// Returns, for host arrays, the first result row with a NaN or infinity (out_n when none; checked here in one pass,
/// cheaper than NumPy's), and out_n for CUDA arrays (their library checks them).
std::size_t gravity_arrays(Device& dev, const Arrays& a, double theta, double eps, bool direct)
{
    check_theta_eps(theta, eps);
    Backend& be = *dev.backend;
    const std::size_t n = a.n, q = a.q, total = n + q;
    const std::size_t out_first = q ? n : 0, out_n = q ? q : n;
    if (n == 0 || out_n == 0) return out_n;
    const DeviceLock lock(dev);
    // Where the input rows are: the caller's CUDA arrays, or the staging buffer (pos, mass, points one after another).
    auto wrap = [&](const void* p, std::size_t bytes) { return cuda_array(be, p, bytes); };
    std::unique_ptr<RawBuffer> pos_in, mass_in, points_in;
    std::size_t pos_at = 0, mass_at = 0, points_at = 0;
    if (a.on_device) {
        pos_in = wrap(a.pos, 12 * n), mass_in = wrap(a.mass, 4 * n);
        if (q) points_in = wrap(a.points, 12 * q);
    } else {
        if (!dev.stage || dev.stage.size() < total) dev.stage = be.alloc<bn_f4>(total, "python.stage");
        RawBuffer& st = dev.stage.raw();
        mass_at = 12 * n, points_at = 16 * n;
        st.upload(a.pos, 12 * n, pos_at);
        st.upload(a.mass, 4 * n, mass_at);
        if (q) st.upload(a.points, 12 * q, points_at);
    }
    const RawBuffer& pos_rows = a.on_device ? *pos_in : dev.stage.raw();
    const RawBuffer& mass_rows = a.on_device ? *mass_in : dev.stage.raw();
    const RawBuffer& points_rows = a.on_device ? (q ? *points_in : pos_rows) : dev.stage.raw();
    auto put = [&](Buffer<bn_f4>& into) {
        if (q) into.fill(bn_f4{0, 0, 0, 0}); // the points' masses stay 0
        into.raw().copy_rows_from(pos_rows, n, 12, pos_at, 12, 0, 16);
        into.raw().copy_rows_from(mass_rows, n, 4, mass_at, 4, 12, 16);
        if (q) into.raw().copy_rows_from(points_rows, q, 12, points_at, 12, 16 * n, 16);
    };
    const Buffer<bn_f4>& acc = dev.evaluate(total, put, InternalUnits{}, theta, eps, direct);
    if (a.on_device) {
        wrap(a.acc, 12 * out_n)->copy_rows_from(acc.raw(), out_n, 12, 16 * out_first, 16, 0, 12);
        wrap(a.pot, 4 * out_n)->copy_rows_from(acc.raw(), out_n, 4, 16 * out_first + 12, 16, 0, 4);
        be.synchronize(); // the caller's library reads the results next, on its own stream
    } else {
        RawBuffer& st = dev.stage.raw(); // (out_n, 3) then (out_n,), downloaded straight into the caller's arrays
        st.copy_rows_from(acc.raw(), out_n, 12, 16 * out_first, 16, 0, 12);
        st.copy_rows_from(acc.raw(), out_n, 4, 16 * out_first + 12, 16, 12 * out_n, 4);
        st.download(a.acc, 12 * out_n, 0);
        st.download(a.pot, 4 * out_n, 12 * out_n);
        for (std::size_t i = 0; i < out_n; ++i)
            if (!(std::isfinite(a.acc[3 * i]) && std::isfinite(a.acc[3 * i + 1]) && std::isfinite(a.acc[3 * i + 2]) &&
                  std::isfinite(a.pot[i])))
                return i;
    }
    return out_n;
}

/// The Python-facing entry of gravity_arrays for host (NumPy) or CUDA (CuPy, PyTorch) arrays; results of the same
/// kind.
template <class V3, class S, class V3Out, class SOut, bool OnDevice>
std::size_t gravity_entry(Device& dev, const V3& pos, const S& mass, const V3& points, double theta, double eps,
                          bool direct, V3Out acc, SOut pot)
{
    const std::size_t out_n = points.shape(0) ? points.shape(0) : pos.shape(0);
    if (mass.shape(0) != pos.shape(0) || acc.shape(0) != out_n || pot.shape(0) != out_n)
        throw UsageError("gravity: array lengths disagree");
    return gravity_arrays(
        dev,
        Arrays{pos.data(), mass.data(), points.data(), pos.shape(0), points.shape(0), acc.data(), pot.data(), OnDevice},
        theta, eps, direct);
}

/// One pass over host positions and masses: (the first particle with a non-finite coordinate, the first whose mass
/// is not positive and finite (n when none), the extent, the total mass, the smallest mass and its particle). NumPy
/// takes many passes, and long ones, for the same (banyan/__init__.py uses this for NumPy arrays).
nb::tuple host_summary(const Vec3In& pos, const ScalarIn& mass)
{
    const std::size_t n = pos.shape(0);
    const float *p = pos.data(), *m = mass.data();
    std::size_t bad_pos = n, bad_mass = n, lightest = 0;
    double lo[3] = {INFINITY, INFINITY, INFINITY}, hi[3] = {-INFINITY, -INFINITY, -INFINITY}, total = 0;
    {
        nb::gil_scoped_release unlocked;
        for (std::size_t i = 0; i < n; ++i) {
            for (int c = 0; c < 3; ++c) {
                const double x = p[3 * i + c];
                if (!std::isfinite(x) && bad_pos == n) bad_pos = i;
                lo[c] = std::min(lo[c], x), hi[c] = std::max(hi[c], x);
            }
            if (!(std::isfinite(m[i]) && m[i] > 0) && bad_mass == n) bad_mass = i;
            total += m[i];
            if (m[i] < m[lightest]) lightest = i;
        }
    }
    const double extent = n ? std::max({hi[0] - lo[0], hi[1] - lo[1], hi[2] - lo[2]}) : 0.0;
    return nb::make_tuple(bad_pos, bad_mass, extent, total, n ? m[lightest] : 0.0f, lightest);
}

/// check_precision_range from the numbers banyan/__init__.py computes with the arrays' own library.
void check_precision(double extent, double total, double min_mass, std::size_t lightest, std::size_t n, double eps,
                     const std::string& what)
{
    check_precision_range(extent, total, min_mass, lightest, n, eps, what);
}

/// The request of a banyan.Simulation: its options in RunOptions, as the CLI's would be, with no output files.
RunRequest simulation_request(double theta, double eps, double dt, double time, const std::string& opening,
                              double alpha, const std::string& steps, double eta, long long max_rung,
                              const std::string& rung_rule, const std::string& units)
{
    RunRequest request;
    RunOptions& o = request.options;
    o.ic = "file";
    o.in = "(banyan.Simulation)";
    o.theta = theta, o.eps = eps, o.dt = dt;
    o.opening = opening, o.alpha = alpha;
    o.steps = steps, o.eta = eta, o.rung_rule = rung_rule;
    if (max_rung < 0) throw UsageError(fmt::format("max_rung must be >= 0, got {}", max_rung));
    o.max_rung = static_cast<std::uint64_t>(max_rung); // RunOptions::check judges the rest, naming the value given
    o.t_end = time + dt;                               // evolve() moves the end to the time it is given
    o.units = units;                                   // of the numbers given, for the snapshots; checked with the rest
    // A Simulation writes no outputs on a grid; its checkpoints carry these for `banyan run --restart`: the CLI's
    // default of one time unit, or every 64 steps where a step is longer (a dt in years, say, which the default
    // refused).
    if (dt > o.snapshot_every) o.snapshot_every = o.checkpoint_every = 64 * dt;
    request.style = OptionStyle::python;
    request.outputs = RunOutputs::none();
    return request;
}

/// The checks of banyan.Simulation, before any device is opened: the run engine's plan_run (the options, once, in
/// Python's spelling, and the particles) of a run from the caller's arrays, as `banyan run --in FILE` from a file's.
RunPlan plan_simulation(const Vec3In& pos, const Vec3In& vel, const ScalarIn& mass, double theta, double eps, double dt,
                        double time, const std::string& opening, double alpha, const std::string& steps, double eta,
                        long long max_rung, const std::string& rung_rule, std::optional<IdsIn> ids,
                        const std::string& units)
{
    RunRequest request =
        simulation_request(theta, eps, dt, time, opening, alpha, steps, eta, max_rung, rung_rule, units);
    const std::size_t n = pos.shape(0);
    Snapshot s = Snapshot::dark(n);
    s.time = time;
    std::memcpy(s.pos.data(), pos.data(), 3 * n * sizeof(float));
    std::memcpy(s.vel.data(), vel.data(), 3 * n * sizeof(float));
    std::memcpy(s.mass.data(), mass.data(), n * sizeof(float));
    std::fill(s.eps.begin(), s.eps.end(), static_cast<float>(eps));
    if (ids) s.ids.assign(ids->data(), ids->data() + n); // the caller's own ids: kept through saves and loads
    request.particles = std::move(s);
    return plan_run(std::move(request));
}

/// plan_simulation for CUDA arrays (CuPy, PyTorch) on @p dev, already checked and summarised by their library
/// (@p extent .. @p lightest, in the input's units) and scaled by it into the internal units 2^k, 2^j that
/// internal_units gives for them: the run starts from them where they lie (DeviceParticles), each array's rows
/// copied into the tree's by the device. The arrays must live until the Simulation is made of the plan (the next
/// call of banyan/__init__.py, which holds them).
RunPlan plan_simulation_device(Device& dev, const Vec3Dev& pos, const Vec3Dev& vel, const ScalarDev& mass,
                               double extent, double total, double min_mass, std::size_t lightest, int k, int j,
                               double theta, double eps, double dt, double time, const std::string& opening,
                               double alpha, const std::string& steps, double eta, long long max_rung,
                               const std::string& rung_rule, std::optional<IdsIn> ids, const std::string& units)
{
    const std::size_t n = pos.shape(0);
    if (vel.shape(0) != n || mass.shape(0) != n) throw UsageError("Simulation: array lengths disagree");
    RunRequest request =
        simulation_request(theta, eps, dt, time, opening, alpha, steps, eta, max_rung, rung_rule, units);
    DeviceParticles d;
    d.n = n, d.time = time;
    d.extent = extent, d.total_mass = total, d.min_mass = min_mass, d.lightest = lightest;
    d.units = InternalUnits{k, j};
    if (ids) d.ids.assign(ids->data(), ids->data() + n);
    Backend* be = dev.backend.get();
    const float *p = pos.data(), *v = vel.data(), *m = mass.data();
    d.put = [be, n, p, v, m](Buffer<bn_f4>& into_pos, Buffer<bn_f4>& into_vel) {
        into_pos.raw().copy_rows_from(*cuda_array(*be, p, 12 * n), n, 12, 0, 12, 0, 16);
        into_pos.raw().copy_rows_from(*cuda_array(*be, m, 4 * n), n, 4, 0, 4, 12, 16);
        into_vel.fill(bn_f4{0, 0, 0, 0}, 0, n); // w = 0 as a host start leaves it
        into_vel.raw().copy_rows_from(*cuda_array(*be, v, 12 * n), n, 12, 0, 12, 0, 16);
    };
    request.device_particles = std::move(d);
    return plan_run(std::move(request));
}

/// The GalaxySetup of the Python module's keywords (option name: its text), as the CLI makes one.
GalaxySetup galaxy_setup_of(const std::map<std::string, std::string>& options, bool merger, long long n, long long seed,
                            const std::string& units)
{
    RunOptions o;
    o.ic = merger ? "galaxy-merger" : "galaxy";
    if (n < 1) throw UsageError(fmt::format("n must be at least 1, got {}", n));
    if (seed < 0) throw UsageError(fmt::format("seed must be 0 or more, got {}", seed));
    o.n = static_cast<std::uint64_t>(n), o.seed = static_cast<std::uint64_t>(seed), o.units = units;
    auto preset = options.find("preset");
    o.galaxy = galaxy_preset(preset == options.end() ? "mw" : preset->second);
    if (merger && !options.count("bh_mass")) o.galaxy.bh_mass = 1e8; // as `banyan run --ic galaxy-merger`
    if (merger && !options.count("star_fraction")) o.galaxy.star_fraction = 1.0 / 6;
    for (const auto& [key, value] : options)
        if (key != "preset") set_galaxy_option(o.galaxy, o.orbit, key, value, key);
    o.check(OptionStyle::python);
    return galaxy_setup(o);
}

/// The particle count and the counts of GADGET types 1, 2, 3, 5 of the galaxy (or merger) that banyan.galaxy and
/// banyan.galaxy_merger ask for: the options are checked as `banyan run --ic galaxy` checks them.
std::tuple<std::uint64_t, std::uint64_t, std::uint64_t, std::uint64_t, std::uint64_t>
galaxy_counts_of(const std::map<std::string, std::string>& options, bool merger, long long n, long long seed,
                 const std::string& units)
{
    const GalaxyGenerator gen(galaxy_setup_of(options, merger, n, seed, units));
    const auto t = gen.type_counts();
    return {gen.size(), t[0], t[1], t[2], t[3]};
}

/// Fills @p pos, @p vel, @p mass (of galaxy_counts_of's size) with the galaxy's particles.
void galaxy_fill(const std::map<std::string, std::string>& options, bool merger, long long n, long long seed,
                 const std::string& units, Vec3Out pos, Vec3Out vel, ScalarOut mass)
{
    const GalaxyGenerator gen(galaxy_setup_of(options, merger, n, seed, units));
    if (pos.shape(0) != gen.size() || vel.shape(0) != gen.size() || mass.shape(0) != gen.size())
        throw UsageError("galaxy: output arrays of the wrong size");
    Particles p;
    {
        nb::gil_scoped_release unlocked;
        p = gen.make_all();
    }
    for (std::size_t i = 0; i < p.size(); ++i) {
        pos.data()[3 * i] = p.pos[i].x, pos.data()[3 * i + 1] = p.pos[i].y, pos.data()[3 * i + 2] = p.pos[i].z;
        vel.data()[3 * i] = p.vel[i].x, vel.data()[3 * i + 1] = p.vel[i].y, vel.data()[3 * i + 2] = p.vel[i].z;
        mass.data()[i] = p.pos[i].w;
    }
}

/// The GADGET type of each particle of @p f, in its order (gas, dark, stars): gas 0, dark matter 1 (2, 3 and 5 the
/// last of the dark ones, as Snapshot keeps them), stars 4. Into @p out, of f.size() entries.
void gadget_types(const Snapshot& f, std::int8_t* out)
{
    const std::size_t d0 = f.n_gas, d1 = d0 + f.n_dark;
    const std::size_t t2 = d1 - f.n_type2 - f.n_type3 - f.n_type5, t3 = t2 + f.n_type2, t5 = t3 + f.n_type3;
    for (std::size_t i = 0; i < f.size(); ++i)
        out[i] = static_cast<std::int8_t>(i < d0 ? 0 : i < t2 ? 1 : i < t3 ? 2 : i < t5 ? 3 : i < d1 ? 5 : 4);
}

/// A snapshot file read whole as `banyan run --in` reads it (HDF5 or tipsy, told by its first bytes; an HDF5 file's
/// velocities converted to G = 1 where its units ask), for banyan.read_snapshot: its size, time and units, then
/// its arrays copied into the caller's.
class SnapshotFile {
public:
    explicit SnapshotFile(const std::string& path)
    {
        nb::gil_scoped_release unlocked; // a large file takes seconds
        SnapshotMeta meta;
        s_ = read_snapshot(path, &meta, false);
        if (!s_.units.physical()) return;
        units_ = s_.units.text();
        // A run's own spelling ("kpc,1e10Msun", its Parameters/units) where it names the file's units.
        const KeyValues kv = parse_key_values(meta.parameters);
        const auto it = kv.find("units");
        if (it == kv.end()) return;
        try {
            if (same_units(parse_units(it->second), s_.units)) units_ = it->second;
        } catch (const UsageError&) {
            // not a spelling banyan takes: the units in cm and g
        }
    }
    std::size_t size() const { return s_.size(); }
    double time() const { return s_.time; }
    /// The units as `--units` and Simulation(units=) take them; empty for N-body units (tipsy, or none stated).
    const std::string& units() const { return units_; }

    void fill(Vec3Out pos, Vec3Out vel, ScalarOut mass, IdsOut ids, TypesOut types) const
    {
        const std::size_t n = s_.size();
        if (pos.shape(0) != n || vel.shape(0) != n || mass.shape(0) != n || ids.shape(0) != n || types.shape(0) != n)
            throw UsageError("read_snapshot: output arrays of the wrong size");
        std::copy(s_.pos.begin(), s_.pos.end(), pos.data());
        if (s_.vel.size() == 3 * n)
            std::copy(s_.vel.begin(), s_.vel.end(), vel.data());
        else
            std::fill(vel.data(), vel.data() + 3 * n, 0.0f); // a file without velocities
        std::copy(s_.mass.begin(), s_.mass.end(), mass.data());
        for (std::size_t i = 0; i < n; ++i)
            ids.data()[i] = s_.ids.empty() ? i : s_.ids[i]; // tipsy has no ids: the index in the file
        gadget_types(s_, types.data());
    }

private:
    Snapshot s_;
    std::string units_;
};

/// banyan.Simulation: the run engine of `banyan run` (core/simulation/run.hpp) with no output files, started from
/// the caller's arrays as `banyan run --in FILE` starts from a file's, so that the same particles give the same
/// numbers bit for bit; its checkpoints are the CLI's.
class PySimulation {
public:
    /// Starts the run of @p plan (plan_simulation) on @p dev.
    PySimulation(Device& dev, RunPlan& plan) : dev_(dev)
    {
        const DeviceLock lock(dev_);
        run_ = std::make_unique<Run>(*dev_.backend, std::move(plan));
    }

    /// Frees the run's device memory while no other call uses the device.
    ~PySimulation()
    {
        if (!run_) return;
        const DeviceLock lock(dev_);
        run_.reset();
    }
    PySimulation(const PySimulation&) = delete;
    PySimulation& operator=(const PySimulation&) = delete;

    /// Continues the checkpoint at @p path (a file, or a run folder holding checkpoint.bin) exactly.
    static std::unique_ptr<PySimulation> load(Device& dev, const std::string& path)
    {
        auto s = std::unique_ptr<PySimulation>(new PySimulation(dev));
        const DeviceLock lock(dev);
        s->run_ = Run::resume(*dev.backend, path, std::nullopt, {}, RunOutputs::none());
        // A checkpoint `banyan run` wrote between the substeps of a block step (stopped by a signal): the step is
        // finished first, so that every query reads particles synchronised at a step's end.
        if (s->run_->simulation().tick()) s->run_->step();
        return s;
    }

    /// @p n steps (each to the next point of the time grid of the start; after an evolve() that ended off it, the
    /// first goes on to it); Ctrl-C (SIGINT) raises KeyboardInterrupt between two steps. The device is held a step
    /// at a time: other threads' calls on it fall between the steps, and the signal check (which needs the GIL)
    /// runs with the device free.
    void step(std::uint64_t n)
    {
        for (std::uint64_t i = 0; i < n; ++i) {
            {
                const DeviceLock lock(dev_);
                run_->step();
            }
            if (PyErr_CheckSignals() != 0) throw nb::python_error();
        }
        const DeviceLock lock(dev_);
        run_->record(); // dE/E and its largest magnitude, at the end of each call
    }

    /// The step @p t_end lies in on the run's time grid (steps_between: refuses an end no step reaches), as
    /// log_step() counts.
    std::uint64_t step_at(double t_end)
    {
        const DeviceLock lock(dev_);
        return steps_between(run_->simulation().t_begin(), t_end, run_->options().dt);
    }

    /// Steps until @p t_end, at most @p most of them, and returns whether it is reached: to the end time exactly, as
    /// `banyan run --t-end` (the step that would pass it is cut short there, Run::step). Ctrl-C raises
    /// KeyboardInterrupt between two steps.
    bool evolve(double t_end, std::uint64_t most)
    {
        {
            const DeviceLock lock(dev_);
            // The run's end is where it cuts its step short (and what a checkpoint saved from here holds).
            if (!run_->reached(t_end)) run_->set_end(t_end);
        }
        std::uint64_t taken = 0;
        for (;; ++taken) {
            {
                const DeviceLock lock(dev_);
                if (run_->reached(t_end) || taken == most) break;
                run_->step();
            }
            if (PyErr_CheckSignals() != 0) throw nb::python_error();
        }
        const DeviceLock lock(dev_);
        if (taken) run_->record(); // dE/E and its largest magnitude, at the end of each call
        return run_->reached(t_end);
    }

    /// The step the time lies in (Run::log_step: steps(), and one more off the grid).
    std::uint64_t log_step()
    {
        const DeviceLock lock(dev_);
        return run_->log_step();
    }

    // The run's state changes during another thread's step() of this Simulation: read under the lock too.
    double time()
    {
        const DeviceLock lock(dev_);
        return run_->simulation().time();
    }
    std::uint64_t steps()
    {
        const DeviceLock lock(dev_);
        return run_->simulation().steps();
    }
    std::size_t size() const { return run_->simulation().size(); }
    double e0()
    {
        const DeviceLock lock(dev_);
        return run_->e0();
    }
    double max_de()
    {
        const DeviceLock lock(dev_);
        return run_->max_de();
    }

    /// Positions, velocities, accelerations and potentials, in input order, into the caller's arrays.
    void state(Vec3Out pos, Vec3Out vel, Vec3Out acc, ScalarOut pot)
    {
        std::vector<bn_f4> p, v, a;
        {
            const DeviceLock lock(dev_);
            if (const std::size_t lost = run_->simulation().input_order(p, v, a))
                throw NumericalError(fmt::format("Simulation: {} accelerations or potentials left float's range in "
                                                 "the units of the input",
                                                 lost));
        }
        float *xp = pos.data(), *xv = vel.data(), *xa = acc.data(), *xf = pot.data();
        for (std::size_t i = 0; i < p.size(); ++i) {
            xp[3 * i] = p[i].x, xp[3 * i + 1] = p[i].y, xp[3 * i + 2] = p[i].z;
            xv[3 * i] = v[i].x, xv[3 * i + 1] = v[i].y, xv[3 * i + 2] = v[i].z;
            xa[3 * i] = a[i].x, xa[3 * i + 1] = a[i].y, xa[3 * i + 2] = a[i].z, xf[i] = a[i].w;
        }
    }

    /// The same into CUDA arrays on the run's device (CuPy, PyTorch), in the internal units that units() gives:
    /// the device writes each row where it belongs, nothing goes through the host.
    void state_device(Vec3DevOut pos, Vec3DevOut vel, Vec3DevOut acc, ScalarDevOut pot)
    {
        const std::size_t n = run_->simulation().size();
        if (pos.shape(0) != n || vel.shape(0) != n || acc.shape(0) != n || pot.shape(0) != n)
            throw UsageError("Simulation: output arrays of the wrong size");
        const DeviceLock lock(dev_);
        Backend& be = *dev_.backend;
        auto to_pos = cuda_array(be, pos.data(), 12 * n), to_vel = cuda_array(be, vel.data(), 12 * n);
        auto to_acc = cuda_array(be, acc.data(), 12 * n), to_pot = cuda_array(be, pot.data(), 4 * n);
        run_->simulation().for_input_order([&](std::size_t first, std::size_t m, const Buffer<bn_f4>& p,
                                               const Buffer<bn_f4>& v, const Buffer<bn_f4>& a) {
            to_pos->copy_rows_from(p.raw(), m, 12, 0, 16, 12 * first, 12);
            to_vel->copy_rows_from(v.raw(), m, 12, 0, 16, 12 * first, 12);
            to_acc->copy_rows_from(a.raw(), m, 12, 0, 16, 12 * first, 12);
            to_pot->copy_rows_from(a.raw(), m, 4, 12, 16, 4 * first, 4);
        });
        be.synchronize(); // the caller's library reads them next, on its own stream
    }

    /// The internal units of the run, as internal_units gives them.
    nb::tuple units() const { return unit_exponents(run_->simulation().units()); }

    /// Each particle's id in input order: the input's own, or 0 .. N-1.
    void ids(IdsOut out) const
    {
        const std::vector<std::uint64_t>& own = run_->fields().ids;
        for (std::size_t i = 0; i < out.shape(0); ++i)
            out.data()[i] = own.empty() ? i : own[i];
    }

    /// Each particle's GADGET type in input order: gas 0, dark matter 1 (2, 3 and 5 among its last), stars 4.
    void types(TypesOut out) const
    {
        if (out.shape(0) != run_->simulation().size()) throw UsageError("Simulation: output array of the wrong size");
        gadget_types(run_->fields(), out.data());
    }

    /// Each particle's mass in input order, in the input's units: the float32 masses the run holds (on the device,
    /// beside the positions), so that a Simulation loaded from a checkpoint has them too.
    void masses(ScalarOut out)
    {
        if (out.shape(0) != run_->simulation().size()) throw UsageError("Simulation: output array of the wrong size");
        std::vector<bn_f4> p, v, a;
        {
            const DeviceLock lock(dev_);
            (void)run_->simulation().input_order(p, v, a); // the masses never leave float's range: they came in it
        }
        for (std::size_t i = 0; i < p.size(); ++i)
            out.data()[i] = p[i].w;
    }

    nb::dict energies()
    {
        Energies e;
        std::uint64_t at_step = 0;
        double at_time = 0;
        {
            const DeviceLock lock(dev_);
            e = run_->simulation().energies();
            at_step = run_->simulation().steps(), at_time = run_->simulation().time();
        }
        if (!all_finite(e))
            throw NumericalError(
                fmt::format("Simulation: the energies went non-finite at step {} (t = {})", at_step, at_time));
        nb::dict d;
        d["kinetic"] = e.kinetic;
        d["potential"] = e.potential;
        d["total"] = e.total();
        d["momentum"] = nb::make_tuple(e.momentum[0], e.momentum[1], e.momentum[2]);
        d["angular_momentum"] = nb::make_tuple(e.angular_momentum[0], e.angular_momentum[1], e.angular_momentum[2]);
        return d;
    }

    /// Writes the CLI's checkpoint (core/simulation/checkpoint.hpp): `banyan run --restart` continues a folder
    /// holding it as checkpoint.bin, and load() continues it here.
    /// A snapshot of the particles now, as `banyan run` writes them (with the run's units and parameters).
    void write_snapshot(const std::string& path, const std::string& format)
    {
        const SnapshotFormat f = parse_snapshot_format(format, "format");
        const DeviceLock lock(dev_);
        run_->write_snapshot(path, f);
    }

    /// The projected surface density of the particles now (of @p types: "" for all) as a PNG, as `banyan render`
    /// draws a snapshot; @p centre_kind "mass" or "density" unless @p centre is given.
    void render(const std::string& path, const std::string& axis, int size, const std::string& centre_kind,
                std::optional<std::array<double, 3>> centre, std::optional<double> extent, double range,
                std::optional<double> vmin, std::optional<double> vmax, bool annotate, const std::string& types)
    {
        RenderOptions ro;
        ro.axis = parse_axis(axis);
        ro.size = size;
        if (centre_kind != "mass" && centre_kind != "density")
            throw UsageError(
                fmt::format("render: centre must be \"mass\", \"density\" or a point, got {}", centre_kind));
        ro.centre_kind = centre_kind == "mass" ? CentreKind::mass : CentreKind::density;
        ro.centre = centre, ro.extent = extent, ro.range = range, ro.vmin = vmin, ro.vmax = vmax;
        ro.annotate = annotate;
        check_render_options(ro);
        const std::vector<int> only = types.empty() ? std::vector<int>{} : parse_particle_types(types);
        if (!only.empty()) ro.selection = describe_particle_types(only);
        check_output_path(path);
        const DeviceLock lock(dev_);
        const Snapshot& now = run_->snapshot(false);
        write_png(path, render_surface_density(only.empty() ? now : select_particle_types(now, only), ro));
    }

    void save(const std::string& path)
    {
        const DeviceLock lock(dev_);
        // An end the CLI accepts (it must lie ahead of the checkpoint): the end of the step under way, a point of the
        // grid of dt, so that neither this simulation nor a restart cuts a step short for it.
        const double ahead = run_->simulation().step_end();
        if (!(run_->options().t_end >= ahead)) run_->set_end(ahead);
        run_->save(path);
    }

    std::string device() const { return dev_.label(); }
    double theta() const { return run_->options().theta; }
    const std::string& opening() const { return run_->options().opening; }
    double alpha() const { return run_->options().alpha; }
    double eps() const { return run_->options().eps; }
    double dt() const { return run_->options().dt; }
    /// The run's physical units as given (units=, `--units`, or those of the file a loaded run started from); empty
    /// for N-body units.
    const std::string& units_text() const { return run_->options().units; }
    const std::string& steps_kind() const { return run_->options().steps; }
    double eta() const { return run_->options().eta; }
    std::uint64_t max_rung() const { return run_->options().max_rung; }
    const std::string& rung_rule() const { return run_->options().rung_rule; }
    /// Block time steps: {"rungs": particles per rung (to the deepest allowed), "deepest": the deepest rung used,
    /// "substeps", "active_updates", "steps", "saving": shared_step_ratio}.
    nb::dict block_stats()
    {
        BlockStats b;
        {
            const DeviceLock lock(dev_);
            b = run_->simulation().block_stats();
        }
        nb::dict d;
        nb::list rungs;
        for (unsigned k = 0; k <= run_->options().max_rung; ++k)
            rungs.append(b.rungs[k]);
        d["rungs"] = rungs;
        d["deepest"] = b.deepest;
        d["substeps"] = b.substeps;
        d["active_updates"] = b.active_updates;
        d["steps"] = b.steps;
        d["saving"] = shared_step_ratio(b);
        return d;
    }

private:
    explicit PySimulation(Device& dev) : dev_(dev) {}

    Device& dev_;
    std::unique_ptr<Run> run_;
};

} // namespace banyan::python

NB_MODULE(_banyan, m)
{
    using namespace banyan;
    using namespace banyan::python;
    m.doc() = "banyan's compiled core; use the functions of the banyan package, which check and lay out arrays";
    m.attr("__version__") = banyan::version;
    // The lists a front end must not copy, each from core's one list and in its order: the opening criteria
    // (tree/opening.hpp), the snapshot formats (files/snapshot_file.hpp), the backends this build knows
    // (device/backend_registry.hpp).
    auto names = [](const auto& list, auto name_of) {
        nb::list out;
        for (const auto& x : list)
            out.append(std::string(name_of(x)));
        return nb::tuple(out);
    };
    m.attr("opening_criteria") = names(opening_criteria, [](const OpeningName& c) { return c.name; });
    m.attr("snapshot_formats") = names(snapshot_formats(), [](const SnapshotFormatInfo& f) { return f.name; });
    m.attr("backends") = names(backend_registry().entries(), [](const BackendEntry& b) { return b.name; });
    m.attr("max_rung_limit") = BANYAN_MAX_RUNG;  // the deepest rung (block steps), for max_rung's check
    m.attr("max_render_size") = max_render_size; // the largest image side, for render's size
    nb::exception<UsageError>(m, "UsageError", PyExc_ValueError);
    nb::exception<NumericalError>(m, "NumericalError", PyExc_ArithmeticError);
    nb::exception<DeviceError>(m, "DeviceError", PyExc_RuntimeError);

    m.def("devices", &python::devices, "Every device of every backend compiled in, best first within a backend.");
    nb::class_<Device>(m, "Device", "An opened device (a backend and one of its devices).")
        .def_prop_ro("label", &Device::label, "'backend #index name', as `banyan devices` prints it");
    m.def("open", &python::open, "backend"_a, "index"_a,
          "Opens a device: backend 'auto', 'cuda' or 'opencl'; index -1: the best.");
    m.def("checkpoint_device", &python::checkpoint_device, "path"_a,
          "(backend, index) of the device that wrote a checkpoint, when present here; else None.");
    m.def("internal_units", &python::internal_units, "extent"_a, "mass"_a, "eps"_a,
          "(k, j, acceleration exponent, potential exponent) of the internal units of such a system.");
    m.def("host_summary", &python::host_summary, "pos"_a.noconvert(), "mass"_a.noconvert(),
          "(first bad position, first bad mass, extent, total mass, smallest mass, its particle) in one pass.");
    m.def("check_parameters", &python::check_theta_eps, "theta"_a, "eps"_a,
          "Refuses an opening angle outside [0, 1] or a softening that is negative or not finite (UsageError).");
    m.def("check_precision", &python::check_precision, "extent"_a, "total"_a, "min_mass"_a, "lightest"_a, "n"_a,
          "eps"_a, "what"_a, "Refuses masses and a softening that single precision cannot serve (as the CLI).");
    m.def("gravity_host", &python::gravity_entry<Vec3In, ScalarIn, Vec3Out, ScalarOut, false>, "device"_a,
          "pos"_a.noconvert(), "mass"_a.noconvert(), "points"_a.noconvert(), "theta"_a, "eps"_a, "direct"_a,
          "acc"_a.noconvert(), "pot"_a.noconvert(),
          "gravity (no points) or gravity_at of host arrays in internal units, into host arrays acc and pot.");
    m.def("gravity_device", &python::gravity_entry<Vec3Dev, ScalarDev, Vec3DevOut, ScalarDevOut, true>, "device"_a,
          "pos"_a.noconvert(), "mass"_a.noconvert(), "points"_a.noconvert(), "theta"_a, "eps"_a, "direct"_a,
          "acc"_a.noconvert(), "pot"_a.noconvert(),
          "The same for CUDA arrays (CuPy, PyTorch), results into CUDA arrays.");
    m.def("plan_simulation_device", &python::plan_simulation_device, "device"_a, "pos"_a.noconvert(),
          "vel"_a.noconvert(), "mass"_a.noconvert(), "extent"_a, "total"_a, "min_mass"_a, "lightest"_a, "k"_a, "j"_a,
          "theta"_a, "eps"_a, "dt"_a, "time"_a, "opening"_a, "alpha"_a, "steps"_a, "eta"_a, "max_rung"_a, "rung_rule"_a,
          "ids"_a.noconvert() = nb::none(), "units"_a = "",
          "plan_simulation for CUDA arrays scaled into internal units (the run starts from them where they lie).");
    m.def("galaxy_counts", &python::galaxy_counts_of, "options"_a, "merger"_a, "n"_a, "seed"_a, "units"_a,
          "(N, halo, disc, bulge, black holes) of a galaxy or a merger (options: name to text, as the CLI's).");
    m.def("galaxy_fill", &python::galaxy_fill, "options"_a, "merger"_a, "n"_a, "seed"_a, "units"_a, "pos"_a.noconvert(),
          "vel"_a.noconvert(), "mass"_a.noconvert(),
          "The particles of that galaxy or merger into host arrays of its size.");
    nb::class_<SnapshotFile>(m, "SnapshotFile", "A snapshot file read whole; see banyan.read_snapshot.")
        .def(nb::init<const std::string&>(), "path"_a)
        .def_prop_ro("size", &SnapshotFile::size)
        .def_prop_ro("time", &SnapshotFile::time)
        .def_prop_ro("units", &SnapshotFile::units)
        .def("fill", &SnapshotFile::fill, "pos"_a.noconvert(), "vel"_a.noconvert(), "mass"_a.noconvert(),
             "ids"_a.noconvert(), "types"_a.noconvert());
    nb::class_<RunPlan>(m, "RunPlan", "A checked simulation, not yet started; see plan_simulation.");
    m.def("plan_simulation", &python::plan_simulation, "pos"_a.noconvert(), "vel"_a.noconvert(), "mass"_a.noconvert(),
          "theta"_a, "eps"_a, "dt"_a, "time"_a, "opening"_a, "alpha"_a, "steps"_a, "eta"_a, "max_rung"_a, "rung_rule"_a,
          "ids"_a.noconvert() = nb::none(), "units"_a = "",
          "Checks the options and particles of a Simulation (before any device is opened).");
    nb::class_<PySimulation>(m, "Simulation", "The device state of a simulation; see banyan.Simulation.")
        .def(nb::init<Device&, RunPlan&>(), "device"_a, "plan"_a, nb::keep_alive<1, 2>())
        .def_static("load", &PySimulation::load, "device"_a, "path"_a, nb::keep_alive<0, 1>())
        .def("step", &PySimulation::step, "n"_a)
        .def("evolve", &PySimulation::evolve, "t_end"_a, "most"_a = ~std::uint64_t{0})
        .def_prop_ro("log_step", &PySimulation::log_step)
        .def("step_at", &PySimulation::step_at, "t_end"_a)
        .def("state", &PySimulation::state, "pos"_a.noconvert(), "vel"_a.noconvert(), "acc"_a.noconvert(),
             "pot"_a.noconvert())
        .def("state_device", &PySimulation::state_device, "pos"_a.noconvert(), "vel"_a.noconvert(), "acc"_a.noconvert(),
             "pot"_a.noconvert())
        .def("units", &PySimulation::units)
        .def("ids", &PySimulation::ids, "out"_a.noconvert())
        .def("types", &PySimulation::types, "out"_a.noconvert())
        .def("masses", &PySimulation::masses, "out"_a.noconvert())
        .def("energies", &PySimulation::energies)
        .def("save", &PySimulation::save, "path"_a)
        .def("write_snapshot", &PySimulation::write_snapshot, "path"_a, "format"_a)
        .def("render", &PySimulation::render, "path"_a, "axis"_a, "size"_a, "centre_kind"_a, "centre"_a.none(),
             "extent"_a.none(), "range"_a, "vmin"_a.none(), "vmax"_a.none(), "annotate"_a, "types"_a)
        .def_prop_ro("time", &PySimulation::time)
        .def_prop_ro("steps", &PySimulation::steps)
        .def_prop_ro("size", &PySimulation::size)
        .def_prop_ro("e0", &PySimulation::e0)
        .def_prop_ro("max_de", &PySimulation::max_de)
        .def_prop_ro("device", &PySimulation::device)
        .def_prop_ro("theta", &PySimulation::theta)
        .def_prop_ro("opening", &PySimulation::opening)
        .def_prop_ro("alpha", &PySimulation::alpha)
        .def_prop_ro("eps", &PySimulation::eps)
        .def_prop_ro("dt", &PySimulation::dt)
        .def_prop_ro("units_text", &PySimulation::units_text)
        .def_prop_ro("steps_kind", &PySimulation::steps_kind)
        .def_prop_ro("eta", &PySimulation::eta)
        .def_prop_ro("max_rung", &PySimulation::max_rung)
        .def_prop_ro("rung_rule", &PySimulation::rung_rule)
        .def_prop_ro("block_stats", &PySimulation::block_stats);
}
