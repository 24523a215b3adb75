/**
 * @file test_kernel_pairs.cpp
 * @brief kernels_cu/ and kernels_cl/ agree with the one declaration of each kernel (core/device/kernel_list.hpp):
 *        every kernel of either folder is declared, every declared kernel is in both, each parameter has the
 *        declared type in both languages, and every CUDA kernel is registered for launch. Also: what a typed launch
 *        accepts, and the checked narrowing to_u32.
 *
 * Device-free (test suite "static"): runs as part of the CTest test `device_free`, on every machine.
 */
#include "core/device/backend.hpp"
#include "core/device/kernels.hpp"
#include "core/error.hpp"

#include <doctest/doctest.h>

#include <cctype>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

using namespace banyan;

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

/// The top-level parameters of the list that starts at s[open] == '(' (empty for "()"), each as written.
std::vector<std::string> split_params(const std::string& s, std::size_t open)
{
    std::vector<std::string> out;
    std::string cur;
    int depth = 0;
    for (std::size_t i = open; i < s.size(); ++i) {
        const char c = s[i];
        if (c == '(' || c == '<' || c == '[') {
            if (depth++ == 0) continue;
        } else if (c == ')' || c == '>' || c == ']') {
            if (--depth == 0) {
                if (cur.find_first_not_of(" \t\r\n") != std::string::npos) out.push_back(cur);
                return out;
            }
        } else if (c == ',' && depth == 1) {
            out.push_back(cur);
            cur.clear();
            continue;
        }
        cur += c;
    }
    throw std::runtime_error("a kernel's parameter list does not close");
}

struct SourceKernel {
    std::string file;
    std::vector<std::string> params;
    int definitions = 0;
};

/// kernel name -> its parameters, for every file with extension @p ext in @p dir; @p all_text gets the sources.
std::map<std::string, SourceKernel> kernels_in(const fs::path& dir, const std::string& ext, const std::regex& pattern,
                                               std::string* all_text)
{
    std::map<std::string, SourceKernel> out;
    for (const auto& e : fs::directory_iterator(dir)) {
        if (e.path().extension() != ext) continue;
        const std::string text = strip_comments(read_all(e.path()));
        if (all_text) *all_text += text;
        for (std::sregex_iterator it(text.begin(), text.end(), pattern), end; it != end; ++it) {
            auto& k = out[(*it)[1]];
            k.file = e.path().filename().string();
            k.params = split_params(text, static_cast<std::size_t>(it->position(0) + it->length(0) - 1));
            ++k.definitions;
        }
    }
    return out;
}

std::map<std::string, SourceKernel> cuda_kernels(std::string* all_text = nullptr)
{
    static const std::regex pattern(
        R"(__global__\s+(?:__launch_bounds__\s*\([^)]*\)\s*)?void\s+(?:__launch_bounds__\s*\([^)]*\)\s*)?([A-Za-z_]\w*)\s*\()");
    return kernels_in(fs::path(BANYAN_SOURCE_DIR) / "kernels_cu", ".cu", pattern, all_text);
}

std::map<std::string, SourceKernel> opencl_kernels()
{
    static const std::regex pattern(
        R"((?:__kernel|\bkernel)\s+(?:__attribute__\s*\(\([^;{]*?\)\)\s*)?void\s+([A-Za-z_]\w*)\s*\()");
    return kernels_in(fs::path(BANYAN_SOURCE_DIR) / "kernels_cl", ".cl", pattern, nullptr);
}

