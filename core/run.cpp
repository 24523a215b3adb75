/**
 * @file run.cpp
 * @brief The run loop of `banyan run`: outputs on time grids, the energy log, checkpoints and restarts.
 *
 * Checkpoint format (host byte order; the same machine writes and reads it): "BNYNCKPT", u32 version, u32 byte-order
 * mark, u64 length of a text block of key=value lines (the options and the bookkeeping, doubles in shortest
 * round-trip form), the text, then the arrays pos, vel, acc (N float4 each), ids (N u32) in device order, then the
 * fields of the input that never change (eps for N, gas rho/temp/metals, star metals/tform), and last an FNV-1a
 * 64-bit checksum of everything before it.
 */
#include "run.hpp"

#include "atomic_file.hpp"
#include "devices.hpp"
#include "error.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <unistd.h>

namespace banyan {

namespace fs = std::filesystem;

namespace {

constexpr char checkpoint_magic[8] = {'B', 'N', 'Y', 'N', 'C', 'K', 'P', 'T'};
constexpr std::uint32_t checkpoint_version = 1;
constexpr std::uint32_t byte_order_mark = 0x01020304u;

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

std::uint64_t fnv1a(const char* p, std::size_t n)
{
    std::uint64_t h = 1469598103934665603ull;
    for (std::size_t i = 0; i < n; ++i) {
        h ^= static_cast<unsigned char>(p[i]);
        h *= 1099511628211ull;
    }
    return h;
}

template <class T>
void put(std::string& out, const T& v)
{
    out.append(reinterpret_cast<const char*>(&v), sizeof(T));
}
template <class T>
void put_array(std::string& out, const std::vector<T>& v)
{
    if (!v.empty()) out.append(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T));
}

/// Reads a checkpoint's pieces in order, refusing to read past its end.
class Reader {
public:
    Reader(const std::string& data, std::size_t end, std::string path) : d_(data), end_(end), path_(std::move(path)) {}
    template <class T>
    T get()
    {
        T v;
        take(&v, sizeof(T));
        return v;
    }
    template <class T>
    std::vector<T> array(std::size_t n)
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

std::map<std::string, std::string> parse_lines(const std::string& text)
{
    std::map<std::string, std::string> kv;
    std::istringstream in(text);
    std::string line;
    while (std::getline(in, line)) {
        const auto eq = line.find('=');
        if (eq == std::string::npos) continue;
        kv[line.substr(0, eq)] = line.substr(eq + 1);
    }
    return kv;
}

const std::string& need(const std::map<std::string, std::string>& kv, const std::string& key)
{
    auto it = kv.find(key);
    if (it == kv.end()) throw UsageError(fmt::format("checkpoint: the entry '{}' is missing", key));
    return it->second;
}

double to_double(const std::string& s, const std::string& key)
{
    char* end = nullptr;
    const double v = std::strtod(s.c_str(), &end);
    if (s.empty() || *end != '\0') throw UsageError(fmt::format("checkpoint: '{}' is not a number: '{}'", key, s));
    return v;
}

std::uint64_t to_u64(const std::string& s, const std::string& key)
{
    char* end = nullptr;
    const unsigned long long v = std::strtoull(s.c_str(), &end, 10);
    if (s.empty() || *end != '\0')
        throw UsageError(fmt::format("checkpoint: '{}' is not a whole number: '{}'", key, s));
    return v;
}

/// Grid time k of a grid starting at @p t0 with spacing @p every.
double grid_time(double t0, std::uint64_t k, double every) { return t0 + static_cast<double>(k) * every; }

/// Whether grid point @p k lies at or before the step at time @p t (half a step of slack against rounding).
bool due(double t0, std::uint64_t k, double every, double t, double dt)
{
    return every > 0 && grid_time(t0, k, every) <= t + 0.5 * dt;
}

/// Removes leftovers of atomic writes interrupted by a kill ("<name>.tmp.<pid>").
void remove_stale_temporaries(const std::string& dir)
{
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(dir, ec)) {
        const std::string name = e.path().filename().string();
        const bool ours = name.rfind("snapshot_", 0) == 0 || name.rfind("checkpoint.bin", 0) == 0;
        if (ours && name.find(".tmp.") != std::string::npos) fs::remove(e.path(), ec);
    }
}

/// The header of a checkpoint (magic, format, byte order, then its text of key=value lines), read by @p rd.
std::map<std::string, std::string> read_header(Reader& rd, const std::string& path)
{
    if (rd.left() < 32 || rd.text(sizeof checkpoint_magic) != std::string(checkpoint_magic, sizeof checkpoint_magic))
        throw UsageError(fmt::format("{}: not a banyan checkpoint", path));
    const auto version = rd.get<std::uint32_t>();
    const auto bom = rd.get<std::uint32_t>();
    if (version != checkpoint_version || bom != byte_order_mark)
        throw UsageError(fmt::format("{}: checkpoint format {} of another version or byte order", path, version));
    return parse_lines(rd.text(rd.get<std::uint64_t>()));
}

} // namespace

