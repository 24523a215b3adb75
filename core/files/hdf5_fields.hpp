/**
 * @file hdf5_fields.hpp
 * @brief The datasets of the particle groups of an HDF5 snapshot (hdf5_snapshot.hpp), declared once, as GADGET-4's
 *        list of I/O fields: each one's name (and the other names readers accept), its type and columns, the
 *        particles that have it, its place in a Snapshot, its unit, and what reading does without it. The writer
 *        (hdf5_write.cpp) creates and fills, and the reader (hdf5_read.cpp) reads, every dataset of this list in its
 *        order; the conversion to G = 1 (hdf5_units.cpp) scales the fields by their unit. For those three files only.
 *
 * The order is the order of creation, which the bytes of a written file depend on: a group PartType<t> holds, in
 * this order, the fields whose kinds include its particles' kind (type 0 gas, 4 stars, 1, 2, 3 and 5 dark).
 */
#pragma once

#include "core/files/snapshot.hpp"

#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace banyan::hdf5 {

/// The kinds of particle of a Snapshot, as bits: which PartType groups hold a field.
enum Kind : unsigned {
    gas = 1,  ///< type 0
    dark = 2, ///< types 1, 2, 3, 5
    star = 4, ///< type 4
    every_kind = gas | dark | star,
};

/// The kind of the particles of GADGET type @p t.
constexpr Kind kind_of_type(int t) noexcept
{
    return t == 0 ? gas : t == 4 ? star : dark;
}

/// What a file's type stores a field as (read: any real or integer type, converted).
enum class Stored {
    f32, ///< IEEE float32, little-endian; the Snapshot holds floats
    u64, ///< uint64, little-endian; the Snapshot holds std::uint64_t (ParticleIDs)
};

/// What reading does for a type whose group lacks the field.
enum class Absent {
    required,     ///< refused: "<group>/<name> is missing" (Coordinates; check_counts says so first)
    zero,         ///< left zero
    velocities,   ///< refused unless the caller does without velocities (forces need positions and masses only)
    mass_table,   ///< Header/MassTable's entry for the type, refused when it is not positive
    dropped,      ///< the Snapshot's whole array emptied (none known) when any type lacks it; a Snapshot without
                  ///< it is written without the dataset (Acceleration)
    indices,      ///< every type with particles has it or none does (a file with it for some types only is
                  ///< refused); none: the Snapshot's array empty, meaning the index in the file, and a Snapshot
                  ///< without it is written with the rows' indices (ParticleIDs)
    no_softening, ///< left zero, and the file gives its particles no softening (SnapshotMeta::has_softening)
};

struct Field {
    const char* name;                           ///< the name written, and the first one read
    const char* other_name;                     ///< another name readers accept (SWIFT's plural, ...), or nullptr
    Stored stored;                              ///< the file type written
    int cols;                                   ///< values per particle: 1 (a 1-D dataset) or 3 (N x 3)
    unsigned kinds;                             ///< the particles whose groups have it (Kind bits)
    std::vector<float> Snapshot::*floats;       ///< where a Snapshot holds it (Stored::f32), or nullptr
    std::vector<std::uint64_t> Snapshot::*ints; ///< where a Snapshot holds it (Stored::u64), or nullptr
    bool per_kind;    ///< indexed among the particles of its kind (gas_rho: gas 0 .. n_gas), not among all
    Absent absent;    ///< reading a type without it
    bool optional_2d; ///< a 2-D dataset where a 1-D one belongs (a Metallicity of several elements) reads as none
    /// The unit: the power of the velocity unit in it (velocities 1, potentials and accelerations 2, times -1;
    /// lengths and masses, which G = 1 leaves alone, 0), by which a file whose units do not make G = 1 is converted.
    int velocity_power;
    const char* quantity; ///< its name in a message about a converted value ("velocity"), where velocity_power != 0
};

