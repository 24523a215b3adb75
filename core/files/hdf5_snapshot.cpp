/**
 * @file hdf5_snapshot.cpp
 * @brief HDF5 snapshots (hdf5_snapshot.hpp) through the HDF5 1.10 C API. HDF5's own error printing is off: every
 *        call is checked, and a failure becomes an exception that names the file, the object and HDF5's reason.
 *
 * Files are deterministic: objects carry no time stamps (H5Pset_obj_track_times off) and datasets are contiguous,
 * allocated when created and never filled, so the same snapshot gives the same bytes, whether one rank writes it or
 * several ranks write it in turns (a restarted run's snapshots equal those of a run that went straight through).
 */
#include "core/files/hdf5_snapshot.hpp"

#include "core/error.hpp"
#include "core/files/key_values.hpp"
#include "core/version.hpp"

#include <fmt/format.h>
#include <hdf5.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <initializer_list>
#include <limits>
#include <optional>
#include <stdexcept>
#include <unistd.h>
#include <utility>
#include <vector>

namespace banyan {

namespace {

// ---- HDF5 plumbing --------------------------------------------------------------------------------------------

/// HDF5 prints its error stack to stderr by default; banyan reports errors itself.
void silence_hdf5()
{
    H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
}

/// The most specific message on HDF5's error stack (where the error was found), then the stack cleared.
std::string hdf5_reason()
{
    std::string reason;
    H5Ewalk2(
        H5E_DEFAULT, H5E_WALK_UPWARD,
        [](unsigned n, const H5E_error2_t* e, void* data) -> herr_t {
            if (n == 0 && e->desc) *static_cast<std::string*>(data) = e->desc;
            return 0;
        },
        &reason);
    H5Eclear2(H5E_DEFAULT);
    return reason.empty() ? std::string("no reason given") : reason;
}

/// A failed HDF5 call while writing (the caller adds the file).
struct WriteFailure : std::runtime_error {
    using std::runtime_error::runtime_error;
};

/// An HDF5 identifier closed by its matching H5*close when it goes out of scope.
class Id {
public:
    Id() = default;
    Id(hid_t id, herr_t (*close)(hid_t)) : id_(id), close_(close) {}
    Id(Id&& o) noexcept : id_(std::exchange(o.id_, -1)), close_(o.close_) {}
    Id& operator=(Id&& o) noexcept
    {
        if (this != &o) {
            reset();
            id_ = std::exchange(o.id_, -1);
            close_ = o.close_;
        }
        return *this;
    }
    Id(const Id&) = delete;
    Id& operator=(const Id&) = delete;
    ~Id() { reset(); }
    hid_t get() const noexcept { return id_; }
    bool valid() const noexcept { return id_ >= 0; }
    /// Closes now; false when the close failed (for files: the last data could not be written).
    bool close()
    {
        const bool ok = id_ < 0 || close_(id_) >= 0;
        id_ = -1;
        return ok;
    }

private:
    void reset()
    {
        if (id_ >= 0) close_(id_);
        id_ = -1;
    }
    hid_t id_ = -1;
    herr_t (*close_)(hid_t) = nullptr;
};

/// For writes: @p id, or WriteFailure naming @p what.
hid_t must(hid_t id, const std::string& what)
{
    if (id < 0) throw WriteFailure(fmt::format("{}: {}", what, hdf5_reason()));
    return id;
}
void must_ok(herr_t rc, const std::string& what)
{
    if (rc < 0) throw WriteFailure(fmt::format("{}: {}", what, hdf5_reason()));
}

constexpr int ntypes = 6;
/// The order of the types in a snapshot: gas, the collisionless ones, stars.
constexpr int type_order[ntypes] = {0, 1, 2, 3, 5, 4};

std::string group_name(int t)
{
    return fmt::format("PartType{}", t);
}

/// First row of each type in the snapshot's order.
std::array<std::uint64_t, ntypes> type_offsets(const std::array<std::uint64_t, ntypes>& counts)
{
    std::array<std::uint64_t, ntypes> off{};
    std::uint64_t at = 0;
    for (const int t : type_order) {
        off[static_cast<std::size_t>(t)] = at;
        at += counts[static_cast<std::size_t>(t)];
    }
    return off;
}

// ---- Writing ----------------------------------------------------------------------------------------------------

Id object_properties(hid_t cls)
{
    Id p(must(H5Pcreate(cls), "H5Pcreate"), H5Pclose);
    must_ok(H5Pset_obj_track_times(p.get(), false), "H5Pset_obj_track_times"); // no time stamps: the same bytes
    return p;
}

Id make_group(hid_t parent, const std::string& name)
{
    const Id gcpl = object_properties(H5P_GROUP_CREATE);
    return Id(must(H5Gcreate2(parent, name.c_str(), H5P_DEFAULT, gcpl.get(), H5P_DEFAULT), "create group " + name),
              H5Gclose);
}

void attr_raw(hid_t obj, const char* name, hid_t file_type, hid_t mem_type, std::size_t count, const void* data)
{
    const hsize_t dims[1] = {count};
    const Id space(must(count == 0 ? H5Screate(H5S_SCALAR) : H5Screate_simple(1, dims, nullptr), "H5Screate"),
                   H5Sclose);
    const Id a(must(H5Acreate2(obj, name, file_type, space.get(), H5P_DEFAULT, H5P_DEFAULT),
                    fmt::format("create attribute {}", name)),
               H5Aclose);
    must_ok(H5Awrite(a.get(), mem_type, data), fmt::format("write attribute {}", name));
}

void attr_double(hid_t obj, const char* name, double v)
{
    attr_raw(obj, name, H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, 0, &v);
}
void attr_int(hid_t obj, const char* name, std::int32_t v)
{
    attr_raw(obj, name, H5T_STD_I32LE, H5T_NATIVE_INT32, 0, &v);
}

/// A fixed-length string (h5py reads it as bytes, as yt expects of Header/Code; SWIFT writes them so too).
void attr_string(hid_t obj, const char* name, const std::string& v)
{
    const Id type(must(H5Tcopy(H5T_C_S1), "H5Tcopy"), H5Tclose);
    must_ok(H5Tset_size(type.get(), std::max<std::size_t>(v.size(), 1)), "H5Tset_size");
    must_ok(H5Tset_strpad(type.get(), H5T_STR_NULLPAD), "H5Tset_strpad");
    const std::string padded = v.empty() ? std::string(1, '\0') : v;
    attr_raw(obj, name, type.get(), type.get(), 0, padded.data());
}

void make_dataset(hid_t group, const char* name, hid_t file_type, std::uint64_t n, int cols)
{
    const hsize_t dims[2] = {n, static_cast<hsize_t>(cols)};
    const Id space(must(H5Screate_simple(cols == 1 ? 1 : 2, dims, nullptr), "H5Screate_simple"), H5Sclose);
    const Id dcpl = object_properties(H5P_DATASET_CREATE);
    must_ok(H5Pset_layout(dcpl.get(), H5D_CONTIGUOUS), "H5Pset_layout");
    must_ok(H5Pset_alloc_time(dcpl.get(), H5D_ALLOC_TIME_EARLY), "H5Pset_alloc_time");
    must_ok(H5Pset_fill_time(dcpl.get(), H5D_FILL_TIME_NEVER), "H5Pset_fill_time");
    const Id d(must(H5Dcreate2(group, name, file_type, space.get(), H5P_DEFAULT, dcpl.get(), H5P_DEFAULT),
                    fmt::format("create dataset {}", name)),
               H5Dclose);
}

/// Rows [row, row + n) of dataset @p name of @p group from @p data (n * cols values of @p mem_type).
void write_slab(hid_t group, const std::string& gname, const char* name, hid_t mem_type, std::uint64_t row,
                std::uint64_t n, int cols, const void* data)
{
    if (n == 0) return;
    const std::string what = fmt::format("write {}/{}", gname, name);
    const Id d(must(H5Dopen2(group, name, H5P_DEFAULT), what), H5Dclose);
    const Id fspace(must(H5Dget_space(d.get()), what), H5Sclose);
    const hsize_t start[2] = {row, 0}, count[2] = {n, static_cast<hsize_t>(cols)};
    must_ok(H5Sselect_hyperslab(fspace.get(), H5S_SELECT_SET, start, nullptr, count, nullptr), what);
    const Id mspace(must(H5Screate_simple(cols == 1 ? 1 : 2, count, nullptr), what), H5Sclose);
    must_ok(H5Dwrite(d.get(), mem_type, mspace.get(), fspace.get(), H5P_DEFAULT, data), what);
}

/// Header, Parameters, Units and every dataset of types with particles, at full size.
void create_layout(hid_t file, double time, const std::array<std::uint64_t, ntypes>& counts, bool acc,
                   const Units& units, const SnapshotMeta& meta)
{
    {
        const Id h = make_group(file, "Header");
        std::int32_t this_file[ntypes];
        std::uint32_t low[ntypes], high[ntypes];
        for (int t = 0; t < ntypes; ++t) {
            const std::uint64_t c = counts[static_cast<std::size_t>(t)];
            this_file[t] = static_cast<std::int32_t>(c); // at most 2^31 - 1 (checked by the callers)
            low[t] = static_cast<std::uint32_t>(c & 0xffffffffu);
            high[t] = static_cast<std::uint32_t>(c >> 32);
        }
        const double mass_table[ntypes] = {0, 0, 0, 0, 0, 0};
        attr_raw(h.get(), "NumPart_ThisFile", H5T_STD_I32LE, H5T_NATIVE_INT32, ntypes, this_file);
        attr_raw(h.get(), "NumPart_Total", H5T_STD_U32LE, H5T_NATIVE_UINT32, ntypes, low);
        attr_raw(h.get(), "NumPart_Total_HighWord", H5T_STD_U32LE, H5T_NATIVE_UINT32, ntypes, high);
        attr_raw(h.get(), "MassTable", H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, ntypes, mass_table);
        attr_double(h.get(), "Time", time);
        attr_double(h.get(), "Redshift", 0.0);
        attr_double(h.get(), "BoxSize", 0.0); // not periodic
        attr_int(h.get(), "NumFilesPerSnapshot", 1);
        attr_int(h.get(), "Flag_Sfr", 0);
        attr_int(h.get(), "Flag_Cooling", 0);
        attr_int(h.get(), "Flag_Feedback", 0);
        attr_int(h.get(), "Flag_StellarAge", counts[4] > 0 ? 1 : 0);
        attr_int(h.get(), "Flag_Metals", counts[0] + counts[4] > 0 ? 1 : 0);
        attr_int(h.get(), "Flag_DoublePrecision", 0);
        attr_string(h.get(), "Code", "banyan");
        attr_string(h.get(), "CodeVersion", version);
    }
    {
        // GADGET-4 writes its compile-time options here. Its presence also keeps yt from taking a file with gas
        // metallicities for a GIZMO snapshot (whose reader then fails for want of HubbleParam).
        const Id c = make_group(file, "Config");
        attr_int(c.get(), "NTYPES", ntypes);
    }
    {
        const Id p = make_group(file, "Parameters");
        for (const auto& [key, value] : parse_key_values(meta.parameters))
            if (!key.empty()) attr_string(p.get(), key.c_str(), value);
        // G in the file's units (GADGET-4: nonzero overrides the G it would derive from the units).
        attr_double(p.get(), "GravityConstantInternal", 1.0);
        attr_int(p.get(), "ComovingIntegrationOn", 0);
        if (units.physical()) {
            attr_double(p.get(), "UnitLength_in_cm", units.length_cm);
            attr_double(p.get(), "UnitMass_in_g", units.mass_g);
            attr_double(p.get(), "UnitVelocity_in_cm_per_s", units.velocity_cm_per_s());
            // pynbody takes a snapshot's time from Time_GYR, else from a cosmology's age at its redshift.
            attr_double(p.get(), "Time_GYR", time * units.time_s() / (1e9 * cgs::year));
        }
    }
    if (units.physical()) {
        const Units& u = units;
        const Id g = make_group(file, "Units");
        attr_double(g.get(), "UnitLength_in_cm", u.length_cm);
        attr_double(g.get(), "UnitMass_in_g", u.mass_g);
        attr_double(g.get(), "UnitVelocity_in_cm_per_s", u.velocity_cm_per_s());
        attr_double(g.get(), "UnitTime_in_s", u.time_s());
        attr_double(g.get(), "Unit length in cgs (U_L)", u.length_cm);
        attr_double(g.get(), "Unit mass in cgs (U_M)", u.mass_g);
        attr_double(g.get(), "Unit time in cgs (U_t)", u.time_s());
        attr_double(g.get(), "Unit current in cgs (U_I)", 1.0);
        attr_double(g.get(), "Unit temperature in cgs (U_T)", 1.0);
    }
    for (const int t : type_order) {
        const std::uint64_t n = counts[static_cast<std::size_t>(t)];
        if (n == 0) continue;
        const Id g = make_group(file, group_name(t));
        make_dataset(g.get(), "Coordinates", H5T_IEEE_F32LE, n, 3);
        make_dataset(g.get(), "Velocities", H5T_IEEE_F32LE, n, 3);
        make_dataset(g.get(), "ParticleIDs", H5T_STD_U64LE, n, 1);
        make_dataset(g.get(), "Masses", H5T_IEEE_F32LE, n, 1);
        make_dataset(g.get(), "Potential", H5T_IEEE_F32LE, n, 1);
        if (acc) make_dataset(g.get(), "Acceleration", H5T_IEEE_F32LE, n, 3);
        if (t == 0) {
            for (const char* name : {"Density", "Temperature", "SmoothingLength", "Metallicity"})
                make_dataset(g.get(), name, H5T_IEEE_F32LE, n, 1);
        } else if (t == 4) {
            for (const char* name : {"Metallicity", "StellarFormationTime", "Softenings"})
                make_dataset(g.get(), name, H5T_IEEE_F32LE, n, 1);
        } else {
            make_dataset(g.get(), "Softenings", H5T_IEEE_F32LE, n, 1);
        }
    }
}

/// The fields every particle has, rows [rows.first, rows.first + n) of the snapshot's order, split over the types.
void write_common_rows(hid_t file, const std::array<std::uint64_t, ntypes>& counts, const Hdf5Rows& rows,
                       std::span<const std::uint64_t> ids)
{
    const std::uint64_t n = rows.mass.size();
    const auto off = type_offsets(counts);
    for (const int t : type_order) {
        const std::uint64_t a = off[static_cast<std::size_t>(t)], b = a + counts[static_cast<std::size_t>(t)];
        const std::uint64_t lo = std::max(a, rows.first), hi = std::min(b, rows.first + n);
        if (lo >= hi) continue;
        const std::string gname = group_name(t);
        const Id g(must(H5Gopen2(file, gname.c_str(), H5P_DEFAULT), "open group " + gname), H5Gclose);
        const std::uint64_t row = lo - a, m = hi - lo, i = lo - rows.first;
        write_slab(g.get(), gname, "Coordinates", H5T_NATIVE_FLOAT, row, m, 3, rows.pos.data() + 3 * i);
        write_slab(g.get(), gname, "Velocities", H5T_NATIVE_FLOAT, row, m, 3, rows.vel.data() + 3 * i);
        write_slab(g.get(), gname, "Masses", H5T_NATIVE_FLOAT, row, m, 1, rows.mass.data() + i);
        write_slab(g.get(), gname, "Potential", H5T_NATIVE_FLOAT, row, m, 1, rows.phi.data() + i);
        if (!rows.acc.empty())
            write_slab(g.get(), gname, "Acceleration", H5T_NATIVE_FLOAT, row, m, 3, rows.acc.data() + 3 * i);
        write_slab(g.get(), gname, t == 0 ? "SmoothingLength" : "Softenings", H5T_NATIVE_FLOAT, row, m, 1,
                   rows.eps.data() + i);
        std::vector<std::uint64_t> index;
        const std::uint64_t* id = nullptr;
        if (ids.empty()) {
            index.resize(m);
            for (std::uint64_t k = 0; k < m; ++k)
                index[k] = lo + k; // the row in the snapshot's order
            id = index.data();
        } else {
            id = ids.data() + i;
        }
        write_slab(g.get(), gname, "ParticleIDs", H5T_NATIVE_UINT64, row, m, 1, id);
    }
}

/// The file at @p tmp made durable, then renamed to @p path.
void commit(const std::string& tmp, const std::string& path)
{
    const int fd = ::open(tmp.c_str(), O_RDONLY);
    if (fd >= 0) {
        ::fsync(fd);
        ::close(fd);
    }
    if (std::rename(tmp.c_str(), path.c_str()) != 0)
        throw WriteFailure(fmt::format("cannot rename {} to {}: {}", tmp, path, std::strerror(errno)));
}

Id create_file(const std::string& path)
{
    return Id(must(H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT), "cannot create the file"),
              H5Fclose);
}

void close_file(Id& f)
{
    if (!f.close()) throw WriteFailure(fmt::format("closing the file failed: {}", hdf5_reason()));
}

// ---- Reading ----------------------------------------------------------------------------------------------------

/// Reading one file: every failure is a UsageError that names it.
struct Reader {
    std::string path;