// ---- Options --------------------------------------------------------------------------------------------------

void RunOptions::check() const
{
    const bool file = ic == "file";
    if (!(file || ic == "plummer" || ic == "uniform" || ic == "uniform-cold" || ic == "merger"))
        throw UsageError(fmt::format("run: --ic must be plummer, uniform, uniform-cold or merger, got '{}'", ic));
    if (file && in.empty()) throw UsageError("run: initial conditions from a file need --in FILE");
    if (!file) {
        if (n < 1) throw UsageError("run: -n must be at least 1");
        if (n > 0x7FFFFFFFull) throw UsageError(fmt::format("run: -n {} is more than the 2^31 - 1 supported", n));
        if (ic == "merger" && n < 4) throw UsageError(fmt::format("run: a merger needs -n 4 or more, got {}", n));
    }
    if (!(theta > 0.0 && theta <= 1.0)) throw UsageError(fmt::format("run: --theta must be in (0, 1], got {}", theta));
    if (!(eps >= 0.0 && eps < 1e30)) throw UsageError(fmt::format("run: --eps must be >= 0 and finite, got {}", eps));
    if (!(dt > 0.0 && dt < 1e30)) throw UsageError(fmt::format("run: --dt must be positive and finite, got {}", dt));
    if (static_cast<float>(dt) == 0.0f || static_cast<float>(0.5 * dt) == 0.0f)
        throw UsageError(fmt::format("run: --dt {} is too small for single precision", dt));
    if (!std::isfinite(t_end)) throw UsageError(fmt::format("run: --t-end must be finite, got {}", t_end));
    if (log_every < 1) throw UsageError("run: --log-every must be at least 1 step");
    if (!(snapshot_every >= 0.0 && std::isfinite(snapshot_every)))
        throw UsageError(fmt::format("run: --snapshot-every must be >= 0 (0: start and end only), got {}",
                                     snapshot_every));
    if (!(checkpoint_every >= 0.0 && std::isfinite(checkpoint_every)))
        throw UsageError(fmt::format("run: --checkpoint-every must be >= 0 (0: start, end and stops only), got {}",
                                     checkpoint_every));
    // A grid finer than the step would only repeat the same step's output.
    if (snapshot_every > 0 && snapshot_every < dt)
        throw UsageError(fmt::format("run: --snapshot-every {} is shorter than the time step {} (0: start and end "
                                     "only)",
                                     snapshot_every, dt));
    if (checkpoint_every > 0 && checkpoint_every < dt)
        throw UsageError(fmt::format("run: --checkpoint-every {} is shorter than the time step {}", checkpoint_every,
                                     dt));
    if (std::fabs(t_end) / dt > 1e15)
        throw UsageError(fmt::format("run: --t-end {} at --dt {} is more than 10^15 steps", t_end, dt));
    if (ic == "merger") check_merger_options(merger);
    if (out.empty()) throw UsageError("run: --out must name a folder");
}

