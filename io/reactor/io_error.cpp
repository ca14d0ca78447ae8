// io/reactor/io_error.cpp: how a failed operation reaches the awaiting task.
#include <cerrno>
#include <string>
#include <system_error>

#include <eddy/io/detail/io_awaiter.hpp>
#include <eddy/tasks/errors.hpp>

namespace eddy::detail {

void throw_io_error(int negative_errno, const char* what) {
    if (negative_errno == -ECANCELED) throw OperationCancelled(what);
    // The operation's deadline passed (eddy::with_deadline; eddy/time/detail/deadline.hpp).
    if (negative_errno == kDeadlineResult) throw TimedOut("eddy: the deadline passed (eddy::with_deadline)");
    throw std::system_error(-negative_errno, std::system_category(), what);
}

void throw_errno(const char* what) { throw std::system_error(errno, std::system_category(), what); }

}  // namespace eddy::detail
