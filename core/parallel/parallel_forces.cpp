/**
 * @file parallel_forces.cpp
 * @brief One force evaluation over all ranks (parallel_forces.hpp has the order of the phases).
 */
#include "core/parallel/parallel_forces.hpp"

#include <algorithm>
#include <chrono>

namespace banyan {

namespace {

using Clock = std::chrono::steady_clock;
double ms_between(Clock::time_point a, Clock::time_point b)
{
    return std::chrono::duration<double, std::milli>(b - a).count();
}

} // namespace

ParallelForces::ParallelForces(Backend& be, const Comm& comm, Transport transport)
    : be_(be), comm_(comm), domain_(be, comm), let_(be, comm), forces_(be)
{
    use_peer_exchange(open_peer_exchange(be, comm, transport));
}

void ParallelForces::use_peer_exchange(std::shared_ptr<PeerExchange> peers)
{
    peers_ = std::move(peers);
    let_.set_peer_exchange(peers_.get());
}

void ParallelForces::compute(Octree& tree, const OpeningCriterion& criterion, float eps, ParallelTimings* timings,
                             bool rebalance)
{
    ParallelTimings t;
    const bool many = comm_.parallel();
    const auto t0 = Clock::now();
    if (many && rebalance) t.balance_stats = domain_.balance(tree, work_);
    if (rebalance) work_ = 0;
    const auto t1 = Clock::now();
    tree.build();
    be_.synchronize();
    const auto t2 = Clock::now();
    if (many) let_.build(tree, criterion, forces_.previous_accelerations());
    const auto t3 = Clock::now();
    // With the top trees grafted (let.hpp) the far groups walk while the trees travel, the near ones after.
    RemoteTrees* remote = many ? &let_.remote() : nullptr;
    const bool split = remote && remote->split;
    if (split) forces_.begin(tree, criterion, eps, remote);
    if (many) let_.exchange(tree);
    const auto t4 = Clock::now();
    if (split)
        forces_.walk_received(tree);
    else
        forces_.begin(tree, criterion, eps, remote);
    forces_.end(tree, &t.walk_device);
    const auto t5 = Clock::now();
    const auto& tot = forces_.totals();
    work_ += 23.0 * static_cast<double>(tot.pp) + 65.0 * static_cast<double>(tot.pc);
    if (timings) {
        t.balance = ms_between(t0, t1);
        t.build = ms_between(t1, t2);
        t.let_build = ms_between(t2, t3);
        t.let_exchange = ms_between(t3, t4);
        t.walk = ms_between(t4, t5);
        t.total = ms_between(t0, t5);
        if (many) {
            t.let = let_.stats();
            t.comm = t.let.comm_ms();
            t.let_make = std::max(0.0, t.let_build + t.let_exchange - t.comm);
        }
        *timings = t;
    }
}

ParallelTimings& ParallelTimings::operator+=(const ParallelTimings& o) noexcept
{
    balance += o.balance, build += o.build, let_build += o.let_build, let_exchange += o.let_exchange;
    walk += o.walk, total += o.total, walk_device += o.walk_device, comm += o.comm, let_make += o.let_make;
    return *this;
}

ParallelTimings ParallelTimings::since(const ParallelTimings& e) const noexcept
{
    ParallelTimings d;
    d.balance = balance - e.balance, d.build = build - e.build, d.let_build = let_build - e.let_build;
    d.let_exchange = let_exchange - e.let_exchange, d.walk = walk - e.walk, d.total = total - e.total;
    d.walk_device = walk_device - e.walk_device, d.comm = comm - e.comm, d.let_make = let_make - e.let_make;
    return d;
}

ParallelPhases phases_over_ranks(const Comm& comm, const ParallelTimings& t)
{
    constexpr std::size_t k = 7;
    const double mine[k] = {t.balance, t.build, t.let_make, t.comm, t.walk, t.walk_device, t.total};
    double most[k + 1], sum[k + 1];
    std::copy(mine, mine + k, most);
    most[k] = -t.comm; // the least time in the messages, as the largest of its negatives
    comm.max(std::span<double>(most, k + 1));
    const double wait = t.comm + most[k];
    std::copy(mine, mine + k, sum);
    sum[k] = wait;
    comm.sum(std::span<double>(sum, k + 1));
    double wait_most = wait;
    comm.max(std::span<double>(&wait_most, 1));
    const double P = static_cast<double>(comm.size());
    ParallelPhases r;
    PhaseSpread* out[k] = {&r.domain, &r.build, &r.let_make, &r.comm, &r.gravity, &r.gravity_device, &r.total};
    for (std::size_t i = 0; i < k; ++i)
        *out[i] = {most[i], sum[i] / P};
    r.wait = {wait_most, sum[k] / P};
    return r;
}

} // namespace banyan