    [[noreturn]] void fail(const std::string& problem) const
    {
        H5Eclear2(H5E_DEFAULT);
        throw UsageError(fmt::format("{}: {}", path, problem));
    }
    hid_t check(hid_t id, const std::string& what) const
    {
        if (id < 0) fail(fmt::format("cannot read {}: {} (a truncated or damaged HDF5 file?)", what, hdf5_reason()));
        return id;
    }
    void ok(herr_t rc, const std::string& what) const
    {
        if (rc < 0) fail(fmt::format("cannot read {}: {} (a truncated or damaged HDF5 file?)", what, hdf5_reason()));
    }
    bool exists(hid_t loc, const std::string& name) const
    {
        const htri_t e = H5Lexists(loc, name.c_str(), H5P_DEFAULT);
        if (e < 0) fail(fmt::format("cannot look up {}: {}", name, hdf5_reason()));
        return e > 0;
    }
    bool has_attr(hid_t obj, const char* name) const
    {
        const htri_t e = H5Aexists(obj, name);
        if (e < 0) fail(fmt::format("cannot look up attribute {}: {}", name, hdf5_reason()));
        return e > 0;
    }

    /// The numbers of attribute @p name of @p obj (@p where names the object in messages).
    std::vector<double> numbers(hid_t obj, const std::string& where, const char* name) const
    {
        const std::string what = fmt::format("{}/{}", where, name);
        const Id a(check(H5Aopen(obj, name, H5P_DEFAULT), what), H5Aclose);
        const Id type(check(H5Aget_type(a.get()), what), H5Tclose);
        const H5T_class_t cls = H5Tget_class(type.get());
        if (cls != H5T_INTEGER && cls != H5T_FLOAT) fail(fmt::format("{} is not a number", what));
        const Id space(check(H5Aget_space(a.get()), what), H5Sclose);
        const hssize_t n = H5Sget_simple_extent_npoints(space.get());
        if (n < 0) fail(fmt::format("cannot read {}: {}", what, hdf5_reason()));
        if (n > 1024) fail(fmt::format("{} has {} values, more than a header attribute holds", what, n));
        std::vector<double> v(static_cast<std::size_t>(n));
        if (n) ok(H5Aread(a.get(), H5T_NATIVE_DOUBLE, v.data()), what);
        return v;
    }
    /// The one number of @p name, when the attribute is there.
    std::optional<double> number(hid_t obj, const std::string& where, const char* name) const
    {
        if (!has_attr(obj, name)) return std::nullopt;
        const auto v = numbers(obj, where, name);
        if (v.size() != 1) fail(fmt::format("{}/{} has {} values where one is expected", where, name, v.size()));
        return v[0];
    }
    /// The text of string attribute @p name (fixed or variable length).
    std::string text(hid_t a, const std::string& what) const
    {
        const Id type(check(H5Aget_type(a), what), H5Tclose);
        const htri_t vlen = H5Tis_variable_str(type.get());
        if (vlen < 0) fail(fmt::format("cannot read {}: {}", what, hdf5_reason()));
        const Id space(check(H5Aget_space(a), what), H5Sclose);
        if (H5Sget_simple_extent_npoints(space.get()) != 1) return {};
        if (vlen > 0) {
            const Id mem(check(H5Tcopy(H5T_C_S1), what), H5Tclose);
            ok(H5Tset_size(mem.get(), H5T_VARIABLE), what);
            char* s = nullptr;
            ok(H5Aread(a, mem.get(), &s), what);
            std::string out = s ? s : "";
            H5free_memory(s);
            return out;
        }
        const std::size_t size = H5Tget_size(type.get());
        if (size == 0 || size > (1u << 20)) fail(fmt::format("{} is a string of {} bytes", what, size));
        std::string buf(size, '\0');
        const Id mem(check(H5Tcopy(H5T_C_S1), what), H5Tclose);
        ok(H5Tset_size(mem.get(), size), what);
        ok(H5Tset_strpad(mem.get(), H5T_STR_NULLPAD), what);
        ok(H5Aread(a, mem.get(), buf.data()), what);
        buf.resize(std::strlen(buf.c_str()));
        return buf;
    }

