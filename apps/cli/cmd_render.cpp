/**
 * @file cmd_render.cpp
 * @brief `banyan render SNAPSHOT --out image.png`: the projected, log-scaled surface density of a snapshot as a PNG,
 *        with a colour bar, a scale bar and a caption (core/render/render.hpp). Host only: no device is opened.
 */
#include "apps/cli/cli.hpp"
#include "core/device/backend.hpp"
#include "core/error.hpp"
#include "core/files/png_image.hpp"
#include "core/render/render.hpp"
#include "core/files/snapshot_file.hpp"
#include "core/numbers.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>

namespace banyan::cli {

namespace {

/// "x,y,z" as three finite numbers; a UsageError otherwise.
std::array<double, 3> parse_point(const std::string& text)
{
    const std::vector<std::string> items = comma_items(text);
    std::array<double, 3> p{};
    bool ok = items.size() == p.size();
    for (std::size_t k = 0; ok && k < p.size(); ++k) {
        const auto v = parse_decimal(items[k]);
        ok = v.has_value();
        if (ok) p[k] = *v;
    }
    if (ok) return p;
    throw UsageError(fmt::format("render: --centre expects mass, density or three comma-separated numbers x,y,z, got "
                                 "'{}'",
                                 text));
}

} // namespace

int run_render(const std::vector<std::string>& raw_args)
{
    Options opt("render",
                "banyan render SNAPSHOT --out IMAGE.png [options]\n\n"
                "A quick look at a snapshot (HDF5 or tipsy): its surface density projected along --axis onto a\n"
                "square map by cloud-in-cell deposit (each particle a square cloud one pixel wide), as log10 of mass\n"
                "per unit area in the snapshot's units (an HDF5 file's, else N-body units), coloured with magma from\n"
                "vmin (the lowest colour, also where no mass fell) to vmax, with a colour bar of log10 surface\n"
                "density, a scale bar and a caption. Orientation: along z, x runs right and y up; along x, y right\n"
                "and z up; along y, z right and x up. Written as an 8-bit PNG (a temporary name, then renamed).\n"
                "With --type, only the particles of those GADGET types are drawn, and the field is framed on them.\n\n"
                "examples:\n"
                "  banyan render run/snapshot_00010.hdf5 --out t10.png\n"
                "  banyan render paper/snapshot_00020.hdf5 --type disc --axis x --centre density --out discs.png\n"
                "  banyan run --render ...   draws every snapshot of a run beside it");
    opt.value("in", "FILE",
              fmt::format("the snapshot ({}, detected from its first bytes); or give it as the first argument",
                          snapshot_format_list([](const SnapshotFormatInfo& f) { return f.title; })));
    opt.value("out", "IMAGE.png", "where to write the image (PNG: the name must end in .png)");
    opt.value("axis", "x|y|z", "projection axis", "z");
    opt.value("size", "PIXELS", "pixels on each side of the map, 1 .. 16384", "800");
    opt.value("centre", "mass|density|X,Y,Z",
              "centre of the field: the centre of mass, the density centre (shrinking spheres: the densest system, "
              "escapers aside), or a point",
              "mass");
    opt.value("extent", "L",
              "half-width of the field, > 0 (default: 1.3 x the radius about the centre that holds "
              "90 % of the mass)");
    opt.value("range", "DEX", "dynamic range of the colour scale below vmax, > 0", "4");
    opt.value("vmin", "V", "log10 surface density of the lowest colour (default: vmax - range)");
    opt.value("vmax", "V", "log10 surface density of the highest colour (default: the brightest pixel's)");
    opt.value("type", "T[,T...]",
              "draw only the particles of these GADGET types, by number or name: 0 gas, 1 halo (dark matter), "
              "2 disc, 3 bulge, 4 stars, 5 bh (black holes); the centre and the default extent are then those of "
              "these particles (default: all particles)");
    opt.flag("map-only", "the map alone: no colour bar, scale bar or caption");

    // The snapshot may come first, as a bare argument; every option here but --map-only takes a value.
    std::vector<std::string> args;
    std::string positional;
    for (std::size_t i = 0; i < raw_args.size(); ++i) {
        const std::string& a = raw_args[i];
        const bool option = a.rfind("--", 0) == 0 || a == "-h";
        if (!option && positional.empty()) {
            positional = a;
            continue;
        }
        args.push_back(a);
        if (option && a.find('=') == std::string::npos && a != "--map-only" && a != "--help" && a != "-h" &&
            i + 1 < raw_args.size())
            args.push_back(raw_args[++i]);
    }
    if (!opt.parse(args)) return 0;
    if (!positional.empty() && opt.has("in"))
        throw UsageError(
            fmt::format("render: two snapshots given ('{}' and --in {}); give one", positional, opt.str("in")));
    const std::string in = opt.has("in") ? opt.str("in") : positional;
    if (in.empty()) throw UsageError("render: no snapshot given (banyan render SNAPSHOT --out IMAGE.png)");
    if (!opt.has("out")) throw UsageError("render: --out IMAGE.png is required");
    const std::string out = opt.str("out");
    try {
        check_output_path(out); // before reading a large snapshot
    } catch (const UsageError& e) {
        throw UsageError(fmt::format("render: --out: {}", e.what()));
    }

    RenderOptions ro;
    try {
        ro.axis = parse_axis(opt.str("axis"));
    } catch (const UsageError& e) {
        throw UsageError(fmt::format("render: --axis: {}", e.what()));
    }
    ro.size = opt.integer_in("size", 1, max_render_size);
    const std::string centre = opt.str("centre");
    if (centre == "mass")
        ro.centre_kind = CentreKind::mass;
    else if (centre == "density")
        ro.centre_kind = CentreKind::density;
    else
        ro.centre = parse_point(centre);
    if (opt.has("extent")) {
        ro.extent = opt.number("extent");
        if (!(*ro.extent > 0))
            throw UsageError(fmt::format("render: --extent (half-width of the field) must be > 0, got {}", *ro.extent));
    }
    ro.range = opt.number("range");
    if (!(ro.range > 0)) throw UsageError(fmt::format("render: --range must be > 0 dex, got {}", ro.range));
    if (opt.has("vmin")) ro.vmin = opt.number("vmin");
    if (opt.has("vmax")) ro.vmax = opt.number("vmax");
    if (ro.vmin && ro.vmax && !(*ro.vmin < *ro.vmax))
        throw UsageError(fmt::format("render: --vmin ({}) must be below --vmax ({})", *ro.vmin, *ro.vmax));
    ro.annotate = !opt.has("map-only");
    std::vector<int> types; // empty: all
    if (opt.has("type")) {
        try {
            types = parse_particle_types(opt.str("type")); // before reading a large snapshot
        } catch (const UsageError& e) {
            throw UsageError(fmt::format("render: --type: {}", e.what()));
        }
        ro.selection = describe_particle_types(types);
    }

    const auto file_error = [&](const UsageError& e) {
        const std::string what = e.what();
        // The reader's messages start with the file's name already.
        return UsageError(what.rfind(in, 0) == 0 ? "render: " + what : fmt::format("render: {}: {}", in, what));
    };
    RenderSummary summary;
    Image img;
    Snapshot s, selected;
    SnapshotFormat format = SnapshotFormat::hdf5;
    try {
        s = read_snapshot(in, nullptr, false, &format);
        check_particles(s, in);
    } catch (const UsageError& e) {
        throw file_error(e);
    }
    if (!types.empty()) {
        try {
            selected = select_particle_types(s, types);
        } catch (const UsageError& e) {
            // Tipsy has no place for types 2, 3 and 5: its dark particles all read as type 1.
            const SnapshotFormatInfo& f = snapshot_format_info(format);
            const bool typeless = !f.keeps_types && std::any_of(types.begin(), types.end(),
                                                                [](int t) { return t == 2 || t == 3 || t == 5; });
            throw UsageError(
                fmt::format("render: --type {}: {}{}", opt.str("type"), e.what(),
                            typeless ? fmt::format(" (a {} file holds types 0, 1 and 4 only)", f.name) : ""));
        }
    }
    const Snapshot& shown = types.empty() ? s : selected;
    try {
        img = render_surface_density(shown, ro, &summary);
    } catch (const UsageError& e) {
        throw file_error(e);
    }
    try {
        write_png(out, img);
    } catch (const UsageError& e) {
        throw UsageError(fmt::format("render: --out: {}", e.what()));
    }

    const auto& m = summary.map;
    double total = 0;
    for (float x : shown.mass)
        total += x;
    const std::string which = types.empty() ? "" : fmt::format(" of {}, of {} in all", ro.selection, s.size());
    fmt::print("{}: t = {}, {} particles{}; projected along {}, centre ({:.4g}, {:.4g}, {:.4g}), half-width {:.4g}\n",
               in, s.time, shown.size(), which, to_string(m.axis), m.centre[0], m.centre[1], m.centre[2], m.extent);
    fmt::print("inside the field: {} particles, {:.4g} of the mass {:.4g} ({:.1f} %); log10 surface density {:.3f} .. "
               "{:.3f} ({}; cloud-in-cell, {} x {} pixels)\n",
               m.n_inside, m.mass_inside, total, 100 * m.mass_inside / total, summary.vmin, summary.vmax,
               surface_density_units(s.units), m.size, m.size);
    if (m.n_inside < shown.size() / 2)
        notice(fmt::format("warning: only {} of {} particles{} lie inside the field", m.n_inside, shown.size(),
                           types.empty() ? "" : " of " + ro.selection));
    fmt::print("wrote {} ({} x {} pixels)\n", out, img.width, img.height);
    return 0;
}

} // namespace banyan::cli
