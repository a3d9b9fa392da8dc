#include "agent/npu_smi.h"

#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace tunefarm {
namespace {

std::vector<std::string> Cells(absl::string_view line) {
  absl::string_view s = absl::StripAsciiWhitespace(line);
  absl::ConsumePrefix(&s, "|");
  absl::ConsumeSuffix(&s, "|");
  std::vector<std::string> out;
  for (absl::string_view c : absl::StrSplit(s, '|')) {
    out.emplace_back(absl::StripAsciiWhitespace(c));
  }
  return out;
}

// Whitespace tokens, with '/' always its own token ("54592/ 65536").
std::vector<std::string> Tokens(const std::string& cell) {
  std::string spaced = absl::StrReplaceAll(cell, {{"/", " / "}});
  return absl::StrSplit(spaced, ' ', absl::SkipEmpty());
}

bool Int(const std::string& s, int64_t* v) { return absl::SimpleAtoi(s, v); }

absl::Status RowError(int line_no, absl::string_view line,
                      absl::string_view why) {
  return absl::InvalidArgumentError(
      absl::StrCat("npu-smi info line ", line_no, ": ", why, ": \"",
                   absl::StripAsciiWhitespace(line), "\""));
}

// "<used> / <total>" starting at tokens[i]; advances i.
bool UsedTotal(const std::vector<std::string>& t, size_t* i, int64_t* used,
               int64_t* total) {
  if (*i + 2 >= t.size() || t[*i + 1] != "/") return false;
  if (!Int(t[*i], used) || !Int(t[*i + 2], total)) return false;
  *i += 3;
  return true;
}

}  // namespace

absl::StatusOr<std::vector<NpuChip>> ParseNpuSmiInfo(absl::string_view text) {
  std::vector<NpuChip> chips;
  bool in_table = false;  // past the "NPU Name | Health" header
  bool pending = false;   // first row of a chip seen, waiting for its second
  NpuChip cur;
  int line_no = 0;
  for (absl::string_view raw : absl::StrSplit(text, '\n')) {
    ++line_no;
    absl::string_view line = absl::StripAsciiWhitespace(raw);
    if (line.empty() || line[0] == '+') continue;
    if (line[0] != '|') continue;
    std::vector<std::string> cells = Cells(line);
    if (cells.empty()) continue;
    if (absl::StartsWith(cells[0], "npu-smi")) continue;
    if (absl::StartsWith(cells[0], "NPU") && cells.size() >= 2 &&
        absl::StrContains(cells[1], "Health")) {
      in_table = true;
      continue;
    }
    if (absl::StartsWith(cells[0], "Chip")) continue;  // second header row
    // The process table ends the chip table.
    if ((cells.size() >= 2 && absl::StrContains(cells[1], "Process id")) ||
        absl::StartsWith(cells[0], "No running processes")) {
      break;
    }
    if (!in_table) continue;
    if (cells.size() < 3) return RowError(line_no, line, "expected 3 cells");
    std::vector<std::string> c0 = Tokens(cells[0]);
    std::vector<std::string> c2 = Tokens(cells[2]);
    if (!pending) {
      // | <npu> <name> | <health> | <power> <temp> <hp used> / <hp total> |
      int64_t npu = 0;
      if (c0.size() < 2 || !Int(c0[0], &npu)) {
        return RowError(line_no, line, "expected \"<npu id> <name>\"");
      }
      cur = NpuChip{};
      cur.npu_id = static_cast<int>(npu);
      cur.name = c0[1];
      cur.health = cells[1];
      if (c2.size() < 2)
        return RowError(line_no, line, "expected power and temperature");
      cur.has_power =
          absl::SimpleAtod(c2[0], &cur.power_w);  // "NA" / "-" = unknown
      if (!cur.has_power) cur.power_w = 0;
      if (!absl::SimpleAtod(c2[1], &cur.temp_c)) {
        return RowError(
            line_no, line,
            absl::StrCat("temperature \"", c2[1], "\" is not a number"));
      }
      pending = true;
    } else {
      // | <chip> [<device>] | <bus-id> | <aicore%> <mem> / <total> [<hbm> /
      // <total>] |
      int64_t chip = 0, dev = 0;
      if (c0.empty() || !Int(c0[0], &chip)) {
        return RowError(line_no, line, "expected \"<chip id> [<device id>]\"");
      }
      cur.chip_id = static_cast<int>(chip);
      if (c0.size() >= 2 && Int(c0[1], &dev))
        cur.device_id = static_cast<int>(dev);
      cur.bus_id = cells[1];
      if (c2.empty() || !absl::SimpleAtod(c2[0], &cur.aicore_pct)) {
        return RowError(line_no, line, "expected AICore(%)");
      }
      size_t i = 1;
      if (!UsedTotal(c2, &i, &cur.memory_used_mb, &cur.memory_total_mb)) {
        return RowError(line_no, line, "expected \"<used> / <total>\" memory");
      }
      if (i < c2.size()) {
        if (!UsedTotal(c2, &i, &cur.hbm_used_mb, &cur.hbm_total_mb)) {
          return RowError(line_no, line, "expected \"<used> / <total>\" HBM");
        }
        cur.has_hbm = true;
      }
      chips.push_back(std::move(cur));
      pending = false;
    }
  }
  if (pending) {
    return absl::InvalidArgumentError(
        absl::StrCat("npu-smi info: NPU ", cur.npu_id,
                     " has no second (chip / bus-id) row"));
  }
  if (chips.empty()) {
    return absl::NotFoundError(
        "npu-smi info printed no chip table (no NPU rows)");
  }
  return chips;
}

