/**
 * @file kernel_registry.hpp
 * @brief KernelId -> CUDA kernel table, so that core/ launches CUDA kernels through the same typed handles as
 *        OpenCL ones; each kernel's signature is checked against its declaration when it is compiled.
 *
 * Every kernel in kernels_cu/ registers itself right after its definition:
 *     __global__ void scanReduce(...) { ... }
 *     BANYAN_CUDA_KERNEL(scanReduce);
 * which fails to compile when scanReduce is not declared in core/device/kernel_list.hpp or its parameters differ
 * from the declaration (In<T> is const T*, Out<T> is T*, a scalar its type), and otherwise puts its host stub in the
 * table at KernelId::scanReduce, filled before main() by static initialisers. This header is plain C++ (no CUDA
 * types outside CUDA translation units), included by .cu and .cpp files alike.
 */
#pragma once

#include "core/device/kernel_list.hpp"
#include "core/device_shared.h"

#include <type_traits>

namespace banyan::cuda {

void register_kernel(KernelId id, const void* host_stub);
/// The kernel registered for @p id, or nullptr: an index into the table, no look-up by name.
const void* kernel_stub(KernelId id) noexcept;

struct KernelRegistrar {
    KernelRegistrar(KernelId id, const void* host_stub) { register_kernel(id, host_stub); }
};

#if defined(__CUDACC__)
/// signature::name is the function pointer type that kernel `name` must have, read from BANYAN_KERNELS with the
/// CUDA meanings of the device types (bn_f4 is float4 here).
namespace signature {
template <class T> struct In;
template <class T> struct Out;
template <unsigned long N> struct InBits;
template <unsigned long N> struct OutBits;

template <unsigned long N> struct Bits; // the unsigned type of an N-byte element, as the gathers move it
template <> struct Bits<4> {
    using type = bn_u32;
};
template <> struct Bits<8> {
    using type = bn_u64;
};
template <> struct Bits<16> {
    using type = uint4;
};

template <class P> struct Param {
    using type = P;
};
template <class T> struct Param<In<T>> {
    using type = const T*;
};
template <class T> struct Param<Out<T>> {
    using type = T*;
};
template <unsigned long N> struct Param<InBits<N>> {
    using type = const typename Bits<N>::type*;
};
template <unsigned long N> struct Param<OutBits<N>> {
    using type = typename Bits<N>::type*;
};

template <class... P> using Stub = void (*)(typename Param<P>::type...);

#define BANYAN_CUDA_SIGNATURE(name, ...) using name = Stub<__VA_ARGS__>;
BANYAN_KERNELS(BANYAN_CUDA_SIGNATURE)
#undef BANYAN_CUDA_SIGNATURE
} // namespace signature
#endif

} // namespace banyan::cuda

#define BANYAN_CUDA_KERNEL(name)                                                                                       \
    static_assert(std::is_same_v<decltype(&name), ::banyan::cuda::signature::name>,                                    \
                  "CUDA kernel " #name " does not take the parameters core/device/kernel_list.hpp declares");          \
    static const ::banyan::cuda::KernelRegistrar banyan_registrar_##name(::banyan::KernelId::name,                     \
                                                                         reinterpret_cast<const void*>(&name))
