/**
 * @file error.hpp
 * @brief The one exception type for device failures, and the check macro pattern the backends use.
 */
#pragma once

#include <stdexcept>
#include <string>

namespace banyan {

/// A failed device call: which backend, which call, its error code, where in our source, and (OpenCL program
/// builds) the build log. Backends throw this and never call exit().
class DeviceError : public std::runtime_error {
public:
    DeviceError(std::string backend, std::string call, long code, std::string code_name, const char* file, int line,
                std::string detail = {});

    const std::string& backend() const noexcept { return backend_; }
    const std::string& call() const noexcept { return call_; }
    long code() const noexcept { return code_; }
    const std::string& detail() const noexcept { return detail_; }

private:
    std::string backend_, call_;
    long code_;
    std::string detail_;
};

/// Bad input or a bad request from a user (unknown device, bad option, bad file): a clear message, no backtrace.
class UsageError : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

/// Numbers that left single precision's range during a computation (NaN or infinity in forces, energies or the
/// state): the computation stops rather than go on silently wrong.
class NumericalError : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

} // namespace banyan
