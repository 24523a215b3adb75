/**
 * @file npy.cpp
 * @brief The .npy header: magic, version 1.0, a Python dict literal padded so the data starts 64-byte aligned.
 */
#include "core/files/npy.hpp"

#include "core/files/atomic_file.hpp"
#include "core/error.hpp"

#include <fmt/format.h>

#include <bit>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>
#include <regex>

namespace banyan {

static_assert(std::endian::native == std::endian::little, "the .npy writer assumes a little-endian host");

std::string npy_header(std::size_t rows, std::size_t cols)
{
    std::string dict = fmt::format("{{'descr': '<f4', 'fortran_order': False, 'shape': ({}, {}), }}", rows, cols);
    const std::size_t unpadded = 10 + dict.size() + 1; // magic(6) + version(2) + length(2) + dict + '\n'
    dict.append((64 - unpadded % 64) % 64, ' ');
    dict.push_back('\n');
    const auto len = static_cast<std::uint16_t>(dict.size());
    std::string head("\x93NUMPY\x01\x00", 8);
    head.append(reinterpret_cast<const char*>(&len), 2);
    return head + dict;
}

void write_npy(const std::string& path, const std::vector<float>& data, std::size_t rows, std::size_t cols)
{
    if (data.size() != rows * cols) throw std::invalid_argument("write_npy: data size disagrees with the shape");
    const std::string head = npy_header(rows, cols);
    write_file_atomically(path, [&](std::ostream& out) {
        out.write(head.data(), static_cast<std::streamsize>(head.size()));
        out.write(reinterpret_cast<const char*>(data.data()), static_cast<std::streamsize>(data.size() * 4));
    });
}

std::vector<float> read_npy(const std::string& path, std::size_t* rows, std::size_t* cols)
{
    std::ifstream in(path, std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (bytes.size() < 10 || bytes.compare(0, 6, "\x93NUMPY") != 0)
        throw UsageError(fmt::format("{}: not a .npy file", path));
    std::uint16_t len;
    std::memcpy(&len, bytes.data() + 8, 2);
    const std::string dict = bytes.substr(10, len);
    std::smatch m;
    if (!std::regex_search(dict, m, std::regex(R"('shape': \((\d+), (\d+)\))")) ||
        dict.find("'<f4'") == std::string::npos)
        throw UsageError(fmt::format("{}: not a 2-D float32 .npy file", path));
    *rows = std::stoull(m[1]);
    *cols = std::stoull(m[2]);
    std::vector<float> out(*rows * *cols);
    if (bytes.size() != 10 + len + out.size() * 4) throw UsageError(fmt::format("{}: truncated .npy file", path));
    if (!out.empty()) std::memcpy(out.data(), bytes.data() + 10 + len, out.size() * 4);
    return out;
}

} // namespace banyan
