#include "cli/analyze_command.h"

#include <filesystem>
#include <iostream>
#include <string>
#include <system_error>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "analyzer/analyzer.h"
#include "common/files.h"
#include "google/protobuf/util/json_util.h"
#include "tunefarm/v1/pipeline.pb.h"

namespace tunefarm {
namespace {

namespace fs = std::filesystem;

// Files larger than this are skipped: profiles are CSV / JSON tables, and a
// stray core dump or binary should not be read into memory.
constexpr uintmax_t kMaxFileBytes = uintmax_t{1} << 31;

absl::Status AddFiles(const std::string& root, v1::ProfileBundle& bundle) {
  std::error_code ec;
  fs::path p(root);
  if (fs::is_regular_file(p, ec)) {
    absl::StatusOr<std::string> text = ReadFile(p.string());
    if (!text.ok()) return text.status();
    v1::ProfileFile* f = bundle.add_files();
    f->set_path(p.filename().string());
    f->set_content(*std::move(text));
    return absl::OkStatus();
  }
  if (!fs::is_directory(p, ec)) {
    return absl::NotFoundError(
        absl::StrCat(root, ": no such file or directory"));
  }
  for (fs::recursive_directory_iterator it(p, ec), end; !ec && it != end;
       it.increment(ec)) {
    if (!it->is_regular_file(ec) || it->file_size(ec) > kMaxFileBytes) continue;
    absl::StatusOr<std::string> text = ReadFile(it->path().string());
    if (!text.ok()) return text.status();
    v1::ProfileFile* f = bundle.add_files();
    f->set_path(fs::relative(it->path(), p, ec).generic_string());
    f->set_content(*std::move(text));
  }
  if (ec) return absl::InternalError(absl::StrCat(root, ": ", ec.message()));
  return absl::OkStatus();
}

}  // namespace

int RunAnalyze(const AnalyzeOptions& options) {
  v1::ProfileBundle bundle;
  bundle.set_bundle_id(fs::path(options.profile_dir).filename().string());
  bundle.set_chip(options.chip);
  if (absl::Status st = AddFiles(options.profile_dir, bundle); !st.ok()) {
    std::cerr << "tunefarm analyze: " << st.message() << "\n";
    return 1;
  }
  v1::ProfileBundle parent;
  bool has_parent = !options.parent_dir.empty();
  if (has_parent) {
    parent.set_bundle_id(fs::path(options.parent_dir).filename().string());
    if (absl::Status st = AddFiles(options.parent_dir, parent); !st.ok()) {
      std::cerr << "tunefarm analyze: --parent: " << st.message() << "\n";
      return 1;
    }
  }
  v1::Diagnosis d = Analyze(bundle, has_parent ? &parent : nullptr);
  if (d.formats_size() == 0) {
    std::cerr << "tunefarm analyze: nothing readable in " << options.profile_dir
              << " (" << bundle.files_size() << " file(s))\n";
    for (const v1::EvidenceGap& g : d.evidence_gaps()) {
      std::cerr << "  " << g.file() << ": " << g.reason() << "\n";
    }
    return 2;
  }
  std::string out_dir = options.out_dir;
  if (out_dir.empty()) {
    std::error_code ec;
    out_dir = fs::is_directory(options.profile_dir, ec)
                  ? options.profile_dir
                  : fs::path(options.profile_dir).parent_path().string();
    if (out_dir.empty()) out_dir = ".";
  }
  std::string json;
  google::protobuf::util::JsonPrintOptions jopt;
  jopt.add_whitespace = true;
  jopt.preserve_proto_field_names = true;
  if (!google::protobuf::util::MessageToJsonString(d, &json, jopt).ok()) {
    std::cerr << "tunefarm analyze: cannot render the diagnosis as JSON\n";
    return 1;
  }
  absl::Status st = MakeDirs(out_dir);
  if (st.ok())
    st = WriteFileAtomic(out_dir + "/perf-analysis.md", d.perf_analysis_md());
  if (st.ok()) st = WriteFileAtomic(out_dir + "/diagnosis.json", json);
  if (!st.ok()) {
    std::cerr << "tunefarm analyze: " << st.message() << "\n";
    return 1;
  }
  std::cout << (options.output == "json" ? json : d.perf_analysis_md());
  return 0;
}

}  // namespace tunefarm
