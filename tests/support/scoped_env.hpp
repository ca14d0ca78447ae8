// tests/support/scoped_env.hpp: sets (or unsets) an environment variable for one scope.
//
// setenv/unsetenv race with any getenv on another thread: use it only where no other thread
// reads the environment (doctest runs the cases one at a time, on one thread).
#pragma once

#include <doctest/doctest.h>

#include <cstdlib>
#include <optional>
#include <string>

namespace eddy::test {

/// Sets (or unsets) an environment variable for one scope, then restores it.
class ScopedEnv {
public:
    ScopedEnv(const char* name, const char* value) : name_(name) {
        if (const char* old = std::getenv(name); old != nullptr) old_ = old;
        if (value != nullptr) {
            REQUIRE(::setenv(name, value, 1) == 0);
        } else {
            REQUIRE(::unsetenv(name) == 0);
        }
    }
    ~ScopedEnv() {
        if (old_) {
            ::setenv(name_, old_->c_str(), 1);
        } else {
            ::unsetenv(name_);
        }
    }
    ScopedEnv(const ScopedEnv&) = delete;
    ScopedEnv& operator=(const ScopedEnv&) = delete;

private:
    const char* name_;
    std::optional<std::string> old_;
};

}  // namespace eddy::test