AscendChipSpec AscendChipSpecFor(const std::string& chip_name) {
  std::string n = absl::AsciiStrToUpper(chip_name);
  if (absl::StartsWith(n, "ASCEND")) n = n.substr(6);
  AscendChipSpec s;
  auto a2 = [&](int aic, double mhz, std::string note) {
    s.known = true;
    s.family = "A2";
    s.cube_cores = aic;
    s.vector_cores = 2 * aic;
    s.ub_bytes = 196608;
    s.l1_bytes = 524288;
    s.l0c_bytes = 131072;
    s.l2_bytes = 201326592;
    s.hbm_gbps = 1600;
    s.cube_mhz = mhz;
    s.note = std::move(note);
  };
  if (n == "910B1") {
    a2(24, 1850, "A2A3.ini (SoC Ascend910B1): 24/48 cores, cube_freq 1850");
  } else if (n == "910B2" || n == "910B2C") {
    a2(24, 1800,
       "910B2 ini cube_freq 1800; 24 AIC confirmed by a real msprof profile");
  } else if (n == "910B3") {
    a2(20, 1800,
       "catlass AscendC910B3: 20 AIC / 40 AIV; clock 1800 assumed (A2 family)");
  } else if (n == "910B4") {
    a2(20, 1800, "inferred: 20 AIC like 910B3; HBM bandwidth unknown");
    s.hbm_gbps = 0;
  } else if (n == "910" || n == "910C" || n == "910_93" || n == "910_9391" ||
             n == "910_9392") {
    s.known = true;
    s.family = "A3";
    s.cube_cores = 24;
    s.vector_cores = 48;
    s.ub_bytes = 196608;
    s.l1_bytes = 524288;
    s.l0c_bytes = 131072;
    s.l2_bytes = 201326592;
    s.hbm_gbps = 0;
    s.cube_mhz = 1850;
    s.note =
        "A3 per die: 910PR ini 24/48, cube_freq 1850; HBM bandwidth not found";
  } else if (absl::StartsWith(n, "950") || absl::StartsWith(n, "95")) {
    const bool small = absl::StrContains(n, "957") || n == "950PR";
    s.known = true;
    s.family = "950";
    s.cube_cores = small ? 28 : 32;
    s.vector_cores = 2 * s.cube_cores;
    s.ub_bytes = 253952;
    s.l1_bytes = 524288;
    s.l0c_bytes = 262144;
    s.l2_bytes = 134217728;
    s.hbm_gbps = 1600;
    s.cube_mhz = 1650;
    s.note =
        small
            ? "950PR_957x ini: 28/56, cube_freq 1650, usable UB 248 KiB"
            : "950DT_9581 / 958x ini: 32/64, cube_freq 1650, usable UB 248 KiB";
  } else {
    s.note =
        absl::StrCat("chip \"", chip_name,
                     "\" is not in the A2/A3/950 table; no roofline figures");
    return s;
  }
  s.peak_tflops_fp16 = s.cube_cores * 4096.0 * 2.0 * s.cube_mhz * 1e6 / 1e12;
  return s;
}

v1::BoardCapabilities AscendCapabilities(const AscendChipSpec& spec) {
  v1::BoardCapabilities c;
  c.set_cube_cores(spec.cube_cores);
  c.set_vector_cores(spec.vector_cores);
  c.set_ub_bytes(spec.ub_bytes);
  c.set_memory_bandwidth_gbps(spec.hbm_gbps);
  c.set_clock_mhz(spec.cube_mhz);
  c.set_peak_tflops(spec.peak_tflops_fp16);
  auto& extra = *c.mutable_extra();
  if (!spec.family.empty()) extra["family"] = spec.family;
  if (spec.l1_bytes) extra["l1_bytes"] = absl::StrCat(spec.l1_bytes);
  if (spec.l0c_bytes) extra["l0c_bytes"] = absl::StrCat(spec.l0c_bytes);
  if (spec.l2_bytes) extra["l2_bytes"] = absl::StrCat(spec.l2_bytes);
  extra["spec_note"] = spec.note;
  return c;
}

}  // namespace tunefarm
