/**
 * @file cl_check.hpp
 * @brief The check macro around every OpenCL call: throws banyan::DeviceError with the call, code, file and line.
 */
#pragma once

#include "core/error.hpp"

#include <CL/cl.h>

namespace banyan::opencl {

const char* error_name(cl_int code) noexcept;

[[noreturn]] void throw_error(const char* call, cl_int code, const char* file, int line, std::string detail = {});

} // namespace banyan::opencl

/// Wraps an OpenCL call that returns cl_int.
#define BANYAN_CL_CHECK(call)                                                                                          \
    do {                                                                                                               \
        const cl_int banyan_cl_status_ = (call);                                                                       \
        if (banyan_cl_status_ != CL_SUCCESS)                                                                           \
            ::banyan::opencl::throw_error(#call, banyan_cl_status_, __FILE__, __LINE__);                               \
    } while (0)
