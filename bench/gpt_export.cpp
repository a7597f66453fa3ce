// The bitgrad side of the GPT peer benchmark (bench/gpt_peer.sh, docs/benchmarks.md): builds the
// training session of a configuration as `bitgrad train` does, and writes what a PyTorch peer
// needs to train the same model on the same data from the same start:
//   init.safetensors   the initial parameters, named as model->named_parameters()
//   x.npy, y.npy       int32 [S, B, T]: each step's token windows and labels, as the loader gave them
//   lr.npy             float64 [S]: the schedule's learning rate of each step (Schedule::at)
//   val_x.npy, val_y.npy  int32 [n, T]: the validation windows (the test dataset, in order)
//   bitgrad.json       the run: the validation loss at the evaluation steps, each step's training
//                      loss, per-step wall times and their median, threads, ISA, fingerprint
// Then it trains S steps, timing each (session.step only: loading, forward, backward, clipping,
// optimizer), evaluating the validation windows (session.evaluate) at step 0, every
// --eval-every steps, every --dense-every steps up to --dense-until, and after the last step.
// --time-only writes only bitgrad.json (a timing run at another thread count).
//   build/bin/gpt_export --config FILE --out DIR --steps S [--threads N] [--eval-every K]
//                        [--dense-every M] [--dense-until U] [--time-only] [--warmup W]
// --warmup: the first W steps are left out of the median (default min(10, S/10)).
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "bench_util.hpp"
#include "bitgrad/io.hpp"
#include "bitgrad/runtime.hpp"
#include "bitgrad/session.hpp"

namespace {

using namespace bitgrad;

// NumPy's .npy, version 1.0: magic, header length (u16 LE), a Python dict padded with spaces to
// a multiple of 64 bytes ending in '\n', then the raw little-endian data in C order.
void write_npy(const std::string& path, const char* descr, const std::vector<std::int64_t>& shape, const void* data, std::size_t bytes) {
  std::string dims;
  for (std::size_t i = 0; i < shape.size(); ++i) dims += std::to_string(shape[i]) + (shape.size() == 1 || i + 1 < shape.size() ? ", " : "");
  std::string h = std::string("{'descr': '") + descr + "', 'fortran_order': False, 'shape': (" + dims + "), }";
  while ((10 + h.size() + 1) % 64) h += ' ';
  h += '\n';
  std::ofstream f(path, std::ios::binary);
  if (!f) throw Error("gpt_export: cannot write " + path);
  f.write("\x93NUMPY\x01\x00", 8);
  const auto n = static_cast<std::uint16_t>(h.size());
  const char len[2] = {static_cast<char>(n & 0xff), static_cast<char>(n >> 8)};
  f.write(len, 2);
  f.write(h.data(), static_cast<std::streamsize>(h.size()));
  f.write(static_cast<const char*>(data), static_cast<std::streamsize>(bytes));
  if (!f) throw Error("gpt_export: cannot write " + path);
}

std::string jnum(double v) {
  char b[64];
  std::snprintf(b, sizeof b, "%.17g", v);
  return b;
}

}  // namespace