/// One parameter as kernel code writes it, in the spelling of to_string(KernelParam): address-space and aliasing
/// qualifiers and the name dropped, OpenCL's and CUDA's names of the types mapped to the bn_ ones, const kept only
/// where it qualifies what a pointer points to. "__global const uint* restrict in" -> "const bn_u32*".
std::string canonical_param(const std::string& text)
{
    static const std::regex token(R"([A-Za-z_]\w*|\*)");
    static const std::map<std::string, std::string> types{
        {"uint", "bn_u32"},  {"unsigned int", "bn_u32"},       {"unsigned", "bn_u32"}, {"int", "bn_i32"},
        {"ulong", "bn_u64"}, {"unsigned long long", "bn_u64"}, {"float4", "bn_f4"},    {"uint2", "bn_u2"},
    };
    std::vector<std::string> before, after; // the tokens before the first '*' and after it
    bool pointer = false, pointee_const = false;
    for (std::sregex_iterator it(text.begin(), text.end(), token), end; it != end; ++it) {
        const std::string t = it->str();
        if (t == "__global" || t == "global" || t == "restrict" || t == "__restrict__" || t == "__restrict" ||
            t == "volatile")
            continue;
        if (t == "*") {
            if (pointer) after.push_back(t); // a second level of pointer: kept, so that it differs
            pointer = true;
        } else if (t == "const") {
            if (!pointer) pointee_const = true; // after the '*' it qualifies the pointer itself: no matter
        } else {
            (pointer ? after : before).push_back(t);
        }
    }
    if (!pointer && !before.empty()) before.pop_back(); // the name
    std::string type;
    for (const auto& t : before)
        type += (type.empty() ? "" : " ") + t;
    if (auto it = types.find(type); it != types.end()) type = it->second;
    if (!pointer) return type;
    std::string out = (pointee_const ? "const " : "") + type + "*";
    for (const auto& t : after)
        if (t == "*") out += "*";
    return out;
}

/// What differs between the declaration @p decl and the parameters @p params of its kernel in @p where (a folder);
/// empty when they agree.
std::vector<std::string> compare_params(const KernelDecl& decl, const std::vector<std::string>& params,
                                        const std::string& where)
{
    std::vector<std::string> out;
    if (params.size() != decl.params.size())
        out.push_back(where + " " + std::string(decl.name) + " takes " + std::to_string(params.size()) +
                      " parameters, its declaration " + std::to_string(decl.params.size()));
    for (std::size_t i = 0; i < std::min(params.size(), decl.params.size()); ++i) {
        const std::string want = to_string(decl.params[i]), got = canonical_param(params[i]);
        if (got != want)
            out.push_back(where + " " + std::string(decl.name) + " parameter " + std::to_string(i) + " '" + params[i] +
                          "' is " + got + ", declared " + want);
    }
    return out;
}

const KernelDecl& decl_of(std::string_view name)
{
    const auto id = find_kernel(name);
    REQUIRE(id.has_value());
    return kernel_decls[index_of(*id)];
}

} // namespace

