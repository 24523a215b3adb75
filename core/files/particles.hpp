/**
 * @file particles.hpp
 * @brief The one host particle type of a run, in the layout the device holds particles, and its conversions to and
 *        from the files' Snapshot (each done once per input and once per snapshot written).
 */
#pragma once

#include "core/device_shared.h"
#include "core/files/snapshot.hpp"

#include <cstddef>
#include <span>
#include <vector>

namespace banyan {

/// Particles on the host in the layout the device holds them: pos = (x, y, z, mass), vel = (vx, vy, vz, 0).
struct Particles {
    std::vector<bn_f4> pos;
    std::vector<bn_f4> vel;
    std::size_t size() const noexcept { return pos.size(); }
};

/// The positions, masses and velocities of @p s (gas, dark, star, in the file's order).
Particles to_particles(const Snapshot& s);

/// Sets the masses, positions, velocities and potentials (acc[i].w) of @p s from device-layout arrays of its size;
/// with @p with_acc also its accelerations (HDF5 snapshots hold them).
void set_particles(Snapshot& s, std::span<const bn_f4> pos, std::span<const bn_f4> vel, std::span<const bn_f4> acc,
                   bool with_acc);

} // namespace banyan