int main(int argc, char** argv) {
  using Clock = std::chrono::steady_clock;
  std::string config, out;
  long steps = 0, eval_every = 250, dense_every = 0, dense_until = 0, warmup = -1;
  int threads = 1;
  bool time_only = false;
  for (int i = 1; i < argc; ++i) {
    const std::string k = argv[i];
    if (k == "--time-only") {
      time_only = true;
      continue;
    }
    if (i + 1 >= argc) {
      std::fprintf(stderr, "gpt_export: %s needs a value\n", k.c_str());
      return 2;
    }
    const char* v = argv[++i];
    if (k == "--config") config = v;
    else if (k == "--out") out = v;
    else if (k == "--steps") steps = std::atol(v);
    else if (k == "--threads") threads = std::atoi(v);
    else if (k == "--eval-every") eval_every = std::atol(v);
    else if (k == "--dense-every") dense_every = std::atol(v);
    else if (k == "--dense-until") dense_until = std::atol(v);
    else if (k == "--warmup") warmup = std::atol(v);
    else {
      std::fprintf(stderr, "gpt_export: unknown option %s\n", k.c_str());
      return 2;
    }
  }
  try {
    if (config.empty() || out.empty() || steps <= 0) throw Error("gpt_export: --config, --out and --steps S > 0 are required");
    set_num_threads(threads);
    const train::Config cfg = train::load_config(config);
    if (cfg.data.dataset != train::DatasetKind::text) throw Error("gpt_export: " + config + " is not a text configuration");
    io::make_dirs(out);
    auto test_ds = train::test_dataset(cfg);
    if (!test_ds) throw Error("gpt_export: " + config + " has no validation windows");
    // the loader on the training thread (workers = 0): the batches do not depend on it
    train::Session session(cfg, train::train_dataset(cfg), test_ds, 0);
    const std::int64_t B = cfg.train.batch_size, T = session.train_data().sample_shape()[0];
    if (!time_only) {
      io::NamedTensors init;
      for (const auto& [name, p] : session.params()) init.emplace_back(name, p.contiguous_copy());
      io::save_safetensors(out + "/init.safetensors", init, {{"config", config}});
      // the validation windows, in the order evaluate() reads them
      const std::int64_t n = test_ds->size();
      std::vector<float> fx(static_cast<std::size_t>(T));
      std::vector<std::int64_t> ly(static_cast<std::size_t>(T));
      std::vector<std::int32_t> vx(static_cast<std::size_t>(n * T)), vy(static_cast<std::size_t>(n * T));
      for (std::int64_t i = 0; i < n; ++i) {
        test_ds->get(i, fx.data(), ly.data(), nullptr);
        for (std::int64_t t = 0; t < T; ++t) {
          vx[static_cast<std::size_t>(i * T + t)] = static_cast<std::int32_t>(fx[static_cast<std::size_t>(t)]);
          vy[static_cast<std::size_t>(i * T + t)] = static_cast<std::int32_t>(ly[static_cast<std::size_t>(t)]);
        }
      }
      write_npy(out + "/val_x.npy", "<i4", {n, T}, vx.data(), vx.size() * 4);
      write_npy(out + "/val_y.npy", "<i4", {n, T}, vy.data(), vy.size() * 4);
    }
    auto eval_here = [&](std::int64_t s) {  // after s steps
      if (s == 0 || s == steps) return true;
      if (eval_every > 0 && s % eval_every == 0) return true;
      return dense_every > 0 && s <= dense_until && s % dense_every == 0;
    };
    std::vector<std::int32_t> xs, ys;
    if (!time_only) {
      xs.resize(static_cast<std::size_t>(steps * B * T));
      ys.resize(xs.size());
    }
    std::vector<double> lrs, ms, losses, grad_norms;
    std::vector<std::pair<std::int64_t, double>> evals;
    double eval_s = 0;
    for (std::int64_t s = 0; s <= steps; ++s) {
      if (!time_only && eval_here(s)) {
        const auto t0 = Clock::now();
        evals.emplace_back(s, session.evaluate().loss);
        eval_s += std::chrono::duration<double>(Clock::now() - t0).count();
        std::fprintf(stderr, "gpt_export: step %lld  validation loss %.6f\n", static_cast<long long>(s), evals.back().second);
      }
      if (s == steps) break;
      const auto t0 = Clock::now();
      const train::Session::StepOut r = session.step(s);
      ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
      lrs.push_back(r.lr);
      losses.push_back(r.loss);
      grad_norms.push_back(r.grad_norm);
      if (r.batch.x.shape()[0] != B || r.batch.x.shape()[1] != T) throw Error("gpt_export: a batch of shape " + r.batch.x.shape().str());
      if (!time_only) {
        const Tensor bx = r.batch.x.contiguous_copy(), by = r.batch.y.contiguous_copy();
        const float* px = bx.data<float>();
        const std::int64_t* py = by.data<std::int64_t>();
        for (std::int64_t k = 0; k < B * T; ++k) {
          xs[static_cast<std::size_t>(s * B * T + k)] = static_cast<std::int32_t>(px[k]);
          ys[static_cast<std::size_t>(s * B * T + k)] = static_cast<std::int32_t>(py[k]);
        }
      }
    }
    if (!time_only) {
      write_npy(out + "/x.npy", "<i4", {steps, B, T}, xs.data(), xs.size() * 4);
      write_npy(out + "/y.npy", "<i4", {steps, B, T}, ys.data(), ys.size() * 4);
      write_npy(out + "/lr.npy", "<f8", {steps}, lrs.data(), lrs.size() * 8);
    }
    // the median over the steps after the first 10 (warm-up), as the other peer benchmarks, or
    // after --warmup steps (a few timed steps of a large model); at least one step is measured
    const std::ptrdiff_t nms = static_cast<std::ptrdiff_t>(ms.size());
    const std::ptrdiff_t skip = std::min<std::ptrdiff_t>(warmup >= 0 ? static_cast<std::ptrdiff_t>(warmup) : std::min<std::ptrdiff_t>(10, nms / 10), nms - 1);
    const std::vector<double> measured(ms.begin() + skip, ms.end());
    double total = 0;
    for (double v : ms) total += v;
    std::string j = "{\"framework\": \"bitgrad\", \"config\": \"" + config + "\", \"threads\": " + std::to_string(threads) +
                    ", \"isa\": \"" + isa_name(active_isa()) + "\", \"cpu\": \"" + cpu_model() + "\", \"steps\": " + std::to_string(steps) +
                    ", \"batch\": " + std::to_string(B) + ", \"block\": " + std::to_string(T) +
                    ", \"vocab\": " + std::to_string(session.train_data().num_classes()) +
                    ", \"val_windows\": " + std::to_string(test_ds->size()) +
                    ", \"n_layer\": " + std::to_string(cfg.model.gpt.n_layer) + ", \"n_head\": " + std::to_string(cfg.model.gpt.n_head) +
                    ", \"n_embd\": " + std::to_string(cfg.model.gpt.n_embd) + ", \"bias\": " + (cfg.model.gpt.bias ? "true" : "false") +
                    ", \"tie_weights\": " + (cfg.model.gpt.tie_weights ? "true" : "false") + ", \"clip_grad_norm\": " + jnum(cfg.train.clip_grad_norm) +
                    ", \"beta1\": " + jnum(cfg.optimizer.beta1) + ", \"beta2\": " + jnum(cfg.optimizer.beta2) + ", \"eps\": " + jnum(cfg.optimizer.eps) +
                    ", \"weight_decay\": " + jnum(cfg.optimizer.weight_decay) + ", \"decay_matrices_only\": " + (cfg.optimizer.decay_matrices_only ? "true" : "false") +
                    ", \"warmup\": " + std::to_string(skip) + ", \"ms_per_step_median\": " + jnum(bench::median(measured)) + ", \"train_s\": " + jnum(total / 1000.0) +
                    ", \"eval_s\": " + jnum(eval_s) + ", \"fingerprint\": \"" + session.fingerprint().hex() + "\"";
    j += ", \"val_loss\": [";
    for (std::size_t i = 0; i < evals.size(); ++i) j += (i ? ", [" : "[") + std::to_string(evals[i].first) + ", " + jnum(evals[i].second) + "]";
    j += "]";
    auto list = [&](const char* name, const std::vector<double>& v) {
      j += std::string(", \"") + name + "\": [";
      for (std::size_t i = 0; i < v.size(); ++i) j += (i ? ", " : "") + jnum(v[i]);
      j += "]";
    };
    list("train_loss", losses);
    list("grad_norm", grad_norms);
    list("lr", lrs);
    list("ms", ms);
    j += "}\n";
    io::write_file_atomic(out + "/bitgrad.json", j);
    std::printf("gpt_export: %lld steps at %d threads (%s): median %.3f ms per step; %s\n", static_cast<long long>(steps), threads,
                isa_name(active_isa()), bench::median(measured), time_only ? "timing only" : ("wrote " + out).c_str());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gpt_export: %s\n", e.what());
    return 2;
  }
  return 0;
}
