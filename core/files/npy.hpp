/**
 * @file npy.hpp
 * @brief NumPy .npy output (format 1.0, little-endian float32), written atomically.
 */
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace banyan {

/// The header of a float32 C-order .npy array of shape (rows, cols): magic, version 1.0 and the dict, padded so that
/// the data starts 64-byte aligned (writers over several ranks put the data after it themselves).
std::string npy_header(std::size_t rows, std::size_t cols);

/// Writes @p data (rows * cols floats, row-major) as a float32 array of shape (rows, cols).
void write_npy(const std::string& path, const std::vector<float>& data, std::size_t rows, std::size_t cols);

/// Reads a file written by write_npy (float32, C order, 2-D); for tests and tools.
std::vector<float> read_npy(const std::string& path, std::size_t* rows, std::size_t* cols);

} // namespace banyan
