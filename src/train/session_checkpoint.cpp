// A session's state to and from checkpoints (resume, diff's replay, the shadow's start, rank 0's
// state on the other ranks) and its fingerprint.
#include "train/session_parts.hpp"

namespace bitgrad::train {

void Session::restore(const store::Checkpoint& ck, const std::string& where) {
  p_->state.restore(ck, where);
  p_->scaler.restore(ck.info);
  p_->loader->seek(ck.info.epoch, ck.info.index);
}

store::CheckpointInfo Session::checkpoint_info(std::int64_t step, const std::string& config_hash) const {
  store::CheckpointInfo info;
  info.step = step;
  info.epoch = p_->loader->epoch();
  info.index = p_->loader->index();
  info.opt_steps = p_->state.optimizer->steps();
  info.config_hash = config_hash;
  info.accumulate = p_->cfg.train.accumulate;
  info.world = world();
  info.hosts = p_->hosts;
  info.precision = p_->cfg.train.precision;
  p_->scaler.save(info);
  return info;
}

Digest128 Session::fingerprint() const {
  Fingerprint fp;
  p_->state.add_to(fp);
  p_->scaler.add_to(fp);  // a dynamic loss scale's state decides the steps to come
  p_->state.add_buffers_to(fp);
  return fp.digest();
}

}  // namespace bitgrad::train
