// The Store contract, run against every implementation (RocksDB in a temp
// dir, and the in-memory store): round trips of every record type, atomic
// commits, event paging, key ordering and prefix isolation, lineage through
// the store and concurrent commits. Then what only RocksDB has: reopen,
// corrupt values, the database lock.
#include "storage/store.h"

#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "common/files.h"
#include "gmock/gmock.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"
#include "rocksdb/db.h"
#include "storage/memory_store.h"
#include "storage/rocksdb_store.h"

namespace tunefarm {
namespace {

using google::protobuf::util::MessageDifferencer;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

MATCHER_P(ProtoEq, expected, "") {
  return MessageDifferencer::Equals(arg, expected);
}

v1::Sweep MakeSweep(const std::string& id) {
  v1::Sweep s;
  s.set_sweep_id(id);
  s.mutable_spec()->set_name("sweep " + id);
  s.mutable_spec()->set_operator_name("matmul");
  (*s.mutable_spec()->mutable_workload()->mutable_dims())["m"] = 1024;
  (*s.mutable_spec()->mutable_baseline_params())["tile"].set_int_value(64);
  s.set_state(v1::SWEEP_STATE_RUNNING);
  s.set_best_round(-1);
  s.set_baseline_us(123.5);
  return s;
}

v1::Round MakeRound(const std::string& sweep_id, int64_t id, int64_t parent) {
  v1::Round r;
  r.set_sweep_id(sweep_id);
  r.set_round_id(id);
  r.set_parent_round(parent);
  (*r.mutable_params())["tile"].set_int_value(32 + id);
  (*r.mutable_params())["layout"].set_string_value("nz");
  v1::ParamChange* c = r.add_changes();
  c->set_name("tile");
  c->mutable_from()->set_int_value(32);
  c->mutable_to()->set_int_value(32 + id);
  r.set_state(v1::ROUND_STATE_DONE);
  r.mutable_result()->set_outcome(v1::OUTCOME_OK);
  r.mutable_result()->mutable_measurement()->set_median_us(100.0 - id);
  r.set_decision(v1::DECISION_KEPT);
  return r;
}

v1::SweepEvent MakeEvent(const std::string& sweep_id, int64_t seq) {
  v1::SweepEvent e;
  e.set_sweep_id(sweep_id);
  e.set_seq(seq);
  e.set_kind(v1::EVENT_KIND_ROUND_FINISHED);
  e.set_message("event " + std::to_string(seq));
  return e;
}

v1::BoardInfo MakeBoard(const std::string& id) {
  v1::BoardInfo b;
  b.set_board_id(id);
  b.set_agent_id("agent-1");
  b.set_kind("sim");
  b.set_simulated(true);
  b.set_state(v1::BOARD_STATE_IDLE);
  (*b.mutable_labels())["rack"] = "r1";
  b.mutable_capabilities()->set_cube_cores(24);
  return b;
}

v1::Measurement MakeMeasurement(double median) {
  v1::Measurement m;
  m.set_median_us(median);
  m.set_p20_us(median - 1);
  m.set_p80_us(median + 1);
  m.set_samples(50);
  m.set_policy("warmup=5 samples=50");
  return m;
}

std::vector<int64_t> Seqs(const std::vector<v1::SweepEvent>& events) {
  std::vector<int64_t> out;
  for (const auto& e : events) out.push_back(e.seq());
  return out;
}

std::vector<int64_t> RoundIds(const std::vector<v1::Round>& rounds) {
  std::vector<int64_t> out;
  for (const auto& r : rounds) out.push_back(r.round_id());
  return out;
}

// One fixture for every Store: the parameter names the implementation.
class StoreContractTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (GetParam() == "memory") {
      store_ = NewMemoryStore();
      return;
    }
    absl::StatusOr<std::string> dir = MakeTempDir("storage_test_");
    ASSERT_TRUE(dir.ok()) << dir.status();
    dir_ = *dir;
    absl::StatusOr<std::unique_ptr<Store>> store =
        OpenRocksDbStore(dir_ + "/db");
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = std::move(*store);
  }
  void TearDown() override {
    store_.reset();
    if (!dir_.empty()) {
      EXPECT_TRUE(RemoveAll(dir_).ok());
    }
  }
  void MustCommit(const WriteSet& ws) {
    absl::Status s = store_->Commit(ws);
    ASSERT_TRUE(s.ok()) << s;
  }

