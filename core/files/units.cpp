/**
 * @file units.cpp
 * @brief Parsing and printing of a run's physical units (units.hpp).
 */
#include "core/files/units.hpp"

#include "core/error.hpp"
#include "core/numbers.hpp"

#include <fmt/format.h>

#include <cctype>
#include <cmath>
#include <cstdlib>
#include <utility>
#include <vector>

namespace banyan {

namespace {

struct Named {
    const char* name;
    double cgs;
};

constexpr Named lengths[] = {{"cm", 1.0},     {"m", 100.0},      {"km", cgs::km},   {"au", cgs::au},  {"AU", cgs::au},
                             {"pc", cgs::pc}, {"kpc", cgs::kpc}, {"Mpc", cgs::Mpc}, {"Gpc", cgs::Gpc}};
constexpr Named masses[] = {{"g", 1.0}, {"kg", 1e3}, {"Msun", cgs::msun}, {"Msol", cgs::msun}};

std::string trim(const std::string& s)
{
    std::size_t a = 0, b = s.size();
    while (a < b && std::isspace(static_cast<unsigned char>(s[a])))
        ++a;
    while (b > a && std::isspace(static_cast<unsigned char>(s[b - 1])))
        --b;
    return s.substr(a, b - a);
}

/// "1e10Msun", "1e10 Msun", "Msun", "100pc": a positive finite factor (1 when absent) times a named unit.
double parse_item(const std::string& item, const Named* table, std::size_t count, const char* kind,
                  const std::string& what)
{
    std::string names;
    for (std::size_t i = 0; i < count; ++i)
        names += (i ? ", " : "") + std::string(table[i].name);
    auto bad = [&](const std::string& why) {
        return UsageError(fmt::format("{}: '{}' is not a {}: {} (give a number and one of {}, or the unit alone, as "
                                      "in kpc,1e10Msun)",
                                      what, item, kind, why, names));
    };
    const std::size_t digits = decimal_length(item);
    const std::optional<double> factor = digits ? parse_decimal(std::string_view(item).substr(0, digits)) : 1.0;
    const std::string unit = trim(item.substr(digits)); // no number: the unit alone
    if (!factor || !(*factor > 0.0)) throw bad("the factor must be a positive, finite decimal number");
    if (unit.empty()) throw bad("no unit");
    for (std::size_t i = 0; i < count; ++i)
        if (unit == table[i].name) {
            const double v = *factor * table[i].cgs;
            if (!(std::isfinite(v) && v > 0.0)) throw bad("out of range");
            return v;
        }
    throw bad(fmt::format("unknown unit '{}'", unit));
}

} // namespace

double Units::velocity_cm_per_s() const
{
    return std::sqrt(cgs::G * mass_g / length_cm);
}

double Units::time_s() const
{
    return length_cm / velocity_cm_per_s();
}

std::string Units::text() const
{
    return physical() ? fmt::format("{}cm,{}g", length_cm, mass_g) : std::string();
}

std::string Units::describe() const
{
    if (!physical()) return "N-body units (G = 1)";
    const double t = time_s();
    const std::string time = t >= 1e6 * cgs::year ? fmt::format("{:.4g} Myr", t / (1e6 * cgs::year))
                             : t >= cgs::year     ? fmt::format("{:.4g} yr", t / cgs::year)
                                                  : fmt::format("{:.4g} s", t);
    return fmt::format("length {:.10g} cm ({:.6g} kpc), mass {:.10g} g ({:.6g} Msun), velocity {:.4g} km/s, time {} "
                       "(G = 1)",
                       length_cm, length_cm / cgs::kpc, mass_g, mass_g / cgs::msun, velocity_cm_per_s() / cgs::km,
                       time);
}

Units parse_units(const std::string& text, const std::string& what)
{
    const std::string all = trim(text);
    if (all.empty() || all == "nbody" || all == "N-body") return {};
    std::vector<std::string> items = comma_items(all);
    for (auto& item : items)
        item = trim(item);
    if (items.size() < 2)
        throw UsageError(fmt::format("{}: '{}' names one unit; give LENGTH,MASS (e.g. kpc,1e10Msun): with G = 1 the "
                                     "velocity and time units follow from them",
                                     what, text));
    Units u;
    u.length_cm = parse_item(items[0], lengths, std::size(lengths), "length", what);
    u.mass_g = parse_item(items[1], masses, std::size(masses), "mass", what);
    if (items.size() > 2)
        throw UsageError(fmt::format("{}: '{}' is one item too many: --units takes LENGTH,MASS only, because banyan "
                                     "computes with G = 1, so the velocity and time units follow from them; for "
                                     "{},{} they are {:.4g} km/s and {:.4g} Myr",
                                     what, items[2], items[0], items[1], u.velocity_cm_per_s() / cgs::km,
                                     u.time_s() / (1e6 * cgs::year)));
    return u;
}

bool same_units(const Units& a, const Units& b)
{
    if (a.physical() != b.physical()) return false;
    if (!a.physical()) return true;
    auto close = [](double x, double y) { return std::fabs(x - y) <= 1e-9 * std::fabs(y); };
    return close(a.length_cm, b.length_cm) && close(a.mass_g, b.mass_g);
}

} // namespace banyan
