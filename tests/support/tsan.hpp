// tests/support/tsan.hpp: EDDY_TEST_TSAN, defined in a ThreadSanitizer build (g++ or clang).
// The stress tests do less work per round there (TSan makes every atomic and every lock
// several times slower); tests that replace the global operator new leave that out (the TSan
// runtime defines it itself).
#pragma once

#if defined(__SANITIZE_THREAD__)
#define EDDY_TEST_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define EDDY_TEST_TSAN 1
#endif
#endif
