// `bitgrad sensitivity`: perturbed-order members drift away from the canonical run of the
// Fashion-MNIST MLP (examples/fashion_mlp.toml), and the distance grows; the canonical member is the plain training run.
#include <nlohmann/json.hpp>

#include "bitgrad/runtime.hpp"
#include "support/fashion.hpp"
#include "support/runs.hpp"
#include "support/test_util.hpp"

namespace bitgrad::test {
namespace {

using json = nlohmann::json;

TEST(Sensitivity, DivergenceOfTheFashionMlpGrows) {
  BITGRAD_NEED_FASHION_MNIST();
  RuntimeGuard g;
  const train::Config cfg = train::load_config(std::string(BITGRAD_SOURCE_DIR) + "/examples/fashion_mlp.toml");
  instruments::SensitivityOptions o;
  o.members = 2;
  o.steps = 60;
  o.out = fresh_dir("sens");
  std::ostringstream out;
  instruments::sensitivity(cfg, o, out);
  const json j = json::parse(io::read_file(o.out + "/sensitivity.json"));
  const json& per = j["per_step"];
  ASSERT_EQ(per.size(), 60u);
  const double d1 = per[0]["distance_mean"], d60 = per[59]["distance_mean"];
  EXPECT_GT(d1, 0.0) << "another order changes the bits from the first step";
  EXPECT_LT(d1, 1e-5) << "... by rounding only";
  // and the difference grows (by how much depends on how accurate the canonical sums are: more
  // than x1000 over 60 steps with numerics 5's single GEMM chains, x13 with version 6's blocks)
  EXPECT_GT(d60, d1) << "and the difference grows\n" << out.str();
  EXPECT_GT(j["growth_rate_per_step"].get<double>(), 0.0);
  for (const auto& s : per) EXPECT_LE(s["distance_mean"].get<double>(), s["distance_max"].get<double>());
  ASSERT_EQ(j["final_accuracy"].size(), 3u);
  EXPECT_NE(out.str().find("growth: x"), std::string::npos) << out.str();
  EXPECT_NE(out.str().find("final test accuracy: canonical"), std::string::npos) << out.str();
  EXPECT_EQ(json::parse(io::read_file(o.out + "/manifest.json"))["run"]["kind"], "sensitivity");

  // the canonical member is exactly `bitgrad train`
  instruments::TrainOptions r;
  r.steps = 60;
  r.out = fresh_dir("sens_train");
  std::ostringstream log;
  instruments::train(cfg, r, log);
  std::size_t k = 0;
  for (const std::string& l : lines_of(r.out + "/metrics.jsonl")) {
    const json m = json::parse(l);
    if (!m.contains("loss")) continue;
    ASSERT_LT(k, per.size());
    EXPECT_EQ(static_cast<float>(m["loss"].get<double>()), static_cast<float>(per[k]["loss"].get<double>())) << "step " << k + 1;
    ++k;
  }
  EXPECT_EQ(k, 60u);
}

}  // namespace
}  // namespace bitgrad::test
