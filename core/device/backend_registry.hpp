/**
 * @file backend_registry.hpp
 * @brief Entry points each backend library provides to core/device/devices.cpp (declarations only, no vendor types).
 */
#pragma once

#include "core/device/backend.hpp"
#include "core/device/devices.hpp"

#include <memory>

namespace banyan {

#ifdef BANYAN_HAVE_CUDA
BackendDevices cuda_discover();
std::unique_ptr<Backend> cuda_open(int index);
#endif

#ifdef BANYAN_HAVE_OPENCL
BackendDevices opencl_discover();
std::unique_ptr<Backend> opencl_open(int index);
#endif

} // namespace banyan
