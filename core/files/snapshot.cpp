/**
 * @file snapshot.cpp
 * @brief The format-neutral snapshot's rows and the checks of particle data (see snapshot.hpp).
 */
#include "core/files/snapshot.hpp"

#include "core/error.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <type_traits>

namespace banyan {

Snapshot Snapshot::dark(std::size_t n)
{
    Snapshot s;
    s.n_dark = n;
    s.mass.assign(n, 0.f);
    s.pos.assign(3 * n, 0.f);
    s.vel.assign(3 * n, 0.f);
    s.eps.assign(n, 0.f);
    s.phi.assign(n, 0.f);
    return s;
}

std::uint64_t max_file_particles()
{
    constexpr std::uint64_t most = 0x7FFFFFFF; // NumPart_ThisFile, and tipsy's counts, are 32-bit signed
    const char* text = std::getenv("BANYAN_MAX_FILE_PARTICLES");
    if (!text) return most;
    std::uint64_t v = 0;
    const char* end = text + std::strlen(text);
    const auto [at, ec] = std::from_chars(text, end, v);
    if (ec != std::errc() || at != end || at == text || v < 1 || v > most)
        throw UsageError(fmt::format("BANYAN_MAX_FILE_PARTICLES={}: must be a whole number from 1 to 2^31 - 1", text));
    return v;
}

Snapshot rows_of(const Snapshot& s, Rows rows)
{
    const std::size_t n = s.size(), a = std::min(rows.first, n), b = a + std::min(rows.count, n - a);
    auto overlap = [&](std::size_t lo, std::size_t hi) {
        const std::size_t l = std::max(a, lo), h = std::min(b, hi);
        return h > l ? h - l : 0;
    };
    const std::size_t d0 = s.n_gas, d1 = d0 + s.n_dark; // the dark rows; types 2, 3, 5 are the last of them
    const std::size_t t2 = d1 - s.n_type2 - s.n_type3 - s.n_type5, t3 = t2 + s.n_type2, t5 = t3 + s.n_type3;
    Snapshot r;
    r.time = s.time;
    r.units = s.units;
    r.n_gas = overlap(0, d0), r.n_dark = overlap(d0, d1), r.n_star = overlap(d1, n);
    r.n_type2 = overlap(t2, t3), r.n_type3 = overlap(t3, t5), r.n_type5 = overlap(t5, d1);
    auto cut = [](const auto& v, std::size_t lo, std::size_t hi, std::size_t per) {
        using V = std::remove_cvref_t<decltype(v)>;
        if (v.empty() || hi <= lo) return V{};
        return V(v.begin() + static_cast<std::ptrdiff_t>(lo * per), v.begin() + static_cast<std::ptrdiff_t>(hi * per));
    };
    r.mass = cut(s.mass, a, b, 1), r.pos = cut(s.pos, a, b, 3), r.vel = cut(s.vel, a, b, 3);
    r.eps = cut(s.eps, a, b, 1), r.phi = cut(s.phi, a, b, 1), r.acc = cut(s.acc, a, b, 3), r.ids = cut(s.ids, a, b, 1);
    r.gas_rho = cut(s.gas_rho, a, a + r.n_gas, 1), r.gas_temp = cut(s.gas_temp, a, a + r.n_gas, 1);
    r.gas_metals = cut(s.gas_metals, a, a + r.n_gas, 1);
    const std::size_t s0 = std::max(a, d1) - d1; // the first star among the rows
    r.star_metals = cut(s.star_metals, s0, s0 + r.n_star, 1), r.star_tform = cut(s.star_tform, s0, s0 + r.n_star, 1);
    return r;
}

std::optional<float> common_softening(const Snapshot& s)
{
    if (s.n_dark + s.n_star == 0) return std::nullopt;
    const float first = s.eps[s.n_gas];
    for (std::size_t i = s.n_gas; i < s.size(); ++i)
        if (s.eps[i] != first) return std::nullopt;
    return first;
}

void check_softenings(const Snapshot& s, const std::string& what, std::size_t first)
{
    for (std::size_t i = 0; i < s.eps.size(); ++i)
        if (!(std::isfinite(s.eps[i]) && s.eps[i] >= 0.0f))
            throw UsageError(fmt::format("{}: particle {} has the softening {}; softenings must be finite and >= 0",
                                         what, first + i, s.eps[i]));
}

void check_particles(const Snapshot& s, const std::string& what)
{
    if (s.size() == 0) throw UsageError(fmt::format("{}: no particles (N = 0); at least one is needed", what));
    check_particle_values(s, what);
}

void check_particle_values(const Snapshot& s, const std::string& what, std::size_t first)
{
    const std::size_t n = s.size();
    check_softenings(s, what, first);
    for (std::size_t i = 0; i < n; ++i) {
        if (!(std::isfinite(s.mass[i]) && s.mass[i] > 0.f))
            throw UsageError(fmt::format("{}: particle {} has mass {}; masses must be positive and finite", what,
                                         first + i, s.mass[i]));
        for (int k = 0; k < 3; ++k) {
            if (!std::isfinite(s.pos[3 * i + k]))
                throw UsageError(fmt::format("{}: particle {} has a non-finite coordinate ({}, {}, {})", what,
                                             first + i, s.pos[3 * i], s.pos[3 * i + 1], s.pos[3 * i + 2]));
            if (!std::isfinite(s.vel[3 * i + k]))
                throw UsageError(fmt::format("{}: particle {} has a non-finite velocity ({}, {}, {})", what, first + i,
                                             s.vel[3 * i], s.vel[3 * i + 1], s.vel[3 * i + 2]));
        }
    }
}

} // namespace banyan
