// io/tls/openssl_error.hpp: reading (and emptying) the calling thread's OpenSSL error queue,
// for the tls::Error messages of context.cpp and engine.cpp.
#pragma once
#ifndef EDDY_INTERNAL
#error "private eddy header (io/tls/): for eddy's own sources only"
#endif

#include <string>

namespace eddy::tls::detail {

/// OpenSSL's reasons for the errors queued on this thread, oldest first, joined by "; "
/// ("" if none); the queue is empty afterwards.
std::string take_openssl_errors();

}  // namespace eddy::tls::detail
