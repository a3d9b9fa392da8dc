#include <utility>

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

}  // namespace

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
