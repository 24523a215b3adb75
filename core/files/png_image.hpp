/**
 * @file png_image.hpp
 * @brief 8-bit RGB images in memory, and PNG files of them through libpng (written atomically: a temporary name in
 *        the same folder, then a rename).
 */
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace banyan {

/// An 8-bit RGB image: row 0 is the top row, 3 bytes (r, g, b) a pixel, rows packed without padding.
struct Image {
    int width = 0, height = 0;
    std::vector<std::uint8_t> rgb; ///< width * height * 3

    Image() = default;
    /// A @p w x @p h image filled with one colour.
    Image(int w, int h, std::uint8_t r = 0, std::uint8_t g = 0, std::uint8_t b = 0);

    std::uint8_t* at(int x, int y) { return rgb.data() + (static_cast<std::size_t>(y) * width + x) * 3; }
    const std::uint8_t* at(int x, int y) const { return rgb.data() + (static_cast<std::size_t>(y) * width + x) * 3; }
    /// Sets pixel (x, y) (x to the right, y down from the top) when it lies inside the image; ignores it otherwise.
    void set(int x, int y, std::uint8_t r, std::uint8_t g, std::uint8_t b);
    /// Fills the rectangle [x0, x0 + w) x [y0, y0 + h), clipped to the image.
    void fill(int x0, int y0, int w, int h, std::uint8_t r, std::uint8_t g, std::uint8_t b);
};

/// Throws UsageError naming the problem when @p path cannot take a new PNG image: it is a folder, or its folder does
/// not exist, is not a folder or cannot be written, or its name does not end in .png (any case: z.jpg asks for JPEG,
/// which banyan does not write). (write_png checks this too; a command can check before its work.)
void check_output_path(const std::string& path);

/// Writes @p image as an 8-bit PNG (with a palette when it has at most 256 colours, RGB otherwise) through a temporary
/// name in the same folder and a rename. Throws UsageError when the folder of @p path does not exist, is not a folder
/// or cannot be written, or @p path is a folder or not named .png; std::runtime_error when the write itself fails (disk
/// full); std::invalid_argument for an empty image.
void write_png(const std::string& path, const Image& image);

/// Reads a PNG file of any kind, converted to 8-bit RGB (alpha composited on black). Throws UsageError naming the
/// file and libpng's reason for a missing file or one that is not a PNG.
Image read_png(const std::string& path);

} // namespace banyan
