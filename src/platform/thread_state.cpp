#include "platform/thread_state.hpp"

#include <type_traits>

namespace bitgrad {
static_assert(std::is_trivially_destructible_v<ThreadState>, "a thread's state must be reachable through its exit");
constinit thread_local ThreadState t_thread_state{};
}  // namespace bitgrad
