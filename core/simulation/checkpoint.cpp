/**
 * @file checkpoint.cpp
 * @brief Writing and reading checkpoint files (format in checkpoint.hpp).
 */
#include "core/simulation/checkpoint.hpp"

#include "core/error.hpp"
#include "core/files/atomic_file.hpp"

#include <fmt/format.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>

namespace banyan {

namespace {

constexpr char checkpoint_magic[8] = {'B', 'N', 'Y', 'N', 'C', 'K', 'P', 'T'};
constexpr std::uint32_t checkpoint_version = 1;
constexpr std::uint32_t byte_order_mark = 0x01020304u;

/// FNV-1a over @p n bytes, continuing from @p h.
std::uint64_t fnv1a(const char* p, std::size_t n, std::uint64_t h = 1469598103934665603ull)
{
    for (std::size_t i = 0; i < n; ++i) {
        h ^= static_cast<unsigned char>(p[i]);
        h *= 1099511628211ull;
    }
    return h;
}

template <class T> void put(std::string& out, const T& v)
{
    out.append(reinterpret_cast<const char*>(&v), sizeof(T));
}
template <class T> void put_array(std::string& out, const std::vector<T>& v)
{
    if (!v.empty()) out.append(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T));
}

/// Reads a checkpoint's header in order, refusing to read past its end.
class Reader {
public:
    Reader(const std::string& data, std::size_t end, std::string path) : d_(data), end_(end), path_(std::move(path)) {}
    template <class T> T get()
    {
        T v;
        take(&v, sizeof(T));
        return v;
    }
    std::string text(std::size_t n)
    {
        if (n > end_ - at_) fail();
        std::string s = d_.substr(at_, n);
        at_ += n;
        return s;
    }
    std::size_t left() const { return end_ - at_; }
    [[noreturn]] void fail() const
    {
        throw UsageError(fmt::format("{}: the checkpoint is truncated or not one of banyan's", path_));
    }

private:
    void take(void* dst, std::size_t n)
    {
        if (n > end_ - at_) fail();
        if (n) std::memcpy(dst, d_.data() + at_, n);
        at_ += n;
    }
    const std::string& d_;
    std::size_t end_, at_ = 0;
    std::string path_;
};

/// The header of a checkpoint (magic, format, byte order, then its text of key=value lines), read by @p rd.
KeyValues read_header(Reader& rd, const std::string& path)
{
    if (rd.left() < 32 || rd.text(sizeof checkpoint_magic) != std::string(checkpoint_magic, sizeof checkpoint_magic))
        throw UsageError(fmt::format("{}: not a banyan checkpoint", path));
    const auto version = rd.get<std::uint32_t>();
    const auto bom = rd.get<std::uint32_t>();
    if (version != checkpoint_version || bom != byte_order_mark)
        throw UsageError(fmt::format("{}: checkpoint format {} of another version or byte order", path, version));
    return parse_key_values(rd.text(rd.get<std::uint64_t>()));
}

} // namespace

void write_checkpoint(const std::string& path, const std::string& header_text, const SimulationState& st,
                      const Snapshot& fields)
{
    const std::string text =
        header_text + fmt::format("format={}\nparticles={}\nn_gas={}\nn_dark={}\nn_star={}\nlength_exp={}\n"
                                  "mass_exp={}\nrungs={}\nfile_ids={}\nid_bytes=8\n",
                                  checkpoint_version, st.pos.size(), fields.n_gas, fields.n_dark, fields.n_star,
                                  st.units.k, st.units.j, st.rungs.empty() ? 0 : 1, fields.ids.empty() ? 0 : 1);
    if (!st.rungs.empty() && st.rungs.size() != st.pos.size())
        throw std::logic_error("write_checkpoint: rungs and particles differ in number");
    if (!fields.ids.empty() && fields.ids.size() != fields.size())
        throw std::logic_error("write_checkpoint: ids and fields differ in number");
    if (st.ids.size() != st.pos.size()) throw std::logic_error("write_checkpoint: ids and particles differ in number");
    std::string blob;
    blob.reserve(64 + text.size() + st.pos.size() * 64 + fields.n_gas * 12 + fields.n_star * 8);
    blob.append(checkpoint_magic, sizeof checkpoint_magic);
    put(blob, checkpoint_version);
    put(blob, byte_order_mark);
    put(blob, static_cast<std::uint64_t>(text.size()));
    blob += text;
    put_array(blob, st.pos), put_array(blob, st.vel), put_array(blob, st.acc), put_array(blob, st.ids);
    put_array(blob, st.rungs); // block time steps only (rungs=1); nothing otherwise
    put_array(blob, fields.eps), put_array(blob, fields.gas_rho), put_array(blob, fields.gas_temp);
    put_array(blob, fields.gas_metals), put_array(blob, fields.star_metals);
    put_array(blob, fields.star_tform);
    put_array(blob, fields.ids); // file_ids=1 only
    put(blob, fnv1a(blob.data(), blob.size()));
    write_file_atomically(
        path, [&](std::ostream& out) { out.write(blob.data(), static_cast<std::streamsize>(blob.size())); });
}

