#include <climits>
#include <cstdint>
#include <iterator>
#include <utility>

#include "absl/strings/str_cat.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"
#include "storage/store.h"

namespace tunefarm {
namespace {

WriteSet::Mutation Serialized(WriteSet::Mutation::Kind kind, std::string id,
                              int64_t a, int64_t b,
                              const google::protobuf::MessageLite& msg) {
  WriteSet::Mutation m;
  m.kind = kind;
  m.id = std::move(id);
  m.a = a;
  m.b = b;
  // Serializing only fails for messages over 2 GiB; Commit reports it.
  m.serialize_failed = !msg.SerializeToString(&m.value);
  return m;
}

absl::Status ValidateMutation(const WriteSet::Mutation& m) {
  using Kind = WriteSet::Mutation::Kind;
  if (m.serialize_failed) {
    return absl::InvalidArgumentError(absl::StrCat(
        "commit: a record for '", m.id,
        "' could not be serialized (over 2 GiB, or two rounds in one event)"));
  }
  auto bad = [](absl::string_view what) {
    return absl::InvalidArgumentError(absl::StrCat("commit: ", what));
  };
  switch (m.kind) {
    case Kind::kPutSweep:
      if (m.id.empty()) return bad("PutSweep: sweep_id is empty");
      break;
    case Kind::kPutRound:
      if (m.id.empty()) return bad("PutRound: sweep_id is empty");
      if (m.a < 0) {
        return bad(absl::StrCat("PutRound: round_id ", m.a, " of sweep '", m.id,
                                "' is negative"));
      }
      break;
    case Kind::kPutBoard:
      if (m.id.empty()) return bad("PutBoard: board_id is empty");
      break;
    case Kind::kDeleteBoard:
      if (m.id.empty()) return bad("DeleteBoard: board_id is empty");
      break;
    case Kind::kAppendEvent:
      if (m.id.empty()) return bad("AppendEvent: sweep_id is empty");
      if (m.a < 1) {
        return bad(absl::StrCat("AppendEvent: seq ", m.a, " of sweep '", m.id,
                                "' must be >= 1"));
      }
      break;
    case Kind::kPutMeasurement:
      if (m.id.empty()) return bad("PutMeasurement: sweep_id is empty");
      if (m.a < 0 || m.b < 0) {
        return bad(absl::StrCat("PutMeasurement: round_id ", m.a, " and epoch ",
                                m.b, " of sweep '", m.id, "' must be >= 0"));
      }
      break;
    case Kind::kPutMeta:
      if (m.id.empty()) return bad("PutMeta: key is empty");
      break;
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status WriteSet::Validate() const {
  for (const Mutation& m : mutations_) {
    if (absl::Status st = ValidateMutation(m); !st.ok()) return st;
  }
  return absl::OkStatus();
}

void WriteSet::Append(const WriteSet& other) {
  mutations_.insert(mutations_.end(), other.mutations_.begin(),
                    other.mutations_.end());
}

void WriteSet::Append(WriteSet&& other) {
  mutations_.insert(mutations_.end(),
                    std::make_move_iterator(other.mutations_.begin()),
                    std::make_move_iterator(other.mutations_.end()));
  other.mutations_.clear();
}

void WriteSet::PutSweep(const v1::Sweep& sweep) {
  mutations_.push_back(
      Serialized(Mutation::Kind::kPutSweep, sweep.sweep_id(), 0, 0, sweep));
}

void WriteSet::PutRound(const v1::Round& round) {
  mutations_.push_back(Serialized(Mutation::Kind::kPutRound, round.sweep_id(),
                                  round.round_id(), 0, round));
}

void WriteSet::PutBoard(const v1::BoardInfo& board) {
  mutations_.push_back(
      Serialized(Mutation::Kind::kPutBoard, board.board_id(), 0, 0, board));
}

void WriteSet::DeleteBoard(const std::string& board_id) {
  Mutation m;
  m.kind = Mutation::Kind::kDeleteBoard;
  m.id = board_id;
  mutations_.push_back(std::move(m));
}

void WriteSet::AppendEvent(const v1::SweepEvent& event) {
  mutations_.push_back(Serialized(Mutation::Kind::kAppendEvent,
                                  event.sweep_id(), event.seq(), 0, event));
}

void WriteSet::AppendEvent(const v1::SweepEvent& event,
                           const v1::Round& round) {
  Mutation m = Serialized(Mutation::Kind::kAppendEvent, event.sweep_id(),
                          event.seq(), 0, event);
  // A message's fields may come in any order on the wire: the round goes
  // after the rest, as a length-delimited field 6.
  const size_t size = round.ByteSizeLong();
  if (event.has_round() || size > INT32_MAX) {
    m.serialize_failed = true;
  } else if (!m.serialize_failed) {
    google::protobuf::io::StringOutputStream stream(&m.value);
    google::protobuf::io::CodedOutputStream out(&stream);
    out.WriteTag(static_cast<uint32_t>(v1::SweepEvent::kRoundFieldNumber) << 3 |
                 2);  // wire type 2: length-delimited
    out.WriteVarint32(static_cast<uint32_t>(size));
    round.SerializeWithCachedSizes(&out);
    m.serialize_failed = out.HadError();
  }
  mutations_.push_back(std::move(m));
}

void WriteSet::PutMeasurement(const std::string& sweep_id, int64_t round_id,
                              int64_t epoch, const v1::Measurement& m) {
  mutations_.push_back(Serialized(Mutation::Kind::kPutMeasurement, sweep_id,
                                  round_id, epoch, m));
}

void WriteSet::PutMeta(const std::string& key, const std::string& value) {
  Mutation m;
  m.kind = Mutation::Kind::kPutMeta;
  m.id = key;
  m.value = value;
  mutations_.push_back(std::move(m));
}

}  // namespace tunefarm
