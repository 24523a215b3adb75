/**
 * @file snapshot_file.cpp
 * @brief Either snapshot format, detected from the first bytes (snapshot_file.hpp).
 */
#include "core/files/snapshot_file.hpp"

#include "core/error.hpp"
#include "core/files/tipsy.hpp"

#include <fmt/format.h>

#include <cstring>
#include <filesystem>
#include <fstream>

namespace banyan {

SnapshotFormat parse_snapshot_format(const std::string& text, const std::string& what)
{
    if (text == "hdf5") return SnapshotFormat::hdf5;
    if (text == "tipsy") return SnapshotFormat::tipsy;
    throw UsageError(fmt::format("{} must be hdf5 or tipsy, got '{}'", what, text));
}

const char* to_string(SnapshotFormat f) noexcept
{
    return f == SnapshotFormat::hdf5 ? "hdf5" : "tipsy";
}

SnapshotFormat detect_snapshot_format(const std::string& path)
{
    // Regular files only: opening a pipe could block (read_tipsy refuses them with a message).
    std::error_code ec;
    if (!std::filesystem::is_regular_file(path, ec)) return SnapshotFormat::tipsy;
    const auto size = std::filesystem::file_size(path, ec);
    if (ec) return SnapshotFormat::tipsy;
    std::ifstream in(path, std::ios::binary);
    static constexpr char signature[8] = {'\x89', 'H', 'D', 'F', '\r', '\n', '\x1a', '\n'};
    // HDF5 looks for its superblock at 0, 512, 1024, 2048, ... (after a user block of that size).
    for (std::uintmax_t at = 0; at + 8 <= size; at = at ? 2 * at : 512) {
        char head[8];
        in.seekg(static_cast<std::streamoff>(at));
        if (!in.read(head, 8)) break;
        if (std::memcmp(head, signature, 8) == 0) return SnapshotFormat::hdf5;
    }
    return SnapshotFormat::tipsy;
}

Snapshot read_snapshot(const std::string& path, SnapshotMeta* meta, bool need_velocities, SnapshotFormat* detected,
                       Rows rows, FileCounts* whole)
{
    const SnapshotFormat f = detect_snapshot_format(path);
    if (detected) *detected = f;
    if (f == SnapshotFormat::hdf5) return read_hdf5(path, meta, need_velocities, rows, whole);
    if (meta) *meta = SnapshotMeta{};
    return read_tipsy(path, nullptr, rows, whole);
}

void write_snapshot(const std::string& path, const Snapshot& s, SnapshotFormat format, const SnapshotMeta& meta)
{
    if (format == SnapshotFormat::hdf5)
        write_hdf5(path, s, meta);
    else
        write_tipsy(path, s, Endian::big);
}

float softening_from_file(const Snapshot& s, const SnapshotMeta& meta, const std::string& path,
                          const std::string& command)
{
    check_softenings(s, path);
    return softening_from_file(meta, path, command, common_softening(s));
}

float softening_from_file(const SnapshotMeta& meta, const std::string& path, const std::string& command,
                          std::optional<float> eps)
{
    if (!meta.has_softening)
        throw UsageError(fmt::format("{}: {} gives its collisionless particles no softening (no "
                                     "PartTypeK/Softenings): give --eps",
                                     command, path));
    if (!eps)
        throw UsageError(fmt::format("{}: the particles of {} do not all carry the same softening (banyan uses one "
                                     "for all): give --eps",
                                     command, path));
    // Tools that have no softening of their own write 0 there; run unsoftened, close encounters make the energy
    // error large. Zero is taken only when asked for.
    if (*eps == 0.0f)
        throw UsageError(fmt::format("{}: the particles of {} all carry a softening of 0, which files written by other "
                                     "tools hold where none was set: give --eps (e.g. --eps 0.05 in N-body units; "
                                     "--eps 0 runs unsoftened)",
                                     command, path));
    return *eps;
}

} // namespace banyan
