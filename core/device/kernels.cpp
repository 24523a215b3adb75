/**
 * @file kernels.cpp
 * @brief Look-ups in the table of kernel declarations (kernels.hpp).
 */
#include "core/device/kernels.hpp"

namespace banyan {

std::string to_string(const KernelParam& p)
{
    switch (p.kind) {
    case ParamKind::in:
        return "const " + std::string(p.type) + "*";
    case ParamKind::out:
        return std::string(p.type) + "*";
    case ParamKind::scalar:
        break;
    }
    return std::string(p.type);
}

std::optional<KernelId> find_kernel(std::string_view name) noexcept
{
    for (std::size_t i = 0; i < kernel_decls.size(); ++i)
        if (kernel_decls[i].name == name) return static_cast<KernelId>(i);
    return std::nullopt;
}

} // namespace banyan
