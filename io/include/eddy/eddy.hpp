// <eddy/eddy.hpp>: the one header users include.
#pragma once

#include <eddy/runtime/config.hpp>
#include <eddy/runtime/event.hpp>
#include <eddy/runtime/join_handle.hpp>
#include <eddy/runtime/runtime.hpp>
#include <eddy/runtime/spawn.hpp>
#include <eddy/runtime/this_worker.hpp>
#include <eddy/runtime/when_all.hpp>
#include <eddy/runtime/yield_now.hpp>
#include <eddy/tasks/errors.hpp>
#include <eddy/tasks/task.hpp>