std::string checkpoint_rank_file(const std::string& first, std::uint64_t rank, const std::string& slot)
{
    if (rank == 0) return first;
    return slot.empty() ? fmt::format("{}.rank{}", first, rank) : fmt::format("{}.rank{}.{}", first, rank, slot);
}

std::string checkpoint_slot(const KeyValues& header, const std::string& path)
{
    if (!header.count("slot")) return {};
    const std::string slot = value_of(header, "slot", path);
    if (slot != "a" && slot != "b") throw UsageError(fmt::format("{}: slot={} is neither a nor b", path, slot));
    return slot;
}

KeyValues read_checkpoint_header(const std::string& path)
{
    std::ifstream f(path, std::ios::binary);
    if (!f) throw UsageError(fmt::format("{}: no checkpoint (the file cannot be read)", path));
    std::string head(64 << 10, '\0'); // the header's text is a few hundred bytes
    f.read(head.data(), static_cast<std::streamsize>(head.size()));
    head.resize(static_cast<std::size_t>(f.gcount()));
    Reader rd(head, head.size(), path);
    return read_header(rd, path);
}

namespace {

constexpr std::uint64_t fnv_basis = 1469598103934665603ull;

/// Whether the checksum at the end of the file at @p path matches its other bytes (read in pieces).
bool checksum_matches(const std::string& path)
{
    std::ifstream f(path, std::ios::binary);
    std::error_code ec;
    const std::uint64_t size = std::filesystem::file_size(path, ec);
    if (!f || ec || size < 8) return false;
    std::vector<char> buf(std::size_t{16} << 20);
    std::uint64_t h = fnv_basis;
    for (std::uint64_t done = 0; done < size - 8;) {
        const std::size_t m = static_cast<std::size_t>(std::min<std::uint64_t>(buf.size(), size - 8 - done));
        if (!f.read(buf.data(), static_cast<std::streamsize>(m))) return false;
        h = fnv1a(buf.data(), m, h);
        done += m;
    }
    std::uint64_t sum = 0;
    return f.read(reinterpret_cast<char*>(&sum), sizeof sum) && sum == h;
}

/// read_checkpoint's single pass: the header, then each array through a buffer, hashed as it goes by, the rows
/// kept copied out.
Checkpoint read_rows(const std::string& path, CheckpointRows rows)
{
    std::ifstream f(path, std::ios::binary);
    std::error_code ec;
    const std::uint64_t size = std::filesystem::file_size(path, ec);
    if (!f || ec) throw UsageError(fmt::format("{}: no checkpoint (the file cannot be read)", path));
    std::uint64_t h = fnv_basis, at = 0;
    auto take = [&](char* dst, std::size_t n) {
        if (n > size - at || !f.read(dst, static_cast<std::streamsize>(n)))
            throw UsageError(fmt::format("{}: the checkpoint is truncated or not one of banyan's", path));
        h = fnv1a(dst, n, h);
        at += n;
    };
    std::string head(24, '\0'); // magic, format, byte order, length of the text
    if (size < 32) throw UsageError(fmt::format("{}: not a banyan checkpoint", path));
    take(head.data(), head.size());
    std::uint64_t text_bytes = 0;
    std::memcpy(&text_bytes, head.data() + 16, sizeof text_bytes);
    if (text_bytes > size - at)
        throw UsageError(fmt::format("{}: the checkpoint is truncated or not one of banyan's", path));
    head.resize(head.size() + text_bytes);
    take(head.data() + 24, text_bytes);
    Reader rd(head, head.size(), path);
    Checkpoint c;
    c.header = read_header(rd, path);
    auto u = [&](const char* k) { return u64_of(c.header, k, path); };
    const std::size_t n = u("particles");
    const std::size_t g = u("n_gas"), d = u("n_dark"), s = u("n_star");
    // The file's size follows from its counts (each checked against what is left before a product is formed).
    const std::uint64_t left = size - at - 8;
    if (g > left / 4 || d > left / 4 || s > left / 4) rd.fail();
    // The fields are of the particles, or over ranks (rank_rows) of the rows of the input that the rank writes.
    const std::size_t nf = g + d + s;
    if (nf != n && !c.header.count("rank_rows")) rd.fail();
    const bool with_rungs = c.header.count("rungs") && u("rungs") != 0;
    const bool with_ids = c.header.count("file_ids") && u("file_ids") != 0; // before them: none
    // The particles' ids: 8 bytes each (id_bytes=8), or 4 in checkpoints before runs passed 2^32 particles.
    const std::uint64_t id_bytes = c.header.count("id_bytes") ? u("id_bytes") : 4;
    if (id_bytes != 4 && id_bytes != 8) rd.fail();
    SimulationState& st = c.state;
    st.units = checkpoint_units(c.header, path);
    const std::uint64_t per_particle = 3 * sizeof(bn_f4) + id_bytes + (with_rungs ? sizeof(bn_u32) : 0);
    if (n > left / per_particle || nf > left / sizeof(float) || g > left / 12 || s > left / 8 ||
        n * per_particle + (nf + 3 * g + 2 * s) * sizeof(float) + (with_ids ? nf * 8 : 0) != left)
        rd.fail();

    // The rows kept: particles [p0, p1), field rows [f0, f1) of which gas [f0, min(f1, g)), stars from g + d.
    auto clamp = [](Rows r, std::size_t total) {
        const std::size_t a = std::min(r.first, total);
        return std::pair{a, a + std::min(r.count, total - a)};
    };
    const auto [p0, p1] = clamp(rows.particles, n);
    const auto [f0, f1] = clamp(rows.fields, nf);
    const std::size_t gas0 = std::min(f0, g), gas1 = std::min(f1, g);
    const std::size_t star0 = std::max(f0, g + d) - (g + d), star1 = std::max(f1, g + d) - (g + d);
    Snapshot& fl = c.fields;
    fl.n_gas = gas1 - gas0, fl.n_star = star1 - star0, fl.n_dark = (f1 - f0) - fl.n_gas - fl.n_star;

    std::vector<char> buf(std::size_t{16} << 20);
    // One array of @p count elements of T, of which [lo, hi) go into @p out.
    auto array = [&]<class T>(std::vector<T>& out, std::size_t count, std::size_t lo, std::size_t hi) {
        out.resize(hi - lo);
        const std::uint64_t bytes = count * sizeof(T), keep0 = lo * sizeof(T), keep1 = hi * sizeof(T);
        char* dst = reinterpret_cast<char*>(out.data());
        for (std::uint64_t done = 0; done < bytes;) {
            const std::size_t m = static_cast<std::size_t>(std::min<std::uint64_t>(buf.size(), bytes - done));
            take(buf.data(), m);
            const std::uint64_t a = std::max(done, keep0), b = std::min(done + m, keep1);
            if (a < b) std::memcpy(dst + (a - keep0), buf.data() + (a - done), static_cast<std::size_t>(b - a));
            done += m;
        }
    };
    array(st.pos, n, p0, p1), array(st.vel, n, p0, p1), array(st.acc, n, p0, p1);
    if (id_bytes == 8) {
        array(st.ids, n, p0, p1);
    } else {
        std::vector<bn_u32> ids32;
        array(ids32, n, p0, p1);
        st.ids.assign(ids32.begin(), ids32.end());
    }
    // Block time steps' rungs (absent from checkpoints of shared steps, and of versions before them).
    if (with_rungs) array(st.rungs, n, p0, p1);
    array(fl.eps, nf, f0, f1);
    array(fl.gas_rho, g, gas0, gas1), array(fl.gas_temp, g, gas0, gas1), array(fl.gas_metals, g, gas0, gas1);
    array(fl.star_metals, s, star0, star1), array(fl.star_tform, s, star0, star1);
    if (with_ids) array(fl.ids, nf, f0, f1);
    std::uint64_t sum = 0;
    if (!f.read(reinterpret_cast<char*>(&sum), sizeof sum)) rd.fail();
    if (sum != h) throw UsageError(fmt::format("{}: the checksum does not match (a damaged file)", path));

    const std::pair<const char*, const std::vector<bn_f4>*> arrays[] = {
        {"position or mass", &st.pos}, {"velocity", &st.vel}, {"acceleration or potential", &st.acc}};
    for (const auto& [name, v] : arrays)
        if (const std::size_t i = first_non_finite(*v); i < v->size())
            throw UsageError(fmt::format("{}: particle {} has a non-finite {}: the state cannot be continued", path,
                                         st.ids[i], name));
    const std::size_t kept = f1 - f0;
    fl.mass.assign(kept, 0.f), fl.pos.assign(3 * kept, 0.f), fl.vel.assign(3 * kept, 0.f), fl.phi.assign(kept, 0.f);
    return c;
}

} // namespace

