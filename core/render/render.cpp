/**
 * @file render.cpp
 * @brief Surface density maps (cloud-in-cell deposit), the magma colour map, a 5x7 bitmap font, and the annotated
 *        image (colour bar, scale bar, caption).
 */
#include "core/render/render.hpp"

#include "core/error.hpp"
#include "core/files/hdf5_snapshot.hpp"
#include "core/numbers.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <string_view>
#include <utility>
#include <vector>

namespace banyan {

Axis parse_axis(const std::string& text)
{
    if (text == "x" || text == "X") return Axis::x;
    if (text == "y" || text == "Y") return Axis::y;
    if (text == "z" || text == "Z") return Axis::z;
    throw UsageError(fmt::format("the projection axis must be x, y or z, got '{}'", text));
}

const char* to_string(Axis a)
{
    constexpr const char* names[] = {"x", "y", "z"}; // in Axis's order
    return names[static_cast<int>(a)];
}

std::array<int, 2> image_axes(Axis a)
{
    const int k = static_cast<int>(a);
    return {(k + 1) % 3, (k + 2) % 3};
}

void check_render_options(const RenderOptions& o)
{
    if (o.size < 1 || o.size > max_render_size)
        throw UsageError(fmt::format("the image size must be 1 .. {} pixels, got {}", max_render_size, o.size));
    if (o.extent && !(*o.extent > 0 && std::isfinite(*o.extent)))
        throw UsageError(fmt::format("the extent (half-width of the field) must be > 0 and finite, got {}", *o.extent));
    if (!(o.range > 0 && std::isfinite(o.range)))
        throw UsageError(fmt::format("the dynamic range must be > 0 dex, got {}", o.range));
    if (o.vmin && o.vmax && !(*o.vmin < *o.vmax))
        throw UsageError(fmt::format("vmin ({}) must be below vmax ({})", *o.vmin, *o.vmax));
    if (o.centre)
        for (double c : *o.centre)
            if (!std::isfinite(c)) throw UsageError(fmt::format("the centre must be finite, got {}", c));
}

std::array<double, 3> centre_of_mass(const Snapshot& s)
{
    double m = 0, c[3] = {0, 0, 0};
    for (std::size_t i = 0; i < s.size(); ++i) {
        m += s.mass[i];
        for (int k = 0; k < 3; ++k)
            c[k] += double(s.mass[i]) * s.pos[3 * i + k];
    }
    if (!(m > 0)) return {0, 0, 0};
    return {c[0] / m, c[1] / m, c[2] / m};
}

namespace {

double dist2(const Snapshot& s, std::size_t i, const std::array<double, 3>& c)
{
    const double dx = s.pos[3 * i] - c[0], dy = s.pos[3 * i + 1] - c[1], dz = s.pos[3 * i + 2] - c[2];
    return dx * dx + dy * dy + dz * dz;
}

} // namespace

std::array<double, 3> density_centre(const Snapshot& s)
{
    const std::size_t n = s.size();
    std::array<double, 3> c = centre_of_mass(s);
    const std::size_t target = std::max<std::size_t>(32, std::min<std::size_t>(1000, n / 20));
    if (n <= target) return c;
    std::vector<std::size_t> inside(n);
    double r2 = 0;
    for (std::size_t i = 0; i < n; ++i) {
        inside[i] = i;
        r2 = std::max(r2, dist2(s, i, c));
    }
    for (int round = 0; round < 2000 && r2 > 0; ++round) {
        r2 *= 0.95 * 0.95;
        std::vector<std::size_t> next;
        double m = 0, sum[3] = {0, 0, 0};
        for (std::size_t i : inside)
            if (dist2(s, i, c) <= r2) {
                next.push_back(i);
                m += s.mass[i];
                for (int k = 0; k < 3; ++k)
                    sum[k] += double(s.mass[i]) * s.pos[3 * i + k];
            }
        if (next.size() < target || !(m > 0)) break;
        c = {sum[0] / m, sum[1] / m, sum[2] / m};
        inside.swap(next);
    }
    return c;
}

double mass_radius(const Snapshot& s, const std::array<double, 3>& centre, double fraction)
{
    std::vector<std::pair<double, double>> rm(s.size());
    double total = 0;
    for (std::size_t i = 0; i < s.size(); ++i) {
        rm[i] = {dist2(s, i, centre), s.mass[i]};
        total += s.mass[i];
    }
    std::sort(rm.begin(), rm.end());
    double m = 0;
    for (const auto& [r2, mi] : rm) {
        m += mi;
        if (m >= fraction * total) return std::sqrt(r2);
    }
    return rm.empty() ? 0.0 : std::sqrt(rm.back().first);
}

// ---- particle types -------------------------------------------------------------------------------------------

const char* particle_type_name(int type)
{
    static const char* const names[n_particle_types] = {"gas", "halo", "disc", "bulge", "stars", "bh"};
    return type >= 0 && type < n_particle_types ? names[type] : "?";
}

std::vector<int> parse_particle_types(const std::string& text)
{
    std::vector<int> types;
    for (std::string item : comma_items(text)) {
        // " disc, bulge" from a quoted list reads as "disc,bulge".
        item.erase(0, item.find_first_not_of(' '));
        item.erase(item.find_last_not_of(' ') + 1);
        std::string lower = item;
        for (char& c : lower)
            c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        int type = -1;
        if (lower.size() == 1 && lower[0] >= '0' && lower[0] < '0' + n_particle_types) type = lower[0] - '0';
        for (int k = 0; k < n_particle_types && type < 0; ++k)
            if (lower == particle_type_name(k)) type = k;
        if (lower == "disk") type = 2; // GADGET's own spelling
        if (type < 0)
            throw UsageError(
                fmt::format("{}{}: give numbers 0 .. 5 or the names gas, halo, disc, bulge, stars, bh, "
                            "comma-separated for several",
                            item.empty() ? "an empty item" : fmt::format("unknown particle type '{}'", item),
                            item == text ? "" : fmt::format(" in '{}'", text)));
        types.push_back(type);
    }
    std::sort(types.begin(), types.end());
    types.erase(std::unique(types.begin(), types.end()), types.end());
    return types;
}

std::string describe_particle_types(const std::vector<int>& types)
{
    std::string text = types.size() == 1 ? "type " : "types ";
    for (std::size_t k = 0; k < types.size(); ++k)
        text += fmt::format("{}{} ({})", k ? ", " : "", types[k], particle_type_name(types[k]));
    return text;
}

Snapshot select_particle_types(const Snapshot& s, const std::vector<int>& types)
{
    if (types.empty()) return s;
    const auto counts = gadget_type_counts(s);
    bool keep[n_particle_types] = {};
    std::vector<int> absent;
    for (int t : types) {
        if (t < 0 || t >= n_particle_types)
            throw UsageError(fmt::format("a particle type is a number 0 .. 5, got {}", t));
        keep[t] = true;
        if (counts[t] == 0) absent.push_back(t);
    }
    if (!absent.empty()) {
        std::string has;
        int present = 0;
        for (int t = 0; t < n_particle_types; ++t)
            if (counts[t] > 0) has += fmt::format("{}{} ({})", present++ ? ", " : "", t, counts[t]);
        throw UsageError(fmt::format("the snapshot has no particles of {}; it has {}", describe_particle_types(absent),
                                     present == 0   ? std::string("no particles at all")
                                     : present == 1 ? "type " + has
                                                    : "types " + has));
    }

    const std::size_t n = s.size();
    Snapshot r;
    r.time = s.time;
    r.units = s.units;
    // Storage order of the types (tipsy.hpp): gas, then the dark ones as 1, 2, 3, 5, then stars.
    std::size_t first = 0;
    for (int t : {0, 1, 2, 3, 5, 4}) {
        const std::size_t count = counts[t];
        if (keep[t]) {
            // A field shorter than N (none known) stays empty.
            const auto take = [&](std::vector<float>& to, const std::vector<float>& from, std::size_t k) {
                if (from.size() == k * n)
                    to.insert(to.end(), from.begin() + k * first, from.begin() + k * (first + count));
            };
            take(r.mass, s.mass, 1);
            take(r.pos, s.pos, 3);
            take(r.vel, s.vel, 3);
            take(r.eps, s.eps, 1);
            take(r.phi, s.phi, 1);
            take(r.acc, s.acc, 3);
            for (std::size_t i = first; i < first + count; ++i)
                r.ids.push_back(s.ids.size() == n ? s.ids[i] : i);
            if (t == 0) {
                r.n_gas = count;
                r.gas_rho = s.gas_rho, r.gas_temp = s.gas_temp, r.gas_metals = s.gas_metals;
            } else if (t == 4) {
                r.n_star = count;
                r.star_metals = s.star_metals, r.star_tform = s.star_tform;
            } else {
                r.n_dark += count;
                if (t == 2) r.n_type2 = count;
                if (t == 3) r.n_type3 = count;
                if (t == 5) r.n_type5 = count;
            }
        }
        first += count;
    }
    return r;
}

SurfaceDensityMap project_surface_density(const Snapshot& s, const RenderOptions& o)
{
    check_render_options(o);
    if (s.size() == 0) throw UsageError("the snapshot holds no particles: nothing to render");
    SurfaceDensityMap map;
    map.axis = o.axis;
    map.size = o.size;
    map.centre = o.centre ? *o.centre : o.centre_kind == CentreKind::density ? density_centre(s) : centre_of_mass(s);
    if (o.extent) {
        map.extent = *o.extent;
    } else {
        // 1.3 x the 90 % mass radius: a Plummer sphere fills the frame (r90 = 2.18 in N-body units), and the smaller
        // galaxy of a merger (a quarter of the mass, at 7.5 from the centre of mass) stays inside it.
        const double r = 1.3 * mass_radius(s, map.centre, 0.9);
        map.extent = r > 0 && std::isfinite(r) ? r : 1.0;
    }
    const int n = map.size;
    const auto [h, v] = image_axes(o.axis);
    const double dx = map.pixel_width();
    const double x0 = map.centre[h] - map.extent, y0 = map.centre[v] - map.extent;
    map.sigma.assign(static_cast<std::size_t>(n) * n, 0.0);
    auto& sigma = map.sigma;
    // Cloud-in-cell: the particle's cloud is one pixel wide, centred on it; pixel i covers [i, i + 1) in pixel units
    // and its centre is at i + 1/2, so the cloud overlaps pixels floor(u - 1/2) and the one after with weights
    // 1 - f and f. Clouds that reach over the edge are clamped onto the edge pixel, so mass is conserved exactly.
    for (std::size_t p = 0; p < s.size(); ++p) {
        const double px = (s.pos[3 * p + h] - x0) / dx, py = (s.pos[3 * p + v] - y0) / dx;
        if (!(px >= 0 && px < n && py >= 0 && py < n)) continue;
        const double u = px - 0.5, w = py - 0.5;
        const double fu = std::floor(u), fw = std::floor(w);
        const double a = u - fu, b = w - fw;
        const int i0 = std::clamp(static_cast<int>(fu), 0, n - 1), i1 = std::clamp(static_cast<int>(fu) + 1, 0, n - 1);
        const int j0 = std::clamp(static_cast<int>(fw), 0, n - 1), j1 = std::clamp(static_cast<int>(fw) + 1, 0, n - 1);
        const double m = s.mass[p];
        sigma[static_cast<std::size_t>(j0) * n + i0] += m * (1 - a) * (1 - b);
        sigma[static_cast<std::size_t>(j0) * n + i1] += m * a * (1 - b);
        sigma[static_cast<std::size_t>(j1) * n + i0] += m * (1 - a) * b;
        sigma[static_cast<std::size_t>(j1) * n + i1] += m * a * b;
        map.mass_inside += m;
        ++map.n_inside;
    }
    const double area = dx * dx;
    for (double& x : sigma)
        x /= area;
    return map;
}

namespace {

/// A number as short as the caption wants it: 4 digits, "1e10" rather than "1e+10".
std::string compact(double v)
{
    std::string s = fmt::format("{:.4g}", v);
    if (auto e = s.find("e+"); e != std::string::npos) s.erase(e + 1, 1);
    if (auto e = s.find('e'); e != std::string::npos && s.size() > e + 2 && s[e + 1 + (s[e + 1] == '-')] == '0')
        s.erase(e + 1 + (s[e + 1] == '-'), 1);
    return s;
}

} // namespace

std::string length_unit(const Units& u)
{
    if (!u.physical()) return "";
    struct Length {
        const char* name;
        double cm;
    };
    static const Length lengths[] = {{"Mpc", cgs::Mpc}, {"kpc", cgs::kpc}, {"pc", cgs::pc}, {"au", cgs::au}};
    const Length* l = &lengths[3];
    for (const auto& c : lengths)
        if (u.length_cm >= c.cm * (1 - 1e-9)) {
            l = &c;
            break;
        }
    const double factor = u.length_cm / l->cm;
    return std::abs(factor - 1) < 1e-6 ? std::string(l->name) : fmt::format("({} {})", compact(factor), l->name);
}

std::string surface_density_units(const Units& u)
{
    if (!u.physical()) return "N-body units";
    return fmt::format("{} Msun/{}^2", compact(u.mass_g / cgs::msun), length_unit(u));
}

// ---- colours --------------------------------------------------------------------------------------------------

std::array<std::uint8_t, 3> magma(double t)
{
    // matplotlib's magma at t = 0, 0.1, ..., 1 (the table of d3-scale-chromatic's schemeMagma[11]).
    static constexpr std::uint8_t table[11][3] = {
        {0x00, 0x00, 0x04}, {0x14, 0x0e, 0x36}, {0x3b, 0x0f, 0x70}, {0x64, 0x1a, 0x80},
        {0x8c, 0x29, 0x81}, {0xb7, 0x37, 0x79}, {0xde, 0x49, 0x68}, {0xf7, 0x70, 0x5c},
        {0xfe, 0x9f, 0x6d}, {0xfe, 0xcf, 0x92}, {0xfc, 0xfd, 0xbf},
    };
    if (!(t > 0)) t = 0; // NaN too
    if (t > 1) t = 1;
    // 254 levels: with the white and the ink of the annotations, an image fits a PNG palette of 256 colours.
    t = std::round(t * 253) / 253;
    const double x = t * 10;
    const int i = std::min(static_cast<int>(x), 9);
    const double f = x - i;
    std::array<std::uint8_t, 3> c{};
    for (int k = 0; k < 3; ++k)
        c[k] = static_cast<std::uint8_t>(std::lround(table[i][k] * (1 - f) + table[i + 1][k] * f));
    return c;
}

// ---- the bitmap font ------------------------------------------------------------------------------------------

namespace {

// The glyphs, 5 x 7 pixels above the baseline ('#' ink) and 2 rows below it for descenders; lower case after the
// HD44780's. In banks of ten lines: the bank's characters, one every 6 columns, then the 9 pixel rows of their
// glyphs below them. '?' stands for any character the font lacks; an upper-case letter without a glyph of its own
// is drawn as its lower case.
constexpr std::string_view font = R"(
0     1     2     3     4     5     6     7     8     9     -     .     ,
.###. ..#.. .###. ##### ...#. ##### ..##. ##### .###. .###. ..... ..... .....
#...# .##.. #...# ...#. ..##. #.... .#... ....# #...# #...# ..... ..... .....
#..## ..#.. ....# ..#.. .#.#. ####. #.... ...#. #...# #...# ..... ..... .....
#.#.# ..#.. ...#. ...#. #..#. ....# ####. ..#.. .###. .#### .###. ..... .....
##..# ..#.. ..#.. ....# ##### ....# #...# .#... #...# ....# ..... ..... .....
#...# ..#.. .#... #...# ...#. #...# #...# .#... #...# ...#. ..... .##.. .##..
.###. .###. ##### .###. ...#. .###. .###. .#... .###. .##.. ..... .##.. .##..
..... ..... ..... ..... ..... ..... ..... ..... ..... ..... ..... ..... ..#..
..... ..... ..... ..... ..... ..... ..... ..... ..... ..... ..... ..... .#...
:     ;     =     +     (     )     /     N     M     ^     ?
..... ..... ..... ..... ...#. .#... ..... #...# #...# ..#.. #####
.##.. .##.. ..... ..#.. ..#.. ..#.. ....# ##..# ##.## .#.#. #...#
.##.. .##.. ##### ..#.. .#... ...#. ...#. #.#.# #.#.# #...# #...#
..... ..... ..... ##### .#... ...#. ..#.. #..## #.#.# ..... #...#
.##.. ..... ##### ..#.. .#... ...#. .#... #...# #...# ..... #...#
.##.. .##.. ..... ..#.. ..#.. ..#.. #.... #...# #...# ..... #...#
..... .##.. ..... ..... ...#. .#... ..... #...# #...# ..... #####
..... ..#.. ..... ..... ..... ..... ..... ..... ..... ..... .....
..... .#... ..... ..... ..... ..... ..... ..... ..... ..... .....
a     b     c     d     e     f     g     h     i     j     k     l     m
..... #.... ..... ....# ..... ..##. ..... #.... ..#.. ...#. #.... .##.. .....
..... #.... ..... ....# ..... .#..# ..... #.... ..... ..... #.... ..#.. .....
.###. #.##. .###. .##.# .###. .#... .#### #.##. .##.. ..##. #..#. ..#.. ##.#.
....# ##..# #.... #..## #...# ###.. #...# ##..# ..#.. ...#. #.#.. ..#.. #.#.#
.#### #...# #.... #...# ##### .#... #...# #...# ..#.. ...#. ##... ..#.. #.#.#
#...# #...# #...# #...# #.... .#... #...# #...# ..#.. ...#. #.#.. ..#.. #...#
.#### ####. .###. .#### .###. .#... .#### #...# .###. ...#. #..#. .###. #...#
..... ..... ..... ..... ..... ..... ....# ..... ..... #..#. ..... ..... .....
..... ..... ..... ..... ..... ..... .###. ..... ..... .##.. ..... ..... .....
n     o     p     q     r     s     t     u     v     w     x     y     z
..... ..... ..... ..... ..... ..... .#... ..... ..... ..... ..... ..... .....
..... ..... ..... ..... ..... ..... .#... ..... ..... ..... ..... ..... .....
#.##. .###. ####. .#### #.##. .###. ###.. #...# #...# #...# #...# #...# #####
##..# #...# #...# #...# ##..# #.... .#... #...# #...# #...# .#.#. #...# ...#.
#...# #...# #...# #...# #.... .###. .#... #...# #...# #.#.# ..#.. #...# ..#..
#...# #...# #...# #...# #.... ....# .#..# #..## .#.#. #.#.# .#.#. #...# .#...
#...# .###. ####. .#### #.... ####. ..##. .##.# ..#.. .#.#. #...# .#### #####
..... ..... #.... ....# ..... ..... ..... ..... ..... ..... ..... ....# .....
..... ..... #.... ....# ..... ..... ..... ..... ..... ..... ..... .###. .....
)";
constexpr std::size_t glyph_rows = 9, glyph_pitch = 6;

/// The lines of the font's picture.
std::vector<std::string_view> font_lines()
{
    std::vector<std::string_view> lines;
    for (std::size_t at = 1; at < font.size();) { // after the line break that opens the picture
        const std::size_t end = font.find('\n', at);
        lines.push_back(font.substr(at, end - at));
        at = end + 1;
    }
    return lines;
}

/// The 9 pixel rows of @p c's glyph, 5 characters each.
std::array<std::string_view, glyph_rows> glyph(char c)
{
    static const std::vector<std::string_view> lines = font_lines();
    std::array<std::string_view, glyph_rows> rows;
    if (c == ' ') {
        rows.fill(".....");
        return rows;
    }
    for (std::size_t bank = 0; bank < lines.size(); bank += 1 + glyph_rows)
        for (std::size_t column = 0; column < lines[bank].size(); column += glyph_pitch)
            if (lines[bank][column] == c) {
                for (std::size_t r = 0; r < glyph_rows; ++r)
                    rows[r] = lines[bank + 1 + r].substr(column, 5);
                return rows;
            }
    if (std::isupper(static_cast<unsigned char>(c))) return glyph(static_cast<char>(std::tolower(c)));
    return glyph('?');
}

} // namespace

