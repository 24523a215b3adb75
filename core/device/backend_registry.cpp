/**
 * @file backend_registry.cpp
 * @brief The registry of the backends of this build (backend_registry.hpp).
 */
#include "core/device/backend_registry.hpp"

#include <fmt/format.h>

#include <stdexcept>

namespace banyan {

void BackendRegistry::add(BackendEntry entry)
{
    if (entry.name.empty() || find(entry.name))
        throw std::logic_error(fmt::format("backend registry: the name '{}' is empty or taken", entry.name));
    entries_.push_back(std::move(entry));
}

void BackendRegistry::add_absent(std::string name, std::string reason)
{
    BackendEntry entry;
    entry.name = std::move(name);
    entry.absent_reason = std::move(reason);
    add(std::move(entry));
}

const BackendEntry* BackendRegistry::find(std::string_view name) const noexcept
{
    for (const auto& e : entries_)
        if (e.name == name) return &e;
    return nullptr;
}

std::vector<std::string> BackendRegistry::names() const
{
    std::vector<std::string> out;
    for (const auto& e : entries_)
        out.push_back(e.name);
    return out;
}

const BackendRegistry& backend_registry()
{
    static const BackendRegistry registry = [] {
        BackendRegistry r;
        register_backends(r);
        return r;
    }();
    return registry;
}

} // namespace banyan
