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
#include "tunefarm/v1/pipeline.pb.h"

namespace tunefarm {
namespace {

namespace fs = std::filesystem;

// Files larger than this are skipped: profiles are CSV / JSON tables, and a
// stray core dump or binary should not be read into memory.
constexpr int64_t kMaxFileBytes = int64_t{1} << 31;

absl::Status AddFiles(const std::string& root, v1::ProfileBundle& bundle) {
  std::error_code ec;
  fs::path p(root);
  if (fs::is_regular_file(p, ec)) {
    // Bounded even for a device or a pipe given as the profile.
    absl::StatusOr<std::string> text =
        ReadFileUpTo(p.string(), kMaxFileBytes, "one profile file");
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
    if (!it->is_regular_file(ec) ||
        it->file_size(ec) > static_cast<uintmax_t>(kMaxFileBytes)) {
      continue;
    }
    absl::StatusOr<std::string> text =
        ReadFileUpTo(it->path().string(), kMaxFileBytes, "one profile file");
    if (!text.ok()) return text.status();
    v1::ProfileFile* f = bundle.add_files();
    f->set_path(fs::relative(it->path(), p, ec).generic_string());
    f->set_content(*std::move(text));
  }
  if (ec) return absl::InternalError(absl::StrCat(root, ": ", ec.message()));
  return absl::OkStatus();
}

// With --output json, a failure still prints JSON on stdout (scripts parse
// stdout whatever the exit code): {"error": {"exit_code", "message",
// "evidence_gaps": [{file, reason}]}}.
void PrintJsonError(const AnalyzeOptions& options, int code,
                    const std::string& message,
                    const v1::Diagnosis* d = nullptr) {
  if (options.output != "json") return;
  v1::Diagnosis gaps;  // reuse the JSON writer for the gap list
  if (d != nullptr) *gaps.mutable_evidence_gaps() = d->evidence_gaps();
  std::string list = MessageToJsonAlways(gaps);
  size_t at = list.find("\"evidence_gaps\": ");
  std::string gaps_json = "[]";
  if (at != std::string::npos) {
    size_t start = at + 17;
    size_t end = list.find("\n  ]", start);
    gaps_json =
        end == std::string::npos ? "[]" : list.substr(start, end + 4 - start);
  }
  std::string msg;
  for (char c : message) {
    if (c == '"' || c == '\\') msg.push_back('\\');
    if (c == '\n') {
      msg += "\\n";
      continue;
    }
    msg.push_back(c);
  }
  std::cout << "{\n  \"error\": {\n    \"exit_code\": " << code
            << ",\n    \"message\": \"" << msg
            << "\",\n    \"evidence_gaps\": " << gaps_json << "\n  }\n}\n";
}

}  // namespace

int RunAnalyze(const AnalyzeOptions& options) {
  v1::ProfileBundle bundle;
  bundle.set_bundle_id(fs::path(options.profile_dir).filename().string());
  bundle.set_chip(options.chip);
  if (absl::Status st = AddFiles(options.profile_dir, bundle); !st.ok()) {
    std::cerr << "tunefarm analyze: " << st.message() << "\n";
    PrintJsonError(options, 1, std::string(st.message()));
    return 1;
  }
  v1::ProfileBundle parent;
  bool has_parent = !options.parent_dir.empty();
  if (has_parent) {
    parent.set_bundle_id(fs::path(options.parent_dir).filename().string());
    if (absl::Status st = AddFiles(options.parent_dir, parent); !st.ok()) {
      std::cerr << "tunefarm analyze: --parent: " << st.message() << "\n";
      PrintJsonError(options, 1, absl::StrCat("--parent: ", st.message()));
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
    PrintJsonError(options, 2,
                   absl::StrCat("nothing readable in ", options.profile_dir,
                                " (", bundle.files_size(), " file(s))"),
                   &d);
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
  // Every primitive field printed (0 is not "absent"), counts as numbers.
  const std::string json = MessageToJsonAlways(d);
  absl::Status st = MakeDirs(out_dir);
  if (st.ok())
    st = WriteFileAtomic(out_dir + "/perf-analysis.md", d.perf_analysis_md());
  if (st.ok()) st = WriteFileAtomic(out_dir + "/diagnosis.json", json);
  if (!st.ok()) {
    std::cerr << "tunefarm analyze: " << st.message() << "\n";
    PrintJsonError(options, 1, std::string(st.message()));
    return 1;
  }
  std::cout << (options.output == "json" ? json : d.perf_analysis_md());
  return 0;
}

}  // namespace tunefarm