    /// Shape of dataset @p name of @p group, and whether it holds numbers.
    struct Shape {
        int rank = 0;
        hsize_t dims[2] = {0, 0};
    };
    Shape shape(hid_t d, const std::string& what) const
    {
        const Id space(check(H5Dget_space(d), what), H5Sclose);
        const int rank = H5Sget_simple_extent_ndims(space.get());
        if (rank < 0) fail(fmt::format("cannot read {}: {}", what, hdf5_reason()));
        if (rank > 2) fail(fmt::format("{} has {} dimensions; particle data have 1 or 2", what, rank));
        Shape s;
        s.rank = rank;
        if (rank > 0) ok(H5Sget_simple_extent_dims(space.get(), s.dims, nullptr), what);
        return s;
    }

    /// Dataset @p name of @p group as n x cols floats, converted from whatever real or integer type it has; a
    /// finite value beyond float's range is refused. @p optional: a 2-D dataset where a 1-D one is expected (a
    /// Metallicity of several elements) reads as nothing.
    std::vector<float> floats(hid_t group, const std::string& gname, const char* name, std::uint64_t n, int cols,
                              const std::string& count_source, bool optional = false) const
    {
        const std::string what = fmt::format("{}/{}", gname, name);
        const Id d(check(H5Dopen2(group, name, H5P_DEFAULT), what), H5Dclose);
        const Shape s = shape(d.get(), what);
        const bool right = cols == 1 ? s.rank == 1 : (s.rank == 2 && s.dims[1] == static_cast<hsize_t>(cols));
        const std::string shape_text = s.rank == 0   ? std::string("a scalar")
                                       : s.rank == 1 ? fmt::format("shape ({})", s.dims[0])
                                                     : fmt::format("shape ({}, {})", s.dims[0], s.dims[1]);
        if (s.rank >= 1 && s.dims[0] != n)
            fail(fmt::format("{} has {} but {} says {} particles: its length must be the number of particles", what,
                             shape_text, count_source, n));
        if (!right) {
            if (optional && s.rank == 2) return {};
            fail(fmt::format("{} has {}; expected ({}{})", what, shape_text, n,
                             cols == 1 ? std::string() : fmt::format(", {}", cols)));
        }
        const Id type(check(H5Dget_type(d.get()), what), H5Tclose);
        const H5T_class_t cls = H5Tget_class(type.get());
        if (cls != H5T_FLOAT && cls != H5T_INTEGER) fail(fmt::format("{} does not hold numbers", what));
        const std::size_t count = static_cast<std::size_t>(n) * static_cast<std::size_t>(cols);
        std::vector<float> out(count);
        if (count == 0) return out;
        if (cls == H5T_FLOAT && H5Tget_size(type.get()) == 4) {
            ok(H5Dread(d.get(), H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, out.data()), what);
            return out;
        }
        std::vector<double> wide(count);
        ok(H5Dread(d.get(), H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, wide.data()), what);
        constexpr double fmax = std::numeric_limits<float>::max();
        for (std::size_t i = 0; i < count; ++i) {
            if (std::isfinite(wide[i]) && std::fabs(wide[i]) > fmax)
                fail(fmt::format("{} holds {} (particle {}), beyond single precision's range (+-{:.4g}), in which "
                                 "banyan computes; rescale the data",
                                 what, wide[i], i / static_cast<std::size_t>(cols), fmax));
            out[i] = static_cast<float>(wide[i]);
        }
        return out;
    }

