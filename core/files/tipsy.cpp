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

void check_tipsy_count(std::uint64_t n, const std::string& what)
{
    const std::uint64_t most = max_file_particles();
    if (n <= most) return;
    throw UsageError(fmt::format("{}: {} particles is more than a tipsy file holds ({}: its header's counts are "
                                 "32-bit); write HDF5 (--format hdf5), whose snapshots hold more as sets of files",
                                 what, n,
                                 most < 0x7FFFFFFF ? fmt::format("{}, lowered by BANYAN_MAX_FILE_PARTICLES", most)
                                                   : std::string("2^31 - 1")));
}

void write_tipsy(const std::string& path, const Snapshot& s, Endian order)
{
    const std::size_t n = s.size();
    check_tipsy_count(n, path);
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

} // namespace banyan
