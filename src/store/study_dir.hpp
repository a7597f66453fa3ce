// The directory of a study (audit, sensitivity): its result file and its manifest.
//   STUDY/audit.json or STUDY/sensitivity.json, with STUDY/manifest.json
// Locked from its creation until the result is written (dir_lock.hpp); read back with
// RunDir::open, as a run is.
#pragma once

#include <memory>
#include <string>

#include "store/dir_lock.hpp"
#include "store/json_lines.hpp"

namespace bitgrad::store {

class StudyDir {
 public:
  // The directory of a new study (kind: "audit", "sensitivity"), locked: refuses one that
  // holds a run or a study.
  static StudyDir create(const std::string& path, const std::string& kind);
  const std::string& path() const { return path_; }
  // The result file (e.g. "audit.json") and the manifest.
  void write(const char* result_file, const Json& result, const std::string& manifest_json) const;

 private:
  explicit StudyDir(std::string path) : path_(std::move(path)) {}
  std::string path_;
  std::shared_ptr<DirLock> lock_;
};

}  // namespace bitgrad::store
