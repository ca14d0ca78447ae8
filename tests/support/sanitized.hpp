// tests/support/sanitized.hpp: EDDY_TEST_SANITIZED, defined in an AddressSanitizer or
// ThreadSanitizer build (g++ or clang). Tests that measure the process itself (its threads'
// stacks, its resident set) check less there: the sanitizers' runtimes own those.
#pragma once

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define EDDY_TEST_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define EDDY_TEST_SANITIZED 1
#endif
#endif
