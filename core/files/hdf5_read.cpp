/**
 * @file hdf5_read.cpp
 * @brief Reading HDF5 snapshots (hdf5_snapshot.hpp) of GADGET-2, GADGET-4, SWIFT, AREPO, h5py scripts and banyan, in
 *        steps: open the file, its Header (counts, mass table, time), its units, the writer and the run's
 *        parameters, then the particles of each type, and last the conversion to G = 1. The file's structure is
 *        read once before, in a child process (child_process.hpp), so that a file that crashes HDF5 is refused.
 */
#include "core/files/hdf5_snapshot.hpp"

#include "core/files/child_process.hpp"
#include "core/files/hdf5_access.hpp"
#include "core/files/hdf5_fields.hpp"
#include "core/files/hdf5_units.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

namespace banyan {

using namespace hdf5; // the checked calls of hdf5_access.hpp and the units of hdf5_units.hpp

namespace {

/// What Header says.
struct Header {
    const char* count_name = nullptr;           ///< where the counts came from: NumPart_ThisFile or NumPart_Total
    std::array<std::uint64_t, ntypes> counts{}; ///< particles per type
    std::vector<double> mass_table;             ///< the mass of every particle of a type without Masses (0: none)
    double time = 0;
};

/// Which fields of hdf5_fields.hpp some type with particles lacked.
using Lacking = std::array<bool, std::size(fields)>;

/// The file at r.path opened, after the checks that say why a path is no HDF5 file.
Id open_file(const Reader& r)
{
    const std::string& path = r.path;
    std::error_code ec;
    const auto status = std::filesystem::status(path, ec);
    if (ec || !std::filesystem::exists(status)) r.fail("cannot open file: no such file");
    if (!std::filesystem::is_regular_file(status))
        r.fail(fmt::format("not a regular file ({})",
                           std::filesystem::is_directory(status) ? "a folder" : "a pipe, socket or device"));
    const htri_t is = H5Fis_hdf5(path.c_str());
    if (is == 0) r.fail("not an HDF5 file (no HDF5 signature)");
    if (is < 0) r.fail(fmt::format("cannot be read as HDF5: {}", hdf5_reason()));
    Id file(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), H5Fclose);
    if (!file.valid()) r.fail(fmt::format("cannot open as HDF5: {} (a truncated or damaged file?)", hdf5_reason()));
    return file;
}

/// The group Header of @p f, which a snapshot must have.
Id open_header(const Reader& r, hid_t f)
{
    if (!r.exists(f, "Header"))
        r.fail("no Header group: not a GADGET / SWIFT snapshot (it needs Header with NumPart_ThisFile, and PartTypeK "
               "groups)");
    return Id(r.check(H5Gopen2(f, "Header", H5P_DEFAULT), "Header"), H5Gclose);
}

/// The particles per type of Header @p h into head.counts: NumPart_ThisFile, else NumPart_Total (with
/// NumPart_Total_HighWord); whole numbers below 2^31 in all.
void read_counts(const Reader& r, hid_t h, Header& head)
{
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
    head.count_name = count_name;
    std::array<std::uint64_t, ntypes>& counts = head.counts;
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
}

/// Header @p h: one file per snapshot, the counts, the mass table (zeros when absent) and the time (0 when absent).
Header read_header(const Reader& r, hid_t h)
{
    if (const auto files = r.number(h, "Header", "NumFilesPerSnapshot"); files && *files != 1.0)
        r.fail(fmt::format("Header/NumFilesPerSnapshot is {}: banyan reads snapshots of one file (join the {} files "
                           "first)",
                           *files, *files));
    Header head;
    read_counts(r, h, head);
    head.mass_table.assign(ntypes, 0.0);
    if (r.has_attr(h, "MassTable")) {
        head.mass_table = r.numbers(h, "Header", "MassTable");
        if (head.mass_table.size() != ntypes)
            r.fail(fmt::format("Header/MassTable has {} entries; it has one per particle type, 6",
                               head.mass_table.size()));
    }
    head.time = r.number(h, "Header", "Time").value_or(0.0);
    if (!std::isfinite(head.time)) r.fail(fmt::format("Header/Time is {}; it must be finite", head.time));
    return head;
}

/// The writer: the string attributes Code and CodeVersion of Header @p h, joined by a space ("" when neither).
std::string read_code(const Reader& r, hid_t h)
{
    std::string code;
    for (const char* name : {"Code", "CodeVersion"})
        if (r.has_attr(h, name)) {
            const Id a(r.check(H5Aopen(h, name, H5P_DEFAULT), name), H5Aclose);
            const Id type(r.check(H5Aget_type(a.get()), name), H5Tclose);
            if (H5Tget_class(type.get()) != H5T_STRING) continue;
            const std::string v = r.text(a.get(), fmt::format("Header/{}", name));
            code += (code.empty() ? "" : " ") + v;
        }
    return code;
}

/// The string attributes of the group Parameters of @p f as key=value lines (none a line cannot hold).
std::string read_parameters(const Reader& r, hid_t f)
{
    std::string lines;
    if (!r.exists(f, "Parameters")) return lines;
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
        lines += key + "=" + value + "\n";
    }
    return lines;
}

