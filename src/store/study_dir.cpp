#include "store/study_dir.hpp"

#include "bitgrad/error.hpp"
#include "bitgrad/io.hpp"
#include "store/run_dir.hpp"

namespace bitgrad::store {

StudyDir StudyDir::create(const std::string& path, const std::string& kind) {
  StudyDir s(path);
  s.lock_ = std::make_shared<DirLock>(path, kind);
  const std::string what = RunDir::holds(path);
  if (!what.empty()) throw Error(kind + ": " + path + " already holds " + what + "; choose another --out");
  return s;
}

void StudyDir::write(const char* result_file, const Json& result, const std::string& manifest_json) const {
  io::make_dirs(path_);
  io::write_file_atomic(path_ + "/" + result_file, result.dump(1, ' ', false, Json::error_handler_t::replace) + "\n");
  io::write_file_atomic(path_ + "/manifest.json", manifest_json);
}

}  // namespace bitgrad::store
