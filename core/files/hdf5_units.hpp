/**
 * @file hdf5_units.hpp
 * @brief The units an HDF5 snapshot carries (hdf5_snapshot.hpp), both ways, for hdf5_write.cpp and hdf5_read.cpp
 *        only: the names GADGET-4, GADGET-3 / EAGLE, SWIFT and AREPO give them, and the conversion of a file whose
 *        units do not make G = 1.
 */
#pragma once

#include "core/files/hdf5_access.hpp"
#include "core/files/snapshot.hpp"
#include "core/files/units.hpp"

namespace banyan::hdf5 {

/// With physical @p units, their values in Parameters (GADGET-4's place for them) and the time in Gyr (Time_GYR,
/// where pynbody looks for it); nothing in N-body units.
void write_unit_parameters(hid_t parameters, double time, const Units& units);

/// With physical @p units, the group Units of @p file: GADGET-3 / EAGLE's names (which pynbody reads first) and
/// SWIFT's; nothing in N-body units.
void write_units_group(hid_t file, const Units& units);

/// Units from Parameters (GADGET-4) or Units (GADGET-3, EAGLE, SWIFT), and the file's velocity unit when it says one.
Units read_units(const Reader& r, hid_t file, double& file_velocity);

/// What file velocities are multiplied by to make G = 1 for @p units' length and mass: 1 when the file says no
/// velocity unit, or one within 1e-6 of that of G = 1.
double velocity_factor(const Units& units, double file_velocity);

/// G = 1 in banyan: a file in units where G is not 1 has its velocity-like fields rescaled to the velocity unit
/// G = 1 implies for its length and mass units (and its times to the matching time unit): velocities by @p v,
/// potentials and accelerations by v^2, times by 1 / v. A value beyond single precision's range is refused.
void rescale_to_g1(const Reader& r, Snapshot& s, double v);

} // namespace banyan::hdf5
