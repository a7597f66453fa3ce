// Op hooks and label scopes (thread-local: each training thread traces its own ops).
#include "autograd/hooks_internal.hpp"
#include "bitgrad/autograd.hpp"

namespace bitgrad {
namespace {
thread_local std::string t_label;
thread_local autograd::OpHook t_hook = nullptr;
thread_local void* t_ctx = nullptr;
thread_local int t_suppress = 0;
}  // namespace

LabelScope::LabelScope(const std::string& name) : restore_(t_label.size()) {
  if (!t_label.empty()) t_label += '/';
  t_label += name;
}
LabelScope::~LabelScope() { t_label.resize(restore_); }
const std::string& current_label() { return t_label; }

namespace autograd {
LabelReplace::LabelReplace(const std::string& label) : saved_(t_label) { t_label = label; }
LabelReplace::~LabelReplace() { t_label = saved_; }
}  // namespace autograd

namespace autograd {
void set_op_hook(OpHook hook, void* ctx) {
  t_hook = hook;
  t_ctx = ctx;
}
bool op_hook_active() { return t_hook != nullptr; }
OpHookPause::OpHookPause() : hook_(t_hook), ctx_(t_ctx) { t_hook = nullptr, t_ctx = nullptr; }
OpHookPause::~OpHookPause() { t_hook = hook_, t_ctx = ctx_; }
SuppressForward::SuppressForward() { ++t_suppress; }
SuppressForward::~SuppressForward() { --t_suppress; }
void emit_forward(const char* op, const Tensor& out, CallSite site) {
  if (t_hook && t_suppress == 0) t_hook(t_ctx, OpEvent{op, out, site, t_label, false, -1});
}
void emit_backward(const char* op, const Tensor& g, CallSite site, const std::string& label, int input) {
  if (t_hook) t_hook(t_ctx, OpEvent{op, g, site, label, true, input});
}
}  // namespace autograd
}  // namespace bitgrad
