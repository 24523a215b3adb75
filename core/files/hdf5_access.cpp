/**
 * @file hdf5_access.cpp
 * @brief The checked HDF5 calls of hdf5_access.hpp: errors, groups, attributes and datasets written, and the Reader.
 */
#include "core/files/hdf5_access.hpp"

#include "core/error.hpp"
#include "core/files/atomic_file.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <cmath>
#include <cstring>
#include <limits>

namespace banyan::hdf5 {

// ---- Errors -----------------------------------------------------------------------------------------------------

namespace {

// A file whose close failed (a full disk, a file-size limit) stays in the library's tables, and HDF5 1.10's own
// exit handler then crashes on it (H5F__close_cb): the program would end in SIGSEGV after its error message. Every
// file banyan opens is closed by its owner (Id), so nothing is left for that handler to do. It must be turned off
// before the library's first call: at load time.
const bool no_hdf5_exit_handler = [] {
    H5dont_atexit();
    return true;
}();

} // namespace

void silence_hdf5()
{
    (void)no_hdf5_exit_handler;
    H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
}

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
    if (reason.empty()) return "no reason given";
    // A failed system call: "file write failed: time = ..., filename = ..., errno = 28, error message = ..., buf =
    // 0x..., ...": what failed and the errno's meaning, as the other writers say it.
    const std::size_t at = reason.find("errno = "), cut = reason.find(": time = ");
    if (at != std::string::npos && cut != std::string::npos)
        if (const int err = std::atoi(reason.c_str() + at + 8); err > 0)
            return fmt::format("{}: {}", reason.substr(0, cut), io_reason(err));
    return reason;
}

hid_t must(hid_t id, const std::string& what)
{
    if (id < 0) throw WriteFailure(fmt::format("{}: {}", what, hdf5_reason()));
    return id;
}
void must_ok(herr_t rc, const std::string& what)
{
    if (rc < 0) throw WriteFailure(fmt::format("{}: {}", what, hdf5_reason()));
}

// ---- Particle types ---------------------------------------------------------------------------------------------

std::string group_name(int t)
{
    return fmt::format("PartType{}", t);
}

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

namespace {

Id object_properties(hid_t cls)
{
    Id p(must(H5Pcreate(cls), "H5Pcreate"), H5Pclose);
    must_ok(H5Pset_obj_track_times(p.get(), false), "H5Pset_obj_track_times"); // no time stamps: the same bytes
    return p;
}

} // namespace

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

Id create_file(const std::string& path)
{
    return Id(must(H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT), "cannot create the file"),
              H5Fclose);
}

void close_file(Id& f)
{
    if (!f.close()) throw WriteFailure(fmt::format("closing the file failed: {}", hdf5_reason()));
}

void commit(const std::string& tmp, const std::string& path)
{
    try {
        rename_durably(tmp, path);
    } catch (const UsageError&) {
        throw; // a path that cannot be an output: the user's to change (exit 2), not a failed write
    } catch (const std::runtime_error& e) {
        throw WriteFailure(e.what());
    }
}

// ---- Reading ----------------------------------------------------------------------------------------------------

void Reader::fail(const std::string& problem) const
{
    H5Eclear2(H5E_DEFAULT);
    throw UsageError(fmt::format("{}: {}", path, problem));
}

hid_t Reader::check(hid_t id, const std::string& what) const
{
    if (id < 0) fail(fmt::format("cannot read {}: {} (a truncated or damaged HDF5 file?)", what, hdf5_reason()));
    return id;
}

void Reader::ok(herr_t rc, const std::string& what) const
{
    if (rc < 0) fail(fmt::format("cannot read {}: {} (a truncated or damaged HDF5 file?)", what, hdf5_reason()));
}

bool Reader::exists(hid_t loc, const std::string& name) const
{
    const htri_t e = H5Lexists(loc, name.c_str(), H5P_DEFAULT);
    if (e < 0) fail(fmt::format("cannot look up {}: {}", name, hdf5_reason()));
    return e > 0;
}

bool Reader::has_attr(hid_t obj, const char* name) const
{
    const htri_t e = H5Aexists(obj, name);
    if (e < 0) fail(fmt::format("cannot look up attribute {}: {}", name, hdf5_reason()));
    return e > 0;
}

