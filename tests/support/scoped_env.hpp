/**
 * @file scoped_env.hpp
 * @brief An environment variable set (or unset) for the rest of a scope, then put back: for the tests of the knobs
 *        banyan reads from the environment (BANYAN_TRANSPORT, BANYAN_MAX_FILE_PARTICLES, BANYAN_TEST_ID_BASE).
 */
#pragma once

#include <cstdlib>
#include <optional>
#include <string>

namespace banyan::test {

/// Sets the environment variable @p name to @p value (unset: nullopt) until the end of the scope.
class ScopedEnv {
public:
    ScopedEnv(const char* name, std::optional<std::string> value) : name_(name)
    {
        if (const char* old = std::getenv(name)) old_ = old;
        set(value);
    }
    ~ScopedEnv() { set(old_); }
    ScopedEnv(const ScopedEnv&) = delete;
    ScopedEnv& operator=(const ScopedEnv&) = delete;

private:
    void set(const std::optional<std::string>& v)
    {
        if (v)
            ::setenv(name_, v->c_str(), 1);
        else
            ::unsetenv(name_);
    }
    const char* name_;
    std::optional<std::string> old_;
};

} // namespace banyan::test
