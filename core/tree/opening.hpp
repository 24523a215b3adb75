/**
 * @file opening.hpp
 * @brief The opening criterion as one value: its kind (what the build stores for each cell), the opening angle
 *        theta and the relative criterion's alpha, for the build, the walk and the local essential trees alike.
 */
#pragma once

#include "core/tree_shared.h"

#include <array>
#include <string>
#include <string_view>

namespace banyan {

/// The opening criterion whose parameters the build stores in cell_quad1 (tree_shared.h): the paper's
/// d > l / theta + delta, or d > bmax / theta (bmax: the farthest particle of the cell from its centre of mass).
/// docs/benchmarks.md ("Opening criteria") says where each is faster at equal error.
enum class Opening : bn_u32 { paper = BANYAN_OPEN_PAPER, bmax = BANYAN_OPEN_BMAX };

/// A criterion and its name, as options, checkpoints and the Python module spell it.
struct OpeningName {
    std::string_view name;
    Opening kind;
};
/// Every criterion by name, the paper's first: the one list that parsing, messages and the Python module's
/// banyan.opening_criteria read.
inline constexpr std::array<OpeningName, 2> opening_criteria{{{"paper", Opening::paper}, {"bmax", Opening::bmax}}};

/// "paper" or "bmax".
const char* to_string(Opening o) noexcept;
/// The criterion named @p text (one of opening_criteria); UsageError naming @p what otherwise.
Opening parse_opening(std::string_view text, std::string_view what);
/// Whether @p text names one of opening_criteria.
bool is_opening_name(std::string_view text) noexcept;
/// Their names for a refusal, @p quote around each: "paper or bmax", "'paper' or 'bmax'".
std::string opening_names(std::string_view quote = "");

/// The one rule for the opening angle theta, for every front end (`banyan run`, `banyan forces`, `banyan accuracy`,
/// Python's gravity and Simulation) and the walk itself: theta in [0, 1]. Above 1 a group could accept a cell that
/// holds one of its own particles (inv_theta below); 0 opens every cell: direct summation through the tree, exact to
/// float round-off, at O(N^2) cost (the walk's lists grow to whole tree levels; tests/gravity/test_forces.cpp runs it).
constexpr bool opening_angle_ok(double theta) noexcept
{
    return theta >= 0.0 && theta <= 1.0;
}
/// The range opening_angle_ok allows, as refusals name it.
inline constexpr const char* opening_angle_range = "[0, 1]";

/// When the walk accepts a cell for a group instead of opening it. An opening angle alone is the paper's criterion.
struct OpeningCriterion {
    OpeningCriterion(float theta_ = 0.75f, float alpha_ = 0.0f, Opening kind_ = Opening::paper) // NOLINT: implicit
        : kind(kind_), theta(theta_), alpha(alpha_)
    {
    }
    Opening kind;
    /// The opening angle, in [0, 1] (opening_angle_ok; 0: every cell is opened, i.e. direct summation).
    float theta;
    /// The relative criterion on top (bn_rel_cell in device_shared.h; TreeForces), > 0; 0: off.
    float alpha;

    /// 1 / theta (infinity for theta 0): the one place it is computed, for the walk's test and the local essential
    /// trees' alike, so that the two cannot drift apart. theta <= 1 < 2 / sqrt(3) keeps every cell that holds a
    /// particle of a group from being accepted for it: d <= sqrt(3) / 2 l + delta < l / theta + delta.
    float inv_theta() const noexcept;
    /// Throws UsageError for theta outside [0, 1] (opening_angle_ok) or alpha negative or not finite, naming @p what.
    void check(std::string_view what) const;
};

} // namespace banyan
