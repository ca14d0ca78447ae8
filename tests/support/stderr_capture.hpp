// tests/support/stderr_capture.hpp: what a test's code writes to standard error.
#pragma once

#include <doctest/doctest.h>

#include <unistd.h>

#include <cstdio>
#include <string>

namespace eddy::test {

/// Captures what is written to file descriptor 2 while it lives.
class StderrCapture {
public:
    StderrCapture() : file_(std::tmpfile()) {
        REQUIRE(file_ != nullptr);
        std::fflush(stderr);
        saved_ = ::dup(2);
        REQUIRE(saved_ >= 0);
        REQUIRE(::dup2(::fileno(file_), 2) >= 0);
    }
    ~StderrCapture() {
        restore();
        std::fclose(file_);
    }
    StderrCapture(const StderrCapture&) = delete;
    StderrCapture& operator=(const StderrCapture&) = delete;
    /// Restores stderr and returns what was written meanwhile.
    std::string finish() {
        restore();
        std::string out;
        std::rewind(file_);
        char buf[256];
        std::size_t n;
        while ((n = std::fread(buf, 1, sizeof buf, file_)) > 0) out.append(buf, n);
        return out;
    }

private:
    void restore() {
        if (saved_ < 0) return;
        std::fflush(stderr);
        ::dup2(saved_, 2);
        ::close(saved_);
        saved_ = -1;
    }
    std::FILE* file_;
    int saved_ = -1;
};

}  // namespace eddy::test
