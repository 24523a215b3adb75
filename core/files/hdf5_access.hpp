/**
 * @file hdf5_access.hpp
 * @brief The checked HDF5 calls that the files of HDF5 snapshots share (hdf5_write.cpp, hdf5_read.cpp,
 *        hdf5_units.cpp), and no other file includes (the public API is hdf5_snapshot.hpp): HDF5's error reason,
 *        identifiers closed when they go out of scope, the order of the particle types, writes of groups,
 *        attributes and datasets, and reads of attributes and datasets (Reader).
 *
 * HDF5's own error printing is off: every call is checked, and a failure becomes an exception that names the file,
 * the object and HDF5's reason: WriteFailure while writing (the public writers add the file), UsageError while
 * reading.
 *
 * Files are deterministic: objects carry no time stamps (H5Pset_obj_track_times off) and datasets are contiguous,
 * allocated when created and never filled, so the same snapshot gives the same bytes, whether one rank writes it or
 * several ranks write it in turns (a restarted run's snapshots equal those of a run that went straight through).
 */
#pragma once

#include <hdf5.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace banyan::hdf5 {

// ---- Errors and identifiers -------------------------------------------------------------------------------------

/// HDF5 prints its error stack to stderr by default; banyan reports errors itself.
void silence_hdf5();

/// The most specific message on HDF5's error stack (where the error was found), then the stack cleared.
std::string hdf5_reason();

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

// ---- Particle types ---------------------------------------------------------------------------------------------

inline constexpr int ntypes = 6;
/// The order of the types in a snapshot: gas, the collisionless ones, stars.
inline constexpr int type_order[ntypes] = {0, 1, 2, 3, 5, 4};

/// "PartType<t>".
std::string group_name(int t);

/// First row of each type in the snapshot's order.
std::array<std::uint64_t, ntypes> type_offsets(const std::array<std::uint64_t, ntypes>& counts);

// ---- Writing: every failure is a WriteFailure -------------------------------------------------------------------

/// For writes: @p id, or WriteFailure naming @p what.
hid_t must(hid_t id, const std::string& what);
void must_ok(herr_t rc, const std::string& what);

/// A new group @p name of @p parent, without time stamps.
Id make_group(hid_t parent, const std::string& name);

/// Attribute @p name of @p obj: @p count values (0: a scalar) of @p mem_type from @p data, stored as @p file_type.
void attr_raw(hid_t obj, const char* name, hid_t file_type, hid_t mem_type, std::size_t count, const void* data);
void attr_double(hid_t obj, const char* name, double v);
void attr_int(hid_t obj, const char* name, std::int32_t v);
/// A fixed-length string (h5py reads it as bytes, as yt expects of Header/Code; SWIFT writes them so too).
void attr_string(hid_t obj, const char* name, const std::string& v);

/// Dataset @p name of @p group: n rows of @p cols values (1: a 1-D dataset) of @p file_type, contiguous, allocated
/// now and never filled.
void make_dataset(hid_t group, const char* name, hid_t file_type, std::uint64_t n, int cols);

/// Rows [row, row + n) of dataset @p name of @p group from @p data (n * cols values of @p mem_type).
void write_slab(hid_t group, const std::string& gname, const char* name, hid_t mem_type, std::uint64_t row,
                std::uint64_t n, int cols, const void* data);

/// Creates @p path, truncating it.
Id create_file(const std::string& path);

/// Closes @p f, which writes what HDF5 still holds.
void close_file(Id& f);

/// The file at @p tmp made durable, then renamed to @p path.
void commit(const std::string& tmp, const std::string& path);

// ---- Reading: every failure is a UsageError that names the file -------------------------------------------------

/// Rows [first, first + count) of a dataset (count clipped to its length): a hyperslab, so that an MPI rank
/// reads its part alone.
struct Window {
    std::uint64_t first = 0;
    std::uint64_t count = static_cast<std::uint64_t>(-1);
};

/// Reading one file: every failure is a UsageError that names it.
struct Reader {
    std::string path;

    [[noreturn]] void fail(const std::string& problem) const;
    hid_t check(hid_t id, const std::string& what) const;
    void ok(herr_t rc, const std::string& what) const;
    bool exists(hid_t loc, const std::string& name) const;
    bool has_attr(hid_t obj, const char* name) const;

    /// The numbers of attribute @p name of @p obj (@p where names the object in messages).
    std::vector<double> numbers(hid_t obj, const std::string& where, const char* name) const;
    /// The one number of @p name, when the attribute is there.
    std::optional<double> number(hid_t obj, const std::string& where, const char* name) const;
    /// The text of string attribute @p name (fixed or variable length).
    std::string text(hid_t a, const std::string& what) const;

    /// Shape of dataset @p name of @p group, and whether it holds numbers.
    struct Shape {
        int rank = 0;
        hsize_t dims[2] = {0, 0};
    };
    Shape shape(hid_t d, const std::string& what) const;
    /// Fails unless @p type is an IEEE single or double, or a standard integer of 1, 2, 4 or 8 bytes.
    void check_number_type(hid_t type, const std::string& what) const;

    /// Fails unless the storage of dataset @p d (values of @p type) is where its data can be: a contiguous dataset's
    /// bytes, as many as its values take, stored and inside the file.
    void check_storage(hid_t d, hid_t type, const std::string& what) const;

    /// Dataset @p name of @p group, which must hold n x cols values, as floats (the rows of @p window only),
    /// converted from whatever real or integer type it has; a finite value beyond float's range is refused.
    /// @p optional: a 2-D dataset where a 1-D one is expected (a Metallicity of several elements) reads as nothing.
    std::vector<float> floats(hid_t group, const std::string& gname, const char* name, std::uint64_t n, int cols,
                              const std::string& count_source, bool optional = false, Window window = {}) const;

    /// Dataset @p name of @p group, which must hold n integers, as whole numbers 0 or more (the rows of @p window);
    /// a negative one is refused, naming its row, never converted (HDF5 would make it 0).
    std::vector<std::uint64_t> integers(hid_t group, const std::string& gname, const char* name, std::uint64_t n,
                                        const std::string& count_source, Window window = {}) const;
};

/// Which of @p names exists in @p group (SWIFT and GADGET name some fields differently), or nullptr.
const char* first_of(const Reader& r, hid_t group, std::initializer_list<const char*> names);

} // namespace banyan::hdf5