/// A snapshot of @p counts particles, every field there and zero (or only the counts, without @p with_fields).
Snapshot sized_snapshot(const std::array<std::uint64_t, ntypes>& counts, bool with_fields = true)
{
    Snapshot s;
    s.n_gas = counts[0];
    s.n_star = counts[4];
    s.n_dark = counts[1] + counts[2] + counts[3] + counts[5];
    s.n_type2 = counts[2], s.n_type3 = counts[3], s.n_type5 = counts[5];
    if (!with_fields) return s;
    for (const Field& f : fields) {
        const std::size_t size = full_size(f, s.size(), s.n_gas, s.n_star);
        if (f.floats)
            (s.*f.floats).resize(size);
        else
            (s.*f.ints).resize(size);
    }
    return s;
}

/// @p from into @p to from index @p where on.
void place(const std::vector<float>& from, std::vector<float>& to, std::size_t where)
{
    std::copy(from.begin(), from.end(), to.begin() + static_cast<std::ptrdiff_t>(where));
}

/// The rows @p w of the particles of type @p t (group PartType<t> of @p f) into rows [at, at + w.count) of @p s, and
/// of its kind from @p kind_at on: every field of hdf5_fields.hpp the type has, in their order, by their name or the
/// other one; @p lacking learns which fields this type lacked.
void read_type(const Reader& r, hid_t f, const Header& head, int t, std::size_t at, std::size_t kind_at, Window w,
               bool need_velocities, Snapshot& s, Lacking& lacking)
{
    const std::uint64_t m = head.counts[static_cast<std::size_t>(t)];
    const std::string gname = group_name(t);
    const std::string source = fmt::format("Header/{}[{}]", head.count_name, t);
    // The group and its positions are there, as many as the header says (check_counts).
    const Id group(r.check(H5Gopen2(f, gname.c_str(), H5P_DEFAULT), gname), H5Gclose);
    const hid_t g = group.get();
    for (std::size_t k = 0; k < std::size(fields); ++k) {
        const Field& field = fields[k];
        if (!has(field, kind_of_type(t))) continue;
        const char* name = field.other_name          ? first_of(r, g, {field.name, field.other_name})
                           : r.exists(g, field.name) ? field.name
                                                     : nullptr;
        if (!name) {
            switch (field.absent) {
            case Absent::required:
                r.fail(fmt::format("{}/{} is missing", gname, field.name));
            case Absent::velocities:
                if (need_velocities)
                    r.fail(fmt::format("{}/{} is missing: a run cannot start without velocities (banyan forces "
                                       "needs positions and masses only)",
                                       gname, field.name));
                break;
            case Absent::mass_table: {
                const double mt = head.mass_table[static_cast<std::size_t>(t)];
                if (!(mt > 0))
                    r.fail(fmt::format("{} has no {} dataset and Header/MassTable[{}] is {}: the particles have no "
                                       "mass",
                                       gname, field.name, t, mt));
                if (!(mt <= std::numeric_limits<float>::max()))
                    r.fail(fmt::format("Header/MassTable[{}] is {}, beyond single precision's range", t, mt));
                std::fill_n((s.*field.floats).begin() + static_cast<std::ptrdiff_t>(at), w.count,
                            static_cast<float>(mt));
                break;
            }
            case Absent::dropped:
            case Absent::indices:
            case Absent::no_softening:
                lacking[k] = true;
                break;
            case Absent::zero:
                break;
            }
            continue;
        }
        const std::size_t into = static_cast<std::size_t>(field.cols) * (field.per_kind ? at - kind_at : at);
        if (field.ints) {
            const auto v = r.integers(g, gname, name, m, source, w);
            std::copy(v.begin(), v.end(), (s.*field.ints).begin() + static_cast<std::ptrdiff_t>(into));
        } else {
            place(r.floats(g, gname, name, m, field.cols, source, field.optional_2d, w), s.*field.floats, into);
        }
    }
}

