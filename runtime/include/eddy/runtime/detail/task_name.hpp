// eddy/runtime/detail/task_name.hpp: giving a task a name for Runtime::dump(). Not for users.
//
// A name lives in the frame's FrameExtra (frame_header.hpp), made only for a named or
// abortable task: an unnamed spawn pays nothing. Set before the frame is published, never
// changed after; freed with the header.
#pragma once

#include <coroutine>
#include <string_view>

#include <eddy/tasks/detail/frame_header.hpp>

namespace eddy::detail {

/// Names the unstarted frame `frame`, still owned by its Task (an empty name leaves it
/// unnamed). On allocation failure the Task still owns the frame and frees it (with the
/// extra state, which the header owns).
inline void name_task(std::coroutine_handle<> frame, std::string_view name) {
    if (name.empty()) return;
    FrameHeader* h = header_of(frame.address());
    if (h->extra == nullptr) h->extra = new FrameExtra();
    h->extra->name.assign(name);
}

}  // namespace eddy::detail
