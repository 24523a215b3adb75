/**
 * @file kernels.hpp
 * @brief Typed launch handles of the kernels that core/device/kernel_list.hpp declares, the rules that match a
 *        launch's arguments to a kernel's parameters, and the table of declarations the tests read.
 *
 * Backend::launch(kernels::walkPrepare, grid, args...) compiles only when the arguments match the declaration one
 * for one: an In<T> parameter takes a Buffer<T> (const or not), an Out<T> parameter a non-const Buffer<T>, an
 * InBits<N> / OutBits<N> parameter a Buffer of any N-byte type (const or not / not const), and a scalar parameter a
 * value of exactly its type (no conversion: a std::size_t or an int is refused where the kernel takes bn_u32; see
 * to_u32 in core/device/grid.hpp).
 */
#pragma once

#include "core/device/buffer.hpp"
#include "core/device/kernel_list.hpp"

#include <array>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>

namespace banyan {

/// Parameter markers of BANYAN_KERNELS (kernel_list.hpp has their meanings).
template <class T> struct In {
    using type = T;
};
template <class T> struct Out {
    using type = T;
};
template <std::size_t N> struct InBits {
};
template <std::size_t N> struct OutBits {
};

/// The types a kernel parameter may have, buffer elements and scalars alike: one meaning in host C++, CUDA and
/// OpenCL C (never size_t, whose width differs on devices).
template <class T>
concept KernelScalar = std::is_same_v<T, bn_u32> || std::is_same_v<T, bn_i32> || std::is_same_v<T, bn_u64> ||
    std::is_same_v<T, float> || std::is_same_v<T, double> || std::is_same_v<T, bn_f4>;
template <class T>
concept KernelElement = KernelScalar<T> || std::is_same_v<T, bn_u2>;

namespace detail {

template <class P>
struct ParamTraits; // defined for the markers and the scalars only: anything else in the list does not compile
template <KernelElement T> struct ParamTraits<In<T>> {
    static constexpr bool buffer = true, writes = false;
    template <class U> static constexpr bool element = std::is_same_v<U, T>;
};
template <KernelElement T> struct ParamTraits<Out<T>> {
    static constexpr bool buffer = true, writes = true;
    template <class U> static constexpr bool element = std::is_same_v<U, T>;
};
template <std::size_t N>
requires(N == 4 || N == 8 || N == 16) struct ParamTraits<InBits<N>> {
    static constexpr bool buffer = true, writes = false;
    template <class U> static constexpr bool element = sizeof(U) == N;
};
template <std::size_t N>
requires(N == 4 || N == 8 || N == 16) struct ParamTraits<OutBits<N>> {
    static constexpr bool buffer = true, writes = true;
    template <class U> static constexpr bool element = sizeof(U) == N;
};
template <KernelScalar T> struct ParamTraits<T> {
    static constexpr bool buffer = false, writes = false;
};

template <class B> struct IsBuffer : std::false_type {
};
template <class T> struct IsBuffer<Buffer<T>> : std::true_type {
    using element = T;
};

} // namespace detail

/// Whether an argument of type @p A (as a forwarding reference deduces it) may be passed for parameter @p P.
template <class P, class A> constexpr bool kernel_arg_matches()
{
    using Traits = detail::ParamTraits<P>;
    using B = std::remove_reference_t<A>;
    if constexpr (Traits::buffer) {
        using Plain = std::remove_const_t<B>;
        if constexpr (!detail::IsBuffer<Plain>::value)
            return false;
        else if constexpr (Traits::writes && std::is_const_v<B>)
            return false; // a const buffer is read-only
        else
            return Traits::template element<typename detail::IsBuffer<Plain>::element>;
    } else {
        return std::is_same_v<std::remove_cv_t<B>, P>;
    }
}

/// A kernel of BANYAN_KERNELS with parameters @p P (kernels::name is one); launched by Backend::launch.
template <class... P> struct Kernel {
    KernelId id;
};

namespace detail {
template <class K, class... A> struct ArgsMatch : std::false_type {
};
template <class... P, class... A>
requires(sizeof...(P) == sizeof...(A)) struct ArgsMatch<Kernel<P...>, A...>
    : std::bool_constant<(kernel_arg_matches<P, A>() && ...)> {
};
} // namespace detail

/// Whether Backend::launch(k, grid, args...) with a @p K and arguments of types @p A compiles.
template <class K, class... A>
concept KernelArgs = detail::ArgsMatch<K, A...>::value;

/// The typed handle of every kernel: kernels::walkPrepare and so on.
namespace kernels {
#define BANYAN_KERNEL_HANDLE(name, ...) inline constexpr Kernel<__VA_ARGS__> name{KernelId::name};
BANYAN_KERNELS(BANYAN_KERNEL_HANDLE)
#undef BANYAN_KERNEL_HANDLE
} // namespace kernels

// ---- The table of declarations (tests/kernels/test_kernel_pairs.cpp, the backends' error messages) --------------

enum class ParamKind { in, out, scalar };

/// One declared parameter: how it is passed and the element or scalar type, spelled as kernel code spells it in
/// the canonical form test_kernel_pairs.cpp reduces both kernel languages to (bn_u32, bn_i32, bn_u64, bn_u2, bn_f4,
/// float, double; uint4 for 16-byte bits).
struct KernelParam {
    ParamKind kind;
    std::string_view type;
};

/// "const T*" for In, "T*" for Out, "T" for a scalar.
std::string to_string(const KernelParam& p);

struct KernelDecl {
    std::string_view name;
    std::span<const KernelParam> params;
};

namespace detail {

template <class T> constexpr std::string_view type_name()
{
    if constexpr (std::is_same_v<T, bn_u32>)
        return "bn_u32";
    else if constexpr (std::is_same_v<T, bn_i32>)
        return "bn_i32";
    else if constexpr (std::is_same_v<T, bn_u64>)
        return "bn_u64";
    else if constexpr (std::is_same_v<T, bn_u2>)
        return "bn_u2";
    else if constexpr (std::is_same_v<T, bn_f4>)
        return "bn_f4";
    else if constexpr (std::is_same_v<T, float>)
        return "float";
    else if constexpr (std::is_same_v<T, double>)
        return "double";
}

constexpr std::string_view bits_name(std::size_t n)
{
    return n == 4 ? "bn_u32" : n == 8 ? "bn_u64" : "uint4";
}

template <class P> struct ParamDecl {
    static constexpr KernelParam value{ParamKind::scalar, type_name<P>()};
};
template <class T> struct ParamDecl<In<T>> {
    static constexpr KernelParam value{ParamKind::in, type_name<T>()};
};
template <class T> struct ParamDecl<Out<T>> {
    static constexpr KernelParam value{ParamKind::out, type_name<T>()};
};
template <std::size_t N> struct ParamDecl<InBits<N>> {
    static_assert(N == 4 || N == 8 || N == 16, "InBits<N>: elements of 4, 8 or 16 bytes");
    static constexpr KernelParam value{ParamKind::in, bits_name(N)};
};
template <std::size_t N> struct ParamDecl<OutBits<N>> {
    static_assert(N == 4 || N == 8 || N == 16, "OutBits<N>: elements of 4, 8 or 16 bytes");
    static constexpr KernelParam value{ParamKind::out, bits_name(N)};
};

template <class... P> inline constexpr std::array<KernelParam, sizeof...(P)> params_of{ParamDecl<P>::value...};

template <class... P> constexpr std::span<const KernelParam> params(const Kernel<P...>&)
{
    return params_of<P...>;
}

} // namespace detail

/// Every kernel of BANYAN_KERNELS, indexed by KernelId.
inline constexpr std::array<KernelDecl, kernel_count> kernel_decls{{
#define BANYAN_KERNEL_DECL(name, ...) {#name, detail::params(kernels::name)},
    BANYAN_KERNELS(BANYAN_KERNEL_DECL)
#undef BANYAN_KERNEL_DECL
}};

/// The name of kernel @p id, as kernels_cu/ and kernels_cl/ spell it.
constexpr std::string_view kernel_name(KernelId id) noexcept
{
    return kernel_decls[index_of(id)].name;
}

/// The kernel declared under @p name, if any.
std::optional<KernelId> find_kernel(std::string_view name) noexcept;

} // namespace banyan