std::string RunOptions::to_text() const
{
    std::string s;
    auto line = [&](const char* k, const auto& v) { s += fmt::format("{}={}\n", k, v); };
    line("ic", ic), line("in", in), line("n", n), line("seed", seed), line("theta", theta), line("eps", eps);
    line("dt", dt), line("t_end", t_end), line("log_every", log_every), line("snapshot_every", snapshot_every);
    line("checkpoint_every", checkpoint_every), line("pericentre", merger.pericentre);
    line("separation", merger.separation), line("eccentricity", merger.eccentricity);
    line("bh_fraction", merger.bh_fraction), line("direct", direct ? 1 : 0);
    return s;
}

RunOptions RunOptions::from_text(const std::map<std::string, std::string>& kv)
{
    RunOptions o;
    auto d = [&](const char* k) { return to_double(need(kv, k), k); };
    auto u = [&](const char* k) { return to_u64(need(kv, k), k); };
    o.ic = need(kv, "ic");
    o.in = need(kv, "in");
    o.n = u("n"), o.seed = u("seed"), o.theta = d("theta"), o.eps = d("eps"), o.dt = d("dt"), o.t_end = d("t_end");
    o.log_every = u("log_every"), o.snapshot_every = d("snapshot_every"), o.checkpoint_every = d("checkpoint_every");
    o.merger.pericentre = d("pericentre"), o.merger.separation = d("separation");
    o.merger.eccentricity = d("eccentricity"), o.merger.bh_fraction = d("bh_fraction");
    o.direct = u("direct") != 0;
    return o;
}

SimulationOptions RunOptions::simulation() const
{
    SimulationOptions s;
    s.theta = static_cast<float>(theta);
    s.eps = static_cast<float>(eps);
    s.dt = dt;
    s.direct = direct;
    return s;
}

double parse_time(const std::string& text, const std::string& option)
{
    auto number = [&](const std::string& s) {
        char* end = nullptr;
        const double v = std::strtod(s.c_str(), &end);
        if (s.empty() || *end != '\0' || !std::isfinite(v))
            throw UsageError(fmt::format("run: {} expects a number or a fraction such as 1/64, got '{}'", option,
                                         text));
        return v;
    };
    const auto slash = text.find('/');
    if (slash == std::string::npos) return number(text);
    const double a = number(text.substr(0, slash)), b = number(text.substr(slash + 1));
    if (b == 0.0) throw UsageError(fmt::format("run: {} divides by zero: '{}'", option, text));
    return a / b;
}

std::uint64_t steps_between(double t_begin, double t_end, double dt)
{
    if (!(t_end > t_begin)) return 0;
    const double q = (t_end - t_begin) / dt;
    const double r = std::round(q);
    if (std::fabs(q - r) <= 1e-9 * std::max(1.0, q)) return static_cast<std::uint64_t>(r);
    return static_cast<std::uint64_t>(std::ceil(q));
}

Snapshot initial_conditions(const RunOptions& o)
{
    if (o.ic == "file") {
        Snapshot s = read_tipsy(o.in);
        check_particles(s, o.in);
        if (s.size() > 0x7FFFFFFFull)
            throw UsageError(fmt::format("{}: {} particles is more than the 2^31 - 1 supported", o.in, s.size()));
        return s;
    }
    Particles p;
    if (o.ic == "plummer") p = plummer(o.n, o.seed);
    else if (o.ic == "uniform") p = uniform_sphere(o.n, o.seed, true);
    else if (o.ic == "uniform-cold") p = uniform_sphere(o.n, o.seed, false);
    else if (o.ic == "merger") p = galaxy_merger(o.n, o.seed, o.merger).particles;
    else throw UsageError(fmt::format("run: unknown initial conditions '{}'", o.ic));
    Snapshot s = Snapshot::dark(p.size());
    for (std::size_t i = 0; i < p.size(); ++i) {
        s.mass[i] = p.pos[i].w;
        s.pos[3 * i] = p.pos[i].x, s.pos[3 * i + 1] = p.pos[i].y, s.pos[3 * i + 2] = p.pos[i].z;
        s.vel[3 * i] = p.vel[i].x, s.vel[3 * i + 1] = p.vel[i].y, s.vel[3 * i + 2] = p.vel[i].z;
        s.eps[i] = static_cast<float>(o.eps);
    }
    return s;
}

