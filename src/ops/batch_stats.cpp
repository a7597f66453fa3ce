// The batch-statistics exchange of the calling thread (batch_stats.hpp; its slot is ThreadState::batch_stats).
#include "ops/batch_stats.hpp"
#include "platform/thread_state.hpp"

namespace bitgrad {
BatchStatsExchange* batch_stats_exchange() { return thread_state().batch_stats; }

BatchStatsScope::BatchStatsScope(BatchStatsExchange* x) : prev_(thread_state().batch_stats) { thread_state().batch_stats = x; }
BatchStatsScope::~BatchStatsScope() { thread_state().batch_stats = prev_; }

}  // namespace bitgrad
