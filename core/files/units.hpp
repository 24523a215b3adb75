/**
 * @file units.hpp
 * @brief Physical units of a run (`--units LENGTH,MASS`): banyan computes with G = 1, so a length unit L and a mass
 *        unit M fix the velocity unit sqrt(G M / L) and the time unit sqrt(L^3 / (G M)); none of them is chosen
 *        apart. Without --units a run is in N-body units and its files say none.
 *
 * Constants (cgs): G = 6.6743e-8 (CODATA 2018); the astronomical unit 1.495978707e13 cm and the parsec 648000 / pi
 * au (IAU 2012, 2015); the solar mass from the IAU 2015 nominal GM_sun = 1.3271244e26 cm^3 s^-2 divided by G, about
 * 1.98841e33 g (pynbody takes 1.98842e33 g, yt 1.988416e33 g: within 3e-6 of it). With M = 1 Msun the product G M
 * is the IAU value exactly.
 */
#pragma once

#include <string>

namespace banyan {

namespace cgs {
inline constexpr double G = 6.6743e-8;                             ///< cm^3 g^-1 s^-2
inline constexpr double au = 1.495978707e13;                       ///< cm
inline constexpr double pc = au * 648000 / 3.14159265358979323846; ///< cm
inline constexpr double kpc = 1e3 * pc, Mpc = 1e6 * pc, Gpc = 1e9 * pc;
inline constexpr double msun = 1.3271244e26 / G; ///< g
inline constexpr double km = 1e5;                ///< cm
inline constexpr double year = 365.25 * 86400;   ///< s (Julian year)
} // namespace cgs

/// The units of a run's numbers. length_cm == 0: N-body units (no physical meaning stated).
struct Units {
    double length_cm = 0; ///< the length unit in cm
    double mass_g = 0;    ///< the mass unit in g

    bool physical() const noexcept { return length_cm > 0; }
    /// sqrt(G M / L): the velocity unit that G = 1 implies.
    double velocity_cm_per_s() const;
    /// sqrt(L^3 / (G M)) = L / V.
    double time_s() const;
    /// Text that parse_units turns back into the same doubles ("3.0856775814913673e+21cm,1.98841e+43g"); empty
    /// for N-body units.
    std::string text() const;
    /// For people: "length 3.086e+21 cm, mass 1.988e+43 g, velocity 207.4 km/s, time 4.714 Myr (G = 1)", or
    /// "N-body units (G = 1)".
    std::string describe() const;
};

/// Parses `--units`: "" or "nbody" (N-body units), or "LENGTH,MASS", each a positive number and a unit, or a unit
/// alone ("kpc,1e10Msun", "pc,Msun", "au,Msun", "Mpc,1e10Msun", "3.0857e21cm,1.989e43g"). Lengths: cm, m, km, au,
/// pc, kpc, Mpc, Gpc; masses: g, kg, Msun (or Msol). A third item (a velocity unit) is refused with a message that
/// prints the velocity and time units G = 1 implies. Throws UsageError naming @p what and the bad item.
Units parse_units(const std::string& text, const std::string& what = "--units");

/// Whether @p a and @p b are the same units to a relative 1e-9 (N-body equals only N-body).
bool same_units(const Units& a, const Units& b);

} // namespace banyan
