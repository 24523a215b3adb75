/**
 * @file centring.cpp
 * @brief Exact sums and the centring of a model's share (centring.hpp).
 */
#include "core/models/centring.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <exception>
#include <stdexcept>
#include <thread>

namespace banyan {

namespace {

constexpr int fraction_bits = 100;

/// @p d in units of 2^-100, truncated toward zero (the bits below dropped: the same for every particle order), as
/// static_cast<__int128> of d 2^100 would give, without the library's slow conversion.
__int128 fixed(double d)
{
    const double scaled = d * 0x1.0p100;
    // |d| < 2^26: the sum of a model's N terms stays below 2^126 (its total is at most 2^26 too).
    if (!(std::fabs(scaled) < 0x1.0p126)) throw std::logic_error("ExactSums: a value out of range");
    const auto bits = std::bit_cast<std::uint64_t>(scaled);
    const int exponent = static_cast<int>((bits >> 52) & 0x7FF);
    if (exponent < 1023) return 0; // below one unit
    const std::uint64_t mantissa = (bits & ((std::uint64_t{1} << 52) - 1)) | (std::uint64_t{1} << 52);
    const int shift = exponent - 1075; // scaled = mantissa 2^shift
    const unsigned __int128 magnitude = shift >= 0 ? static_cast<unsigned __int128>(mantissa) << shift
                                                   : static_cast<unsigned __int128>(mantissa >> -shift);
    return bits >> 63 ? -static_cast<__int128>(magnitude) : static_cast<__int128>(magnitude);
}

} // namespace

void ExactSums::add(double m, const double x[3], const double v[3])
{
    s_[0] += fixed(m);
    for (int k = 0; k < 3; ++k) {
        s_[1 + k] += fixed(m * x[k]);
        s_[4 + k] += fixed(m * v[k]);
    }
}

void ExactSums::merge(const ExactSums& o) noexcept
{
    for (int j = 0; j < values; ++j)
        s_[j] += o.s_[j];
}

void ExactSums::reduce(const std::function<void(std::span<std::uint64_t>)>& sum_over_ranks)
{
    // Each sum as four 32-bit limbs of its two's complement, each limb in a 64-bit integer: summed over ranks they
    // cannot overflow, and put together again modulo 2^128 they give the exact total.
    std::array<std::uint64_t, 4 * values> limbs{};
    for (int j = 0; j < values; ++j) {
        const auto u = static_cast<unsigned __int128>(s_[j]);
        for (int l = 0; l < 4; ++l)
            limbs[static_cast<std::size_t>(4 * j + l)] = static_cast<std::uint64_t>(u >> (32 * l)) & 0xFFFFFFFFu;
    }
    sum_over_ranks(std::span<std::uint64_t>(limbs));
    for (int j = 0; j < values; ++j) {
        unsigned __int128 u = 0;
        for (int l = 0; l < 4; ++l)
            u += static_cast<unsigned __int128>(limbs[static_cast<std::size_t>(4 * j + l)]) << (32 * l);
        s_[j] = static_cast<__int128>(u);
    }
}

void ExactSums::centre(double cx[3], double cv[3]) const
{
    const double m = std::ldexp(static_cast<double>(s_[0]), -fraction_bits);
    for (int k = 0; k < 3; ++k) {
        cx[k] = m > 0 ? std::ldexp(static_cast<double>(s_[1 + k]), -fraction_bits) / m : 0.0;
        cv[k] = m > 0 ? std::ldexp(static_cast<double>(s_[4 + k]), -fraction_bits) / m : 0.0;
    }
}

Centring::Centring(std::size_t n, Share share) : share_(std::move(share))
{
    kept_ = share_.size(n);
    const bool alone = share_.sum_over_ranks || (share_.first == 0 && kept_ == n);
    begin_ = alone ? std::min(share_.first, n) : 0;
    end_ = alone ? begin_ + kept_ : n;
}

unsigned Centring::threads_for(std::size_t n) const
{
    const unsigned most = share_.threads ? share_.threads : std::max(1u, std::thread::hardware_concurrency());
    return static_cast<unsigned>(std::clamp<std::size_t>(n / 4096, 1, most));
}

void Centring::for_ranges(std::size_t begin, std::size_t end,
                          const std::function<void(std::size_t, std::size_t, unsigned)>& f) const
{
    const std::size_t n = end - begin;
    const unsigned t = threads_for(n);
    if (t == 1) {
        f(begin, end, 0);
        return;
    }
    std::vector<std::exception_ptr> errors(t);
    {
        std::vector<std::jthread> pool;
        for (unsigned k = 0; k < t; ++k)
            pool.emplace_back([&, k] {
                try {
                    f(begin + n * k / t, begin + n * (k + 1) / t, k);
                } catch (...) {
                    errors[k] = std::current_exception();
                }
            });
    } // joined here
    for (const auto& e : errors)
        if (e) std::rethrow_exception(e);
}

void Centring::add(std::size_t i, double m, const double x[3], const double v[3])
{
    sums_.add(m, x, v);
    if (!share_.holds(i)) return;
    // The share's doubles, made at its first particle (make() never needs them).
    if (m_.size() != kept_) m_.resize(kept_), x_.resize(3 * kept_), v_.resize(3 * kept_);
    const std::size_t j = i - share_.first;
    m_[j] = m;
    for (int k = 0; k < 3; ++k)
        x_[3 * j + k] = x[k], v_[3 * j + k] = v[k];
}

void Centring::centre(double cx[3], double cv[3])
{
    if (share_.sum_over_ranks && !reduced_) sums_.reduce(share_.sum_over_ranks);
    reduced_ = true;
    sums_.centre(cx, cv);
}

Particles Centring::finish()
{
    double cx[3], cv[3];
    centre(cx, cv);
    Particles p;
    p.pos.resize(m_.size());
    p.vel.resize(m_.size());
    for (std::size_t i = 0; i < m_.size(); ++i) {
        p.pos[i] = rounded(m_[i], &x_[3 * i], cx);
        p.vel[i] = rounded(0.0, &v_[3 * i], cv);
    }
    return p;
}

} // namespace banyan
