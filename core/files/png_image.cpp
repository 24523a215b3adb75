/**
 * @file png_image.cpp
 * @brief PNG through libpng's simplified API (png_image_*, libpng >= 1.6.22): it reports errors through the
 *        png_image's message instead of longjmp, so no setjmp crosses C++ frames here.
 */
#include "core/files/png_image.hpp"

#include "core/error.hpp"
#include "core/files/atomic_file.hpp"

#include <fmt/format.h>
#include <png.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <ostream>
#include <stdexcept>
#include <unordered_map>

namespace banyan {

Image::Image(int w, int h, std::uint8_t r, std::uint8_t g, std::uint8_t b)
    : width(w), height(h), rgb(static_cast<std::size_t>(std::max(w, 0)) * static_cast<std::size_t>(std::max(h, 0)) * 3)
{
    fill(0, 0, w, h, r, g, b);
}

void Image::set(int x, int y, std::uint8_t r, std::uint8_t g, std::uint8_t b)
{
    if (x < 0 || y < 0 || x >= width || y >= height) return;
    std::uint8_t* p = at(x, y);
    p[0] = r;
    p[1] = g;
    p[2] = b;
}

void Image::fill(int x0, int y0, int w, int h, std::uint8_t r, std::uint8_t g, std::uint8_t b)
{
    const int xa = std::max(x0, 0), xb = std::min(x0 + w, width);
    const int ya = std::max(y0, 0), yb = std::min(y0 + h, height);
    for (int y = ya; y < yb; ++y)
        for (int x = xa; x < xb; ++x) {
            std::uint8_t* p = at(x, y);
            p[0] = r;
            p[1] = g;
            p[2] = b;
        }
}

void check_output_path(const std::string& path)
{
    namespace fs = std::filesystem;
    std::error_code ec;
    const fs::path dest(path);
    const fs::path dir = dest.has_parent_path() ? dest.parent_path() : fs::path(".");
    if (dest.filename().empty()) throw UsageError(fmt::format("cannot write {}: the path names no file", path));
    if (fs::is_directory(dest, ec)) throw UsageError(fmt::format("cannot write {}: it is a folder", path));
    if (!fs::exists(dir, ec))
        throw UsageError(fmt::format("cannot write {}: the folder {} does not exist", path, dir.string()));
    if (!fs::is_directory(dir, ec))
        throw UsageError(fmt::format("cannot write {}: {} is not a folder", path, dir.string()));
    if (::access(dir.c_str(), W_OK | X_OK) != 0)
        throw UsageError(fmt::format("cannot write {}: the folder {} is not writable", path, dir.string()));
    // Images are PNG alone: a name that asks for another format (z.jpg) or for none would hold PNG bytes unsaid.
    std::string ext = dest.extension().string();
    std::transform(ext.begin(), ext.end(), ext.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    if (ext != ".png")
        throw UsageError(
            fmt::format("cannot write {}: banyan writes PNG images only; give a name ending in .png", path));
}

void write_png(const std::string& path, const Image& image)
{
    if (image.width <= 0 || image.height <= 0 ||
        image.rgb.size() != static_cast<std::size_t>(image.width) * static_cast<std::size_t>(image.height) * 3)
        throw std::invalid_argument("write_png: an empty image or one whose pixels disagree with its size");
    check_output_path(path); // a bad destination is refused with the reason a user can act on

    // An image of at most 256 colours (a colour-mapped rendering) is written with a palette: a third of the bytes
    // before compression, and it compresses better.
    std::vector<std::uint8_t> palette, indices;
    {
        std::unordered_map<std::uint32_t, std::uint8_t> seen;
        const std::size_t pixels = image.rgb.size() / 3;
        indices.resize(pixels);
        for (std::size_t i = 0; i < pixels; ++i) {
            const std::uint8_t* p = image.rgb.data() + 3 * i;
            const std::uint32_t key = std::uint32_t(p[0]) << 16 | std::uint32_t(p[1]) << 8 | p[2];
            auto it = seen.find(key);
            if (it == seen.end()) {
                if (seen.size() == 256) {
                    palette.clear();
                    break;
                }
                it = seen.emplace(key, static_cast<std::uint8_t>(seen.size())).first;
                palette.insert(palette.end(), p, p + 3);
            }
            indices[i] = it->second;
        }
    }
    png_image png{};
    png.version = PNG_IMAGE_VERSION;
    png.width = static_cast<png_uint_32>(image.width);
    png.height = static_cast<png_uint_32>(image.height);
    const void* pixels = image.rgb.data();
    const void* colormap = nullptr;
    if (!palette.empty()) {
        png.format = PNG_FORMAT_RGB_COLORMAP;
        png.colormap_entries = static_cast<png_uint_32>(palette.size() / 3);
        pixels = indices.data();
        colormap = palette.data();
    } else {
        png.format = PNG_FORMAT_RGB;
    }
    png_alloc_size_t bytes = 0;
    // First call: the size the encoded file needs; second: the encoding.
    if (!png_image_write_to_memory(&png, nullptr, &bytes, 0, pixels, 0, colormap))
        throw std::runtime_error(fmt::format("cannot encode {} as PNG: {}", path, png.message));
    std::vector<unsigned char> encoded(bytes);
    if (!png_image_write_to_memory(&png, encoded.data(), &bytes, 0, pixels, 0, colormap))
        throw std::runtime_error(fmt::format("cannot encode {} as PNG: {}", path, png.message));
    write_file_atomically(path, [&](std::ostream& out) {
        out.write(reinterpret_cast<const char*>(encoded.data()), static_cast<std::streamsize>(bytes));
    });
}

Image read_png(const std::string& path)
{
    png_image png{};
    png.version = PNG_IMAGE_VERSION;
    if (!png_image_begin_read_from_file(&png, path.c_str()))
        throw UsageError(fmt::format("{}: cannot read as PNG: {}", path, png.message));
    png.format = PNG_FORMAT_RGB;
    Image out;
    out.width = static_cast<int>(png.width);
    out.height = static_cast<int>(png.height);
    out.rgb.resize(PNG_IMAGE_SIZE(png));
    if (!png_image_finish_read(&png, nullptr, out.rgb.data(), 0, nullptr)) {
        const std::string why = png.message;
        png_image_free(&png);
        throw UsageError(fmt::format("{}: cannot read as PNG: {}", path, why));
    }
    return out;
}

} // namespace banyan