int text_width(const std::string& text, int scale)
{
    return text.empty() ? 0 : (6 * int(text.size()) - 1) * scale;
}

int draw_text(Image& img, int x, int y, const std::string& text, int scale, std::array<std::uint8_t, 3> colour)
{
    for (std::size_t k = 0; k < text.size(); ++k) {
        const auto rows = glyph(text[k]);
        const int gx = x + static_cast<int>(k) * 6 * scale;
        for (int r = 0; r < 9; ++r)
            for (int c = 0; c < 5; ++c)
                if (rows[r][c] == '#')
                    img.fill(gx + c * scale, y + r * scale, scale, scale, colour[0], colour[1], colour[2]);
    }
    return text_width(text, scale);
}

// ---- the annotated image --------------------------------------------------------------------------------------

namespace {

/// 1, 2 or 5 times a power of ten: the largest not above @p x (down) or the smallest not below it (up).
double nice(double x, bool up)
{
    const double p = std::pow(10.0, std::floor(std::log10(x)));
    const double m = x / p;
    if (up) return (m <= 1 + 1e-9 ? 1 : m <= 2 + 1e-9 ? 2 : m <= 5 + 1e-9 ? 5 : 10) * p;
    return (m >= 5 - 1e-9 ? 5 : m >= 2 - 1e-9 ? 2 : 1) * p;
}

/// A number for a label, without a "-0" and with no more digits than @p step needs.
std::string label(double v, double step)
{
    const int decimals = std::max(0, -static_cast<int>(std::floor(std::log10(step) + 1e-9)));
    if (std::abs(v) < step * 1e-6) v = 0;
    return fmt::format("{:.{}f}", v, decimals);
}

std::string short_number(double v, double scale)
{
    if (std::abs(v) < scale * 1e-6) v = 0;
    return fmt::format("{:.3g}", v);
}

} // namespace