    std::vector<std::uint64_t> integers(hid_t group, const std::string& gname, const char* name, std::uint64_t n,
                                        const std::string& count_source) const
    {
        const std::string what = fmt::format("{}/{}", gname, name);
        const Id d(check(H5Dopen2(group, name, H5P_DEFAULT), what), H5Dclose);
        const Shape s = shape(d.get(), what);
        if (s.rank != 1 || s.dims[0] != n)
            fail(fmt::format("{} has {} dimension(s) of length {} but {} says {} particles", what, s.rank,
                             s.rank ? s.dims[0] : 0, count_source, n));
        const Id type(check(H5Dget_type(d.get()), what), H5Tclose);
        if (H5Tget_class(type.get()) != H5T_INTEGER) fail(fmt::format("{} does not hold whole numbers", what));
        std::vector<std::uint64_t> out(n);
        if (n) ok(H5Dread(d.get(), H5T_NATIVE_UINT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, out.data()), what);
        return out;
    }
};

/// Which of @p names exists in @p group (SWIFT and GADGET name some fields differently), or nullptr.
const char* first_of(const Reader& r, hid_t group, std::initializer_list<const char*> names)
{
    for (const char* n : names)
        if (r.exists(group, n)) return n;
    return nullptr;
}

/// Units from Parameters (GADGET-4) or Units (GADGET-3, EAGLE, SWIFT), and the file's velocity unit when it says one.
Units read_units(const Reader& r, hid_t file, double& file_velocity)
{
    file_velocity = 0;
    struct Place {
        const char* group;
        const char* length;
        const char* mass;
        const char* velocity; // or nullptr, then time
        const char* time;
    };
    const Place places[] = {
        {"Parameters", "UnitLength_in_cm", "UnitMass_in_g", "UnitVelocity_in_cm_per_s", nullptr},
        {"Units", "UnitLength_in_cm", "UnitMass_in_g", "UnitVelocity_in_cm_per_s", nullptr},
        {"Units", "Unit length in cgs (U_L)", "Unit mass in cgs (U_M)", nullptr, "Unit time in cgs (U_t)"},
        {"Header", "UnitLength_in_cm", "UnitMass_in_g", "UnitVelocity_in_cm_per_s", nullptr}, // AREPO
    };
    for (const Place& p : places) {
        if (!r.exists(file, p.group)) continue;
        const Id g(r.check(H5Gopen2(file, p.group, H5P_DEFAULT), p.group), H5Gclose);
        const auto len = r.number(g.get(), p.group, p.length), mass = r.number(g.get(), p.group, p.mass);
        if (!len || !mass) continue;
        if (!(std::isfinite(*len) && *len > 0 && std::isfinite(*mass) && *mass > 0))
            r.fail(fmt::format("{}/{} = {} and {}/{} = {}: units must be positive and finite", p.group, p.length, *len,
                               p.group, p.mass, *mass));
        Units u;
        u.length_cm = *len;
        u.mass_g = *mass;
        if (p.velocity) {
            if (const auto v = r.number(g.get(), p.group, p.velocity)) file_velocity = *v;
        } else if (const auto t = r.number(g.get(), p.group, p.time)) {
            file_velocity = *len / *t;
        }
        if (file_velocity != 0 && !(std::isfinite(file_velocity) && file_velocity > 0))
            r.fail(fmt::format("the velocity unit in {} is {}; units must be positive and finite", p.group,
                               file_velocity));
        return u;
    }
    return {};
}

} // namespace

