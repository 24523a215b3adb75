/**
 * @file atomic_file.hpp
 * @brief Writing an output file so that a crash mid-write never leaves a half file: write a temporary name in the
 *        same folder, flush it to disk, then rename it over the final name.
 */
#pragma once

#include <functional>
#include <ostream>
#include <string>

namespace banyan {

/// Calls @p write with a stream to "<path>.tmp.<pid>", then syncs and renames it to @p path. On any failure the
/// temporary file is removed and an std::runtime_error names the path and the reason; @p path is untouched.
void write_file_atomically(const std::string& path, const std::function<void(std::ostream&)>& write);

/// The last step of such a write, for writers that fill the temporary file otherwise (HDF5, several ranks): syncs
/// @p tmp to disk, then renames it to @p path. Throws std::runtime_error "cannot rename TMP to PATH: REASON" when the
/// rename fails; removing @p tmp is the caller's.
void rename_durably(const std::string& tmp, const std::string& path);

} // namespace banyan
