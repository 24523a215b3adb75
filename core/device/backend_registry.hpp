/**
 * @file backend_registry.hpp
 * @brief The backends of this build, as core/ reaches them without naming any: each one's name, how to list its
 *        devices and open one, in order of preference.
 *
 * Each backend library (backend_<name>/) exports one function, `void register_<name>_backend(BackendRegistry&)`,
 * which adds its entry. The build generates the one translation unit that calls them (register_backends, in the
 * program-level library banyan_lib: cmake/BackendRegistry.cmake), from the list of backends it knows in order of
 * preference (BANYAN_BACKENDS in CMakeLists.txt); a backend known but not built gets an entry that says why. An
 * explicit call, not a static initialiser, so that no linker drops a backend. A new backend is a folder, its library
 * and its line in CMakeLists.txt; nothing in core/ changes.
 */
#pragma once

#include "core/device/backend.hpp"
#include "core/device/devices.hpp"

#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace banyan {

/// One backend as core/ knows it.
struct BackendEntry {
    std::string name;  ///< what --backend takes and DeviceInfo::backend holds, in lower case
    std::string title; ///< its API's name in errors (DeviceError::backend)
    /// Its devices (or none, and why). Null for a backend that is known but not built.
    BackendDevices (*discover)() = nullptr;
    /// Opens device @p index of discover()'s list; UsageError when there is none of that index.
    std::unique_ptr<Backend> (*open)(int index) = nullptr;
    /// Why a backend that is not built has no devices, as `banyan devices` prints it.
    std::string absent_reason;

    bool built() const noexcept { return discover != nullptr && open != nullptr; }
};

/// The backends in order of preference: the order in which they are registered, which is the order in which
/// `banyan devices` lists them and `--backend auto` looks for a GPU, then for any device (devices.hpp).
class BackendRegistry {
public:
    /// Adds a built backend (name, title, discover and open set). std::logic_error for a name already registered.
    void add(BackendEntry entry);
    /// Adds a backend that this build knows but did not build, with the reason `banyan devices` gives.
    void add_absent(std::string name, std::string reason);

    const std::vector<BackendEntry>& entries() const noexcept { return entries_; }
    /// The entry named @p name, or nullptr.
    const BackendEntry* find(std::string_view name) const noexcept;
    /// The names, in order of preference.
    std::vector<std::string> names() const;

private:
    std::vector<BackendEntry> entries_;
};

/// Every backend of this build, registered on first use (register_backends), in order of preference.
const BackendRegistry& backend_registry();

/// Registers the backends of this build in order of preference. Defined by the translation unit the build generates
/// (cmake/BackendRegistry.cmake) in the program-level library, not in core/.
void register_backends(BackendRegistry& registry);

} // namespace banyan
