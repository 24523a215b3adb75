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
#include <optional>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

namespace banyan {

using namespace hdf5; // the checked calls of hdf5_access.hpp and the units of hdf5_units.hpp

namespace {

using Counts = std::array<std::uint64_t, ntypes>;

/// The most files a snapshot set may have (GADGET writes one per task, or per group of tasks).
constexpr double max_set_files = 1 << 20;

/// What Header says.
struct Header {
    const char* count_name = nullptr; ///< where the counts came from: NumPart_ThisFile or NumPart_Total
    Counts counts{};                  ///< particles per type in this file
    std::optional<Counts> total;      ///< NumPart_Total (with NumPart_Total_HighWord): the whole snapshot's, if given
    std::uint64_t files = 1;          ///< NumFilesPerSnapshot: the files of the snapshot (a set when more than 1)
    std::vector<double> mass_table;   ///< the mass of every particle of a type without Masses (0: none)
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

/// The six counts of attribute @p name of Header @p h, plus 2^32 times those of @p high_name when given and there:
/// whole numbers from 0 to 2^53 (what a double holds exactly).
Counts read_counts(const Reader& r, hid_t h, const char* name, const char* high_name = nullptr)
{
    const std::vector<double> np = r.numbers(h, "Header", name);
    if (np.size() != ntypes)
        r.fail(fmt::format("Header/{} has {} entries; a GADGET header has 6, one per particle type", name, np.size()));
    std::vector<double> high(ntypes, 0.0);
    if (high_name && r.has_attr(h, high_name)) {
        high = r.numbers(h, "Header", high_name);
        if (high.size() != ntypes) r.fail(fmt::format("Header/{} does not have 6 entries", high_name));
    }
    Counts counts{};
    for (int t = 0; t < ntypes; ++t) {
        const double c = np[static_cast<std::size_t>(t)] + std::ldexp(high[static_cast<std::size_t>(t)], 32);
        if (!(c >= 0 && c == std::floor(c) && c <= 0x1p53))
            r.fail(fmt::format("Header/{}[{}] is {}: particle counts are whole numbers from 0 to 2^53", name, t, c));
        counts[static_cast<std::size_t>(t)] = static_cast<std::uint64_t>(c);
    }
    return counts;
}

/// Header @p h: the files of the snapshot, the counts (this file's: NumPart_ThisFile, else NumPart_Total), the whole
/// snapshot's (NumPart_Total with NumPart_Total_HighWord), the mass table (zeros when absent) and the time (0 when
/// absent).
Header read_header(const Reader& r, hid_t h)
{
    Header head;
    if (const auto files = r.number(h, "Header", "NumFilesPerSnapshot")) {
        if (!(*files >= 1 && *files <= max_set_files && *files == std::floor(*files)))
            r.fail(fmt::format("Header/NumFilesPerSnapshot is {}: a snapshot is 1 to {} files", *files, max_set_files));
        head.files = static_cast<std::uint64_t>(*files);
    }
    // A file of one snapshot is read by its own counts: its NumPart_Total is read only in their place (some writers
    // leave it wrong there).
    const bool this_file = r.has_attr(h, "NumPart_ThisFile");
    if (r.has_attr(h, "NumPart_Total") && (head.files > 1 || !this_file))
        head.total = read_counts(r, h, "NumPart_Total", "NumPart_Total_HighWord");
    if (this_file) {
        head.count_name = "NumPart_ThisFile";
        head.counts = read_counts(r, h, "NumPart_ThisFile");
    } else if (head.total && head.files == 1) {
        head.count_name = "NumPart_Total";
        head.counts = *head.total;
    } else {
        r.fail(head.files == 1 ? "Header has no NumPart_ThisFile (nor NumPart_Total): the particle counts are missing"
                               : "Header has no NumPart_ThisFile: the particle counts of this file of a set are "
                                 "missing");
    }
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
/// read, so that all ranks agree. Returns whether the file's particles have them (false for a file without
/// particles).
bool check_ids(const Reader& r, hid_t f, const Header& head)
{
    bool any = false;
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
        any |= with >= 0;
    }
    return any;
}

/// A file of a snapshot (its only one, or one of its set) opened, with its header.
struct OpenFile {
    Id file;
    Id header; ///< the group
    Header head;
};

OpenFile open_snapshot_file(const Reader& r)
{
    OpenFile o;
    o.file = open_file(r);
    o.header = open_header(r, o.file.get());
    o.head = read_header(r, o.header.get());
    return o;
}

/// The file's units, writer and parameters.
SnapshotMeta read_meta(const Reader& r, const OpenFile& o, Units& units)
{
    SnapshotMeta meta;
    double file_velocity = 0;
    units = read_units(r, o.file.get(), file_velocity);
    meta.velocity_factor = velocity_factor(units, file_velocity);
    meta.code = read_code(r, o.header.get());
    meta.parameters = read_parameters(r, o.file.get());
    return meta;
}

/// The windows @p w of the types of the file @p o into @p s, type t's rows from row @p at[t] of @p s on.
void read_windows(const Reader& r, const OpenFile& o, const std::array<Window, ntypes>& w,
                  const std::array<std::uint64_t, ntypes>& at, bool need_velocities, Snapshot& s, Lacking& lacking)
{
    for (const int t : type_order) {
        const std::size_t k = static_cast<std::size_t>(t);
        if (w[k].count == 0) continue;
        const Kind kind = kind_of_type(t);
        const std::size_t kind_at = kind == gas ? 0 : kind == star ? s.n_gas + s.n_dark : s.n_gas;
        read_type(r, o.file.get(), o.head, t, at[k], kind_at, w[k], need_velocities, s, lacking);
    }
}

/// What HDF5 decodes of the structure of the file at @p path: the header, units, writer and parameters, and of every
/// type with particles each dataset's type, shape and first row (read_hdf5 does it in a child process first).
void probe_file(const std::string& path, bool need_velocities)
{
    const Reader r{path};
    const OpenFile o = open_snapshot_file(r);
    Units units;
    read_meta(r, o, units);
    check_counts(r, o.file.get(), o.head);
    check_ids(r, o.file.get(), o.head);
    std::array<Window, ntypes> w{};
    Counts first{};
    for (std::size_t t = 0; t < ntypes; ++t)
        w[t] = Window{0, std::min<std::uint64_t>(1, o.head.counts[t])}, first[t] = w[t].count;
    Snapshot s = sized_snapshot(first);
    Lacking lacking{};
    read_windows(r, o, w, type_offsets(first), need_velocities, s, lacking);
}

/// "c0, c1, c2, c3, c4, c5".
std::string counts_text(const Counts& c)
{
    return fmt::format("{}, {}, {}, {}, {}, {}", c[0], c[1], c[2], c[3], c[4], c[5]);
}

/// The read of read_hdf5 from the files @p names of a snapshot (one, or a set's in order): its rows @p rows of the
/// whole, type by type over the files (type t of the whole is type t of file 0, then of file 1, ...). The files'
/// headers are read first, one at a time, and must agree: the set's files and counts, the time, and the counts of
/// the files adding up to the set's; then only the files that hold rows asked for are read.
Snapshot read_files(const std::vector<std::string>& names, SnapshotMeta* meta_out, bool need_velocities, Rows rows,
                    FileCounts* whole)
{
    const std::size_t K = names.size();
    const Reader first_reader{names[0]};
    std::vector<Counts> counts(K);
    Counts total{}, sum{};
    SnapshotMeta meta;
    Units units;
    double time = 0;
    bool ids = false;
    std::size_t with_particles = K; // the first file with particles
    for (std::size_t k = 0; k < K; ++k) {
        const Reader r{names[k]};
        const OpenFile o = open_snapshot_file(r);
        const Header& h = o.head;
        if (k == 0) {
            meta = read_meta(r, o, units);
            time = h.time;
            total = K == 1 ? h.counts : *h.total;
        } else if (h.files != K) {
            r.fail(fmt::format("Header/NumFilesPerSnapshot is {} but {} says {}: files of different snapshots", h.files,
                               names[0], K));
        } else if (h.time != time) {
            r.fail(
                fmt::format("Header/Time is {} but {} says {}: files of different snapshots", h.time, names[0], time));
        }
        if (K > 1 && !h.total)
            r.fail(fmt::format("Header has no NumPart_Total: a file of a set of {} needs the counts of the whole", K));
        if (K > 1 && *h.total != total)
            r.fail(fmt::format("Header/NumPart_Total (with NumPart_Total_HighWord) is {} but {} says {}: files of "
                               "different snapshots",
                               counts_text(*h.total), names[0], counts_text(total)));
        check_counts(r, o.file.get(), h);
        const bool has_ids = check_ids(r, o.file.get(), h);
        counts[k] = h.counts;
        bool particles = false;
        for (std::size_t t = 0; t < ntypes; ++t)
            sum[t] += h.counts[t], particles |= h.counts[t] > 0;
        if (!particles) continue;
        if (with_particles == K)
            with_particles = k, ids = has_ids;
        else if (has_ids != ids)
            r.fail(fmt::format("its particles {} ids (ParticleIDs) but those of {} {}: give every file of the set "
                               "its ids, or none",
                               has_ids ? "have" : "have no", names[with_particles], ids ? "have" : "have none"));
    }
    if (sum != total)
        first_reader.fail(fmt::format("the NumPart_ThisFile of its set's {} files add up to {} but NumPart_Total says "
                                      "{}: a file of the set is missing or of another snapshot",
                                      K, counts_text(sum), counts_text(total)));
    if (whole) {
        const Snapshot c = sized_snapshot(total, false);
        *whole = FileCounts{c.n_gas, c.n_dark, c.n_star, c.n_type2, c.n_type3, c.n_type5};
    }
    // The rows asked for, type by type (the whole's order is types 0, 1, 2, 3, 5, 4: gas, dark, stars): of type t
    // those [lo[t], lo[t] + mine[t]) among the whole's.
    const auto off = type_offsets(total);
    std::uint64_t n = 0;
    for (const auto c : total)
        n += c;
    const std::uint64_t first = std::min<std::uint64_t>(rows.first, n);
    const std::uint64_t end = first + std::min<std::uint64_t>(rows.count, n - first);
    Counts lo{}, mine{};
    for (std::size_t t = 0; t < ntypes; ++t) {
        const std::uint64_t a = std::clamp(first, off[t], off[t] + total[t]);
        const std::uint64_t b = std::clamp(end, off[t], off[t] + total[t]);
        lo[t] = a - off[t], mine[t] = b - a;
    }
    Snapshot s = sized_snapshot(mine);
    s.time = time;
    s.units = units;
    Lacking lacking{};
    const auto at = type_offsets(mine);
    Counts before{}; // of each type, the particles of the files before file k
    for (std::size_t k = 0; k < K; ++k) {
        std::array<Window, ntypes> w;
        w.fill(Window{0, 0}); // none of a type unless below
        std::array<std::uint64_t, ntypes> to{};
        bool any = false;
        for (std::size_t t = 0; t < ntypes; ++t) {
            const std::uint64_t a = std::max(lo[t], before[t]);
            const std::uint64_t b = std::min(lo[t] + mine[t], before[t] + counts[k][t]);
            if (a < b) w[t] = Window{a - before[t], b - a}, to[t] = at[t] + (a - lo[t]), any = true;
            before[t] += counts[k][t];
        }
        if (!any) continue;
        const Reader r{names[k]};
        const OpenFile o = open_snapshot_file(r);
        if (o.head.counts != counts[k]) r.fail("the file changed while it was read");
        read_windows(r, o, w, to, need_velocities, s, lacking);
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

    if (meta.velocity_factor != 1.0) rescale_to_g1(first_reader, s, meta.velocity_factor);
    if (meta_out) *meta_out = std::move(meta);
    return s;
}

/// "<stem>.<k><ext>" of @p path, split: the stem with its folder, and the extension ("snap.hdf5": "snap", ".hdf5").
std::pair<std::string, std::string> stem_and_extension(const std::string& path)
{
    const std::filesystem::path p(path);
    const std::string ext = p.extension().string();
    return {path.substr(0, path.size() - ext.size()), ext};
}

/// The file that the snapshot @p path names starts with: @p path when it exists, else the first of a set of that
/// name (hdf5_set_file(path, 0), or "<path>.0.hdf5" for a base name) when one exists, else @p path (whose read then
/// says that it is missing).
std::string first_file(const std::string& path)
{
    std::error_code ec;
    if (std::filesystem::exists(std::filesystem::symlink_status(path, ec))) return path;
    for (const std::string& name : {hdf5_set_file(path, 0), path + ".0.hdf5"})
        if (std::filesystem::is_regular_file(name, ec)) return name;
    return path;
}

/// The files of the set that @p first (a file whose header says @p files) belongs to, in order: "<base>.<k><ext>"
/// for k = 0 .. files - 1, from its name "<base>.<i><ext>"; itself alone when @p files is 1.
std::vector<std::string> set_names(const Reader& r, std::uint64_t files)
{
    if (files == 1) return {r.path};
    const auto [stem, ext] = stem_and_extension(r.path);
    const std::size_t dot = stem.rfind('.');
    const std::string index = dot == std::string::npos ? std::string() : stem.substr(dot + 1);
    const bool numbered = !index.empty() && index.size() < 10 &&
                          std::all_of(index.begin(), index.end(), [](char c) { return c >= '0' && c <= '9'; });
    if (!numbered || std::stoull(index) >= files)
        r.fail(fmt::format("Header/NumFilesPerSnapshot is {}, but the file's name is not that of a file of a set of "
                           "{} (<name>.<0 to {}>{})",
                           files, files, files - 1, ext));
    std::vector<std::string> names(files);
    for (std::uint64_t k = 0; k < files; ++k)
        names[k] = fmt::format("{}.{}{}", stem.substr(0, dot), k, ext);
    return names;
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
    // A snapshot of one file, or a set of several (first_file: the path given, or its set's first file).
    const Reader r{first_file(path)};
    // HDF5 1.10 has known crashes (CVEs: out-of-bounds reads and writes, null pointers) on crafted object headers,
    // attribute, datatype, dataspace and layout messages, and banyan must refuse a damaged file (exit 2), not die of
    // it: the file's structure is decoded first in a child process. A crash there is a UsageError; a clean refusal
    // there is given again, with its reason, by the read here, which starts from the same memory as the child did.
    // The cost is a fork per file read: about 1 ms for a small process, 50 ms for one holding 1 GB (a 2-core VM),
    // whose next write to each of its pages then faults once more (0.4 s for all of 1 GB there). A set's other
    // files are probed together in a second child, once the first file's header has named them.
    in_child_process([&] { probe_file(r.path, need_velocities); },
                     fmt::format("{}: the HDF5 library crashed reading the file's header and structure: a damaged or "
                                 "crafted file",
                                 r.path));
    std::vector<std::string> names;
    {
        const OpenFile o = open_snapshot_file(r);
        names = set_names(r, o.head.files);
    }
    if (names.size() > 1) {
        for (const std::string& name : names) {
            std::error_code ec;
            if (!std::filesystem::exists(std::filesystem::symlink_status(name, ec)))
                Reader{name}.fail(fmt::format("missing: the snapshot {} is a set of {} files (Header/"
                                              "NumFilesPerSnapshot), of which this is one",
                                              r.path, names.size()));
        }
        in_child_process(
            [&] {
                for (std::size_t k = 1; k < names.size(); ++k)
                    probe_file(names[k], need_velocities);
            },
            fmt::format("{}: the HDF5 library crashed reading the headers and structure of the other files of its set "
                        "({} to {}): a damaged or crafted file",
                        r.path, names[1], names.back()));
    }
    return read_files(names, meta_out, need_velocities, rows, whole);
}

bool is_hdf5_snapshot(const std::string& path)
{
    return has_hdf5_signature(first_file(path));
}

std::string hdf5_set_file(const std::string& path, std::uint64_t k)
{
    const auto [stem, ext] = stem_and_extension(path);
    return fmt::format("{}.{}{}", stem, k, ext);
}

} // namespace banyan
