/**
 * @file particles.cpp
 * @brief Particles to and from Snapshot.
 */
#include "core/files/particles.hpp"

namespace banyan {

Particles to_particles(const Snapshot& s)
{
    const std::size_t n = s.size();
    Particles p;
    p.pos.resize(n);
    p.vel.resize(n);
    for (std::size_t i = 0; i < n; ++i) {
        p.pos[i] = {s.pos[3 * i], s.pos[3 * i + 1], s.pos[3 * i + 2], s.mass[i]};
        p.vel[i] = {s.vel[3 * i], s.vel[3 * i + 1], s.vel[3 * i + 2], 0.0f};
    }
    return p;
}

void set_particles(Snapshot& s, std::span<const bn_f4> pos, std::span<const bn_f4> vel, std::span<const bn_f4> acc,
                   bool with_acc)
{
    for (std::size_t i = 0; i < pos.size(); ++i) {
        s.mass[i] = pos[i].w;
        s.pos[3 * i] = pos[i].x, s.pos[3 * i + 1] = pos[i].y, s.pos[3 * i + 2] = pos[i].z;
        s.vel[3 * i] = vel[i].x, s.vel[3 * i + 1] = vel[i].y, s.vel[3 * i + 2] = vel[i].z;
        s.phi[i] = acc[i].w;
    }
    if (with_acc) {
        s.acc.resize(3 * pos.size());
        for (std::size_t i = 0; i < pos.size(); ++i)
            s.acc[3 * i] = acc[i].x, s.acc[3 * i + 1] = acc[i].y, s.acc[3 * i + 2] = acc[i].z;
    }
}

} // namespace banyan
