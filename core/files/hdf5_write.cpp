/**
 * @file hdf5_write.cpp
 * @brief Writing HDF5 snapshots (hdf5_snapshot.hpp): the layout (header, metadata, every dataset of hdf5_fields.hpp at
 *        its full size), then the particles' rows; whole snapshots through a temporary name and a rename, or, for
 * writers over several ranks (core/parallel/parallel_files.cpp), the layout first and each rank's rows in its turn.
 */
#include "core/files/hdf5_snapshot.hpp"

#include "core/error.hpp"
#include "core/files/atomic_file.hpp"
#include "core/files/hdf5_access.hpp"
#include "core/files/hdf5_fields.hpp"
#include "core/files/hdf5_units.hpp"
#include "core/files/key_values.hpp"
#include "core/version.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <stdexcept>
#include <unistd.h>
#include <vector>

namespace banyan {

using namespace hdf5; // the checked calls of hdf5_access.hpp and the units of hdf5_units.hpp

namespace {

/// The file type of @p f's dataset.
hid_t file_type(const Field& f)
{
    return f.stored == Stored::u64 ? H5T_STD_U64LE : H5T_IEEE_F32LE;
}

/// Header, Parameters, Units and every dataset of types with particles, at full size: those of hdf5_fields.hpp, but
/// a dropped one (Acceleration) only where @p known holds it (nullptr: every one). The file holds @p counts of each
/// type, of a snapshot of @p set.total in @p set.files files.
void create_layout(hid_t file, double time, const std::array<std::uint64_t, ntypes>& counts, const Hdf5Set& set,
                   const Snapshot* known, const Units& units, const SnapshotMeta& meta)
{
    std::uint64_t n = 0;
    for (const auto c : counts)
        n += c;
    if (n > max_file_particles()) // the callers split larger snapshots into sets
        throw std::logic_error(fmt::format("HDF5: {} particles in one file, more than {}", n, max_file_particles()));
    {
        const Id h = make_group(file, "Header");
        std::int32_t this_file[ntypes];
        std::uint32_t low[ntypes], high[ntypes];
        for (int t = 0; t < ntypes; ++t) {
            const std::uint64_t c = set.total[static_cast<std::size_t>(t)];
            this_file[t] = static_cast<std::int32_t>(counts[static_cast<std::size_t>(t)]); // at most 2^31 - 1: above
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
        attr_int(h.get(), "NumFilesPerSnapshot", static_cast<std::int32_t>(set.files));
        attr_int(h.get(), "Flag_Sfr", 0);
        attr_int(h.get(), "Flag_Cooling", 0);
        attr_int(h.get(), "Flag_Feedback", 0);
        attr_int(h.get(), "Flag_StellarAge", set.total[4] > 0 ? 1 : 0);
        attr_int(h.get(), "Flag_Metals", set.total[0] + set.total[4] > 0 ? 1 : 0);
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
        write_unit_parameters(p.get(), time, units);
    }
    write_units_group(file, units);
    for (const int t : type_order) {
        const std::uint64_t n = counts[static_cast<std::size_t>(t)];
        if (n == 0) continue;
        const Id g = make_group(file, group_name(t));
        for (const Field& f : fields)
            if (has(f, kind_of_type(t)) && (f.absent != Absent::dropped || !known || size_in(*known, f) > 0))
                make_dataset(g.get(), f.name, file_type(f), n, f.cols);
    }
}

/// Rows [first, first + rows.size()) of the file's order, split over the types: every field of hdf5_fields.hpp that
/// the rows hold (@p rows' arrays; its gas and star fields those of the gas and stars among the rows, which the
/// file's @p counts say). Rows without ids get their indices in the whole snapshot, whose row @p file_first the
/// file's first is.
void write_rows(hid_t file, const std::array<std::uint64_t, ntypes>& counts, std::uint64_t first, const Snapshot& rows,
                std::uint64_t file_first = 0)
{
    const std::uint64_t n = rows.size();
    const std::vector<std::uint64_t>& ids = rows.ids;
    if (!ids.empty() && ids.size() != n) throw std::invalid_argument("HDF5 snapshot rows: ids disagree with the rows");
    // Gas rows come first in the snapshot's order, stars last.
    std::uint64_t total = 0;
    for (const auto c : counts)
        total += c;
    const std::uint64_t gas_end = std::min(first + n, counts[0]), star_begin = total - counts[4];
    const std::uint64_t ngas = gas_end > first ? gas_end - first : 0;
    const std::uint64_t star_first = std::max(first, star_begin);
    const std::uint64_t nstar = first + n > star_first ? first + n - star_first : 0;
    for (const Field& f : fields)
        if (f.per_kind && size_in(rows, f) != full_size(f, n, ngas, nstar))
            throw std::invalid_argument("HDF5 snapshot rows: gas or star fields disagree with the rows");
    const auto off = type_offsets(counts);
    for (const int t : type_order) {
        const std::uint64_t a = off[static_cast<std::size_t>(t)], b = a + counts[static_cast<std::size_t>(t)];
        const std::uint64_t lo = std::max(a, first), hi = std::min(b, first + n);
        if (lo >= hi) continue;
        const std::string gname = group_name(t);
        const Id g(must(H5Gopen2(file, gname.c_str(), H5P_DEFAULT), "open group " + gname), H5Gclose);
        const std::uint64_t row = lo - a, m = hi - lo, i = lo - first;
        const Kind kind = kind_of_type(t);
        // The first of the rows of this kind, for the fields held per kind.
        const std::uint64_t kind_first = kind == gas ? 0 : kind == star ? n - nstar : ngas;
        for (const Field& f : fields) {
            if (!has(f, kind)) continue;
            const std::uint64_t at = static_cast<std::uint64_t>(f.cols) * (f.per_kind ? i - kind_first : i);
            if (f.ints) {
                const std::vector<std::uint64_t>& v = rows.*f.ints;
                std::vector<std::uint64_t> index;
                const std::uint64_t* id = nullptr;
                if (v.empty()) {
                    index.resize(m);
                    for (std::uint64_t k = 0; k < m; ++k)
                        index[k] = file_first + lo + k; // the row in the snapshot's order
                    id = index.data();
                } else {
                    id = v.data() + at;
                }
                write_slab(g.get(), gname, f.name, H5T_NATIVE_UINT64, row, m, f.cols, id);
            } else {
                const std::vector<float>& v = rows.*f.floats;
                if (v.empty() && f.absent == Absent::dropped) continue; // not known: no dataset
                write_slab(g.get(), gname, f.name, H5T_NATIVE_FLOAT, row, m, f.cols, v.data() + at);
            }
        }
    }
}

} // namespace

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
    const std::uint64_t n = s.size();
    if (!sizes_agree(s)) throw std::invalid_argument("write_hdf5: snapshot arrays disagree with its particle counts");
    const Hdf5Set set{1, gadget_type_counts(s)};
    const std::uint64_t blocks[2] = {0, n};
    const std::vector<std::uint64_t> starts = hdf5_file_starts(blocks, max_file_particles());
    const std::uint64_t K = starts.size() - 1;
    if (K == 1) {
        const std::string tmp = temporary_path(path, std::to_string(::getpid()));
        try {
            write_hdf5_part(tmp, s, 0, set, meta);
            commit(tmp, path);
        } catch (const WriteFailure& e) {
            std::remove(tmp.c_str());
            throw std::runtime_error(fmt::format("writing the HDF5 snapshot {} failed: {}", path, e.what()));
        } catch (...) {
            std::remove(tmp.c_str());
            throw;
        }
        remove_stale_hdf5_files(path, 1);
        return;
    }
    // More than one file holds: a set, each file written whole under a temporary name, then all renamed.
    const Hdf5Set parts{K, set.total};
    std::vector<std::string> names, tmps;
    try {
        for (std::uint64_t k = 0; k < K; ++k) {
            names.push_back(hdf5_set_file(path, k));
            tmps.push_back(temporary_path(names.back(), std::to_string(::getpid())));
            write_hdf5_part(tmps.back(), rows_of(s, Rows{starts[k], starts[k + 1] - starts[k]}), starts[k], parts,
                            meta);
        }
        for (std::uint64_t k = 0; k < K; ++k) {
            commit(tmps[k], names[k]);
            tmps[k].clear();
        }
    } catch (const std::exception& e) {
        for (const std::string& tmp : tmps)
            if (!tmp.empty()) std::remove(tmp.c_str());
        if (dynamic_cast<const WriteFailure*>(&e))
            throw std::runtime_error(fmt::format("writing the HDF5 snapshot {} failed: {}", path, e.what()));
        throw;
    }
    remove_stale_hdf5_files(path, K);
}

std::vector<std::uint64_t> hdf5_file_starts(std::span<const std::uint64_t> blocks, std::uint64_t limit)
{
    if (blocks.size() < 2 || limit == 0) throw std::invalid_argument("hdf5_file_starts: no blocks, or no room");
    if (blocks.back() - blocks.front() <= limit) return {blocks.front(), blocks.back()};
    std::uint64_t largest = 0;
    for (std::size_t q = 0; q + 1 < blocks.size(); ++q)
        largest = std::max(largest, blocks[q + 1] - blocks[q]);
    const std::uint64_t m = (largest + limit - 1) / limit; // files per block
    std::vector<std::uint64_t> starts;
    for (std::size_t q = 0; q + 1 < blocks.size(); ++q) {
        const std::uint64_t a = blocks[q], size = blocks[q + 1] - a;
        for (std::uint64_t j = 0; j < m; ++j)
            starts.push_back(a + j * size / m);
    }
    starts.push_back(blocks.back());
    return starts;
}

void write_hdf5_part(const std::string& path, const Snapshot& part, std::uint64_t first, const Hdf5Set& set,
                     const SnapshotMeta& meta)
{
    silence_hdf5();
    if (!sizes_agree(part)) throw std::invalid_argument("write_hdf5_part: arrays disagree with the particle counts");
    const auto counts = gadget_type_counts(part);
    try {
        Id f = create_file(path);
        create_layout(f.get(), part.time, counts, set, &part, part.units, meta);
        write_rows(f.get(), counts, 0, part, first);
        close_file(f);
    } catch (const WriteFailure& e) {
        throw std::runtime_error(fmt::format("writing the HDF5 snapshot {} failed: {}", path, e.what()));
    }
}

void remove_stale_hdf5_files(const std::string& path, std::uint64_t files)
{
    std::error_code ec;
    auto regular = [&](const std::string& name) {
        return std::filesystem::is_regular_file(std::filesystem::symlink_status(name, ec));
    };
    if (files > 1 && regular(path)) std::filesystem::remove(path, ec);
    for (std::uint64_t k = files > 1 ? files : 0; regular(hdf5_set_file(path, k)); ++k)
        std::filesystem::remove(hdf5_set_file(path, k), ec);
}

void create_hdf5_for_rows(const std::string& path, double time, const std::array<std::uint64_t, 6>& counts,
                          const Units& units, const SnapshotMeta& meta)
{
    silence_hdf5();
    try {
        Id f = create_file(path);
        create_layout(f.get(), time, counts, Hdf5Set{1, counts}, nullptr, units, meta);
        close_file(f);
    } catch (const WriteFailure& e) {
        throw std::runtime_error(fmt::format("writing the HDF5 snapshot {} failed: {}", path, e.what()));
    }
}

void write_hdf5_rows(const std::string& path, std::uint64_t first, const Snapshot& rows)
{
    silence_hdf5();
    const std::size_t n = rows.size();
    if (!sizes_agree(rows, true)) throw std::invalid_argument("write_hdf5_rows: arrays of different lengths");
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
        if (first + n > total)
            throw std::invalid_argument(
                fmt::format("write_hdf5_rows: rows {} .. {} of a file of {} particles", first, first + n, total));
        write_rows(f.get(), counts, first, rows);
        close_file(f);
    } catch (const WriteFailure& e) {
        throw std::runtime_error(fmt::format("writing the HDF5 snapshot {} failed: {}", path, e.what()));
    }
}

} // namespace banyan