// ---- Public -----------------------------------------------------------------------------------------------------

std::array<std::uint64_t, 6> gadget_type_counts(const Snapshot& s)
{
    const std::size_t extra = s.n_type2 + s.n_type3 + s.n_type5;
    if (extra > s.n_dark)
        throw std::invalid_argument("snapshot: more particles of types 2, 3 and 5 than dark particles");
    return {s.n_gas, s.n_dark - extra, s.n_type2, s.n_type3, s.n_star, s.n_type5};
}

void write_hdf5(const std::string& path, const Snapshot& s, const SnapshotMeta& meta)
{
    silence_hdf5();
    const std::size_t n = s.size();
    if (s.mass.size() != n || s.pos.size() != 3 * n || s.vel.size() != 3 * n || s.eps.size() != n ||
        s.phi.size() != n || s.gas_rho.size() != s.n_gas || s.gas_temp.size() != s.n_gas ||
        s.gas_metals.size() != s.n_gas || s.star_metals.size() != s.n_star || s.star_tform.size() != s.n_star ||
        !(s.acc.empty() || s.acc.size() == 3 * n) || !(s.ids.empty() || s.ids.size() == n))
        throw std::invalid_argument("write_hdf5: snapshot arrays disagree with its particle counts");
    if (n > 0x7fffffffu) throw UsageError(fmt::format("{}: {} particles is more than the 2^31 - 1 supported", path, n));
    const auto counts = gadget_type_counts(s);
    const std::string tmp = fmt::format("{}.tmp.{}", path, ::getpid());
    try {
        Id f = create_file(tmp);
        create_layout(f.get(), s.time, counts, !s.acc.empty(), s.units, meta);
        Hdf5Rows rows;
        rows.pos = s.pos, rows.vel = s.vel, rows.acc = s.acc, rows.mass = s.mass, rows.eps = s.eps, rows.phi = s.phi;
        write_common_rows(f.get(), counts, rows, s.ids);
        if (s.n_gas) {
            const Id g(must(H5Gopen2(f.get(), "PartType0", H5P_DEFAULT), "open PartType0"), H5Gclose);
            write_slab(g.get(), "PartType0", "Density", H5T_NATIVE_FLOAT, 0, s.n_gas, 1, s.gas_rho.data());
            write_slab(g.get(), "PartType0", "Temperature", H5T_NATIVE_FLOAT, 0, s.n_gas, 1, s.gas_temp.data());
            write_slab(g.get(), "PartType0", "Metallicity", H5T_NATIVE_FLOAT, 0, s.n_gas, 1, s.gas_metals.data());
        }
        if (s.n_star) {
            const Id g(must(H5Gopen2(f.get(), "PartType4", H5P_DEFAULT), "open PartType4"), H5Gclose);
            write_slab(g.get(), "PartType4", "Metallicity", H5T_NATIVE_FLOAT, 0, s.n_star, 1, s.star_metals.data());
            write_slab(g.get(), "PartType4", "StellarFormationTime", H5T_NATIVE_FLOAT, 0, s.n_star, 1,
                       s.star_tform.data());
        }
        close_file(f);
        commit(tmp, path);
    } catch (const WriteFailure& e) {
        std::remove(tmp.c_str());
        throw std::runtime_error(fmt::format("writing the HDF5 snapshot {} failed: {}", path, e.what()));
    } catch (...) {
        std::remove(tmp.c_str());
        throw;
    }
}