  std::string dir_;
  std::unique_ptr<Store> store_;
};

INSTANTIATE_TEST_SUITE_P(Stores, StoreContractTest,
                         ::testing::Values("rocksdb", "memory"),
                         [](const auto& info) { return info.param; });

class StoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::string> dir = MakeTempDir("storage_test_");
    ASSERT_TRUE(dir.ok()) << dir.status();
    dir_ = *dir;
    path_ = dir_ + "/db";
    Reopen();
  }
  void TearDown() override {
    store_.reset();
    EXPECT_TRUE(RemoveAll(dir_).ok());
  }
  void Reopen() {
    store_.reset();  // closes and releases the lock first
    absl::StatusOr<std::unique_ptr<Store>> store = OpenRocksDbStore(path_);
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = std::move(*store);
  }
  void MustCommit(const WriteSet& ws) {
    absl::Status s = store_->Commit(ws);
    ASSERT_TRUE(s.ok()) << s;
  }

  std::string dir_;
  std::string path_;
  std::unique_ptr<Store> store_;
};

TEST_P(StoreContractTest, RoundTripsEveryRecordType) {
  WriteSet ws;
  ws.PutSweep(MakeSweep("s1"));
  ws.PutRound(MakeRound("s1", 0, -1));
  ws.PutBoard(MakeBoard("agent-1/b0"));
  ws.AppendEvent(MakeEvent("s1", 1));
  ws.PutMeasurement("s1", 0, 1, MakeMeasurement(90.0));
  ws.PutMeta("idem/key-1", std::string("s1\0x", 4));
  EXPECT_EQ(ws.size(), 6u);
  EXPECT_FALSE(ws.empty());
  MustCommit(ws);

  auto sweep = store_->GetSweep("s1");
  ASSERT_TRUE(sweep.ok()) << sweep.status();
  EXPECT_THAT(*sweep, ProtoEq(MakeSweep("s1")));
  auto round = store_->GetRound("s1", 0);
  ASSERT_TRUE(round.ok()) << round.status();
  EXPECT_THAT(*round, ProtoEq(MakeRound("s1", 0, -1)));
  auto boards = store_->ListBoards();
  ASSERT_TRUE(boards.ok()) << boards.status();
  EXPECT_THAT(*boards, ElementsAre(ProtoEq(MakeBoard("agent-1/b0"))));
  auto events = store_->ReadEvents("s1", 1, 0);
  ASSERT_TRUE(events.ok()) << events.status();
  EXPECT_THAT(*events, ElementsAre(ProtoEq(MakeEvent("s1", 1))));
  auto ms = store_->ListMeasurements("s1", 0);
  ASSERT_TRUE(ms.ok()) << ms.status();
  EXPECT_THAT(*ms, ElementsAre(ProtoEq(MakeMeasurement(90.0))));
  auto meta = store_->GetMeta("idem/key-1");
  ASSERT_TRUE(meta.ok()) << meta.status();
  ASSERT_TRUE(meta->has_value());
  EXPECT_EQ(**meta, std::string("s1\0x", 4));

  // Overwrite and delete.
  v1::Sweep updated = MakeSweep("s1");
  updated.set_state(v1::SWEEP_STATE_SUCCEEDED);
  WriteSet ws2;
  ws2.PutSweep(updated);
  ws2.DeleteBoard("agent-1/b0");
  ws2.PutMeta("idem/key-1", "s1");
  MustCommit(ws2);
  sweep = store_->GetSweep("s1");
  ASSERT_TRUE(sweep.ok());
  EXPECT_EQ(sweep->state(), v1::SWEEP_STATE_SUCCEEDED);
  boards = store_->ListBoards();
  ASSERT_TRUE(boards.ok());
  EXPECT_THAT(*boards, IsEmpty());
  meta = store_->GetMeta("idem/key-1");
  ASSERT_TRUE(meta.ok());
  EXPECT_EQ(meta->value_or(""), "s1");
}

