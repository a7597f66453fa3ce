#include "train/dist_sync.hpp"

#include <cstring>

#include "bitgrad/fingerprint.hpp"
#include "bitgrad/io.hpp"
#include "bitgrad/version.hpp"
#include "store/run_dir.hpp"

namespace bitgrad::train {
namespace {

std::string build_id() {
  std::string compiler;
#if defined(__clang__)
  compiler = std::string("Clang ") + __clang_version__;
#elif defined(__GNUC__)
  compiler = std::string("GCC ") + __VERSION__;
#endif
  return std::string("bitgrad ") + kVersion + ", commit " + git_commit() + ", numerics " + std::to_string(kNumericsVersion) + ", " + compiler;
}

std::string who(int rank, const std::vector<std::string>& hosts) {
  return "rank " + std::to_string(rank) + " (" + hosts[static_cast<std::size_t>(rank)] + ")";
}

}  // namespace

std::vector<std::string> agree_to_start(dist::Comm& comm, const StartInfo& mine) {
  store::Json j = {{"host", comm.host()}, {"error", mine.error}, {"build", build_id()}, {"config_hash", mine.config_hash}, {"stop", mine.stop}};
  j["perturb"] = mine.perturb ? std::to_string(*mine.perturb) : "";
  store::Json data = store::Json::array();
  if (mine.error.empty()) {
    try {
      for (const std::string& f : mine.data_files) data.push_back({f, io::file_hash(f)});
    } catch (const std::exception& e) {
      j["error"] = std::string("data parallel: ") + e.what();
    }
  }
  j["data"] = data;
  const std::vector<std::string> got = comm.allgather(j.dump(-1, ' ', false, store::Json::error_handler_t::replace), "the start-up check");
  comm.set_started();
  std::vector<store::Json> all;
  std::vector<std::string> hosts;
  for (const std::string& g : got) {
    all.push_back(store::Json::parse(g));
    hosts.push_back(all.back().at("host").get<std::string>());
  }
  // errors first: the lowest rank's, and those of others that say something else
  std::string err;
  int shown = 0;
  for (std::size_t r = 0; r < all.size(); ++r) {
    const std::string e = all[r].at("error").get<std::string>();
    if (e.empty()) continue;
    bool same = false;
    for (std::size_t q = 0; q < r; ++q) same = same || all[q].at("error").get<std::string>() == e;
    if (same || shown == 3) continue;
    err += (err.empty() ? "" : "; ") + (r == 0 && shown == 0 ? e : who(static_cast<int>(r), hosts) + ": " + e);
    ++shown;
  }
  if (!err.empty()) throw dist::CollectiveError(err);
  for (std::size_t r = 1; r < all.size(); ++r) {
    for (const char* key : {"build", "config_hash", "stop", "perturb", "data"}) {
      if (all[r].at(key) == all[0].at(key)) continue;
      const std::string what = std::string(key) == "build"         ? "a different build"
                               : std::string(key) == "config_hash" ? "a different configuration"
                               : std::string(key) == "stop"        ? "a different stop point (--steps / --epochs)"
                               : std::string(key) == "perturb"     ? "a different --perturb-order"
                                                                   : "different data files";
      throw dist::CollectiveError("data parallel: " + who(static_cast<int>(r), hosts) + " was started with " + what + " than rank 0 (" +
                                  all[r].at(key).dump() + " against " + all[0].at(key).dump() +
                                  "): every rank must run the same build on the same configuration and data");
    }
  }
  return hosts;
}

std::int64_t share_start_state(dist::Comm& comm, Session& session, const store::Checkpoint* ck) {
  std::string bytes;
  if (comm.root() && ck) {
    io::Metadata meta = {{"step", std::to_string(ck->info.step)},
                         {"epoch", std::to_string(ck->info.epoch)},
                         {"index", std::to_string(ck->info.index)},
                         {"optimizer_steps", std::to_string(ck->info.opt_steps)},
                         {"config_hash", ck->info.config_hash},
                         {"precision", precision_name(ck->info.precision)},
                         {"loss_scale", ck->info.dynamic_scale ? std::to_string(ck->info.loss_scale_log2) : std::string()},
                         {"loss_scale_good_steps", std::to_string(ck->info.loss_scale_good)}};
    const std::string m = io::safetensors_bytes(ck->params, meta), o = io::safetensors_bytes(ck->optimizer, meta);
    const std::uint64_t ml = m.size();
    bytes.assign(reinterpret_cast<const char*>(&ml), sizeof ml);
    bytes += m;
    bytes += o;
  }
  comm.broadcast(bytes, 0, "the start state from rank 0");
  if (bytes.empty()) return 0;
  if (comm.root()) return ck->info.step;
  std::uint64_t ml;
  std::memcpy(&ml, bytes.data(), sizeof ml);
  io::SafeTensors m = io::parse_safetensors(bytes.substr(sizeof ml, ml), "rank 0's checkpoint (parameters)");
  io::SafeTensors o = io::parse_safetensors(bytes.substr(sizeof ml + ml), "rank 0's checkpoint (optimizer)");
  store::Checkpoint c;
  auto num = [&](const char* k) { return std::stoll(o.metadata.at(k)); };
  c.info.step = num("step");
  c.info.epoch = num("epoch");
  c.info.index = num("index");
  c.info.opt_steps = num("optimizer_steps");
  c.info.config_hash = o.metadata.at("config_hash");
  c.info.precision = parse_precision(o.metadata.at("precision"));
  if (const std::string& ls = o.metadata.at("loss_scale"); !ls.empty()) {
    c.info.dynamic_scale = true;
    c.info.loss_scale_log2 = static_cast<int>(std::stoll(ls));
    c.info.loss_scale_good = num("loss_scale_good_steps");
  }
  c.params = std::move(m.tensors);
  c.optimizer = std::move(o.tensors);
  session.restore(c, "rank 0's checkpoint");
  return c.info.step;
}

void check_replicas(dist::Comm& comm, const Session& session, std::int64_t step, const std::vector<std::string>& hosts) {
  if (comm.size() == 1) return;
  std::vector<std::string> names;
  std::string mine;
  auto add = [&](const std::string& name, const Digest128& d) {
    names.push_back(name);
    mine.append(reinterpret_cast<const char*>(&d), sizeof d);
  };
  for (const auto& [n, p] : session.params()) add("parameter '" + n + "'", fingerprint(p));
  for (const auto& [n, s] : session.optimizer().state()) add("optimizer buffer '" + n + "'", fingerprint(s));
  for (const auto& [n, b] : session.model().named_buffers()) add("model buffer '" + n + "'", fingerprint(b));
  const std::int64_t pos[3] = {session.optimizer().steps(), session.loader().epoch(), session.loader().index()};
  Fingerprint f;
  f.add_bytes(pos, sizeof pos);
  add("the optimizer's step count or the loader's position", f.digest());
  const std::vector<std::string> got = comm.allgather(mine, "the replica check");
  for (std::size_t r = 1; r < got.size(); ++r) {
    if (got[r] == got[0]) continue;
    std::string what = "its state";
    if (got[r].size() == got[0].size())
      for (std::size_t i = 0; i < names.size(); ++i)
        if (std::memcmp(got[r].data() + i * sizeof(Digest128), got[0].data() + i * sizeof(Digest128), sizeof(Digest128)) != 0) {
          what = names[i];
          break;
        }
    throw dist::CollectiveError("replica check after step " + std::to_string(step) + ": " + who(static_cast<int>(r), hosts) +
                                " differs from rank 0 (" + hosts[0] + ") in " + what +
                                ": the ranks no longer hold the same model (a fault in memory, a modified binary or a bug); stopped every rank");
  }
}

void share_buffers_with_idle_ranks(dist::Comm& comm, const dist::StepLayout& layout, nn::Module& model) {
  std::vector<int> idle;
  for (int r = 0; r < comm.size(); ++r)
    if (layout.rows_of(r).size() == 0) idle.push_back(r);
  if (idle.empty()) return;
  BITGRAD_CHECK(layout.rows_of(0).size() > 0, "data parallel", "rank 0 holds no samples of a batch of ", layout.rows);
  const bool sender = comm.rank() == 0;
  const bool receiver = layout.rows_of(comm.rank()).size() == 0;
  if (!sender && !receiver) return;
  std::vector<dist::Comm::Message> sends, recvs;
  for (auto& [name, b] : model.named_buffers()) {
    BITGRAD_CHECK(b.is_contiguous(), "data parallel", "model buffer '", name, "' is not contiguous");
    char* at = nullptr;
    switch (b.dtype()) {
      case DType::f32: at = reinterpret_cast<char*>(b.mutable_data<float>()); break;
      case DType::f64: at = reinterpret_cast<char*>(b.mutable_data<double>()); break;
      case DType::i64: at = reinterpret_cast<char*>(b.mutable_data<std::int64_t>()); break;
      default: throw Error("data parallel: cannot share model buffer '" + name + "' of dtype " + dtype_name(b.dtype()));
    }
    const std::int64_t bytes = b.numel() * static_cast<std::int64_t>(dtype_size(b.dtype()));
    if (sender)
      for (int r : idle) sends.push_back({r, at, bytes});
    else
      recvs.push_back({0, at, bytes});
  }
  comm.exchange(sends, recvs, "the running statistics for the ranks without samples");
}

void fail_start(const std::string& error) {
  if (!dist::launched_by_mpirun() || dist::world_size() == 1 || dist::Comm::world().started()) throw Error(error);
  StartInfo si;
  si.error = error;
  agree_to_start(dist::Comm::world(), si);
  throw dist::CollectiveError(error);  // not reached: agree_to_start throws
}

}  // namespace bitgrad::train
