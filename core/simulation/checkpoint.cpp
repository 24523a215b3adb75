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
#include <fstream>
#include <sstream>

namespace banyan {

namespace {

constexpr char checkpoint_magic[8] = {'B', 'N', 'Y', 'N', 'C', 'K', 'P', 'T'};
constexpr std::uint32_t checkpoint_version = 1;
constexpr std::uint32_t byte_order_mark = 0x01020304u;

std::uint64_t fnv1a(const char* p, std::size_t n)
{
    std::uint64_t h = 1469598103934665603ull;
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

/// Reads a checkpoint's pieces in order, refusing to read past its end.
class Reader {
public:
    Reader(const std::string& data, std::size_t end, std::string path) : d_(data), end_(end), path_(std::move(path)) {}
    template <class T> T get()
    {
        T v;
        take(&v, sizeof(T));
        return v;
    }
    template <class T> std::vector<T> array(std::size_t n)
    {
        if (n > (end_ - at_) / sizeof(T)) fail();
        std::vector<T> v(n);
        take(v.data(), n * sizeof(T));
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
                                  "mass_exp={}\nrungs={}\n",
                                  checkpoint_version, st.pos.size(), fields.n_gas, fields.n_dark, fields.n_star,
                                  st.units.k, st.units.j, st.rungs.empty() ? 0 : 1);
    if (!st.rungs.empty() && st.rungs.size() != st.pos.size())
        throw std::logic_error("write_checkpoint: rungs and particles differ in number");
    std::string blob;
    blob.reserve(64 + text.size() + st.pos.size() * 60 + fields.n_gas * 12 + fields.n_star * 8);
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
    put(blob, fnv1a(blob.data(), blob.size()));
    write_file_atomically(
        path, [&](std::ostream& out) { out.write(blob.data(), static_cast<std::streamsize>(blob.size())); });
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

Checkpoint read_checkpoint(const std::string& path)
{
    std::string data;
    {
        std::ifstream f(path, std::ios::binary);
        if (!f) throw UsageError(fmt::format("{}: no checkpoint (the file cannot be read)", path));
        std::ostringstream ss;
        ss << f.rdbuf();
        data = ss.str();
    }
    if (data.size() < 32 || std::memcmp(data.data(), checkpoint_magic, sizeof checkpoint_magic) != 0)
        throw UsageError(fmt::format("{}: not a banyan checkpoint", path));
    std::uint64_t sum;
    std::memcpy(&sum, data.data() + data.size() - sizeof sum, sizeof sum);
    if (sum != fnv1a(data.data(), data.size() - sizeof sum))
        throw UsageError(fmt::format("{}: the checksum does not match (a damaged file)", path));
    Reader rd(data, data.size() - sizeof sum, path);
    Checkpoint c;
    c.header = read_header(rd, path);
    auto u = [&](const char* k) { return u64_of(c.header, k, path); };
    const std::size_t n = u("particles");
    Snapshot& f = c.fields;
    f.n_gas = u("n_gas"), f.n_dark = u("n_dark"), f.n_star = u("n_star");
    // The fields are of the particles, or over ranks (rank_rows) of the rows of the input that the rank writes.
    const std::size_t nf = f.size();
    if (nf != n && !c.header.count("rank_rows")) rd.fail();
    SimulationState& st = c.state;
    // Internal units (absent from checkpoints written before they existed: the identity then).
    auto exponent = [&](const char* k) {
        if (!c.header.count(k)) return 0;
        const double v = double_of(c.header, k, path);
        if (!(v == std::floor(v) && std::fabs(v) <= 1000)) rd.fail();
        return static_cast<int>(v);
    };
    st.units.k = exponent("length_exp"), st.units.j = exponent("mass_exp");
    if ((3 * st.units.k - st.units.j) % 2 != 0) rd.fail();
    st.pos = rd.array<bn_f4>(n), st.vel = rd.array<bn_f4>(n), st.acc = rd.array<bn_f4>(n);
    st.ids = rd.array<bn_u32>(n);
    // Block time steps' rungs (absent from checkpoints of shared steps, and of versions before them).
    if (c.header.count("rungs") && u("rungs") != 0) st.rungs = rd.array<bn_u32>(n);
    f.eps = rd.array<float>(nf);
    f.gas_rho = rd.array<float>(f.n_gas), f.gas_temp = rd.array<float>(f.n_gas);
    f.gas_metals = rd.array<float>(f.n_gas);
    f.star_metals = rd.array<float>(f.n_star), f.star_tform = rd.array<float>(f.n_star);
    if (rd.left() != 0) rd.fail();
    const std::pair<const char*, const std::vector<bn_f4>*> arrays[] = {
        {"position or mass", &st.pos}, {"velocity", &st.vel}, {"acceleration or potential", &st.acc}};
    for (const auto& [name, v] : arrays)
        if (const std::size_t i = first_non_finite(*v); i < n)
            throw UsageError(fmt::format("{}: particle {} has a non-finite {}: the state cannot be continued", path,
                                         st.ids[i], name));
    f.mass.assign(nf, 0.f), f.pos.assign(3 * nf, 0.f), f.vel.assign(3 * nf, 0.f), f.phi.assign(nf, 0.f);
    return c;
}

} // namespace banyan