/// The header's counts against the lengths of the position datasets, before anything of their size is allocated: a
/// header that promises more particles than the file holds is a damaged file, not a lack of host memory.
void check_counts(const Reader& r, hid_t f, const Header& head)
{
    for (int t = 0; t < static_cast<int>(ntypes); ++t) {
        const std::uint64_t m = head.counts[static_cast<std::size_t>(t)];
        if (m == 0) continue;
        const std::string gname = group_name(t);
        const std::string source = fmt::format("Header/{}[{}]", head.count_name, t);
        if (!r.exists(f, gname))
            r.fail(fmt::format("{} says {} particles of type {} but there is no {} group", source, m, t, gname));
        const Id group(r.check(H5Gopen2(f, gname.c_str(), H5P_DEFAULT), gname), H5Gclose);
        if (!r.exists(group.get(), "Coordinates"))
            r.fail(fmt::format("{}/Coordinates is missing: no positions", gname));
        const std::string what = gname + "/Coordinates";
        const Id d(r.check(H5Dopen2(group.get(), "Coordinates", H5P_DEFAULT), what), H5Dclose);
        const auto shape = r.shape(d.get(), what);
        if (shape.rank >= 1 && shape.dims[0] != m)
            r.fail(fmt::format("{} holds {} rows but {} says {} particles: the header's counts and the datasets "
                               "disagree",
                               what, shape.dims[0], source, m));
    }
}

/// Every type with particles has the fields of Absent::indices (ParticleIDs), or none has: ids for some types only
/// would leave the others' particles without ids that are sure not to collide with the given ones, and dropping the
/// given ones would change the particles' identities without a word. Checked over the whole file, whatever rows are
/// read, so that all ranks agree.
void check_ids(const Reader& r, hid_t f, const Header& head)
{
    for (const Field& field : fields) {
        if (field.absent != Absent::indices) continue;
        int with = -1, without = -1;
        for (int t = 0; t < static_cast<int>(ntypes); ++t) {
            if (head.counts[static_cast<std::size_t>(t)] == 0 || !has(field, kind_of_type(t))) continue;
            const std::string gname = group_name(t);
            const Id group(r.check(H5Gopen2(f, gname.c_str(), H5P_DEFAULT), gname), H5Gclose);
            int& first = r.exists(group.get(), field.name) ? with : without;
            if (first < 0) first = t;
        }
        if (with >= 0 && without >= 0)
            r.fail(fmt::format("{}/{} is missing but {}/{} is there: particle ids for some types only (give every "
                               "type with particles its ids, or none)",
                               group_name(without), field.name, group_name(with), field.name));
    }
}