// ---- Output folder --------------------------------------------------------------------------------------------

void prepare_output_dir(const std::string& dir, bool fresh)
{
    std::error_code ec;
    if (!fresh && !fs::exists(fs::path(dir) / "checkpoint.bin"))
        throw UsageError(fmt::format("run: no checkpoint to continue from in {} ({} is missing)", dir,
                                     (fs::path(dir) / "checkpoint.bin").string()));
    fs::create_directories(dir, ec);
    if (ec || !fs::is_directory(dir))
        throw UsageError(fmt::format("run: cannot create the output folder {}: {}", dir,
                                     ec ? ec.message() : "it exists and is not a folder"));
    const std::string probe = fmt::format("{}/.banyan-write-test.{}", dir, ::getpid());
    {
        std::ofstream f(probe);
        if (!f || !(f << "x") || !f.flush())
            throw UsageError(fmt::format("run: the output folder {} is not writable: {}", dir, std::strerror(errno)));
    }
    fs::remove(probe, ec);
    if (fresh && fs::exists(fs::path(dir) / "checkpoint.bin"))
        throw UsageError(fmt::format("run: {} holds a run already (checkpoint.bin): continue it with "
                                     "`banyan run --restart {}`, or choose another --out",
                                     dir, dir));
}

// ---- The run --------------------------------------------------------------------------------------------------

Run::Run(Backend& be, const RunOptions& options, RunHooks hooks) : be_(be), opt_(options), hooks_(std::move(hooks)) {}

Run::Run(Backend& be, const RunOptions& options, Snapshot ic, RunHooks hooks) : Run(be, options, std::move(hooks))
{
    opt_.check();
    check_particles(ic, opt_.ic == "file" ? opt_.in : "initial conditions");
    if (opt_.ic != "file" && ic.size() != opt_.n)
        throw UsageError(fmt::format("run: {} particles given for -n {}", ic.size(), opt_.n));
    if (!(opt_.t_end > ic.time))
        throw UsageError(fmt::format("run: --t-end {} must be later than the start time {}", opt_.t_end, ic.time));
    prepare_output_dir(opt_.out, true);
    const std::size_t n = ic.size();
    std::vector<bn_f4> pos(n), vel(n);
    for (std::size_t i = 0; i < n; ++i) {
        pos[i] = {ic.pos[3 * i], ic.pos[3 * i + 1], ic.pos[3 * i + 2], ic.mass[i]};
        vel[i] = {ic.vel[3 * i], ic.vel[3 * i + 1], ic.vel[3 * i + 2], 0.0f};
    }
    template_ = std::move(ic);
    end_step_ = steps_between(template_.time, opt_.t_end, opt_.dt);
    sim_ = std::make_unique<Simulation>(be_, opt_.simulation());
    sim_->start(pos, vel, template_.time);

    // Step 0: a fresh log, the first snapshot and a checkpoint, so that a kill from now on loses nothing.
    const auto t0 = Clock::now();
    std::error_code ec;
    fs::resize_file(log_path(), 0, ec); // an energy.csv of an earlier, checkpoint-less attempt
    log_bytes_ = 0;
    output_seconds_ += seconds_since(t0);
    log_energies();
    const double t = sim_->time();
    next_snapshot_ = next_checkpoint_ = 1; // grid point 0 is now
    while (due(t, next_snapshot_, opt_.snapshot_every, t, opt_.dt)) ++next_snapshot_;
    while (due(t, next_checkpoint_, opt_.checkpoint_every, t, opt_.dt)) ++next_checkpoint_;
    write_snapshot();
    write_checkpoint();
}

