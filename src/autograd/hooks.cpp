// Op hooks and label scopes: each thread traces its own ops (their slots are ThreadState's).
#include "autograd/hooks_internal.hpp"
#include "bitgrad/autograd.hpp"
#include "platform/thread_state.hpp"

namespace bitgrad {
namespace {
const std::string kNoLabel;
}  // namespace

LabelScope::LabelScope(const std::string& name) : before_(thread_state().label) {
  label_ = before_ && !before_->empty() ? *before_ + '/' + name : name;
  thread_state().label = &label_;
}
LabelScope::~LabelScope() { thread_state().label = before_; }
const std::string& current_label() {
  const std::string* l = thread_state().label;
  return l ? *l : kNoLabel;
}

namespace autograd {
LabelReplace::LabelReplace(const std::string& label) : label_(label), saved_(thread_state().label) { thread_state().label = &label_; }
LabelReplace::~LabelReplace() { thread_state().label = saved_; }

void set_op_hook(OpHook hook, void* ctx) {
  thread_state().hook = hook;
  thread_state().hook_ctx = ctx;
}
bool op_hook_active() { return thread_state().hook != nullptr; }
OpHookPause::OpHookPause() : hook_(thread_state().hook), ctx_(thread_state().hook_ctx) { set_op_hook(nullptr, nullptr); }
OpHookPause::~OpHookPause() { set_op_hook(hook_, ctx_); }
SuppressForward::SuppressForward() { ++thread_state().suppress_forward; }
SuppressForward::~SuppressForward() { --thread_state().suppress_forward; }
void emit_forward(const char* op, const Tensor& out, CallSite site) {
  const ThreadState& t = thread_state();
  if (t.hook && t.suppress_forward == 0) t.hook(t.hook_ctx, OpEvent{op, out, site, current_label(), false, -1});
}
void emit_backward(const char* op, const Tensor& g, CallSite site, const std::string& label, int input) {
  const ThreadState& t = thread_state();
  if (t.hook) t.hook(t.hook_ctx, OpEvent{op, g, site, label, true, input});
}
}  // namespace autograd
}  // namespace bitgrad
