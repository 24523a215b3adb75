/**
 * @file transport.cpp
 * @brief Which path the trees and particles take between ranks, and the opening of the device-to-device group
 *        (transport.hpp).
 */
#include "core/parallel/transport.hpp"

#include "core/error.hpp"

#include <fmt/format.h>

#include <cstdlib>
#include <map>
#include <unistd.h>
#include <vector>

namespace banyan {

namespace {

/// What one rank asks for and has, as the ranks gather it.
struct RankView {
    Transport want = Transport::automatic;
    std::string backend, transport, device; // device: "host PCI-address"; transport empty: none
};

std::string host_name()
{
    char name[256] = {};
    if (::gethostname(name, sizeof name - 1) != 0) return "?";
    return name;
}

/// Every rank's view of @p mine, in rank order (collective). Lines: request, backend, transport, device.
std::vector<RankView> gather_views(const Comm& comm, const RankView& mine)
{
    const std::string text =
        fmt::format("{}\n{}\n{}\n{}", static_cast<int>(mine.want), mine.backend, mine.transport, mine.device);
    std::vector<std::size_t> counts;
    const auto all = all_gather<char>(comm, std::span<const char>(text.data(), text.size()), &counts);
    std::vector<RankView> out;
    std::size_t at = 0;
    for (std::size_t n : counts) {
        std::string s(all.data() + at, n);
        at += n;
        std::vector<std::string> line;
        for (std::size_t a = 0;;) {
            const std::size_t b = s.find('\n', a);
            line.push_back(s.substr(a, b == std::string::npos ? std::string::npos : b - a));
            if (b == std::string::npos) break;
            a = b + 1;
        }
        line.resize(4);
        RankView v;
        v.want = static_cast<Transport>(std::atoi(line[0].c_str()));
        v.backend = line[1], v.transport = line[2], v.device = line[3];
        out.push_back(std::move(v));
    }
    return out;
}

const char* name_of(Transport t)
{
    switch (t) {
    case Transport::automatic:
        return "auto";
    case Transport::host:
        return "host";
    case Transport::device:
        return "device";
    }
    return "?";
}

} // namespace

Transport parse_transport(std::string_view text, std::string_view what)
{
    for (Transport t : {Transport::automatic, Transport::host, Transport::device})
        if (text == name_of(t)) return t;
    throw UsageError(fmt::format("{}: expected auto, host or device, got '{}'", what, text));
}

Transport default_transport()
{
    const char* env = std::getenv("BANYAN_TRANSPORT");
    return env && *env ? parse_transport(env, "BANYAN_TRANSPORT") : Transport::automatic;
}

std::unique_ptr<PeerExchange> open_peer_exchange(Backend& be, const Comm& comm, Transport transport)
{
    if (!comm.parallel()) return nullptr; // nothing travels
    PeerTransport* pt = be.peer_transport();
    RankView mine;
    mine.want = transport;
    mine.backend = be.info().backend;
    if (pt) mine.transport = pt->name(), mine.device = host_name() + " " + pt->device_address();
    const auto views = gather_views(comm, mine);
    // Every rank decides alike from the same views, so that all of them open the group or none does.
    for (std::size_t r = 1; r < views.size(); ++r)
        if (views[r].want != views[0].want)
            throw UsageError(fmt::format("the ranks ask for different transports of the trees between them: {} on "
                                         "rank 0, {} on rank {} (BANYAN_TRANSPORT must be the same on every rank)",
                                         name_of(views[0].want), name_of(views[r].want), r));
    if (transport == Transport::host) return nullptr;
    const bool must = transport == Transport::device;
    for (std::size_t r = 0; r < views.size(); ++r)
        if (views[r].transport.empty()) {
            if (!must) return nullptr;
            throw UsageError(fmt::format("transport device: the {} backend of rank {} has no transport from device to "
                                         "device in this build; use the transport auto or host",
                                         views[r].backend, r));
        }
    std::map<std::string, std::size_t> seen;
    for (std::size_t r = 0; r < views.size(); ++r)
        if (auto [it, fresh] = seen.emplace(views[r].device, r); !fresh) {
            if (!must) return nullptr;
            throw UsageError(fmt::format("transport device: ranks {} and {} share the device {}, and {} takes one "
                                         "rank per device; give every rank a device of its own, or use the "
                                         "transport auto or host",
                                         it->second, r, views[r].device, views[r].transport));
        }
    // The key goes from rank 0 to all; an empty one says that rank 0 could not make it (every rank then throws).
    std::vector<std::byte> key;
    std::string failed;
    if (comm.rank() == 0) try {
            key = pt->new_key();
        } catch (const std::exception& e) {
            failed = e.what();
            key.clear();
        }
    comm.broadcast(key, 0);
    if (key.empty())
        throw std::runtime_error(fmt::format("{}: rank 0 could not open a group of the ranks{}", mine.transport,
                                             failed.empty() ? "" : ": " + failed));
    return pt->join(key, comm.rank(), comm.size());
}

std::string transport_text(const PeerExchange* peers)
{
    return peers ? "trees: GPU to GPU through " + peers->name() : "trees: through host memory (MPI)";
}

} // namespace banyan