void create_hdf5_collisionless(const std::string& path, double time, const std::array<std::uint64_t, 6>& counts,
                               const Units& units, const SnapshotMeta& meta)
{
    silence_hdf5();
    if (counts[0] || counts[4])
        throw std::invalid_argument("create_hdf5_collisionless: gas or star particles (types 0 and 4)");
    std::uint64_t n = 0;
    for (const auto c : counts)
        n += c;
    if (n > 0x7fffffffu) throw UsageError(fmt::format("{}: {} particles is more than the 2^31 - 1 supported", path, n));
    try {
        Id f = create_file(path);
        create_layout(f.get(), time, counts, true, units, meta);
        close_file(f);
    } catch (const WriteFailure& e) {
        throw std::runtime_error(fmt::format("writing the HDF5 snapshot {} failed: {}", path, e.what()));
    }
}

void write_hdf5_rows(const std::string& path, const Hdf5Rows& rows)
{
    silence_hdf5();
    const std::size_t n = rows.mass.size();
    if (rows.pos.size() != 3 * n || rows.vel.size() != 3 * n || rows.acc.size() != 3 * n || rows.eps.size() != n ||
        rows.phi.size() != n)
        throw std::invalid_argument("write_hdf5_rows: arrays of different lengths");
    try {
        Id f(must(H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT), "cannot open the file"), H5Fclose);
        // The counts per type, from the file's header.
        const Id h(must(H5Gopen2(f.get(), "Header", H5P_DEFAULT), "open Header"), H5Gclose);
        const Id a(must(H5Aopen(h.get(), "NumPart_ThisFile", H5P_DEFAULT), "open NumPart_ThisFile"), H5Aclose);
        std::array<std::uint64_t, ntypes> counts{};
        must_ok(H5Aread(a.get(), H5T_NATIVE_UINT64, counts.data()), "read NumPart_ThisFile");
        std::uint64_t total = 0;
        for (const auto c : counts)
            total += c;
        if (rows.first + n > total)
            throw std::invalid_argument(fmt::format("write_hdf5_rows: rows {} .. {} of a file of {} particles",
                                                    rows.first, rows.first + n, total));
        write_common_rows(f.get(), counts, rows, {});
        close_file(f);
    } catch (const WriteFailure& e) {
        throw std::runtime_error(fmt::format("writing the HDF5 snapshot {} failed: {}", path, e.what()));
    }
}

