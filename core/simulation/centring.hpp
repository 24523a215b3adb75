/**
 * @file centring.hpp
 * @brief Moving a model's particles to rest at the origin (centre of mass and total momentum zero) when each rank
 *        draws only its share: the sums that centre them are exact (fixed point), so that they are the same bits
 *        whatever the order of the particles and however many ranks add them up.
 */
#pragma once

#include "core/files/particles.hpp"
#include "core/simulation/plummer.hpp"

#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace banyan {

/// Sums of doubles in fixed point (2^-100 a unit, |a sum| < 2^26), exact and so independent of order: the
/// mass-weighted sums of a model's particles, whose magnitudes are the model's mass times its extent.
class ExactSums {
public:
    static constexpr int values = 7; ///< mass, mass x position (3), mass x velocity (3)
    /// Adds particle @p m, @p x, @p v. Throws std::logic_error beyond the range (not a model in N-body units).
    void add(double m, const double x[3], const double v[3]);
    /// Over ranks: @p sum_over_ranks sums a span of integers over every rank in place (collective).
    void reduce(const std::function<void(std::span<std::uint64_t>)>& sum_over_ranks);
    /// The centre: mass-weighted mean position and velocity.
    void centre(double cx[3], double cv[3]) const;

private:
    __int128 s_[values] = {};
};

/// Centres the particles of one model drawn one by one (index i from 0 to n - 1), keeping those of @p share: sums
/// every drawn particle's mass, mass-weighted position and velocity exactly (ExactSums), and removes the mean as
/// the share's particles are rounded to float. With share.sum_over_ranks the model draws only its share and the
/// sums are added up over the ranks; without it (or for the whole model) it draws every particle.
class Centring {
public:
    Centring(std::size_t n, Share share);
    /// The particles to draw: [begin(), end()).
    std::size_t begin() const noexcept { return begin_; }
    std::size_t end() const noexcept { return end_; }
    void add(std::size_t i, double m, const double x[3], const double v[3]);
    /// The centre of all n particles (over ranks: collective).
    void centre(double cx[3], double cv[3]);
    /// The share's particles, centred and rounded to float (over ranks: collective).
    Particles finish();

private:
    Share share_;
    std::size_t begin_ = 0, end_ = 0;
    std::vector<double> m_, x_, v_;
    ExactSums sums_;
    bool reduced_ = false;
};

} // namespace banyan
