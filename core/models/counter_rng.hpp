/**
 * @file counter_rng.hpp
 * @brief A counter-based random stream per particle: Philox4x32-10 (Salmon, Moraes, Dror & Shaw 2011, "Parallel
 *        random numbers: as easy as 1, 2, 3", SC11), keyed by the seed and counting over (particle index, block).
 *        Particle i's draws depend on (seed, i) alone, so any share of a model is drawn in its own time, the same
 *        bits whoever draws it.
 */
#pragma once

#include <cstdint>

namespace banyan {

/// The 64-bit draws of one stream: Philox4x32-10 of the counter (block, stream) under the key seed, two draws per
/// block. Satisfies what draw::uniform needs of a generator (operator() returning 64 random bits).
class CounterRng {
public:
    using result_type = std::uint64_t;
    CounterRng(std::uint64_t seed, std::uint64_t stream) noexcept : seed_(seed), stream_(stream) {}
    std::uint64_t operator()() noexcept
    {
        if (left_ == 0) {
            next_block();
            left_ = 2;
        }
        return out_[--left_];
    }

    /// Philox4x32-10 of counter @p c under key @p k, in place in @p c (Random123's philox4x32_R(10, c, k)).
    static void philox(std::uint32_t c[4], const std::uint32_t key[2]) noexcept
    {
        std::uint32_t k[2] = {key[0], key[1]};
        for (int round = 0; round < 10; ++round) {
            const std::uint64_t p0 = std::uint64_t{0xD2511F53u} * c[0], p1 = std::uint64_t{0xCD9E8D57u} * c[2];
            const std::uint32_t n0 = static_cast<std::uint32_t>(p1 >> 32) ^ c[1] ^ k[0];
            const std::uint32_t n2 = static_cast<std::uint32_t>(p0 >> 32) ^ c[3] ^ k[1];
            c[0] = n0, c[1] = static_cast<std::uint32_t>(p1), c[2] = n2, c[3] = static_cast<std::uint32_t>(p0);
            k[0] += 0x9E3779B9u, k[1] += 0xBB67AE85u;
        }
    }

private:
    void next_block() noexcept
    {
        std::uint32_t c[4] = {static_cast<std::uint32_t>(block_), static_cast<std::uint32_t>(block_ >> 32),
                              static_cast<std::uint32_t>(stream_), static_cast<std::uint32_t>(stream_ >> 32)};
        const std::uint32_t k[2] = {static_cast<std::uint32_t>(seed_), static_cast<std::uint32_t>(seed_ >> 32)};
        philox(c, k);
        ++block_;
        out_[0] = (std::uint64_t{c[1]} << 32) | c[0];
        out_[1] = (std::uint64_t{c[3]} << 32) | c[2];
    }

    std::uint64_t seed_, stream_, block_ = 0;
    std::uint64_t out_[2] = {0, 0};
    int left_ = 0;
};

} // namespace banyan