std::string Run::checkpoint_path() const { return (fs::path(opt_.out) / "checkpoint.bin").string(); }
std::string Run::log_path() const { return (fs::path(opt_.out) / "energy.csv").string(); }

void Run::log_energies()
{
    const Energies e = sim_->energies();
    const auto t0 = Clock::now();
    if (sim_->steps() == 0) e0_ = e.total();
    RunRecord r;
    r.step = sim_->steps();
    r.time = sim_->time();
    r.energies = e;
    r.de = e0_ != 0.0 ? (e0_ - e.total()) / e0_ + 0.0 : 0.0; // + 0.0: no "-0" in the log
    max_de_ = std::max(max_de_, std::fabs(r.de));
    r.max_de = max_de_;
    if (tracked()) {
        const std::uint32_t b = static_cast<std::uint32_t>(sim_->size() - sim_->size() / 2);
        const auto c = sim_->track(0, b);
        const double dx = double(c[1].x) - c[0].x, dy = double(c[1].y) - c[0].y, dz = double(c[1].z) - c[0].z;
        r.centre_distance = std::sqrt(dx * dx + dy * dy + dz * dz);
    }
    std::string text;
    if (log_bytes_ == 0) {
        text = "step,time,kinetic,potential,total,dE,max_abs_dE,px,py,pz,Lx,Ly,Lz";
        text += tracked() ? ",centre_distance\n" : "\n";
    }
    const auto& p = e.momentum;
    const auto& l = e.angular_momentum;
    text += fmt::format("{},{},{},{},{},{},{},{},{},{},{},{},{}", r.step, r.time, e.kinetic, e.potential, e.total(),
                        r.de, r.max_de, p[0], p[1], p[2], l[0], l[1], l[2]);
    text += tracked() ? fmt::format(",{}\n", r.centre_distance) : "\n";
    // One write of whole lines, appended: a kill leaves at most a cut last line, which a restart truncates away.
    const int fd = ::open(log_path().c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd < 0) throw std::runtime_error(fmt::format("cannot open {}: {}", log_path(), std::strerror(errno)));
    std::size_t done = 0;
    while (done < text.size()) {
        const ssize_t w = ::write(fd, text.data() + done, text.size() - done);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) {
            const int err = errno;
            ::close(fd);
            throw std::runtime_error(fmt::format("writing {} failed: {}", log_path(), std::strerror(err)));
        }
        done += static_cast<std::size_t>(w);
    }
    ::close(fd);
    log_bytes_ += text.size();
    last_ = r;
    output_seconds_ += seconds_since(t0);
    if (hooks_.on_log) hooks_.on_log(r);
}

void Run::write_snapshot()
{
    const auto t0 = Clock::now();
    std::vector<bn_f4> pos, vel, acc;
    sim_->input_order(pos, vel, acc);
    Snapshot& s = template_;
    s.time = sim_->time();
    for (std::size_t i = 0; i < pos.size(); ++i) {
        s.mass[i] = pos[i].w;
        s.pos[3 * i] = pos[i].x, s.pos[3 * i + 1] = pos[i].y, s.pos[3 * i + 2] = pos[i].z;
        s.vel[3 * i] = vel[i].x, s.vel[3 * i + 1] = vel[i].y, s.vel[3 * i + 2] = vel[i].z;
        s.phi[i] = acc[i].w;
    }
    const std::string path = (fs::path(opt_.out) / fmt::format("snapshot_{:05d}.tipsy", snapshots_written_)).string();
    write_tipsy(path, s, Endian::big);
    ++snapshots_written_;
    output_seconds_ += seconds_since(t0);
    if (hooks_.on_file) hooks_.on_file(path);
}

