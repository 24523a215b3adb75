/**
 * @file tipsy.cpp
 * @brief Tipsy reader and writer (see tipsy.hpp for the layout).
 */
#include "core/files/tipsy.hpp"

#include "core/error.hpp"
#include "core/files/atomic_file.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>

namespace banyan {

namespace {

constexpr std::size_t header_bytes = 32;
constexpr std::size_t gas_floats = 12, dark_floats = 9, star_floats = 11;

/// The floats of the records before record @p i of a file of counts @p c (gas, then dark, then stars).
std::uint64_t floats_before(const FileCounts& c, std::uint64_t i)
{
    const std::uint64_t g = c.n_gas, gd = c.n_gas + c.n_dark;
    return gas_floats * std::min(i, g) + dark_floats * (std::min(i, gd) - std::min(i, g)) +
           star_floats * (i - std::min(i, gd));
}

std::uint32_t swap32(std::uint32_t v)
{
    return __builtin_bswap32(v);
}
std::uint64_t swap64(std::uint64_t v)
{
    return __builtin_bswap64(v);
}

bool native_is(Endian e)
{
    return (std::endian::native == std::endian::little) == (e == Endian::little);
}

struct Header {
    double time;
    std::int32_t nbodies, ndim, nsph, ndark, nstar;
};

Header decode_header(const unsigned char* p, Endian e)
{
    std::uint64_t t;
    std::uint32_t v[5];
    std::memcpy(&t, p, 8);
    std::memcpy(v, p + 8, 20);
    if (!native_is(e)) {
        t = swap64(t);
        for (auto& x : v)
            x = swap32(x);
    }
    Header h;
    std::memcpy(&h.time, &t, 8);
    h.nbodies = static_cast<std::int32_t>(v[0]);
    h.ndim = static_cast<std::int32_t>(v[1]);
    h.nsph = static_cast<std::int32_t>(v[2]);
    h.ndark = static_cast<std::int32_t>(v[3]);
    h.nstar = static_cast<std::int32_t>(v[4]);
    return h;
}

bool plausible(const Header& h)
{
    return h.ndim == 3 && h.nsph >= 0 && h.ndark >= 0 && h.nstar >= 0 &&
           static_cast<std::int64_t>(h.nsph) + h.ndark + h.nstar == h.nbodies;
}

std::uint64_t expected_size(const Header& h)
{
    return header_bytes + 4 * (gas_floats * std::uint64_t(h.nsph) + dark_floats * std::uint64_t(h.ndark) +
                               star_floats * std::uint64_t(h.nstar));
}

} // namespace

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

Snapshot read_tipsy(const std::string& path, Endian* detected, Rows rows, FileCounts* whole)
{
    // Regular files only: a pipe without a writer would block for ever, a device such as /dev/zero never ends.
    std::error_code ec;
    const auto status = std::filesystem::status(path, ec);
    if (ec || !std::filesystem::exists(status))
        throw UsageError(fmt::format("{}: cannot open file: no such file", path));
    if (!std::filesystem::is_regular_file(status))
        throw UsageError(fmt::format("{}: not a regular file ({}); give a tipsy file", path,
                                     std::filesystem::is_directory(status) ? "a folder" : "a pipe, socket or device"));
    std::ifstream in(path, std::ios::binary);
    if (!in) throw UsageError(fmt::format("{}: cannot open file: {}", path, std::strerror(errno)));
    const std::uint64_t file_bytes = std::filesystem::file_size(path, ec);
    if (ec) throw UsageError(fmt::format("{}: cannot read its size: {}", path, ec.message()));
    unsigned char head[header_bytes];
    if (file_bytes < header_bytes || !in.read(reinterpret_cast<char*>(head), header_bytes))
        throw UsageError(
            fmt::format("{}: not a tipsy file ({} bytes is shorter than a tipsy header)", path, file_bytes));
    Endian order = Endian::big;
    Header h = decode_header(head, Endian::big);
    if (!plausible(h)) {
        order = Endian::little;
        h = decode_header(head, Endian::little);
    }
    if (!plausible(h))
        throw UsageError(
            fmt::format("{}: not a tipsy file (no byte order gives ndim = 3 and counts that add up)", path));
    const std::uint64_t want = expected_size(h);
    if (file_bytes < want)
        throw UsageError(fmt::format("{}: truncated tipsy file: its header promises {} gas, {} dark and {} star "
                                     "particles ({} bytes) but the file has {} bytes",
                                     path, h.nsph, h.ndark, h.nstar, want, file_bytes));
    if (file_bytes > want)
        throw UsageError(fmt::format("{}: tipsy header counts ({} gas, {} dark, {} star = {} bytes) disagree with "
                                     "the file size of {} bytes",
                                     path, h.nsph, h.ndark, h.nstar, want, file_bytes));
    if (!std::isfinite(h.time))
        throw UsageError(fmt::format("{}: the header's time is {}; a tipsy file's time must be finite", path, h.time));
    if (detected) *detected = order;
    const std::size_t ngas = static_cast<std::size_t>(h.nsph), ndark = static_cast<std::size_t>(h.ndark),
                      nstar = static_cast<std::size_t>(h.nstar);
    if (whole) *whole = FileCounts{ngas, ndark, nstar};

    // The rows asked for: whole records, from their offset (records of the three kinds differ in length).
    const std::size_t total = ngas + ndark + nstar;
    const std::size_t first = std::min(rows.first, total), end = first + std::min(rows.count, total - first);
    const FileCounts c{ngas, ndark, nstar};
    const std::size_t f0 = floats_before(c, first), nfloat = floats_before(c, end) - f0;
    std::vector<float> f(nfloat);
    if (nfloat) { // no particles: f.data() is null
        in.seekg(static_cast<std::streamoff>(header_bytes + 4 * f0));
        if (!in.read(reinterpret_cast<char*>(f.data()), static_cast<std::streamsize>(4 * nfloat)))
            throw UsageError(
                fmt::format("{}: cannot read particles {} to {}: {}", path, first, end - 1, std::strerror(errno)));
    }
    // Every record field is a 4-byte float: byte-swap all of them at once.
    if (!native_is(order))
        for (auto& x : f)
            x = std::bit_cast<float>(swap32(std::bit_cast<std::uint32_t>(x)));

    Snapshot s;
    s.time = h.time;
    auto overlap = [&](std::size_t a, std::size_t b) { // of [a, b) with the rows read
        const std::size_t lo = std::max(first, a), hi = std::min(end, b);
        return hi > lo ? hi - lo : 0;
    };
    s.n_gas = overlap(0, ngas);
    s.n_dark = overlap(ngas, ngas + ndark);
    s.n_star = overlap(ngas + ndark, total);
    const std::size_t n = s.size();
    s.mass.resize(n);
    s.pos.resize(3 * n);
    s.vel.resize(3 * n);
    s.eps.resize(n);
    s.phi.resize(n);
    const float* r = f.data();
    std::size_t i = 0;
    auto common = [&](const float* rec) {
        s.mass[i] = rec[0];
        for (int k = 0; k < 3; ++k) {
            s.pos[3 * i + k] = rec[1 + k];
            s.vel[3 * i + k] = rec[4 + k];
        }
    };
    for (std::size_t g = 0; g < s.n_gas; ++g, ++i, r += gas_floats) {
        common(r);
        s.gas_rho.push_back(r[7]);
        s.gas_temp.push_back(r[8]);
        s.eps[i] = r[9];
        s.gas_metals.push_back(r[10]);
        s.phi[i] = r[11];
    }
    for (std::size_t d = 0; d < s.n_dark; ++d, ++i, r += dark_floats) {
        common(r);
        s.eps[i] = r[7];
        s.phi[i] = r[8];
    }
    for (std::size_t t = 0; t < s.n_star; ++t, ++i, r += star_floats) {
        common(r);
        s.star_metals.push_back(r[7]);
        s.star_tform.push_back(r[8]);
        s.eps[i] = r[9];
        s.phi[i] = r[10];
    }
    return s;
}

std::uint64_t tipsy_offset(const FileCounts& counts, std::uint64_t i)
{
    return header_bytes + 4 * floats_before(counts, i);
}

std::vector<float> tipsy_records(const Snapshot& s, Endian order)
{
    const std::size_t n = s.size();
    if (s.mass.size() != n || s.pos.size() != 3 * n || s.vel.size() != 3 * n || s.eps.size() != n ||
        s.phi.size() != n || s.gas_rho.size() != s.n_gas || s.gas_temp.size() != s.n_gas ||
        s.gas_metals.size() != s.n_gas || s.star_metals.size() != s.n_star || s.star_tform.size() != s.n_star)
        throw std::invalid_argument("write_tipsy: snapshot arrays disagree with its particle counts");
    std::vector<float> f;
    f.reserve(gas_floats * s.n_gas + dark_floats * s.n_dark + star_floats * s.n_star);
    std::size_t i = 0;
    auto common = [&] {
        f.push_back(s.mass[i]);
        for (int k = 0; k < 3; ++k)
            f.push_back(s.pos[3 * i + k]);
        for (int k = 0; k < 3; ++k)
            f.push_back(s.vel[3 * i + k]);
    };
    for (std::size_t g = 0; g < s.n_gas; ++g, ++i) {
        common();
        f.insert(f.end(), {s.gas_rho[g], s.gas_temp[g], s.eps[i], s.gas_metals[g], s.phi[i]});
    }
    for (std::size_t d = 0; d < s.n_dark; ++d, ++i) {
        common();
        f.insert(f.end(), {s.eps[i], s.phi[i]});
    }
    for (std::size_t t = 0; t < s.n_star; ++t, ++i) {
        common();
        f.insert(f.end(), {s.star_metals[t], s.star_tform[t], s.eps[i], s.phi[i]});
    }
    if (!native_is(order))
        for (auto& x : f)
            x = std::bit_cast<float>(swap32(std::bit_cast<std::uint32_t>(x)));
    return f;
}

void write_tipsy(const std::string& path, const Snapshot& s, Endian order)
{
    const std::size_t n = s.size();
    if (n > 0x7fffffffu) throw UsageError(fmt::format("{}: tipsy cannot hold {} particles", path, n));
    const std::vector<float> f = tipsy_records(s, order);
    std::uint64_t time_bits = std::bit_cast<std::uint64_t>(s.time);
    std::uint32_t head[6] = {static_cast<std::uint32_t>(n),        3u,
                             static_cast<std::uint32_t>(s.n_gas),  static_cast<std::uint32_t>(s.n_dark),
                             static_cast<std::uint32_t>(s.n_star), 0u};
    if (!native_is(order)) {
        time_bits = swap64(time_bits);
        for (auto& x : head)
            x = swap32(x);
    }
    write_file_atomically(path, [&](std::ostream& out) {
        out.write(reinterpret_cast<const char*>(&time_bits), 8);
        out.write(reinterpret_cast<const char*>(head), sizeof head);
        out.write(reinterpret_cast<const char*>(f.data()), static_cast<std::streamsize>(f.size() * 4));
    });
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
