// with_timeout of something that cannot be awaited: the compiler's note names the concept.
#include <eddy/eddy.hpp>

using namespace std::chrono_literals;

eddy::Task<void> f() {
    co_await eddy::with_timeout(42, 1s);
}