void Run::write_checkpoint()
{
    const auto t0 = Clock::now();
    const SimulationState st = sim_->save();
    std::string text = opt_.to_text();
    text += fmt::format("format={}\nparticles={}\nstep={}\nt_begin={}\ne0={}\nmax_de={}\nnext_snapshot={}\n"
                        "snapshots_written={}\nnext_checkpoint={}\nlog_bytes={}\nwork_group_size={}\ndevice={}\n"
                        "n_gas={}\nn_dark={}\nn_star={}\nlast_log_step={}\nlast_log_time={}\nlast_de={}\n"
                        "last_centre_distance={}\n",
                        checkpoint_version, st.pos.size(), st.step, st.t_begin, e0_, max_de_, next_snapshot_,
                        snapshots_written_, next_checkpoint_, log_bytes_, be_.work_group_size(),
                        device_label(be_.info()), template_.n_gas, template_.n_dark, template_.n_star, last_.step,
                        last_.time, last_.de, last_.centre_distance);
    std::string blob;
    blob.reserve(64 + text.size() + st.pos.size() * 60 + template_.n_gas * 12 + template_.n_star * 8);
    blob.append(checkpoint_magic, sizeof checkpoint_magic);
    put(blob, checkpoint_version);
    put(blob, byte_order_mark);
    put(blob, static_cast<std::uint64_t>(text.size()));
    blob += text;
    put_array(blob, st.pos), put_array(blob, st.vel), put_array(blob, st.acc), put_array(blob, st.ids);
    put_array(blob, template_.eps), put_array(blob, template_.gas_rho), put_array(blob, template_.gas_temp);
    put_array(blob, template_.gas_metals), put_array(blob, template_.star_metals);
    put_array(blob, template_.star_tform);
    put(blob, fnv1a(blob.data(), blob.size()));
    write_file_atomically(checkpoint_path(), [&](std::ostream& out) {
        out.write(blob.data(), static_cast<std::streamsize>(blob.size()));
    });
    output_seconds_ += seconds_since(t0);
    if (hooks_.on_file) hooks_.on_file(checkpoint_path());
}

std::string checkpoint_device(const std::string& dir)
{
    const std::string path = (fs::path(dir) / "checkpoint.bin").string();
    std::ifstream f(path, std::ios::binary);
    if (!f) throw UsageError(fmt::format("run: no checkpoint in {} ({} cannot be read)", dir, path));
    std::string head(64 << 10, '\0'); // the header's text is a few hundred bytes
    f.read(head.data(), static_cast<std::streamsize>(head.size()));
    head.resize(static_cast<std::size_t>(f.gcount()));
    Reader rd(head, head.size(), path);
    const auto kv = read_header(rd, path);
    return need(kv, "device");
}