TEST_SUITE("static")
{
    TEST_CASE("every kernel of kernels_cu and kernels_cl is declared, and every declared kernel is in both")
    {
        const auto cu = cuda_kernels(), cl = opencl_kernels();
        for (const auto& [name, k] : cu) {
            CHECK_MESSAGE(find_kernel(name).has_value(), "kernels_cu/", k.file, " has ", name,
                          ", which core/device/kernel_list.hpp does not declare");
            CHECK_MESSAGE(k.definitions == 1, name, " is defined ", k.definitions, " times in kernels_cu/");
        }
        for (const auto& [name, k] : cl) {
            CHECK_MESSAGE(find_kernel(name).has_value(), "kernels_cl/", k.file, " has ", name,
                          ", which core/device/kernel_list.hpp does not declare");
            CHECK_MESSAGE(k.definitions == 1, name, " is defined ", k.definitions, " times in kernels_cl/");
        }
        for (const auto& d : kernel_decls) {
            const std::string name(d.name);
            CHECK_MESSAGE(cu.count(name) == 1, name, " is declared but kernels_cu/ has no such kernel");
            CHECK_MESSAGE(cl.count(name) == 1, name, " is declared but kernels_cl/ has no such kernel");
        }
    }

    TEST_CASE("each kernel's parameters have the declared types in kernels_cu and in kernels_cl")
    {
        const auto cu = cuda_kernels(), cl = opencl_kernels();
        std::size_t compared = 0;
        for (const auto& d : kernel_decls) {
            const std::string name(d.name);
            INFO("kernel ", name);
            for (const auto* side : {&cu, &cl}) {
                const auto it = side->find(name);
                if (it == side->end()) continue; // reported by the test above
                const std::string where = (side == &cu ? "kernels_cu/" : "kernels_cl/") + it->second.file;
                for (const auto& problem : compare_params(d, it->second.params, where))
                    FAIL_CHECK(problem);
                compared += it->second.params.size();
            }
        }
        CHECK(compared > 2 * kernel_count); // the parameter lists were found, not skipped
    }

    TEST_CASE("every CUDA kernel is registered for launch with BANYAN_CUDA_KERNEL")
    {
        std::string cu_text;
        for (const auto& [name, k] : cuda_kernels(&cu_text))
            CHECK_MESSAGE(cu_text.find("BANYAN_CUDA_KERNEL(" + name + ")") != std::string::npos, "CUDA kernel ", name,
                          " (kernels_cu/", k.file, ") is not registered with BANYAN_CUDA_KERNEL");
    }

    TEST_CASE("the parameter comparison reduces both languages' spellings to one and finds what differs")
    {
        // Each spelling with the one it reduces to ("__local": not a global buffer, so it matches nothing).
        const std::pair<const char*, const char*> spellings[] = {{"__global const uint* restrict in", "const bn_u32*"},
                                                                 {"const bn_u32* __restrict__ perm", "const bn_u32*"},
                                                                 {" __global bn_u2* link", "bn_u2*"},
                                                                 {"__global uint2 *link", "bn_u2*"},
                                                                 {"__global const ulong* keys", "const bn_u64*"},
                                                                 {"volatile __global bn_u32* p", "bn_u32*"},
                                                                 {"__global float4* const out", "bn_f4*"},
                                                                 {"const uint4* __restrict__ in", "const uint4*"},
                                                                 {"bn_u32 n", "bn_u32"},
                                                                 {"const float alpha", "float"},
                                                                 {"unsigned int n", "bn_u32"},
                                                                 {"int level", "bn_i32"},
                                                                 {"__local bn_u32* scratch", "__local bn_u32*"}};
        for (const auto& [spelling, canonical] : spellings) {
            CAPTURE(spelling);
            CHECK(canonical_param(spelling) == canonical);
        }

        const KernelDecl& prepare = decl_of("walkPrepare");
        const std::vector<std::string> right{"__global const bn_f4* cell_com",
                                             "__global const bn_f4* cell_quad1",
                                             "__global const bn_u32* cell_first",
                                             "__global const bn_u32* cell_count",
                                             "bn_u32 ncells",
                                             "float inv_theta",
                                             "__global bn_f4* mac",
                                             "__global uint2* link"};
        CHECK(compare_params(prepare, right, "walk.cl").empty());
        // The drift this check was written for: the link buffer as 64 bits; and a const lost, a scalar's type.
        auto wrong = right;
        wrong[7] = "__global ulong* link";
        wrong[0] = "__global bn_f4* cell_com";
        wrong[5] = "double inv_theta";
        const auto problems = compare_params(prepare, wrong, "walk.cl");
        REQUIRE(problems.size() == 3);
        CHECK(problems[0] == "walk.cl walkPrepare parameter 0 '__global bn_f4* cell_com' is bn_f4*, declared const "
                             "bn_f4*");
        CHECK(problems[1].find("parameter 5") != std::string::npos);
        CHECK(problems[2] == "walk.cl walkPrepare parameter 7 '__global ulong* link' is bn_u64*, declared bn_u2*");
        wrong = right;
        wrong.pop_back();
        CHECK(compare_params(prepare, wrong, "walk.cl").size() == 1); // a parameter missing
    }

    TEST_CASE("the declarations are one table indexed by KernelId")
    {
        CHECK(kernel_decls.size() == kernel_count);
        for (std::size_t i = 0; i < kernel_count; ++i) {
            CAPTURE(kernel_decls[i].name);
            const auto id = find_kernel(kernel_decls[i].name);
            REQUIRE(id.has_value());
            CHECK(index_of(*id) == i);
        }
        CHECK(kernel_name(kernels::walkForces.id) == "walkForces");
        CHECK(kernel_decls[index_of(kernels::walkForces.id)].params.size() == 27);
        CHECK(to_string(decl_of("walkForces").params[3]) == "const bn_u2*");
        CHECK(to_string(decl_of("gather128").params[3]) == "uint4*");
        CHECK_FALSE(find_kernel("noSuchKernel").has_value());
    }

    TEST_CASE("a typed launch takes exactly the declared argument types")
    {
        // Backend::launch static_asserts KernelArgs: what these say does not compile there.
        using Prepare = std::remove_cv_t<decltype(kernels::walkPrepare)>;
        using CF4 = const Buffer<bn_f4>&;
        using CU32 = const Buffer<bn_u32>&;
        static_assert(KernelArgs<Prepare, CF4, CF4, CU32, CU32, bn_u32, float, Buffer<bn_f4>&, Buffer<bn_u2>&>);
        static_assert(KernelArgs<Prepare, Buffer<bn_f4>&, CF4, Buffer<bn_u32>&, CU32, const bn_u32&, float,
                                 Buffer<bn_f4>, Buffer<bn_u2>&&>); // In takes non-const; Out takes a temporary view
        // link as the 64-bit buffer it used to be; an output through a const buffer; the wrong element type.
        static_assert(!KernelArgs<Prepare, CF4, CF4, CU32, CU32, bn_u32, float, Buffer<bn_f4>&, Buffer<bn_u64>&>);
        static_assert(!KernelArgs<Prepare, CF4, CF4, CU32, CU32, bn_u32, float, CF4, Buffer<bn_u2>&>);
        static_assert(
            !KernelArgs<Prepare, const Buffer<float>&, CF4, CU32, CU32, bn_u32, float, Buffer<bn_f4>&, Buffer<bn_u2>&>);
        // Scalars: exactly the type, no conversion from size_t, int, double or a 64-bit type of another name.
        static_assert(!KernelArgs<Prepare, CF4, CF4, CU32, CU32, std::size_t, float, Buffer<bn_f4>&, Buffer<bn_u2>&>);
        static_assert(!KernelArgs<Prepare, CF4, CF4, CU32, CU32, int, float, Buffer<bn_f4>&, Buffer<bn_u2>&>);
        static_assert(!KernelArgs<Prepare, CF4, CF4, CU32, CU32, bn_u32, double, Buffer<bn_f4>&, Buffer<bn_u2>&>);
        using Stay = std::remove_cv_t<decltype(kernels::domainStay)>;
        static_assert(KernelArgs<Stay, const Buffer<bn_u64>&, bn_u32, bn_u64, bn_u64, Buffer<bn_u32>&>);
        static_assert(!KernelArgs<Stay, const Buffer<bn_u64>&, bn_u32, unsigned long, bn_u64, Buffer<bn_u32>&>);
        // A buffer for a scalar, a scalar for a buffer; too few and too many arguments.
        static_assert(!KernelArgs<Prepare, CF4, CF4, CU32, CU32, CU32, float, Buffer<bn_f4>&, Buffer<bn_u2>&>);
        static_assert(!KernelArgs<Prepare, CF4, CF4, CU32, bn_u32, bn_u32, float, Buffer<bn_f4>&, Buffer<bn_u2>&>);
        static_assert(!KernelArgs<Prepare, CF4, CF4, CU32, CU32, bn_u32, float, Buffer<bn_f4>&>);
        static_assert(
            !KernelArgs<Prepare, CF4, CF4, CU32, CU32, bn_u32, float, Buffer<bn_f4>&, Buffer<bn_u2>&, bn_u32>);
        // The gathers move any element of their width, bit for bit.
        using Gather8 = std::remove_cv_t<decltype(kernels::gather64)>;
        static_assert(KernelArgs<Gather8, const Buffer<double>&, CU32, bn_u32, Buffer<double>&>);
        static_assert(KernelArgs<Gather8, const Buffer<bn_u64>&, CU32, bn_u32, Buffer<bn_u2>&>);
        static_assert(!KernelArgs<Gather8, const Buffer<float>&, CU32, bn_u32, Buffer<double>&>);
        static_assert(!KernelArgs<Gather8, const Buffer<double>&, CU32, bn_u32, const Buffer<double>&>);
        CHECK(true);
    }

    TEST_CASE("to_u32 narrows sizes to the kernels' 32-bit integers and refuses what does not fit")
    {
        CHECK(to_u32(0) == 0u);
        CHECK(to_u32(0xFFFFFFFFu) == 0xFFFFFFFFu);
        CHECK_THROWS_AS(to_u32(std::size_t{1} << 32), UsageError);
        try {
            to_u32(std::size_t{5} << 32);
            FAIL("to_u32 took a value above 2^32 - 1");
        } catch (const UsageError& e) {
            CHECK(std::string(e.what()).find("21474836480") != std::string::npos);
        }
    }
}
