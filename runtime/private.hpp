// runtime/private.hpp: included first by every private header of the runtime layer.
// Private headers are eddy's internals: the public API (eddy/...) must never include them,
// and the build defines EDDY_INTERNAL only for eddy's own sources and white-box tests.
#pragma once
#ifndef EDDY_INTERNAL
#error "private eddy header: use the eddy_*_internal_dep dependency (white-box tests only)"
#endif
