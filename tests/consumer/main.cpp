// A program of a bitgrad user, built against an installed bitgrad by tests/consumer/run.sh
// (CMake's find_package, then pkg-config): it trains the model of consumer.toml — Fashion-MNIST,
// an MLP with dropout, SGD with Nesterov momentum and a cosine schedule — with a training loop
// of its own, and prints the fingerprint of the trained weights and the optimizer state, which
// must be the one `bitgrad train consumer.toml --steps STEPS` prints.
//
// Usage: consumer STEPS THREADS WORKERS [FASHION_MNIST_DIR]
#include <bitgrad/bitgrad.hpp>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <memory>
#include <string>

int main(int argc, char** argv) {
  using namespace bitgrad;
  if (argc < 4) {
    std::fprintf(stderr, "usage: %s STEPS THREADS WORKERS [FASHION_MNIST_DIR]\n", argv[0]);
    return 2;
  }
  const std::int64_t steps = std::atoll(argv[1]);
  const int threads = std::atoi(argv[2]), workers = std::atoi(argv[3]);
  const std::string dir = argc > 4 ? argv[4] : data::kFashionMnistDir;
  const std::uint64_t seed = 20261217;  // consumer.toml
  try {
    set_num_threads(threads);

    // the data and the model
    auto train = data::fashion_mnist(dir, /*train=*/true, /*normalize=*/true);
    nn::Sequential model;
    model.add(std::make_shared<nn::Flatten>());
    model.add(std::make_shared<nn::Linear>(784, 256));
    model.add(std::make_shared<nn::ActivationLayer>(nn::Activation::relu));
    model.add(std::make_shared<nn::Dropout>(0.1, /*layer_id=*/0));
    model.add(std::make_shared<nn::Linear>(256, 10));
    nn::initialize(model, nn::Init::kaiming_uniform, seed);

    // the loader, the optimizer and its schedule
    data::LoaderOptions lo;
    lo.batch_size = 128;
    lo.seed = seed;
    lo.workers = workers;
    data::DataLoader loader(train, lo);
    optim::SgdOptions so;
    so.momentum = 0.9;
    so.nesterov = true;
    optim::Sgd opt(model.named_parameters(), so);
    optim::Schedule schedule;
    schedule.kind = optim::Schedule::Kind::cosine;
    schedule.lr = 0.05;
    schedule.total_steps = loader.batches_per_epoch();  // one epoch planned

    // the loop: the loss is the batch's sum over its samples divided by the batch size, as the
    // CLI computes it (docs/numerics.md, the training step)
    double loss = 0;
    for (std::int64_t s = 0; s < steps; ++s) {
      data::Batch batch = loader.next();
      nn::Context ctx;
      ctx.training = true;
      ctx.seed = seed;  // dropout's masks: (seed, layer, step, sample)
      ctx.step = static_cast<std::uint64_t>(s);
      opt.zero_grad();
      Tensor sum = cross_entropy(model.forward(batch.x, ctx), batch.y, Reduction::sum);
      Tensor mean = div(sum, static_cast<double>(batch.rows));
      mean.backward();
      opt.step(schedule.at(s));
      loss = static_cast<float>(sum.item()) / static_cast<float>(batch.rows);
    }

    // what `bitgrad train` fingerprints: the parameters, the optimizer's state, its step count
    Fingerprint fp;
    for (const auto& [name, p] : model.named_parameters()) fp.add(p);
    for (const auto& [name, t] : opt.state()) fp.add(t);
    const std::int64_t opt_steps = opt.steps();
    fp.add_bytes(&opt_steps, sizeof opt_steps);
    std::printf("bitgrad %s (numerics %d): %lld steps, threads %d, loader workers %d, loss %.6f\n", kVersion, kNumericsVersion,
                static_cast<long long>(steps), threads, workers, loss);
    std::printf("fingerprint %s\n", fp.digest().hex().c_str());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "consumer: %s\n", e.what());
    return 1;
  }
  return 0;
}