/// The read of read_hdf5 (its rows @p rows), or with @p probe only what HDF5 decodes of the file's structure: the
/// header, units, writer and parameters, and of every type with particles each dataset's type, shape and first row.
Snapshot read_file(const Reader& r, SnapshotMeta* meta_out, bool need_velocities, Rows rows, FileCounts* whole,
                   bool probe)
{
    const Id file = open_file(r);
    const hid_t f = file.get();
    const Id header = open_header(r, f);
    const Header head = read_header(r, header.get());

    SnapshotMeta meta;
    double file_velocity = 0;
    const Units units = read_units(r, f, file_velocity);
    meta.velocity_factor = velocity_factor(units, file_velocity);
    meta.code = read_code(r, header.get());
    meta.parameters = read_parameters(r, f);

    if (whole) {
        const Snapshot counts = sized_snapshot(head.counts, false);
        *whole = FileCounts{counts.n_gas, counts.n_dark, counts.n_star, counts.n_type2, counts.n_type3, counts.n_type5};
    }
    // The rows asked for, type by type (the file's order is types 0, 1, 2, 3, 5, 4: gas, dark, stars).
    const auto off = type_offsets(head.counts);
    std::uint64_t total = 0;
    for (const auto c : head.counts)
        total += c;
    const std::uint64_t first = std::min<std::uint64_t>(rows.first, total);
    const std::uint64_t end = first + std::min<std::uint64_t>(rows.count, total - first);
    std::array<Window, ntypes> windows{};
    std::array<std::uint64_t, ntypes> mine{};
    for (std::size_t t = 0; t < ntypes; ++t) {
        const std::uint64_t lo = std::max(first, off[t]), hi = std::min(end, off[t] + head.counts[t]);
        windows[t] =
            probe ? Window{0, std::min<std::uint64_t>(1, head.counts[t])} : Window{lo - off[t], hi > lo ? hi - lo : 0};
        mine[t] = windows[t].count;
    }
    check_counts(r, f, head);
    check_ids(r, f, head);
    Snapshot s = sized_snapshot(mine);
    s.time = head.time;
    s.units = units;
    Lacking lacking{};
    const auto at = type_offsets(mine);
    for (const int t : type_order) {
        const Kind kind = kind_of_type(t);
        const std::size_t kind_at = kind == gas ? 0 : kind == star ? s.n_gas + s.n_dark : s.n_gas;
        if (mine[static_cast<std::size_t>(t)] > 0)
            read_type(r, f, head, t, at[static_cast<std::size_t>(t)], kind_at, windows[static_cast<std::size_t>(t)],
                      need_velocities, s, lacking);
    }
    for (std::size_t k = 0; k < std::size(fields); ++k) {
        if (!lacking[k]) continue;
        const Field& field = fields[k];
        if (field.absent == Absent::no_softening)
            meta.has_softening = false;
        else if (field.floats)
            (s.*field.floats).clear();
        else
            (s.*field.ints).clear();
    }

    if (meta.velocity_factor != 1.0) rescale_to_g1(r, s, meta.velocity_factor);
    if (meta_out) *meta_out = std::move(meta);
    return s;
}

} // namespace

bool has_hdf5_signature(const std::string& path)
{
    std::error_code ec;
    const auto size = std::filesystem::file_size(path, ec);
    if (ec) return false;
    std::ifstream in(path, std::ios::binary);
    static constexpr char signature[8] = {'\x89', 'H', 'D', 'F', '\r', '\n', '\x1a', '\n'};
    // HDF5 looks for its superblock at 0, 512, 1024, 2048, ... (after a user block of that size).
    for (std::uintmax_t at = 0; at + 8 <= size; at = at ? 2 * at : 512) {
        char head[8];
        in.seekg(static_cast<std::streamoff>(at));
        if (!in.read(head, 8)) break;
        if (std::memcmp(head, signature, 8) == 0) return true;
    }
    return false;
}

Snapshot read_hdf5(const std::string& path, SnapshotMeta* meta_out, bool need_velocities, Rows rows, FileCounts* whole)
{
    silence_hdf5();
    const Reader r{path};
    // HDF5 1.10 has known crashes (CVEs: out-of-bounds reads and writes, null pointers) on crafted object headers,
    // attribute, datatype, dataspace and layout messages, and banyan must refuse a damaged file (exit 2), not die of
    // it: the file's structure is decoded first in a child process. A crash there is a UsageError; a clean refusal
    // there is given again, with its reason, by the read here, which starts from the same memory as the child did.
    // The cost is a fork per file read: about 1 ms for a small process, 50 ms for one holding 1 GB (a 2-core VM),
    // whose next write to each of its pages then faults once more (0.4 s for all of 1 GB there).
    in_child_process([&] { read_file(r, nullptr, need_velocities, {}, nullptr, true); },
                     fmt::format("{}: the HDF5 library crashed reading the file's header and structure: a damaged or "
                                 "crafted file",
                                 path));
    return read_file(r, meta_out, need_velocities, rows, whole, false);
}

} // namespace banyan
