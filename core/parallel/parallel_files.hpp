/**
 * @file parallel_tipsy.hpp
 * @brief Snapshots of a run over several ranks: one standard big-endian tipsy file of dark-matter particles, in the
 *        order of the input, written by all ranks together (MPI-IO); no rank ever holds more than its share.
 */
#pragma once

#include "core/device_shared.h"
#include "core/parallel/comm.hpp"

#include <string>
#include <vector>

namespace banyan {

/// This rank's particles: ids (0 .. N - 1 over all ranks, each once), x y z mass, vx vy vz, and the potential.
struct RankParticles {
    std::vector<bn_u32> ids;
    std::vector<bn_f4> pos, vel;
    std::vector<float> phi;
};

/// Writes @p path: a tipsy header (time, N dark particles) and particle id i as record i (mass, position, velocity,
/// @p eps, potential). The particles go first to the rank that writes their part of the file (rank q writes ids
/// [q N / P, (q + 1) N / P)); then every rank writes its part at its offset, into a temporary name that rank 0
/// renames when all are done. Collective.
void write_tipsy_parallel(const Comm& comm, const std::string& path, double time, std::size_t n_total,
                          const RankParticles& mine, float eps);

} // namespace banyan
