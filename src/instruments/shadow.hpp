// The float64 shadow of a run (`bitgrad train --shadow f64`, src/instruments/shadow.cpp).
#pragma once

#include <chrono>
#include <optional>
#include <string>

#include "train/trainer.hpp"

namespace bitgrad::instruments {

class ShadowRun final : public train::RunObserver {
 public:
  ShadowRun() = default;  // Shadow::f64
  std::string describe() const override { return ", float64 shadow"; }
  void begin(const store::RunDir* dir, train::Session& session, std::int64_t start) override;
  void end_step(std::int64_t step, const train::Session& session, const train::Session::StepOut& out) override;
  void add_metrics(std::int64_t step, store::Json& record) override;
  double seconds() const { return seconds_; }  // spent in the twin's steps

 private:
  train::Session* main_ = nullptr;
  std::optional<train::Session> twin_;
  store::Json pending_;
  double seconds_ = 0;
};

}  // namespace bitgrad::instruments