void Reader::check_number_type(hid_t type, const std::string& what) const
{
    // HDF5 converts from any layout a file declares; a damaged type (a float of other exponent and mantissa bits,
    // an integer of odd precision) would be read as other numbers. Only the standard ones are numbers here, as
    // for h5py.
    const H5T_class_t cls = H5Tget_class(type);
    const std::size_t size = H5Tget_size(type);
    if (cls == H5T_FLOAT) {
        for (const hid_t ieee : {H5T_IEEE_F32LE, H5T_IEEE_F32BE, H5T_IEEE_F64LE, H5T_IEEE_F64BE})
            if (H5Tequal(type, ieee) > 0) return;
        fail(fmt::format("{} has a floating-point type of {} bytes that is not IEEE single or double precision (a "
                         "damaged file?)",
                         what, size));
    }
    if (cls == H5T_INTEGER) {
        const std::size_t precision = H5Tget_precision(type);
        const int offset = H5Tget_offset(type);
        if ((size == 1 || size == 2 || size == 4 || size == 8) && precision == 8 * size && offset == 0) return;
        fail(fmt::format("{} has an integer type of {} bytes with {} bits of precision at offset {}: not a standard "
                         "integer (a damaged file?)",
                         what, size, precision, offset));
    }
    fail(fmt::format("{} does not hold numbers", what));
}

void Reader::check_storage(hid_t d, hid_t type, const std::string& what) const
{
    // HDF5 1.10 reads a contiguous dataset whose data lie past the end of the file, or were never stored, as zeros,
    // and does not compare the size its layout states with what its values take; a newer HDF5 (h5py's) refuses
    // such a file. The layout is judged here before it is trusted. External files and chunked or compact layouts
    // keep their data elsewhere: HDF5 checks those reads itself.
    const Id dcpl(check(H5Dget_create_plist(d), what), H5Pclose);
    const H5D_layout_t layout = H5Pget_layout(dcpl.get());
    if (layout < 0) fail(fmt::format("cannot read the layout of {}: {}", what, hdf5_reason()));
    if (layout != H5D_CONTIGUOUS || H5Pget_external_count(dcpl.get()) != 0) return;
    const Id space(check(H5Dget_space(d), what), H5Sclose);
    const hssize_t values = H5Sget_simple_extent_npoints(space.get());
    if (values < 0) fail(fmt::format("cannot read {}: {}", what, hdf5_reason()));
    const std::uint64_t bytes = static_cast<std::uint64_t>(values) * H5Tget_size(type);
    if (bytes == 0) return;
    const haddr_t at = H5Dget_offset(d);
    if (at == HADDR_UNDEF)
        fail(fmt::format("{} has no data stored (its storage was never written: a damaged or unfinished file)", what));
    const hsize_t stored = H5Dget_storage_size(d);
    if (stored != bytes)
        fail(fmt::format("{}'s layout says {} bytes of data, but its {} values take {}: a damaged file", what, stored,
                         values, bytes));
    const Id file(check(H5Iget_file_id(d), what), H5Fclose);
    hsize_t size = 0;
    ok(H5Fget_filesize(file.get(), &size), what);
    if (at > size || bytes > size - at)
        fail(fmt::format("{}'s {} bytes of data start at byte {} of the file, which has {}: they lie past its end (a "
                         "truncated or damaged file)",
                         what, bytes, at, size));
}

std::vector<double> Reader::numbers(hid_t obj, const std::string& where, const char* name) const
{
    const std::string what = fmt::format("{}/{}", where, name);
    const Id a(check(H5Aopen(obj, name, H5P_DEFAULT), what), H5Aclose);
    const Id type(check(H5Aget_type(a.get()), what), H5Tclose);
    const H5T_class_t cls = H5Tget_class(type.get());
    if (cls != H5T_INTEGER && cls != H5T_FLOAT) fail(fmt::format("{} is not a number", what));
    check_number_type(type.get(), what);
    const Id space(check(H5Aget_space(a.get()), what), H5Sclose);
    const hssize_t n = H5Sget_simple_extent_npoints(space.get());
    if (n < 0) fail(fmt::format("cannot read {}: {}", what, hdf5_reason()));
    if (n > 1024) fail(fmt::format("{} has {} values, more than a header attribute holds", what, n));
    std::vector<double> v(static_cast<std::size_t>(n));
    if (n) ok(H5Aread(a.get(), H5T_NATIVE_DOUBLE, v.data()), what);
    return v;
}

std::optional<double> Reader::number(hid_t obj, const std::string& where, const char* name) const
{
    if (!has_attr(obj, name)) return std::nullopt;
    const auto v = numbers(obj, where, name);
    if (v.size() != 1) fail(fmt::format("{}/{} has {} values where one is expected", where, name, v.size()));
    return v[0];
}

std::string Reader::text(hid_t a, const std::string& what) const
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

Reader::Shape Reader::shape(hid_t d, const std::string& what) const
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

