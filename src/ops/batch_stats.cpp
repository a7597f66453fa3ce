// The batch-statistics exchange's thread-local slot (batch_stats.hpp).
#include "ops/batch_stats.hpp"

namespace bitgrad {
namespace {
thread_local BatchStatsExchange* t_exchange = nullptr;
}  // namespace

BatchStatsExchange* batch_stats_exchange() { return t_exchange; }

BatchStatsScope::BatchStatsScope(BatchStatsExchange* x) : prev_(t_exchange) { t_exchange = x; }
BatchStatsScope::~BatchStatsScope() { t_exchange = prev_; }

}  // namespace bitgrad
