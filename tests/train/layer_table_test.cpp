// The layer registry (src/train/layer_table.hpp), walked kind by kind: each entry's example
// builds and runs, the parameter count it declares (what the memory pre-check adds up before a
// layer allocates) is the count of the module it built, and its options survive the resolved
// TOML (written, read back, the same text and hash). tests/python/test_layer_table.py checks the
// same entries from Python.
#include "train/layer_table.hpp"

#include "bitgrad/layers.hpp"
#include "bitgrad/train.hpp"
#include "support/test_util.hpp"

namespace bitgrad::test {
namespace {

namespace layers = train::layers;
using train::LayerKind;

std::string table_config(const char* name, const layers::Example& ex) {
  const std::string before = *ex.before ? std::string("  ") + ex.before + ",\n" : "";
  return "[data]\ndataset = \"synthetic\"\n[model]\nlayers = [\n" + before + "  { type = \"" + name + "\"" + (*ex.options ? ", " : "") +
         ex.options + " },\n]\n";
}

double numel_of_last(const nn::Sequential& s) {
  double n = 0;
  for (const Tensor& p : s.children().back().second->parameters()) n += static_cast<double>(p.numel());
  return n;
}

TEST(LayerTable, EveryKindBuildsItsExampleWithTheCountItDeclares) {
  int kinds = 0;
  layers::for_each_entry([&kinds](auto entry, LayerKind k) {
    using E = decltype(entry);
    const char* name = train::to_string(k);
    SCOPED_TRACE(name);
    ++kinds;
    const train::Config c = train::parse_config(table_config(name, E::example), "t.toml");
    ASSERT_EQ(c.model.layers.back().type, k);
    const Shape in = layers::example_input(E::example.input);
    auto model = train::build_layers(c.model.layers, in, layers::kExampleVocabulary, "t.toml");
    ASSERT_EQ(model->size(), c.model.layers.size());
    Shape before = in;  // the last layer's input
    for (std::size_t i = 0; i + 1 < model->size(); ++i) before = model->children()[i].second->output_shape(before);
    layers::Env env;
    env.classes = layers::kExampleVocabulary;
    EXPECT_EQ(E::params(c.model.layers.back(), before, env), numel_of_last(*model)) << "the entry's params() and the module it builds disagree";
    // the module runs on the example input and gives the shape it announces
    nn::initialize(*model, nn::Init::kaiming_uniform, 5);
    Tensor x = E::example.input == layers::Input::tokens
                   ? Tensor::from<std::int64_t>(std::vector<std::int64_t>{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 0, 1}, in)
                   : Tensor::from<float>(random_vec<float>(static_cast<std::size_t>(in.numel()), 3), in);
    nn::Context ctx;
    ctx.training = true;
    ctx.seed = 9;
    const Tensor y = model->forward(x, ctx);
    EXPECT_EQ(y.shape(), model->output_shape(in));
  });
  EXPECT_EQ(kinds, static_cast<int>(std::size(layers::kNames)));
}

TEST(LayerTable, EveryKindsOptionsSurviveTheResolvedToml) {
  layers::for_each_entry([](auto entry, LayerKind k) {
    using E = decltype(entry);
    const char* name = train::to_string(k);
    SCOPED_TRACE(name);
    const train::Config c = train::parse_config(table_config(name, E::example), "t.toml");
    const std::string text = train::resolved_toml(c);
    const train::Config again = train::parse_config(text, "resolved.toml");
    EXPECT_EQ(train::resolved_toml(again), text);
    EXPECT_EQ(train::config_hash(again), train::config_hash(c));
    ASSERT_EQ(again.model.layers.size(), c.model.layers.size());
    EXPECT_EQ(again.model.layers.back().type, k);
  });
}

// A configuration that writes an option the kind does not have is refused naming the key; the
// entries' schemas are the only place options are accepted.
TEST(LayerTable, AnOptionOfAnotherKindIsRefused) {
  EXPECT_THROW_MSG(train::parse_config("[data]\ndataset = \"synthetic\"\n[model]\nlayers = [\n  { type = \"relu\", out = 3 },\n]\n", "t.toml"),
                   "t.toml:5: unknown key 'out' in model.layers[0]");
  EXPECT_THROW_MSG(train::parse_config("[data]\ndataset = \"synthetic\"\n[model]\nlayers = [\n  { type = \"groupnorm\" },\n]\n", "t.toml"),
                   "(groupnorm) needs 'groups'");
}

}  // namespace
}  // namespace bitgrad::test
