/**
 * @file test_kernel_pairs.cpp
 * @brief kernels_cu/ and kernels_cl/ stay in step: every kernel has a partner of the same name and the same
 *        number of arguments on the other side, and every CUDA kernel is registered for launch by name.
 *
 * Device-free (test suite "static"): runs as part of the CTest test `device_free`, on every machine.
 */
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>

namespace {

namespace fs = std::filesystem;

std::string read_all(const fs::path& p)
{
    std::ifstream in(p);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

/// Removes // and /* */ comments, so commented-out kernels do not count.
std::string strip_comments(const std::string& s)
{
    static const std::regex block(R"(/\*[\s\S]*?\*/)"), line(R"(//[^\n]*)");
    return std::regex_replace(std::regex_replace(s, block, " "), line, " ");
}

/// Number of top-level parameters in the list that starts at s[open] == '('.
int count_params(const std::string& s, std::size_t open)
{
    int depth = 0, commas = 0;
    bool any = false;
    for (std::size_t i = open; i < s.size(); ++i) {
        const char c = s[i];
        if (c == '(' || c == '<' || c == '[') ++depth;
        else if (c == ')' || c == '>' || c == ']') {
            if (--depth == 0) return any ? commas + 1 : 0;
        } else if (c == ',' && depth == 1) ++commas;
        else if (depth == 1 && !std::isspace(static_cast<unsigned char>(c))) any = true;
    }
    return -1;
}

/// kernel name -> parameter count, for every file with extension @p ext in @p dir matching @p pattern.
std::map<std::string, int> kernels(const fs::path& dir, const std::string& ext, const std::regex& pattern,
                                   std::string* all_text)
{
    std::map<std::string, int> out;
    for (const auto& e : fs::directory_iterator(dir)) {
        if (e.path().extension() != ext) continue;
        const std::string text = strip_comments(read_all(e.path()));
        if (all_text) *all_text += text;
        for (std::sregex_iterator it(text.begin(), text.end(), pattern), end; it != end; ++it) {
            const std::string name = (*it)[1];
            const std::size_t open = static_cast<std::size_t>(it->position(0) + it->length(0) - 1);
            out[name] = count_params(text, open);
        }
    }
    return out;
}

} // namespace

TEST_SUITE("static")
{
    TEST_CASE("every kernel in kernels_cu has a partner in kernels_cl and the reverse")
    {
        const fs::path root(BANYAN_SOURCE_DIR);
        std::string cu_text;
        const auto cu = kernels(root / "kernels_cu", ".cu",
                                std::regex(R"(__global__\s+(?:__launch_bounds__\s*\([^)]*\)\s*)?void\s+(?:__launch_bounds__\s*\([^)]*\)\s*)?([A-Za-z_]\w*)\s*\()"),
                                &cu_text);
        const auto cl = kernels(root / "kernels_cl", ".cl",
                                std::regex(R"((?:__kernel|\bkernel)\s+(?:__attribute__\s*\(\([^;{]*?\)\)\s*)?void\s+([A-Za-z_]\w*)\s*\()"),
                                nullptr);
        for (const auto& [name, params] : cu) {
            INFO("CUDA kernel ", name);
            CHECK_MESSAGE(cl.count(name) == 1, "kernels_cu/ has ", name, " but kernels_cl/ does not");
            if (cl.count(name) == 1)
                CHECK_MESSAGE(cl.at(name) == params, name, " takes ", params, " arguments in CUDA but ",
                              cl.at(name), " in OpenCL");
            CHECK_MESSAGE(cu_text.find("BANYAN_CUDA_KERNEL(" + name + ")") != std::string::npos, "CUDA kernel ",
                          name, " is not registered with BANYAN_CUDA_KERNEL");
        }
        for (const auto& [name, params] : cl) {
            CHECK_MESSAGE(cu.count(name) == 1, "kernels_cl/ has ", name, " but kernels_cu/ does not");
        }
    }
}
