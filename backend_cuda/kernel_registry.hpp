/**
 * @file kernel_registry.hpp
 * @brief Name -> CUDA kernel table, so that core/ launches CUDA kernels by the same names as OpenCL ones.
 *
 * Every kernel in kernels_cu/ registers itself right after its definition:
 *     __global__ void scanReduce(...) { ... }
 *     BANYAN_CUDA_KERNEL(scanReduce);
 * This header is plain C++ (no CUDA types), included by .cu and .cpp files alike.
 */
#pragma once

#include <string_view>

namespace banyan::cuda {

void register_kernel(const char* name, const void* host_stub);
/// The kernel registered under @p name, or nullptr.
const void* find_kernel(std::string_view name);

struct KernelRegistrar {
    KernelRegistrar(const char* name, const void* host_stub) { register_kernel(name, host_stub); }
};

} // namespace banyan::cuda

#define BANYAN_CUDA_KERNEL(name)                                                                            \
    static const ::banyan::cuda::KernelRegistrar banyan_registrar_##name(#name, reinterpret_cast<const void*>(&name))
