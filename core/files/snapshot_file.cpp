/**
 * @file snapshot_file.cpp
 * @brief The table of snapshot formats, and reading and writing any of them (snapshot_file.hpp).
 */
#include "core/files/snapshot_file.hpp"

#include "core/error.hpp"
#include "core/files/tipsy.hpp"

#include <fmt/format.h>

#include <filesystem>
#include <iterator>

namespace banyan {

namespace {

// The rows of snapshot_formats(): a format's functions adapted to the table's signatures.

Snapshot read_tipsy_row(const std::string& path, SnapshotMeta* meta, bool, Rows rows, FileCounts* whole)
{
    if (meta) *meta = SnapshotMeta{};
    return read_tipsy(path, nullptr, rows, whole);
}

void write_tipsy_row(const std::string& path, const Snapshot& s, const SnapshotMeta&)
{
    write_tipsy(path, s, Endian::big);
}

constexpr SnapshotFormatInfo formats[] = {
    {.format = SnapshotFormat::hdf5,
     .name = "hdf5",
     .title = "HDF5",
     .reads = "GADGET-2/4, SWIFT layout; all particle types",
     .writes = "GADGET-4 layout with potentials, accelerations, the options and the units",
     .detect = is_hdf5_snapshot,
     .read = read_hdf5,
     .write = write_hdf5,
     .keeps_accelerations = true,
     .keeps_ids = true,
     .keeps_types = true,
     .keeps_units = true,
     .keeps_parameters = true},
    {.format = SnapshotFormat::tipsy,
     .name = "tipsy",
     .title = "tipsy",
     .reads = "either byte order",
     .writes = "standard big-endian",
     .detect = nullptr, // any file no other format claims
     .read = read_tipsy_row,
     .write = write_tipsy_row}, // keeps none of the extras
};

constexpr bool rows_in_order()
{
    for (std::size_t i = 0; i < std::size(formats); ++i)
        if (static_cast<std::size_t>(formats[i].format) != i) return false;
    return true;
}
static_assert(rows_in_order(), "row i of the snapshot formats is SnapshotFormat i");

} // namespace

std::span<const SnapshotFormatInfo> snapshot_formats()
{
    return formats;
}

const SnapshotFormatInfo& snapshot_format_info(SnapshotFormat f)
{
    return formats[static_cast<std::size_t>(f)];
}

std::string snapshot_format_list(const std::function<std::string(const SnapshotFormatInfo&)>& item)
{
    std::string list;
    const std::size_t n = std::size(formats);
    for (std::size_t i = 0; i < n; ++i)
        list += (i == 0 ? "" : i + 1 == n ? " or " : ", ") + item(formats[i]);
    return list;
}

SnapshotFormat parse_snapshot_format(const std::string& text, const std::string& what)
{
    for (const SnapshotFormatInfo& f : formats)
        if (text == f.name) return f.format;
    throw UsageError(fmt::format("{} must be {}, got '{}'", what,
                                 snapshot_format_list([](const SnapshotFormatInfo& f) { return f.name; }), text));
}

const char* to_string(SnapshotFormat f) noexcept
{
    return snapshot_format_info(f).name;
}

SnapshotFormat detect_snapshot_format(const std::string& path)
{
    // The format that detects nothing takes what no other claims.
    SnapshotFormat fallback = formats[0].format;
    for (const SnapshotFormatInfo& f : formats)
        if (!f.detect) fallback = f.format;
    // Regular files only: opening a pipe could block (the readers refuse them with a message). A name no file has
    // may name a set of files (an HDF5 snapshot of several).
    std::error_code ec;
    const auto status = std::filesystem::status(path, ec);
    if (std::filesystem::exists(status) && !std::filesystem::is_regular_file(status)) return fallback;
    for (const SnapshotFormatInfo& f : formats)
        if (f.detect && f.detect(path)) return f.format;
    return fallback;
}

Snapshot read_snapshot(const std::string& path, SnapshotMeta* meta, bool need_velocities, SnapshotFormat* detected,
                       Rows rows, FileCounts* whole)
{
    const SnapshotFormat f = detect_snapshot_format(path);
    if (detected) *detected = f;
    return snapshot_format_info(f).read(path, meta, need_velocities, rows, whole);
}

void write_snapshot(const std::string& path, const Snapshot& s, SnapshotFormat format, const SnapshotMeta& meta)
{
    snapshot_format_info(format).write(path, s, meta);
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