// clang-format off
/// Every dataset of a particle group, in the order of creation.
inline constexpr Field fields[] = {
    // name                    other name          stored       cols  kinds        floats                  ints            per kind  absent                2-D    v^p  quantity
    {"Coordinates",          nullptr,            Stored::f32, 3,    every_kind,  &Snapshot::pos,         nullptr,        false,    Absent::required,     false, 0,   nullptr},
    {"Velocities",           nullptr,            Stored::f32, 3,    every_kind,  &Snapshot::vel,         nullptr,        false,    Absent::velocities,   false, 1,   "velocity"},
    {"ParticleIDs",          nullptr,            Stored::u64, 1,    every_kind,  nullptr,                &Snapshot::ids, false,    Absent::indices,      false, 0,   nullptr},
    {"Masses",               "Mass",             Stored::f32, 1,    every_kind,  &Snapshot::mass,        nullptr,        false,    Absent::mass_table,   false, 0,   nullptr},
    {"Potential",            "Potentials",       Stored::f32, 1,    every_kind,  &Snapshot::phi,         nullptr,        false,    Absent::zero,         false, 2,   "potential"},
    {"Acceleration",         nullptr,            Stored::f32, 3,    every_kind,  &Snapshot::acc,         nullptr,        false,    Absent::dropped,      false, 2,   "acceleration"},
    {"Density",              "Densities",        Stored::f32, 1,    gas,         &Snapshot::gas_rho,     nullptr,        true,     Absent::zero,         false, 0,   nullptr},
    {"Temperature",          "Temperatures",     Stored::f32, 1,    gas,         &Snapshot::gas_temp,    nullptr,        true,     Absent::zero,         false, 0,   nullptr},
    {"SmoothingLength",      "SmoothingLengths", Stored::f32, 1,    gas,         &Snapshot::eps,         nullptr,        false,    Absent::zero,         false, 0,   nullptr},
    {"Metallicity",          nullptr,            Stored::f32, 1,    gas,         &Snapshot::gas_metals,  nullptr,        true,     Absent::zero,         true,  0,   nullptr},
    {"Metallicity",          nullptr,            Stored::f32, 1,    star,        &Snapshot::star_metals, nullptr,        true,     Absent::zero,         true,  0,   nullptr},
    {"StellarFormationTime", "BirthTimes",       Stored::f32, 1,    star,        &Snapshot::star_tform,  nullptr,        true,     Absent::zero,         false, -1,  "formation time"},
    {"Softenings",           "Softening",        Stored::f32, 1,    dark | star, &Snapshot::eps,         nullptr,        false,    Absent::no_softening, false, 0,   nullptr},
};
// clang-format on

/// Whether the particles of kind @p k have @p f.
constexpr bool has(const Field& f, Kind k) noexcept
{
    return (f.kinds & k) != 0;
}

/// The values of @p f that @p s holds.
inline std::size_t size_in(const Snapshot& s, const Field& f) noexcept
{
    return f.floats ? (s.*f.floats).size() : (s.*f.ints).size();
}

/// The values of @p f a Snapshot of @p n particles holds, @p n_gas, @p n_star of them gas and stars.
constexpr std::size_t full_size(const Field& f, std::size_t n, std::size_t n_gas, std::size_t n_star) noexcept
{
    const std::size_t rows = !f.per_kind ? n : f.kinds == gas ? n_gas : f.kinds == star ? n_star : n - n_gas - n_star;
    return static_cast<std::size_t>(f.cols) * rows;
}

/// Whether every field of @p s has its size for @p s's counts: a field of Absent::indices may be empty, one of
/// Absent::dropped too unless @p dropped_known.
inline bool sizes_agree(const Snapshot& s, bool dropped_known = false) noexcept
{
    for (const Field& f : fields) {
        const std::size_t have = size_in(s, f);
        const bool may_lack = f.absent == Absent::indices || (f.absent == Absent::dropped && !dropped_known);
        if (have != full_size(f, s.size(), s.n_gas, s.n_star) && !(have == 0 && may_lack)) return false;
    }
    return true;
}

} // namespace banyan::hdf5