namespace {

/// The file and memory dataspaces of @p window's rows of dataset @p d (n rows of @p cols): H5S_ALL for all rows.
struct Selection {
    Id file, mem;
    hid_t file_space() const { return file.get() >= 0 ? file.get() : H5S_ALL; }
    hid_t mem_space() const { return mem.get() >= 0 ? mem.get() : H5S_ALL; }
};

Selection select_rows(const Reader& r, hid_t d, std::uint64_t n, int cols, std::uint64_t first, std::uint64_t rows,
                      const std::string& what)
{
    Selection s;
    if (first == 0 && rows == n) return s;
    s.file = Id(r.check(H5Dget_space(d), what), H5Sclose);
    const hsize_t start[2] = {first, 0}, count[2] = {rows, static_cast<hsize_t>(cols)};
    r.ok(H5Sselect_hyperslab(s.file.get(), H5S_SELECT_SET, start, nullptr, count, nullptr), what);
    s.mem = Id(r.check(H5Screate_simple(cols == 1 ? 1 : 2, count, nullptr), what), H5Sclose);
    return s;
}

} // namespace

std::vector<float> Reader::floats(hid_t group, const std::string& gname, const char* name, std::uint64_t n, int cols,
                                  const std::string& count_source, bool optional, Window window) const
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
    check_number_type(type.get(), what);
    const std::uint64_t first = std::min(window.first, n), rows = std::min(window.count, n - first);
    const std::size_t count = static_cast<std::size_t>(rows) * static_cast<std::size_t>(cols);
    std::vector<float> out(count);
    if (count == 0) return out;
    check_storage(d.get(), type.get(), what);
    const Selection sel = select_rows(*this, d.get(), n, cols, first, rows, what);
    if (cls == H5T_FLOAT && H5Tget_size(type.get()) == 4) {
        ok(H5Dread(d.get(), H5T_NATIVE_FLOAT, sel.mem_space(), sel.file_space(), H5P_DEFAULT, out.data()), what);
        return out;
    }
    std::vector<double> wide(count);
    ok(H5Dread(d.get(), H5T_NATIVE_DOUBLE, sel.mem_space(), sel.file_space(), H5P_DEFAULT, wide.data()), what);
    constexpr double fmax = std::numeric_limits<float>::max();
    for (std::size_t i = 0; i < count; ++i) {
        if (std::isfinite(wide[i]) && std::fabs(wide[i]) > fmax)
            fail(fmt::format("{} holds {} (particle {}), beyond single precision's range (+-{:.4g}), in which "
                             "banyan computes; rescale the data",
                             what, wide[i], first + i / static_cast<std::size_t>(cols), fmax));
        out[i] = static_cast<float>(wide[i]);
    }
    return out;
}

std::vector<std::uint64_t> Reader::integers(hid_t group, const std::string& gname, const char* name, std::uint64_t n,
                                            const std::string& count_source, Window window) const
{
    const std::string what = fmt::format("{}/{}", gname, name);
    const Id d(check(H5Dopen2(group, name, H5P_DEFAULT), what), H5Dclose);
    const Shape s = shape(d.get(), what);
    if (s.rank != 1 || s.dims[0] != n)
        fail(fmt::format("{} has {} dimension(s) of length {} but {} says {} particles", what, s.rank,
                         s.rank ? s.dims[0] : 0, count_source, n));
    const Id type(check(H5Dget_type(d.get()), what), H5Tclose);
    if (H5Tget_class(type.get()) != H5T_INTEGER) fail(fmt::format("{} does not hold whole numbers", what));
    check_number_type(type.get(), what);
    const std::uint64_t first = std::min(window.first, n), rows = std::min(window.count, n - first);
    std::vector<std::uint64_t> out(rows);
    if (rows == 0) return out;
    check_storage(d.get(), type.get(), what);
    const Selection sel = select_rows(*this, d.get(), n, 1, first, rows, what);
    if (H5Tget_sign(type.get()) != H5T_SGN_2) {
        ok(H5Dread(d.get(), H5T_NATIVE_UINT64, sel.mem_space(), sel.file_space(), H5P_DEFAULT, out.data()), what);
        return out;
    }
    // HDF5 converts a negative signed value to the unsigned 0 without a word: signed ids are read as such, and a
    // negative one is refused rather than changed.
    std::vector<std::int64_t> signed_ids(rows);
    ok(H5Dread(d.get(), H5T_NATIVE_INT64, sel.mem_space(), sel.file_space(), H5P_DEFAULT, signed_ids.data()), what);
    for (std::size_t i = 0; i < rows; ++i) {
        if (signed_ids[i] < 0)
            fail(fmt::format("{} holds {} at row {}: particle ids are whole numbers 0 or more", what, signed_ids[i],
                             first + i));
        out[i] = static_cast<std::uint64_t>(signed_ids[i]);
    }
    return out;
}

const char* first_of(const Reader& r, hid_t group, std::initializer_list<const char*> names)
{
    for (const char* n : names)
        if (r.exists(group, n)) return n;
    return nullptr;
}

} // namespace banyan::hdf5
