#include "store/checkpoint.hpp"

#include <dirent.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "bitgrad/io.hpp"
#include "bitgrad/version.hpp"
#include "io/format.hpp"

namespace bitgrad::store {
namespace {

std::string name_of(std::int64_t step) { return io::strprintf("step-%09lld", static_cast<long long>(step)); }

std::int64_t meta_int(const io::SafeTensors& st, const std::string& key, const std::string& file) {
  auto it = st.metadata.find(key);
  if (it == st.metadata.end()) throw Error("checkpoint: " + file + ": metadata '" + key + "' is missing");
  char* end = nullptr;
  const long long v = std::strtoll(it->second.c_str(), &end, 10);
  if (!end || *end) throw Error("checkpoint: " + file + ": metadata '" + key + "' is not an integer");
  return v;
}

}  // namespace

std::string checkpoint_name(std::int64_t step) { return name_of(step); }

void remove_checkpoint_dir(const std::string& dir) {
  if (DIR* d = ::opendir(dir.c_str())) {
    std::vector<std::string> names;
    while (dirent* e = ::readdir(d)) {
      const std::string n = e->d_name;
      if (n != "." && n != "..") names.push_back(n);
    }
    ::closedir(d);
    for (const std::string& n : names) ::unlink((dir + "/" + n).c_str());
  }
  ::rmdir(dir.c_str());
}

void save_checkpoint(const std::string& run_dir, const io::NamedTensors& params, const io::NamedTensors& optimizer,
                     const CheckpointInfo& info, int keep) {
  const std::string root = run_dir + "/checkpoints";
  io::make_dirs(root);
  const std::string name = name_of(info.step);
  const std::string tmp = root + "/.tmp-" + name + "-" + std::to_string(::getpid());
  remove_checkpoint_dir(tmp);
  io::make_dirs(tmp);
  io::Metadata meta = {{"format", "bitgrad checkpoint 1"},
                       {"bitgrad.version", kVersion},
                       {"bitgrad.numerics", std::to_string(kNumericsVersion)},
                       {"config_hash", info.config_hash},
                       {"step", std::to_string(info.step)}};
  io::save_safetensors(tmp + "/model.safetensors", params, meta);
  meta["epoch"] = std::to_string(info.epoch);
  meta["index"] = std::to_string(info.index);
  meta["optimizer_steps"] = std::to_string(info.opt_steps);
  if (info.accumulate > 0) meta["accumulate"] = std::to_string(info.accumulate);
  if (info.precision != Precision::fp32) meta["precision"] = precision_name(info.precision);
  if (info.dynamic_scale) {
    meta["loss_scale_log2"] = std::to_string(info.loss_scale_log2);
    meta["loss_scale_good_steps"] = std::to_string(info.loss_scale_good);
  }
  for (const auto& [f, bytes] : info.records) meta["records." + f] = std::to_string(bytes);
  for (const auto& [f, hex] : info.record_digests) meta["records_xxh128." + f] = hex;
  for (const auto& [f, hex] : info.input_digests) meta["inputs_xxh128." + f] = hex;
  if (info.world > 1) {  // a single process's checkpoint stays the same bytes on every machine
    meta["world_size"] = std::to_string(info.world);
    for (std::size_t r = 0; r < info.hosts.size(); ++r) meta["host." + std::to_string(r)] = info.hosts[r];
  }
  io::save_safetensors(tmp + "/optimizer.safetensors", optimizer, meta);
  const std::string final_dir = root + "/" + name;
  remove_checkpoint_dir(final_dir);
  if (std::rename(tmp.c_str(), final_dir.c_str()) != 0) throw Error("checkpoint: cannot move " + tmp + " to " + final_dir);
  io::write_file_atomic(root + "/latest", name + "\n");
  // keep the newest `keep`
  std::vector<std::string> names;
  if (DIR* d = ::opendir(root.c_str())) {
    while (dirent* e = ::readdir(d)) {
      const std::string n = e->d_name;
      if (n.rfind("step-", 0) == 0) names.push_back(n);
    }
    ::closedir(d);
  }
  std::sort(names.begin(), names.end());
  // the initial state (step 0) stays: `bitgrad diff` replays from it
  for (std::size_t i = 0; i + static_cast<std::size_t>(keep) < names.size(); ++i)
    if (names[i] != name_of(0)) remove_checkpoint_dir(root + "/" + names[i]);
}

std::vector<std::int64_t> list_checkpoints(const std::string& run_dir) {
  std::vector<std::int64_t> steps;
  if (DIR* d = ::opendir((run_dir + "/checkpoints").c_str())) {
    while (dirent* e = ::readdir(d)) {
      const std::string n = e->d_name;
      if (n.rfind("step-", 0) == 0) steps.push_back(std::atoll(n.c_str() + 5));
    }
    ::closedir(d);
  }
  std::sort(steps.begin(), steps.end());
  return steps;
}

Checkpoint load_latest_checkpoint(const std::string& run_dir) {
  const std::string root = run_dir + "/checkpoints";
  const std::string latest = root + "/latest";
  if (!io::exists(latest)) throw NotFoundError("checkpoint: " + latest + " does not exist: " + run_dir + " holds no checkpoint to resume from");
  std::string name = io::read_file(latest);
  while (!name.empty() && (name.back() == '\n' || name.back() == ' ')) name.pop_back();
  if (name.rfind("step-", 0) != 0 || name.find('/') != std::string::npos)
    throw Error("checkpoint: " + latest + " does not name a checkpoint ('" + printable_excerpt(name) + "')");
  return load_checkpoint(run_dir, name);
}

Checkpoint load_checkpoint(const std::string& run_dir, const std::string& name) {
  const std::string root = run_dir + "/checkpoints";
  Checkpoint c;
  c.name = name;
  const std::string mf = root + "/" + name + "/model.safetensors", of = root + "/" + name + "/optimizer.safetensors";
  io::SafeTensors m = io::load_safetensors(mf);
  io::SafeTensors o = io::load_safetensors(of);
  for (const io::SafeTensors* s : {&m, &o}) {
    const std::string& f = s == &m ? mf : of;
    auto fmt = s->metadata.find("format");
    if (fmt == s->metadata.end() || fmt->second != "bitgrad checkpoint 1") throw Error("checkpoint: " + f + " is not a bitgrad checkpoint");
    auto num = s->metadata.find("bitgrad.numerics");
    if (num == s->metadata.end() || num->second != std::to_string(kNumericsVersion))
      throw Error("checkpoint: " + f + " was written with numerics version " + (num == s->metadata.end() ? "?" : num->second) +
                  "; this build is numerics " + std::to_string(kNumericsVersion) + " and cannot continue it bit for bit");
  }
  c.info.step = meta_int(o, "step", of);
  c.info.epoch = meta_int(o, "epoch", of);
  c.info.index = meta_int(o, "index", of);
  c.info.opt_steps = meta_int(o, "optimizer_steps", of);
  c.info.config_hash = o.metadata.at("config_hash");
  if (o.metadata.count("accumulate")) c.info.accumulate = meta_int(o, "accumulate", of);
  if (o.metadata.count("precision")) {
    try {
      c.info.precision = parse_precision(o.metadata.at("precision"));
    } catch (const Error& e) {
      throw Error("checkpoint: " + of + ": " + e.what());
    }
  }
  if (o.metadata.count("loss_scale_log2")) {
    c.info.dynamic_scale = true;
    c.info.loss_scale_log2 = static_cast<int>(meta_int(o, "loss_scale_log2", of));
    c.info.loss_scale_good = meta_int(o, "loss_scale_good_steps", of);
  }
  if (o.metadata.count("world_size")) c.info.world = static_cast<int>(meta_int(o, "world_size", of));
  for (int r = 0; r < c.info.world && o.metadata.count("host." + std::to_string(r)); ++r) c.info.hosts.push_back(o.metadata.at("host." + std::to_string(r)));
  for (const auto& [k, v] : o.metadata)
    if (k.rfind("records.", 0) == 0) c.info.records[k.substr(8)] = meta_int(o, k, of);
    else if (k.rfind("records_xxh128.", 0) == 0) c.info.record_digests[k.substr(15)] = v;
    else if (k.rfind("inputs_xxh128.", 0) == 0) c.info.input_digests[k.substr(14)] = v;
  if (meta_int(m, "step", mf) != c.info.step || m.metadata.at("config_hash") != c.info.config_hash)
    throw Error("checkpoint: " + mf + " and " + of + " belong to different checkpoints");
  c.params = std::move(m.tensors);
  c.optimizer = std::move(o.tensors);
  return c;
}

}  // namespace bitgrad::store