Image render_surface_density(const Snapshot& s, const RenderOptions& o, RenderSummary* summary)
{
    SurfaceDensityMap map = project_surface_density(s, o);
    const int n = map.size;
    double peak = 0;
    for (double x : map.sigma)
        peak = std::max(peak, x);
    if (map.n_inside > 0 && !(peak > 0))
        throw UsageError(fmt::format(
            "{} particles lie inside the field (half-width {}), but at {} pixels across it every pixel's surface "
            "density is below double precision's range: the field is far larger than the particles; give a smaller "
            "--extent",
            map.n_inside, map.extent, n));
    if (map.n_inside == 0)
        throw UsageError(fmt::format(
            "no particle lies inside the field (centre {} {} {}, half-width {}, along {}): the image would be empty; "
            "give another --centre or a larger --extent",
            short_number(map.centre[0], map.extent), short_number(map.centre[1], map.extent),
            short_number(map.centre[2], map.extent), map.extent, to_string(map.axis)));
    const double vmax = o.vmax ? *o.vmax : std::log10(peak);
    const double vmin = o.vmin ? *o.vmin : vmax - o.range;
    if (!(vmin < vmax))
        throw UsageError(fmt::format("vmin ({}) must be below vmax ({}{})", vmin, vmax,
                                     o.vmax ? "" : ", the brightest pixel's log10 surface density"));

    const int sc = std::max(1, n / 256); // font and line scale
    const int margin = o.annotate ? 4 * sc : 0;
    const std::array<std::uint8_t, 3> ink{30, 30, 30}, white{255, 255, 255};

    // The colour bar's ticks: 1, 2 or 5 x 10^k dex apart, about six over the scale.
    const double step = nice((vmax - vmin) / 6, true);
    std::vector<double> ticks;
    for (double k = std::ceil(vmin / step - 1e-9); k <= std::floor(vmax / step + 1e-9); ++k)
        ticks.push_back(k * step);
    int label_w = 0;
    for (double t : ticks)
        label_w = std::max(label_w, text_width(label(t, step), sc));

    const auto [h, v] = image_axes(map.axis);
    const char* names[3] = {"x", "y", "z"};
    std::vector<std::string> caption;
    const std::string unit = length_unit(s.units), length_label = unit.empty() ? "" : " " + unit;
    if (o.annotate) {
        caption.push_back(fmt::format("log10 surface density ({}){}",
                                      o.units.empty() ? surface_density_units(s.units) : o.units,
                                      o.selection.empty() ? "" : " of " + o.selection));
        caption.push_back(fmt::format("projected along {}: {} right, {} up", names[int(map.axis)], names[h], names[v]));
        caption.push_back(fmt::format("field {}{} wide, t = {}", short_number(2 * map.extent, 1), length_label,
                                      short_number(s.time, 1)));
        caption.push_back(fmt::format("centre {} {} {}", short_number(map.centre[0], map.extent),
                                      short_number(map.centre[1], map.extent),
                                      short_number(map.centre[2], map.extent)));
    }
    const int bar_w = 6 * sc, tick_len = 2 * sc;
    const int panel = o.annotate ? 4 * sc + bar_w + tick_len + 2 * sc + label_w + margin : 0;
    int caption_w = 0;
    for (const auto& line : caption)
        caption_w = std::max(caption_w, text_width(line, sc));
    const int width = std::max(margin + n + panel, 2 * margin + caption_w);
    const int caption_h = o.annotate ? 4 * sc + static_cast<int>(caption.size()) * 11 * sc : 0;
    const int height = margin + n + caption_h + margin;
    Image img(width, height, 255, 255, 255);

    // The map: row j from the bottom is image row margin + n - 1 - j.
    const double span = vmax - vmin;
    for (int j = 0; j < n; ++j)
        for (int i = 0; i < n; ++i) {
            const double x = map.sigma[static_cast<std::size_t>(j) * n + i];
            const auto c = magma(x > 0 ? (std::log10(x) - vmin) / span : 0.0);
            img.set(margin + i, margin + n - 1 - j, c[0], c[1], c[2]);
        }

    if (o.annotate) {
        // Scale bar: 1, 2 or 5 x 10^k long, about a quarter of the field, in the lower left corner.
        const double dx = map.pixel_width();
        const double length = nice(map.extent / 2, false);
        const int len_px = static_cast<int>(std::lround(length / dx));
        const int bx = margin + 5 * sc, by = margin + n - 6 * sc;
        if (n >= 64 && len_px >= 4) {
            img.fill(bx, by, len_px, std::max(1, sc), white[0], white[1], white[2]);
            img.fill(bx, by - 2 * sc, std::max(1, sc), 4 * sc + 1, white[0], white[1], white[2]);
            img.fill(bx + len_px - std::max(1, sc), by - 2 * sc, std::max(1, sc), 4 * sc + 1, white[0], white[1],
                     white[2]);
            const std::string text = short_number(length, 1) + length_label;
            draw_text(img, bx + (len_px - text_width(text, sc)) / 2, by - 10 * sc, text, sc, white);
        }

        // Colour bar, top = vmax, with a thin frame.
        const int bx0 = margin + n + 4 * sc;
        for (int r = 0; r < n; ++r) {
            const auto c = magma(1.0 - (r + 0.5) / n);
            img.fill(bx0, margin + r, bar_w, 1, c[0], c[1], c[2]);
        }
        const int line = std::max(1, sc / 2);
        img.fill(bx0 - line, margin - line, bar_w + 2 * line, line, ink[0], ink[1], ink[2]);
        img.fill(bx0 - line, margin + n, bar_w + 2 * line, line, ink[0], ink[1], ink[2]);
        img.fill(bx0 - line, margin, line, n, ink[0], ink[1], ink[2]);
        img.fill(bx0 + bar_w, margin, line, n, ink[0], ink[1], ink[2]);
        for (double t : ticks) {
            const int y = margin + std::clamp(static_cast<int>(std::lround((vmax - t) / span * n)), 0, n - 1);
            img.fill(bx0 + bar_w, y - line / 2, tick_len, line, ink[0], ink[1], ink[2]);
            draw_text(img, bx0 + bar_w + tick_len + 2 * sc, y - (7 * sc) / 2, label(t, step), sc, ink);
        }

        int y = margin + n + 4 * sc;
        for (const auto& text : caption) {
            draw_text(img, margin, y, text, sc, ink);
            y += 11 * sc;
        }
    }
    if (summary) {
        summary->map = std::move(map);
        summary->vmin = vmin;
        summary->vmax = vmax;
    }
    return img;
}

} // namespace banyan