InternalUnits checkpoint_units(const KeyValues& header, const std::string& path)
{
    // Absent from checkpoints written before internal units existed: the identity then.
    auto exponent = [&](const char* k) {
        if (!header.count(k)) return 0;
        const double v = double_of(header, k, path);
        if (!(v == std::floor(v) && std::fabs(v) <= 1000))
            throw UsageError(fmt::format("{}: {}={} is not a whole number in [-1000, 1000]", path, k, v));
        return static_cast<int>(v);
    };
    InternalUnits u;
    u.k = exponent("length_exp"), u.j = exponent("mass_exp");
    if ((3 * u.k - u.j) % 2 != 0)
        throw UsageError(fmt::format("{}: length_exp and mass_exp give no whole velocity unit", path));
    return u;
}

Checkpoint read_checkpoint(const std::string& path, CheckpointRows rows)
{
    try {
        return read_rows(path, rows);
    } catch (const UsageError&) {
        // A damaged byte of one of banyan's checkpoints may make its header say other counts, or other words: name
        // the damage itself.
        std::ifstream f(path, std::ios::binary);
        char magic[sizeof checkpoint_magic] = {};
        const bool ours = f.read(magic, sizeof magic) && std::memcmp(magic, checkpoint_magic, sizeof magic) == 0;
        if (ours && !checksum_matches(path))
            throw UsageError(fmt::format("{}: the checksum does not match (a damaged file)", path));
        throw;
    }
}

} // namespace banyan
