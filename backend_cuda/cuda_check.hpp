/**
 * @file cuda_check.hpp
 * @brief The check macro around every CUDA runtime call: throws banyan::DeviceError with call, code, file, line.
 */
#pragma once

#include "core/error.hpp"

#include <cuda_runtime_api.h>

namespace banyan::cuda {

[[noreturn]] void throw_error(const char* call, cudaError_t code, const char* file, int line, std::string detail = {});

} // namespace banyan::cuda

#define BANYAN_CUDA_CHECK(call)                                                                                        \
    do {                                                                                                               \
        const cudaError_t banyan_cuda_status_ = (call);                                                                \
        if (banyan_cuda_status_ != cudaSuccess)                                                                        \
            ::banyan::cuda::throw_error(#call, banyan_cuda_status_, __FILE__, __LINE__);                               \
    } while (0)
