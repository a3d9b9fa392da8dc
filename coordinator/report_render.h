// Renderers of the tuning report. Each takes the report JSON (schema in
// docs/report.md, built by BuildReport in coordinator/report.h) and nothing
// else, so `tunefarm report --format json` and every rendered file always
// agree. Pure functions of their input; thread-safe.
//
// WriteReportFolder writes the whole folder (report.json, report.md,
// progress.svg, lineage.dot and, when Graphviz is installed, lineage.svg).
#ifndef TUNEFARM_COORDINATOR_REPORT_RENDER_H_
#define TUNEFARM_COORDINATOR_REPORT_RENDER_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace tunefarm {

// The schema this code writes and reads; a document with another
// schema_version is refused.
inline constexpr int kReportSchemaVersion = 1;

// OK when `report` has every field the renderers read, with the right
// types; otherwise INVALID_ARGUMENT naming the field
// (e.g. "report.rounds[3].decision: expected a string").
absl::Status ValidateReport(const nlohmann::json& report);

// Parses and validates report JSON text.
absl::StatusOr<nlohmann::json> ParseReport(const std::string& text);

// The Markdown report. Links the pictures named in report["pictures"] when
// it has them.
absl::StatusOr<std::string> RenderReportMarkdown(const nlohmann::json& report);

// Each round's time (baseline, kept, rolled back, failed distinguished) and
// the best-so-far step line against the round number.
absl::StatusOr<std::string> RenderProgressSvg(const nlohmann::json& report);

// The lineage tree in Graphviz DOT: the kept path highlighted, rolled-back
// leaves grey, failures red.
absl::StatusOr<std::string> RenderLineageDot(const nlohmann::json& report);

struct ReportFolderOptions {
  // The Graphviz `dot` program; "" searches $PATH. A path that does not
  // exist means "not installed".
  std::string dot_program;
};

// Writes report.json, report.md, progress.svg and lineage.dot into `dir`
// (created if missing) and renders lineage.svg with `dot` when it is
// installed. A missing or failing `dot` is not an error: the report then
// says so (report["pictures"]["lineage_note"]). Returns the report as
// written, with its "pictures" section filled in.
absl::StatusOr<nlohmann::json> WriteReportFolder(
    nlohmann::json report, const std::string& dir,
    const ReportFolderOptions& options = {});

}  // namespace tunefarm

#endif  // TUNEFARM_COORDINATOR_REPORT_RENDER_H_