TEST_P(StoreContractTest, MissingRecordsNameTheId) {
  auto sweep = store_->GetSweep("nope");
  ASSERT_FALSE(sweep.ok());
  EXPECT_EQ(sweep.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(sweep.status().message(), HasSubstr("nope"));
  auto round = store_->GetRound("nope", 7);
  ASSERT_FALSE(round.ok());
  EXPECT_EQ(round.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(round.status().message(), HasSubstr("round 7"));
  EXPECT_THAT(round.status().message(), HasSubstr("nope"));
  auto meta = store_->GetMeta("absent");
  ASSERT_TRUE(meta.ok()) << meta.status();
  EXPECT_FALSE(meta->has_value());
  auto rounds = store_->ListRounds("nope");
  ASSERT_TRUE(rounds.ok());
  EXPECT_THAT(*rounds, IsEmpty());
  EXPECT_TRUE(store_->Commit(WriteSet()).ok());  // empty commit: no-op
}

TEST_P(StoreContractTest, CommitIsAllOrNothing) {
  // All column families in one WriteSet: visible together.
  WriteSet ws;
  ws.PutSweep(MakeSweep("s1"));
  ws.PutRound(MakeRound("s1", 0, -1));
  ws.AppendEvent(MakeEvent("s1", 1));
  ws.PutBoard(MakeBoard("b"));
  ws.PutMeasurement("s1", 0, 0, MakeMeasurement(10));
  ws.PutMeta("k", "v");
  MustCommit(ws);
  EXPECT_TRUE(store_->GetSweep("s1").ok());
  EXPECT_TRUE(store_->GetRound("s1", 0).ok());
  EXPECT_EQ(store_->ReadEvents("s1", 0, 0)->size(), 1u);
  EXPECT_EQ(store_->ListBoards()->size(), 1u);
  EXPECT_EQ(store_->ListMeasurements("s1", 0)->size(), 1u);
  EXPECT_TRUE(store_->GetMeta("k")->has_value());

  // A WriteSet with one bad mutation at the end writes nothing at all.
  WriteSet bad;
  bad.PutSweep(MakeSweep("s2"));
  bad.PutRound(MakeRound("s2", 0, -1));
  bad.PutMeta("k2", "v2");
  bad.AppendEvent(MakeEvent("s2", 0));  // seq must be >= 1
  absl::Status s = store_->Commit(bad);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("seq 0"));
  EXPECT_EQ(store_->GetSweep("s2").status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(store_->GetRound("s2", 0).status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_FALSE(store_->GetMeta("k2")->has_value());
}

TEST_P(StoreContractTest, ARoundEventReadsBackAsTheEventWithItsRound) {
  // AppendEvent(event, round) writes the round in place of a copy: what is
  // read back is the event with that round set, the sweep snapshot too.
  v1::SweepEvent event = MakeEvent("s", 1);
  *event.mutable_sweep() = MakeSweep("s");
  const v1::Round round = MakeRound("s", 4, 2);
  WriteSet ws;
  ws.AppendEvent(event, round);
  MustCommit(ws);
  v1::SweepEvent expected = event;
  *expected.mutable_round() = round;
  auto events = store_->ReadEvents("s", 0, 0);
  ASSERT_TRUE(events.ok()) << events.status();
  EXPECT_THAT(*events, ElementsAre(ProtoEq(expected)));

  // An event that has a round of its own would read back as the two merged.
  WriteSet two;
  v1::SweepEvent with_round = MakeEvent("s", 2);
  *with_round.mutable_round() = round;
  two.AppendEvent(with_round, MakeRound("s", 5, 4));
  absl::Status st = store_->Commit(two);
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << st;
  EXPECT_THAT(st.message(), HasSubstr("two rounds in one event"));
  EXPECT_EQ(store_->ReadEvents("s", 0, 0)->size(), 1u);
}

TEST_P(StoreContractTest, RejectsBadIdsNamingTheField) {
  struct Case {
    WriteSet ws;
    std::string needle;
  };
  std::vector<Case> cases(6);
  cases[0].ws.PutSweep(MakeSweep(""));
  cases[0].needle = "sweep_id is empty";
  cases[1].ws.PutRound(MakeRound("s", -2, -1));
  cases[1].needle = "round_id -2";
  cases[2].ws.PutBoard(MakeBoard(""));
  cases[2].needle = "board_id is empty";
  cases[3].ws.PutMeasurement("s", 1, -1, MakeMeasurement(1));
  cases[3].needle = "epoch -1";
  cases[4].ws.PutMeta("", "v");
  cases[4].needle = "key is empty";
  cases[5].ws.DeleteBoard("");
  cases[5].needle = "board_id is empty";
  for (const Case& c : cases) {
    absl::Status s = store_->Commit(c.ws);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
    EXPECT_THAT(s.message(), HasSubstr(c.needle));
  }
  auto events = store_->ReadEvents("s", 1, -1);
  EXPECT_EQ(events.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(StoreTest, ReopenKeepsEverything) {
  WriteSet ws;
  ws.PutSweep(MakeSweep("s1"));
  for (int i = 0; i < 5; ++i) {
    ws.PutRound(MakeRound("s1", i, i - 1));
    ws.AppendEvent(MakeEvent("s1", i + 1));
    ws.PutMeasurement("s1", i, 0, MakeMeasurement(100 - i));
  }
  ws.PutBoard(MakeBoard("b1"));
  ws.PutMeta("counter", "5");
  MustCommit(ws);
  Reopen();
  Reopen();  // twice: close/open must not lose or duplicate anything

  auto sweeps = store_->ListSweeps();
  ASSERT_TRUE(sweeps.ok()) << sweeps.status();
  EXPECT_THAT(*sweeps, ElementsAre(ProtoEq(MakeSweep("s1"))));
  auto rounds = store_->ListRounds("s1");
  ASSERT_TRUE(rounds.ok()) << rounds.status();
  ASSERT_EQ(rounds->size(), 5u);
  for (int i = 0; i < 5; ++i) {
    EXPECT_THAT((*rounds)[i], ProtoEq(MakeRound("s1", i, i - 1)));
    auto ms = store_->ListMeasurements("s1", i);
    ASSERT_TRUE(ms.ok());
    EXPECT_THAT(*ms, ElementsAre(ProtoEq(MakeMeasurement(100 - i))));
  }
  EXPECT_THAT(Seqs(*store_->ReadEvents("s1", 1, 0)),
              ElementsAre(1, 2, 3, 4, 5));
  EXPECT_THAT(*store_->ListBoards(), ElementsAre(ProtoEq(MakeBoard("b1"))));
  EXPECT_EQ(store_->GetMeta("counter")->value_or(""), "5");
}

TEST_P(StoreContractTest, ReadEventsFromSeqAndLimit) {
  WriteSet ws;
  for (int seq = 1; seq <= 12; ++seq) ws.AppendEvent(MakeEvent("s", seq));
  MustCommit(ws);
  auto all = store_->ReadEvents("s", 1, 0);
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(Seqs(*all),
            (std::vector<int64_t>{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}));
  EXPECT_EQ(Seqs(*store_->ReadEvents("s", 0, 0)).size(), 12u);
  EXPECT_THAT(Seqs(*store_->ReadEvents("s", 9, 0)), ElementsAre(9, 10, 11, 12));
  EXPECT_THAT(Seqs(*store_->ReadEvents("s", 2, 3)), ElementsAre(2, 3, 4));
  EXPECT_THAT(Seqs(*store_->ReadEvents("s", 11, 5)), ElementsAre(11, 12));
  EXPECT_THAT(Seqs(*store_->ReadEvents("s", 13, 0)), IsEmpty());
  EXPECT_THAT(Seqs(*store_->ReadEvents("other", 1, 0)), IsEmpty());
}

TEST_P(StoreContractTest, KeysSortNumericallyAndSweepsAreIsolated) {
  WriteSet ws;
  // "a" is a prefix of "ab"; "a\0…" style ids must not leak either.
  for (const std::string id : {"ab", "a", "b", "a0"}) {
    ws.PutSweep(MakeSweep(id));
  }
  for (int64_t id : {10, 2, 1, 100, 0}) ws.PutRound(MakeRound("a", id, -1));
  ws.PutRound(MakeRound("ab", 3, -1));
  ws.PutRound(MakeRound("a0", 5, -1));
  ws.AppendEvent(MakeEvent("a", 2));
  ws.AppendEvent(MakeEvent("a", 10));
  ws.AppendEvent(MakeEvent("ab", 1));
  ws.PutMeasurement("a", 1, 10, MakeMeasurement(3));
  ws.PutMeasurement("a", 1, 2, MakeMeasurement(2));
  ws.PutMeasurement("a", 10, 1, MakeMeasurement(9));
  ws.PutMeasurement("ab", 1, 1, MakeMeasurement(7));
  MustCommit(ws);

  auto sweeps = store_->ListSweeps();
  ASSERT_TRUE(sweeps.ok());
  std::vector<std::string> ids;
  for (const auto& s : *sweeps) ids.push_back(s.sweep_id());
  EXPECT_THAT(ids, ElementsAre("a", "a0", "ab", "b"));

  EXPECT_THAT(RoundIds(*store_->ListRounds("a")),
              ElementsAre(0, 1, 2, 10, 100));
  EXPECT_THAT(RoundIds(*store_->ListRounds("ab")), ElementsAre(3));
  EXPECT_THAT(RoundIds(*store_->ListRounds("a0")), ElementsAre(5));
  EXPECT_THAT(RoundIds(*store_->ListRounds("b")), IsEmpty());
  EXPECT_EQ(store_->GetRound("ab", 0).status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_THAT(Seqs(*store_->ReadEvents("a", 1, 0)), ElementsAre(2, 10));
  EXPECT_THAT(Seqs(*store_->ReadEvents("ab", 1, 0)), ElementsAre(1));
  // Measurements: by epoch, and round 1 does not see round 10's.
  auto m1 = store_->ListMeasurements("a", 1);
  ASSERT_TRUE(m1.ok());
  EXPECT_THAT(*m1, ElementsAre(ProtoEq(MakeMeasurement(2)),
                               ProtoEq(MakeMeasurement(3))));
  EXPECT_THAT(*store_->ListMeasurements("ab", 1),
              ElementsAre(ProtoEq(MakeMeasurement(7))));
}

TEST_P(StoreContractTest, LineageThroughTheStore) {
  v1::Sweep sweep = MakeSweep("s");
  WriteSet ws;
  // 0 ─┬─ 1 ── 3
  //    └─ 2
  ws.PutRound(MakeRound("s", 0, -1));
  ws.PutRound(MakeRound("s", 1, 0));
  ws.PutRound(MakeRound("s", 2, 0));
  ws.PutRound(MakeRound("s", 3, 1));
  ws.PutRound(MakeRound("other", 9, 3));  // another sweep: ignored
  ws.PutSweep(sweep);                     // best_round = -1
  MustCommit(ws);

  auto kept = store_->KeptPath("s");
  ASSERT_TRUE(kept.ok()) << kept.status();
  EXPECT_THAT(*kept, IsEmpty());

  sweep.set_best_round(3);
  WriteSet ws2;
  ws2.PutSweep(sweep);
  MustCommit(ws2);
  kept = store_->KeptPath("s");
  ASSERT_TRUE(kept.ok()) << kept.status();
  EXPECT_THAT(*kept, ElementsAre(0, 1, 3));
  auto anc = store_->Ancestors("s", 3);
  ASSERT_TRUE(anc.ok()) << anc.status();
  EXPECT_THAT(*anc, ElementsAre(1, 0));
  auto kids = store_->Children("s", 0);
  ASSERT_TRUE(kids.ok()) << kids.status();
  EXPECT_THAT(*kids, ElementsAre(1, 2));
  EXPECT_THAT(*store_->Children("s", 3), IsEmpty());

  EXPECT_EQ(store_->Ancestors("s", 42).status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(store_->Children("s", 42).status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(store_->KeptPath("nope").status().code(),
            absl::StatusCode::kNotFound);
  // Round 9 of "other" names parent 3, which "other" does not have.
  auto broken = store_->Ancestors("other", 9);
  EXPECT_EQ(broken.status().code(), absl::StatusCode::kFailedPrecondition);
}

// Overwrites the value of every key in `cf` with bytes that do not parse as
// a protobuf, opening RocksDB directly (the store must be closed).
void Corrupt(const std::string& path, const std::string& cf) {
  std::vector<std::string> names;
  ASSERT_TRUE(
      rocksdb::DB::ListColumnFamilies(rocksdb::DBOptions(), path, &names).ok());
  std::vector<rocksdb::ColumnFamilyDescriptor> descriptors;
  size_t target = names.size();
  for (size_t i = 0; i < names.size(); ++i) {
    descriptors.emplace_back(names[i], rocksdb::ColumnFamilyOptions());
    if (names[i] == cf) target = i;
  }
  ASSERT_LT(target, names.size()) << "no column family " << cf;
  std::vector<rocksdb::ColumnFamilyHandle*> handles;
  rocksdb::DB* db = nullptr;
  rocksdb::Status s =
      rocksdb::DB::Open(rocksdb::DBOptions(), path, descriptors, &handles, &db);
  ASSERT_TRUE(s.ok()) << s.ToString();
  std::vector<std::string> keys;
  {
    std::unique_ptr<rocksdb::Iterator> it(
        db->NewIterator(rocksdb::ReadOptions(), handles[target]));
    for (it->SeekToFirst(); it->Valid(); it->Next()) {
      keys.push_back(it->key().ToString());
    }
  }
  EXPECT_FALSE(keys.empty()) << "nothing to corrupt in " << cf;
  // 0xff starts a field with an invalid wire type: never parses.
  const std::string garbage("\xff\xff\xff\xff garbage", 13);
  for (const std::string& key : keys) {
    ASSERT_TRUE(
        db->Put(rocksdb::WriteOptions(), handles[target], key, garbage).ok());
  }
  for (auto* h : handles) db->DestroyColumnFamilyHandle(h);
  delete db;
}

TEST_F(StoreTest, CorruptValueIsDataLossNamingCfAndKey) {
  WriteSet ws;
  ws.PutSweep(MakeSweep("s"));
  ws.PutRound(MakeRound("s", 7, -1));
  ws.AppendEvent(MakeEvent("s", 3));
  ws.PutBoard(MakeBoard("board-x"));
  ws.PutMeasurement("s", 7, 1, MakeMeasurement(5));
  MustCommit(ws);
  store_.reset();
  for (const char* cf : {"sweeps", "rounds", "events", "boards", "metrics"}) {
    Corrupt(path_, cf);
  }
  Reopen();

  auto expect_data_loss = [](const absl::Status& s, const std::string& cf,
                             const std::string& key_part) {
    EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << s;
    EXPECT_THAT(s.message(), HasSubstr("'" + cf + "'"));
    EXPECT_THAT(s.message(), HasSubstr(key_part));
  };
  expect_data_loss(store_->GetSweep("s").status(), "sweeps", "\"s\"");
  expect_data_loss(store_->ListSweeps().status(), "sweeps", "\"s\"");
  expect_data_loss(store_->GetRound("s", 7).status(), "rounds",
                   "00000000000000000007");
  expect_data_loss(store_->ListRounds("s").status(), "rounds",
                   "00000000000000000007");
  expect_data_loss(store_->ReadEvents("s", 1, 0).status(), "events",
                   "00000000000000000003");
  expect_data_loss(store_->ListBoards().status(), "boards", "board-x");
  expect_data_loss(store_->ListMeasurements("s", 7).status(), "metrics",
                   "00000000000000000001");
  expect_data_loss(store_->Ancestors("s", 7).status(), "rounds", "7");
  expect_data_loss(store_->KeptPath("s").status(), "sweeps", "s");

  // Rewriting the records heals them.
  MustCommit(ws);
  EXPECT_TRUE(store_->GetSweep("s").ok());
  EXPECT_TRUE(store_->ListRounds("s").ok());
}

TEST_F(StoreTest, SecondOpenOfAHeldDatabaseFailsClearly) {
  auto second = OpenRocksDbStore(path_);
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(second.status().message(), HasSubstr("lock"));
  EXPECT_THAT(second.status().message(), HasSubstr(path_));
  // The first store is unharmed.
  WriteSet ws;
  ws.PutMeta("still", "works");
  MustCommit(ws);
}

TEST_F(StoreTest, UnopenablePathIsAnError) {
  // A regular file where the database directory should be.
  const std::string file = dir_ + "/plain-file";
  ASSERT_TRUE(WriteFileAtomic(file, "x").ok());
  auto store = OpenRocksDbStore(file + "/db");
  ASSERT_FALSE(store.ok());
  EXPECT_THAT(store.status().message(), HasSubstr("rocksdb"));
  EXPECT_THAT(store.status().message(), HasSubstr(file));
}

TEST_P(StoreContractTest, ConcurrentCommitsAllLand) {
  constexpr int kThreads = 4;
  constexpr int kPerThread = 25;
  std::vector<std::thread> threads;
  std::vector<absl::Status> errors(kThreads);
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([this, t, &errors] {
      const std::string sweep = "s" + std::to_string(t);
      for (int i = 0; i < kPerThread; ++i) {
        WriteSet ws;
        ws.PutRound(MakeRound(sweep, i, i - 1));
        ws.AppendEvent(MakeEvent(sweep, i + 1));
        absl::Status s = store_->Commit(ws);
        if (!s.ok()) {
          errors[t] = s;
          return;
        }
        // Readers run alongside writers.
        auto rounds = store_->ListRounds(sweep);
        if (!rounds.ok() || rounds->size() != static_cast<size_t>(i + 1)) {
          errors[t] = absl::InternalError("own rounds not visible");
          return;
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  for (int t = 0; t < kThreads; ++t) {
    EXPECT_TRUE(errors[t].ok()) << errors[t];
    const std::string sweep = "s" + std::to_string(t);
    EXPECT_EQ(store_->ListRounds(sweep)->size(), size_t{kPerThread});
    EXPECT_EQ(store_->ReadEvents(sweep, 1, 0)->size(), size_t{kPerThread});
  }
}

}  // namespace
}  // namespace tunefarm

namespace tunefarm {
namespace {

TEST_P(StoreContractTest, ListRoundsFromPagesInOrder) {
  WriteSet ws;
  for (int64_t i = 0; i < 10; ++i) ws.PutRound(MakeRound("s1", i, i - 1));
  ws.PutRound(MakeRound("s10", 0, -1));  // a sweep whose id extends "s1"
  MustCommit(ws);
  auto ids = [&](int64_t from, int limit) {
    auto rounds = store_->ListRoundsFrom("s1", from, limit);
    EXPECT_TRUE(rounds.ok()) << rounds.status();
    return rounds.ok() ? RoundIds(*rounds) : std::vector<int64_t>{};
  };
  EXPECT_THAT(ids(3, 4), ElementsAre(3, 4, 5, 6));
  EXPECT_THAT(ids(8, 0), ElementsAre(8, 9));
  EXPECT_THAT(ids(-5, 2), ElementsAre(0, 1));
  EXPECT_THAT(ids(20, 5), IsEmpty());
  auto unknown = store_->ListRoundsFrom("nope", 0, 5);
  ASSERT_TRUE(unknown.ok());
  EXPECT_THAT(*unknown, IsEmpty());
  EXPECT_TRUE(
      absl::IsInvalidArgument(store_->ListRoundsFrom("s1", 0, -1).status()));
}

}  // namespace
}  // namespace tunefarm
