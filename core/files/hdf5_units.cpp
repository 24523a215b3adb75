/**
 * @file hdf5_units.cpp
 * @brief Units in HDF5 snapshots (hdf5_units.hpp): written in GADGET-4's, GADGET-3's and SWIFT's places, read from
 *        the first place that has them, and files where G is not 1 converted to G = 1.
 */
#include "core/files/hdf5_units.hpp"

#include "core/files/hdf5_fields.hpp"

#include <fmt/format.h>

#include <cmath>
#include <limits>
#include <stdexcept>
#include <vector>

namespace banyan::hdf5 {

// ---- Writing ----------------------------------------------------------------------------------------------------

void write_unit_parameters(hid_t parameters, double time, const Units& units)
{
    if (!units.physical()) return;
    attr_double(parameters, "UnitLength_in_cm", units.length_cm);
    attr_double(parameters, "UnitMass_in_g", units.mass_g);
    attr_double(parameters, "UnitVelocity_in_cm_per_s", units.velocity_cm_per_s());
    // pynbody takes a snapshot's time from Time_GYR, else from a cosmology's age at its redshift.
    attr_double(parameters, "Time_GYR", time * units.time_s() / (1e9 * cgs::year));
}

void write_units_group(hid_t file, const Units& units)
{
    if (!units.physical()) return;
    const Id g = make_group(file, "Units");
    attr_double(g.get(), "UnitLength_in_cm", units.length_cm);
    attr_double(g.get(), "UnitMass_in_g", units.mass_g);
    attr_double(g.get(), "UnitVelocity_in_cm_per_s", units.velocity_cm_per_s());
    attr_double(g.get(), "UnitTime_in_s", units.time_s());
    attr_double(g.get(), "Unit length in cgs (U_L)", units.length_cm);
    attr_double(g.get(), "Unit mass in cgs (U_M)", units.mass_g);
    attr_double(g.get(), "Unit time in cgs (U_t)", units.time_s());
    attr_double(g.get(), "Unit current in cgs (U_I)", 1.0);
    attr_double(g.get(), "Unit temperature in cgs (U_T)", 1.0);
}

// ---- Reading ----------------------------------------------------------------------------------------------------

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
        if (!len && !mass) continue;
        // One without the other is no system of units: the file is damaged or half written, not in N-body units.
        if (!len || !mass)
            r.fail(fmt::format("{} gives {} but not {}: a file's units need both", p.group, len ? p.length : p.mass,
                               len ? p.mass : p.length));
        auto check = [&](const char* name, double v) {
            if (!(std::isfinite(v) && v > 0))
                r.fail(fmt::format("{}/{} is {}; a unit must be positive and finite", p.group, name, v));
        };
        check(p.length, *len);
        check(p.mass, *mass);
        Units u;
        u.length_cm = *len;
        u.mass_g = *mass;
        if (p.velocity) {
            if (const auto v = r.number(g.get(), p.group, p.velocity)) {
                check(p.velocity, *v);
                file_velocity = *v;
            }
        } else if (const auto t = r.number(g.get(), p.group, p.time)) {
            check(p.time, *t);
            file_velocity = *len / *t;
            check("the length unit over the time unit", file_velocity);
        }
        return u;
    }
    return {};
}

double velocity_factor(const Units& units, double file_velocity)
{
    if (units.physical() && file_velocity > 0) {
        const double factor = file_velocity / units.velocity_cm_per_s();
        if (std::fabs(factor - 1.0) > 1e-6) return factor;
    }
    return 1.0;
}

void rescale_to_g1(const Reader& r, Snapshot& s, double v)
{
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
    // Every field whose unit has the velocity unit in it (hdf5_fields.hpp), in their order.
    for (const Field& f : fields) {
        if (f.velocity_power == 0) continue;
        const int p = f.velocity_power;
        if (p != 1 && p != 2 && p != -1) throw std::logic_error("rescale_to_g1: a unit of velocity^p, |p| > 2");
        scale(s.*f.floats, p == 1 ? v : p == 2 ? v * v : 1.0 / v, f.quantity);
    }
    s.time /= v;
}

} // namespace banyan::hdf5
