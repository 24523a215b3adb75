/**
 * @file hdf5_write.cpp
 * @brief Writing HDF5 snapshots (hdf5_snapshot.hpp): the layout (header, metadata, every dataset at its full size),
 *        then the particles' rows; whole snapshots through a temporary name and a rename, or, for writers over
 *        several ranks (core/parallel/parallel_files.cpp), the layout first and each rank's rows in its turn.
 */
#include "core/files/hdf5_snapshot.hpp"

#include "core/error.hpp"
#include "core/files/atomic_file.hpp"
#include "core/files/hdf5_access.hpp"
#include "core/files/hdf5_units.hpp"
#include "core/files/key_values.hpp"
#include "core/version.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <stdexcept>
#include <unistd.h>
#include <vector>

namespace banyan {

using namespace hdf5; // the checked calls of hdf5_access.hpp and the units of hdf5_units.hpp

namespace {

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
        write_unit_parameters(p.get(), time, units);
    }
    write_units_group(file, units);
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

/// Rows [rows.first, rows.first + n) of the snapshot's order, split over the types: the fields every particle has,
/// and those of gas and stars among them.
void write_rows(hid_t file, const std::array<std::uint64_t, ntypes>& counts, const Hdf5Rows& rows)
{
    const std::uint64_t n = rows.mass.size();
    const std::span<const std::uint64_t> ids = rows.ids;
    if (!ids.empty() && ids.size() != n) throw std::invalid_argument("HDF5 snapshot rows: ids disagree with the rows");
    // Gas rows come first in the snapshot's order, stars last.
    std::uint64_t total = 0;
    for (const auto c : counts)
        total += c;
    const std::uint64_t gas_end = std::min(rows.first + n, counts[0]), star_begin = total - counts[4];
    const std::uint64_t ngas = gas_end > rows.first ? gas_end - rows.first : 0;
    const std::uint64_t star_first = std::max(rows.first, star_begin);
    const std::uint64_t nstar = rows.first + n > star_first ? rows.first + n - star_first : 0;
    if (rows.gas_rho.size() != ngas || rows.gas_temp.size() != ngas || rows.gas_metals.size() != ngas ||
        rows.star_metals.size() != nstar || rows.star_tform.size() != nstar)
        throw std::invalid_argument("HDF5 snapshot rows: gas or star fields disagree with the rows");
    if (ngas) {
        const Id g(must(H5Gopen2(file, "PartType0", H5P_DEFAULT), "open PartType0"), H5Gclose);
        write_slab(g.get(), "PartType0", "Density", H5T_NATIVE_FLOAT, rows.first, ngas, 1, rows.gas_rho.data());
        write_slab(g.get(), "PartType0", "Temperature", H5T_NATIVE_FLOAT, rows.first, ngas, 1, rows.gas_temp.data());
        write_slab(g.get(), "PartType0", "Metallicity", H5T_NATIVE_FLOAT, rows.first, ngas, 1, rows.gas_metals.data());
    }
    if (nstar) {
        const Id g(must(H5Gopen2(file, "PartType4", H5P_DEFAULT), "open PartType4"), H5Gclose);
        const std::uint64_t row = star_first - star_begin;
        write_slab(g.get(), "PartType4", "Metallicity", H5T_NATIVE_FLOAT, row, nstar, 1, rows.star_metals.data());
        write_slab(g.get(), "PartType4", "StellarFormationTime", H5T_NATIVE_FLOAT, row, nstar, 1,
                   rows.star_tform.data());
    }
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
    const std::size_t n = s.size();
    if (s.mass.size() != n || s.pos.size() != 3 * n || s.vel.size() != 3 * n || s.eps.size() != n ||
        s.phi.size() != n || s.gas_rho.size() != s.n_gas || s.gas_temp.size() != s.n_gas ||
        s.gas_metals.size() != s.n_gas || s.star_metals.size() != s.n_star || s.star_tform.size() != s.n_star ||
        !(s.acc.empty() || s.acc.size() == 3 * n) || !(s.ids.empty() || s.ids.size() == n))
        throw std::invalid_argument("write_hdf5: snapshot arrays disagree with its particle counts");
    if (n > 0x7fffffffu) throw UsageError(fmt::format("{}: {} particles is more than the 2^31 - 1 supported", path, n));
    const auto counts = gadget_type_counts(s);
    const std::string tmp = temporary_path(path, std::to_string(::getpid()));
    try {
        Id f = create_file(tmp);
        create_layout(f.get(), s.time, counts, !s.acc.empty(), s.units, meta);
        Hdf5Rows rows;
        rows.pos = s.pos, rows.vel = s.vel, rows.acc = s.acc, rows.mass = s.mass, rows.eps = s.eps, rows.phi = s.phi;
        rows.gas_rho = s.gas_rho, rows.gas_temp = s.gas_temp, rows.gas_metals = s.gas_metals;
        rows.star_metals = s.star_metals, rows.star_tform = s.star_tform, rows.ids = s.ids;
        write_rows(f.get(), counts, rows);
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

void create_hdf5_for_rows(const std::string& path, double time, const std::array<std::uint64_t, 6>& counts,
                          const Units& units, const SnapshotMeta& meta)
{
    silence_hdf5();
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
        write_rows(f.get(), counts, rows);
        close_file(f);
    } catch (const WriteFailure& e) {
        throw std::runtime_error(fmt::format("writing the HDF5 snapshot {} failed: {}", path, e.what()));
    }
}

} // namespace banyan
