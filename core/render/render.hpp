/**
 * @file render.hpp
 * @brief Quick looks at a snapshot: its surface density projected along x, y or z onto a square grid of pixels by
 *        cloud-in-cell deposit, log-scaled, coloured with the magma colour map, with a colour bar of log10 surface
 *        density, a scale bar and a caption (`banyan render`).
 *
 * Orientation: looking down the projection axis from its positive side, the image's horizontal axis is the next
 * coordinate in cyclic order, increasing to the right, and its vertical axis the one after, increasing upwards:
 * along z: x right, y up; along x: y right, z up; along y: z right, x up (the convention of yt's projections; a
 * right-handed view in every case).
 */
#pragma once

#include "core/files/png_image.hpp"
#include "core/files/snapshot.hpp"
#include "core/files/units.hpp"

#include <array>
#include <optional>
#include <string>
#include <vector>

namespace banyan {

enum class Axis { x = 0, y = 1, z = 2 };

/// "x", "y" or "z" (either case); throws UsageError naming @p text otherwise.
Axis parse_axis(const std::string& text);
const char* to_string(Axis a);
/// The coordinates (0, 1, 2 for x, y, z) that run right and up in an image projected along @p a.
std::array<int, 2> image_axes(Axis a);

/// Where the field is centred when no centre is given.
enum class CentreKind {
    mass,    ///< the centre of mass (keeps both galaxies of a merger in view)
    density, ///< the density centre by shrinking spheres (Power et al. 2003): the densest system, escapers aside
};

struct RenderOptions {
    Axis axis = Axis::z;
    int size = 800;                              ///< pixels on each side of the (square) map, 1 .. 16384
    std::optional<std::array<double, 3>> centre; ///< the field's centre; nothing: by @ref centre_kind
    CentreKind centre_kind = CentreKind::mass;
    std::optional<double> extent; ///< half-width of the field (> 0); nothing: 1.3 x the radius holding 90 % of the mass
    double range = 4.0;           ///< dynamic range in dex below vmax (> 0), when vmin is not given
    std::optional<double> vmin, vmax; ///< log10 surface density at the bottom and top of the colour scale
    bool annotate = true;             ///< the colour bar, scale bar and caption; false: the map alone
    std::string units; ///< the unit of surface density in the caption; empty: surface_density_units(snapshot's)
    /// Which particles the snapshot given to render_surface_density holds, for the caption ("type 2 (disc)", from
    /// describe_particle_types); empty: all of the file's, not mentioned.
    std::string selection;
};

/// GADGET's particle types 0 .. 5 (core/files/hdf5_snapshot.hpp says where a Snapshot keeps them).
inline constexpr int n_particle_types = 6;
/// The name of GADGET particle type @p type: "gas", "halo" (dark matter), "disc", "bulge", "stars", "bh" (black
/// holes) for 0 .. 5; "?" for anything else.
const char* particle_type_name(int type);
/// Particle types from a comma-separated list of numbers 0 .. 5 and names (particle_type_name's in either case, or
/// "disk"), e.g. "2", "disc,bulge", "0,stars": sorted, each once. Throws UsageError naming an item it does not know.
std::vector<int> parse_particle_types(const std::string& text);
/// "type 2 (disc)", "types 2 (disc), 3 (bulge)": for captions and messages.
std::string describe_particle_types(const std::vector<int>& types);
/**
 * @brief The particles of @p s whose GADGET types are among @p types (all of them when it is empty), in their order,
 *        as a snapshot of their own: every field kept, the counts of types 2, 3, 5 among the dark particles too, and
 *        ids (the original indices when @p s has none) so that each particle stays recognisable.
 * @throws UsageError when one of @p types is not 0 .. 5, or has no particles in @p s: naming it and the types that
 *         @p s has, with their counts ("the snapshot has no particles of type 3 (bulge); it has types 1 (4000), 2
 *         (1000)").
 */
Snapshot select_particle_types(const Snapshot& s, const std::vector<int>& types);

/// The length unit of numbers in @p u for a label: "" (N-body units), "kpc", "(2.5 pc)".
std::string length_unit(const Units& u);
/// The unit of surface density of numbers in @p u: "N-body units", or the mass unit per square length unit, e.g.
/// "1e10 Msun/kpc^2" or "1 Msun/(2.5 pc)^2".
std::string surface_density_units(const Units& u);

/// Largest map side in pixels.
inline constexpr int max_render_size = 16384;

/// Throws UsageError naming the bad option (size out of range, extent <= 0, range <= 0, vmin >= vmax, a centre that is
/// not finite).
void check_render_options(const RenderOptions& o);

/// The projected surface density on the map's grid.
struct SurfaceDensityMap {
    Axis axis = Axis::z;
    int size = 0;
    std::array<double, 3> centre{}; ///< centre of the field
    double extent = 0;              ///< half-width: the map covers centre +- extent in both image directions
    /// size * size, mass per unit area: sigma[j * size + i], i the column from the left, j the row from the BOTTOM.
    std::vector<double> sigma;
    double mass_inside = 0;   ///< mass of the particles whose projected positions lie in the field
    std::size_t n_inside = 0; ///< how many particles those are
    double pixel_width() const { return 2 * extent / size; }
};

std::array<double, 3> centre_of_mass(const Snapshot& s);
/// Shrinking spheres from the centre of mass: the sphere shrinks by 5 % a round about the centre of mass of the
/// particles inside it, until fewer than max(32, min(1000, N / 20)) remain.
std::array<double, 3> density_centre(const Snapshot& s);
/// The radius of the sphere about @p centre that holds @p fraction of the total mass.
double mass_radius(const Snapshot& s, const std::array<double, 3>& centre, double fraction);

/**
 * @brief Deposits the particles' masses onto the map's pixels by cloud-in-cell (each particle a square of one pixel,
 *        shared among the up to four pixels it overlaps) and divides by the pixel area.
 *
 * A particle counts as inside the field when its projected position lies in [c - L, c + L) in both directions; its
 * whole mass goes onto the map (the part of its cloud beyond the edge is put into the edge pixel), so that the sum of
 * sigma times pixel area is mass_inside. Particles outside the field are left out. The centre and extent are resolved
 * as RenderOptions says. Throws UsageError for bad options or an empty snapshot.
 */
SurfaceDensityMap project_surface_density(const Snapshot& s, const RenderOptions& o);

/// What the colour scale of a rendering was, and where it looked.
struct RenderSummary {
    SurfaceDensityMap map;     ///< the surface densities drawn
    double vmin = 0, vmax = 0; ///< log10 surface density at the bottom and top of the colour scale
};

/**
 * @brief The image of project_surface_density's map: magma colours for log10 sigma between vmin (default vmax -
 *        range) and vmax (default the largest pixel's), pixels without mass in the lowest colour; with annotate,
 *        a colour bar with tick labels of log10 sigma to the right, a scale bar in the map's lower left corner, and a
 *        caption below (what is shown, the orientation, the field's width and centre, the time).
 * @throws UsageError for bad options, and when no particle lies inside the field (the image would be empty).
 */
Image render_surface_density(const Snapshot& s, const RenderOptions& o, RenderSummary* summary = nullptr);

/// The magma colour map (matplotlib's, sampled at 11 points and interpolated linearly) at @p t in [0, 1], in 254
/// levels (so that an annotated image has at most 256 colours and is written as a palette PNG).
std::array<std::uint8_t, 3> magma(double t);

/// Draws @p text with banyan's 5x7 bitmap font (digits, lower-case letters, M, N, and - . , : ; = + ( ) / ^; other
/// capitals in lower case, anything else as a box) with its top left corner at (@p x, @p y), 7 font pixels down to
/// the baseline and 2 below for descenders, each font pixel @p scale x @p scale image pixels. Returns the width.
int draw_text(Image& img, int x, int y, const std::string& text, int scale, std::array<std::uint8_t, 3> colour);
/// The width draw_text would take.
int text_width(const std::string& text, int scale);

} // namespace banyan