Snapshot read_hdf5(const std::string& path, SnapshotMeta* meta_out, bool need_velocities)
{
    silence_hdf5();
    const Reader r{path};
    std::error_code ec;
    const auto status = std::filesystem::status(path, ec);
    if (ec || !std::filesystem::exists(status)) r.fail("cannot open file: no such file");
    if (!std::filesystem::is_regular_file(status))
        r.fail(fmt::format("not a regular file ({})",
                           std::filesystem::is_directory(status) ? "a folder" : "a pipe, socket or device"));
    const htri_t is = H5Fis_hdf5(path.c_str());
    if (is == 0) r.fail("not an HDF5 file (no HDF5 signature)");
    if (is < 0) r.fail(fmt::format("cannot be read as HDF5: {}", hdf5_reason()));
    const Id file(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), H5Fclose);
    if (!file.valid()) r.fail(fmt::format("cannot open as HDF5: {} (a truncated or damaged file?)", hdf5_reason()));
    const hid_t f = file.get();

    if (!r.exists(f, "Header"))
        r.fail("no Header group: not a GADGET / SWIFT snapshot (it needs Header with NumPart_ThisFile, and PartTypeK "
               "groups)");
    const Id header(r.check(H5Gopen2(f, "Header", H5P_DEFAULT), "Header"), H5Gclose);
    const hid_t h = header.get();
    if (const auto files = r.number(h, "Header", "NumFilesPerSnapshot"); files && *files != 1.0)
        r.fail(fmt::format("Header/NumFilesPerSnapshot is {}: banyan reads snapshots of one file (join the {} files "
                           "first)",
                           *files, *files));
    const char* count_name = r.has_attr(h, "NumPart_ThisFile") ? "NumPart_ThisFile"
                             : r.has_attr(h, "NumPart_Total")  ? "NumPart_Total"
                                                               : nullptr;
    if (!count_name) r.fail("Header has no NumPart_ThisFile (nor NumPart_Total): the particle counts are missing");
    const std::vector<double> np = r.numbers(h, "Header", count_name);
    if (np.size() != ntypes)
        r.fail(fmt::format("Header/{} has {} entries; a GADGET header has 6, one per particle type", count_name,
                           np.size()));
    std::vector<double> high(ntypes, 0.0);
    if (std::string(count_name) == "NumPart_Total" && r.has_attr(h, "NumPart_Total_HighWord")) {
        high = r.numbers(h, "Header", "NumPart_Total_HighWord");
        if (high.size() != ntypes) r.fail("Header/NumPart_Total_HighWord does not have 6 entries");
    }
    std::array<std::uint64_t, ntypes> counts{};
    std::uint64_t total = 0;
    for (int t = 0; t < ntypes; ++t) {
        const double c = np[static_cast<std::size_t>(t)] + std::ldexp(high[static_cast<std::size_t>(t)], 32);
        if (!(c >= 0 && c == std::floor(c) && c < 0x80000000))
            r.fail(fmt::format("Header/{}[{}] is {}: particle counts are whole numbers from 0 to 2^31 - 1", count_name,
                               t, c));
        counts[static_cast<std::size_t>(t)] = static_cast<std::uint64_t>(c);
        total += counts[static_cast<std::size_t>(t)];
    }
    if (total > 0x7fffffffu) r.fail(fmt::format("{} particles is more than the 2^31 - 1 banyan supports", total));
    std::vector<double> mass_table(ntypes, 0.0);
    if (r.has_attr(h, "MassTable")) {
        mass_table = r.numbers(h, "Header", "MassTable");
        if (mass_table.size() != ntypes)
            r.fail(fmt::format("Header/MassTable has {} entries; it has one per particle type, 6", mass_table.size()));
    }
    const double time = r.number(h, "Header", "Time").value_or(0.0);
    if (!std::isfinite(time)) r.fail(fmt::format("Header/Time is {}; it must be finite", time));

    SnapshotMeta meta;
    double file_velocity = 0;
    const Units units = read_units(r, f, file_velocity);
    if (units.physical() && file_velocity > 0) {
        const double factor = file_velocity / units.velocity_cm_per_s();
        if (std::fabs(factor - 1.0) > 1e-6) meta.velocity_factor = factor;
    }
    for (const char* name : {"Code", "CodeVersion"})
        if (r.has_attr(h, name)) {
            const Id a(r.check(H5Aopen(h, name, H5P_DEFAULT), name), H5Aclose);
            const Id type(r.check(H5Aget_type(a.get()), name), H5Tclose);
            if (H5Tget_class(type.get()) != H5T_STRING) continue;
            const std::string v = r.text(a.get(), fmt::format("Header/{}", name));
            meta.code += (meta.code.empty() ? "" : " ") + v;
        }
    if (r.exists(f, "Parameters")) {
        const Id p(r.check(H5Gopen2(f, "Parameters", H5P_DEFAULT), "Parameters"), H5Gclose);
        H5O_info_t info;
        r.ok(H5Oget_info2(p.get(), &info, H5O_INFO_NUM_ATTRS), "Parameters");
        for (hsize_t i = 0; i < info.num_attrs; ++i) {
            const Id a(r.check(H5Aopen_by_idx(p.get(), ".", H5_INDEX_NAME, H5_ITER_INC, i, H5P_DEFAULT, H5P_DEFAULT),
                               "Parameters"),
                       H5Aclose);
            const Id type(r.check(H5Aget_type(a.get()), "Parameters"), H5Tclose);
            if (H5Tget_class(type.get()) != H5T_STRING) continue;
            const ssize_t len = H5Aget_name(a.get(), 0, nullptr);
            if (len <= 0) continue;
            std::string key(static_cast<std::size_t>(len) + 1, '\0');
            H5Aget_name(a.get(), key.size(), key.data());
            key.resize(static_cast<std::size_t>(len));
            std::string value = r.text(a.get(), "Parameters/" + key);
            if (key.find_first_of("=\n") != std::string::npos || value.find('\n') != std::string::npos) continue;
            meta.parameters += key + "=" + value + "\n";
        }
    }

    Snapshot s;
    s.time = time;
    s.units = units;
    s.n_gas = counts[0];
    s.n_star = counts[4];
    s.n_dark = counts[1] + counts[2] + counts[3] + counts[5];
    s.n_type2 = counts[2], s.n_type3 = counts[3], s.n_type5 = counts[5];
    const std::size_t n = s.size();
    s.mass.resize(n), s.pos.resize(3 * n), s.vel.resize(3 * n), s.eps.resize(n), s.phi.resize(n);
    s.acc.resize(3 * n), s.ids.resize(n);
    s.gas_rho.resize(s.n_gas), s.gas_temp.resize(s.n_gas), s.gas_metals.resize(s.n_gas);
    s.star_metals.resize(s.n_star), s.star_tform.resize(s.n_star);
    bool all_acc = true, all_ids = true;
    const auto off = type_offsets(counts);
    for (const int t : type_order) {
        const std::uint64_t m = counts[static_cast<std::size_t>(t)];
        if (m == 0) continue;
        const std::size_t at = off[static_cast<std::size_t>(t)];
        const std::string gname = group_name(t);
        const std::string source = fmt::format("Header/{}[{}]", count_name, t);
        if (!r.exists(f, gname))
            r.fail(fmt::format("{} says {} particles of type {} but there is no {} group", source, m, t, gname));
        const Id group(r.check(H5Gopen2(f, gname.c_str(), H5P_DEFAULT), gname), H5Gclose);
        const hid_t g = group.get();
        auto copy = [](const std::vector<float>& from, std::vector<float>& to, std::size_t where) {
            std::copy(from.begin(), from.end(), to.begin() + static_cast<std::ptrdiff_t>(where));
        };
        if (!r.exists(g, "Coordinates")) r.fail(fmt::format("{}/Coordinates is missing: no positions", gname));
        copy(r.floats(g, gname, "Coordinates", m, 3, source), s.pos, 3 * at);
        if (r.exists(g, "Velocities"))
            copy(r.floats(g, gname, "Velocities", m, 3, source), s.vel, 3 * at);
        else if (need_velocities)
            r.fail(fmt::format("{}/Velocities is missing: a run cannot start without velocities (banyan forces "
                               "needs positions and masses only)",
                               gname));
        if (const char* name = first_of(r, g, {"Masses", "Mass"})) {
            copy(r.floats(g, gname, name, m, 1, source), s.mass, at);
        } else {
            const double mt = mass_table[static_cast<std::size_t>(t)];
            if (!(mt > 0))
                r.fail(fmt::format("{} has no Masses dataset and Header/MassTable[{}] is {}: the particles have no "
                                   "mass",
                                   gname, t, mt));
            if (!(mt <= std::numeric_limits<float>::max()))
                r.fail(fmt::format("Header/MassTable[{}] is {}, beyond single precision's range", t, mt));
            std::fill_n(s.mass.begin() + static_cast<std::ptrdiff_t>(at), m, static_cast<float>(mt));
        }
        if (const char* name = first_of(r, g, {"Potential", "Potentials"}))
            copy(r.floats(g, gname, name, m, 1, source), s.phi, at);
        if (r.exists(g, "Acceleration"))
            copy(r.floats(g, gname, "Acceleration", m, 3, source), s.acc, 3 * at);
        else
            all_acc = false;
        if (r.exists(g, "ParticleIDs")) {
            const auto ids = r.integers(g, gname, "ParticleIDs", m, source);
            std::copy(ids.begin(), ids.end(), s.ids.begin() + static_cast<std::ptrdiff_t>(at));
        } else {
            all_ids = false;
        }
        if (t == 0) {
            if (const char* name = first_of(r, g, {"SmoothingLength", "SmoothingLengths"}))
                copy(r.floats(g, gname, name, m, 1, source), s.eps, at);
            if (const char* name = first_of(r, g, {"Density", "Densities"}))
                copy(r.floats(g, gname, name, m, 1, source), s.gas_rho, 0);
            if (const char* name = first_of(r, g, {"Temperature", "Temperatures"}))
                copy(r.floats(g, gname, name, m, 1, source), s.gas_temp, 0);
            if (r.exists(g, "Metallicity")) {
                const auto z = r.floats(g, gname, "Metallicity", m, 1, source, true);
                if (!z.empty()) copy(z, s.gas_metals, 0);
            }
        } else {
            if (const char* name = first_of(r, g, {"Softenings", "Softening"}))
                copy(r.floats(g, gname, name, m, 1, source), s.eps, at);
            else
                meta.has_softening = false;
            if (t == 4) {
                if (r.exists(g, "Metallicity")) {
                    const auto z = r.floats(g, gname, "Metallicity", m, 1, source, true);
                    if (!z.empty()) copy(z, s.star_metals, 0);
                }
                if (const char* name = first_of(r, g, {"StellarFormationTime", "BirthTimes"}))
                    copy(r.floats(g, gname, name, m, 1, source), s.star_tform, 0);
            }
        }
    }
    if (!all_acc) s.acc.clear();
    if (!all_ids) s.ids.clear();

    // G = 1 in banyan: a file in units where G is not 1 has its velocity-like fields rescaled to the velocity unit
    // G = 1 implies for its length and mass units (and its times to the matching time unit).
    if (meta.velocity_factor != 1.0) {
        const double v = meta.velocity_factor;
        auto scale = [&](std::vector<float>& a, double k, const char* what) {
            for (auto& x : a) {
                const double y = static_cast<double>(x) * k;
                if (std::isfinite(y) && std::fabs(y) > std::numeric_limits<float>::max())
                    r.fail(fmt::format("a {} of {} in the velocity unit G = 1 implies is beyond single precision's "
                                       "range",
                                       what, y));
                x = static_cast<float>(y);
            }
        };
        scale(s.vel, v, "velocity");
        scale(s.phi, v * v, "potential");
        scale(s.acc, v * v, "acceleration");
        scale(s.star_tform, 1.0 / v, "formation time");
        s.time = time / v;
    }
    if (meta_out) *meta_out = std::move(meta);
    return s;
}

} // namespace banyan
