/**
 * @file centring.hpp
 * @brief Moving a model's particles to rest at the origin (centre of mass and total momentum zero) when each rank
 *        draws only its share: the sums that centre them are exact (fixed point), so that they are the same bits
 *        whatever the order of the particles and however many ranks add them up.
 */
#pragma once

#include "core/files/particles.hpp"
#include "core/models/plummer.hpp"

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

namespace banyan {

/// Sums of doubles in fixed point (2^-100 a unit, |a sum| < 2^26), exact and so independent of order: the
/// mass-weighted sums of a model's particles, whose magnitudes are the model's mass times its extent.
class ExactSums {
public:
    static constexpr int values = 7; ///< mass, mass x position (3), mass x velocity (3)
    /// Adds particle @p m, @p x, @p v. Throws std::logic_error beyond the range (not a model in N-body units).
    void add(double m, const double x[3], const double v[3]);
    /// Adds @p o's sums (exact: the order of the parts does not matter).
    void merge(const ExactSums& o) noexcept;
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

    /// add() and finish() for a model whose particle i is @p draw(i, m, x, v), the same at every call (its own
    /// counter-based stream): on share.threads threads, in two passes, the sums of every particle to draw, then the
    /// share's particles drawn again and rounded about the centre. The same particles, bit for bit, as add() and
    /// finish(), without the share in double precision (56 bytes a particle; 60 GB at 2^30 particles a rank).
    template <class Draw> Particles make(const Draw& draw)
    {
        std::vector<ExactSums> parts(threads_for(end_ - begin_));
        for_ranges(begin_, end_, [&](std::size_t lo, std::size_t hi, unsigned k) {
            double m, x[3], v[3];
            for (std::size_t i = lo; i < hi; ++i) {
                draw(i, m, x, v);
                parts[k].add(m, x, v);
            }
        });
        for (const auto& p : parts)
            sums_.merge(p);
        double cx[3], cv[3];
        centre(cx, cv);
        Particles out;
        out.pos.resize(kept_);
        out.vel.resize(kept_);
        for_ranges(share_.first, share_.first + kept_, [&](std::size_t lo, std::size_t hi, unsigned) {
            double m, x[3], v[3];
            for (std::size_t i = lo; i < hi; ++i) {
                draw(i, m, x, v);
                out.pos[i - share_.first] = rounded(m, x, cx);
                out.vel[i - share_.first] = rounded(0.0, v, cv);
            }
        });
        return out;
    }

private:
    /// The threads that draw @p n particles: share.threads (0: the hardware's), one per 4096 particles at most.
    unsigned threads_for(std::size_t n) const;
    /// Calls @p f(lo, hi, k) for threads_for(end - begin) pieces k of [begin, end), each on a thread of its own;
    /// rethrows the first exception of a piece.
    void for_ranges(std::size_t begin, std::size_t end,
                    const std::function<void(std::size_t, std::size_t, unsigned)>& f) const;
    /// (x - c) rounded to float, with w = m.
    static bn_f4 rounded(double m, const double x[3], const double c[3]) noexcept
    {
        return bn_f4{static_cast<float>(x[0] - c[0]), static_cast<float>(x[1] - c[1]), static_cast<float>(x[2] - c[2]),
                     static_cast<float>(m)};
    }

    Share share_;
    std::size_t kept_ = 0;
    std::size_t begin_ = 0, end_ = 0;
    std::vector<double> m_, x_, v_;
    ExactSums sums_;
    bool reduced_ = false;
};

} // namespace banyan