std::unique_ptr<Run> Run::resume(Backend& be, const std::string& dir, std::optional<double> t_end, RunHooks hooks)
{
    const std::string path = (fs::path(dir) / "checkpoint.bin").string();
    std::string data;
    {
        std::ifstream f(path, std::ios::binary);
        if (!f) throw UsageError(fmt::format("run: no checkpoint in {} ({} cannot be read)", dir, path));
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
    const auto kv = read_header(rd, path);

    RunOptions opt = RunOptions::from_text(kv);
    opt.out = dir;
    if (t_end) opt.t_end = *t_end;
    auto run = std::unique_ptr<Run>(new Run(be, opt, std::move(hooks)));
    Run& r = *run;
    auto u = [&](const char* k) { return to_u64(need(kv, k), k); };
    auto d = [&](const char* k) { return to_double(need(kv, k), k); };
    SimulationState st;
    const std::size_t n = u("particles");
    st.step = u("step");
    st.t_begin = d("t_begin");
    r.e0_ = d("e0");
    r.max_de_ = d("max_de");
    r.next_snapshot_ = u("next_snapshot");
    r.snapshots_written_ = u("snapshots_written");
    r.next_checkpoint_ = u("next_checkpoint");
    r.log_bytes_ = u("log_bytes");
    const std::size_t wg = u("work_group_size");
    Snapshot& tp = r.template_;
    tp.n_gas = u("n_gas"), tp.n_dark = u("n_dark"), tp.n_star = u("n_star");
    if (tp.size() != n) rd.fail();
    st.pos = rd.array<bn_f4>(n), st.vel = rd.array<bn_f4>(n), st.acc = rd.array<bn_f4>(n);
    st.ids = rd.array<bn_u32>(n);
    tp.eps = rd.array<float>(n);
    tp.gas_rho = rd.array<float>(tp.n_gas), tp.gas_temp = rd.array<float>(tp.n_gas);
    tp.gas_metals = rd.array<float>(tp.n_gas);
    tp.star_metals = rd.array<float>(tp.n_star), tp.star_tform = rd.array<float>(tp.n_star);
    if (rd.left() != 0) rd.fail();
    tp.mass.assign(n, 0.f), tp.pos.assign(3 * n, 0.f), tp.vel.assign(3 * n, 0.f), tp.phi.assign(n, 0.f);
    tp.time = st.t_begin;

    opt.check();
    if (t_end && !(*t_end > st.t_begin + static_cast<double>(st.step) * opt.dt - 0.5 * opt.dt))
        throw UsageError(fmt::format("run: --t-end {} is before the checkpoint's time {}", *t_end,
                                     st.t_begin + static_cast<double>(st.step) * opt.dt));
    prepare_output_dir(dir, false);
    // Bit-for-bit continuation needs the kernels of the same work-group size (OpenCL may vary it).
    if (wg != be.work_group_size()) be.set_work_group_size(wg);
    r.end_step_ = steps_between(st.t_begin, opt.t_end, opt.dt);
    r.sim_ = std::make_unique<Simulation>(be, opt.simulation());
    r.sim_->restore(st);
    r.last_.step = u("last_log_step");
    r.last_.time = d("last_log_time");
    r.last_.de = d("last_de");
    r.last_.max_de = r.max_de_;
    r.last_.centre_distance = d("last_centre_distance");

    // Lines logged after the checkpoint (and a line cut by a kill) go: the steps they came from run again.
    remove_stale_temporaries(dir);
    std::error_code ec;
    const auto size = fs::file_size(r.log_path(), ec);
    if (!ec && size > r.log_bytes_) fs::resize_file(r.log_path(), r.log_bytes_, ec);
    if (ec || size < r.log_bytes_) r.log_bytes_ = ec ? 0 : size; // a log removed or cut by hand: start it afresh
    return run;
}

Run::Outcome Run::run(const volatile std::sig_atomic_t* stop)
{
    const double t_begin = sim_->t_begin();
    while (sim_->steps() < end_step_) {
        if (stop && *stop) {
            write_checkpoint();
            return Outcome::stopped;
        }
        const auto t0 = Clock::now();
        sim_->step();
        const std::uint64_t s = sim_->steps();
        const double t = sim_->time();
        const bool last = s == end_step_;
        if (s % opt_.log_every == 0 || last) log_energies();
        const bool snap = due(t_begin, next_snapshot_, opt_.snapshot_every, t, opt_.dt);
        while (due(t_begin, next_snapshot_, opt_.snapshot_every, t, opt_.dt)) ++next_snapshot_;
        if (snap || last) write_snapshot();
        const bool ckpt = due(t_begin, next_checkpoint_, opt_.checkpoint_every, t, opt_.dt);
        while (due(t_begin, next_checkpoint_, opt_.checkpoint_every, t, opt_.dt)) ++next_checkpoint_;
        if (ckpt || last) write_checkpoint();
        ++session_steps_;
        session_seconds_ += seconds_since(t0);
        if (hooks_.on_step) hooks_.on_step();
    }
    return Outcome::finished;
}

} // namespace banyan
