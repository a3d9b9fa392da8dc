// Paging of the list RPCs over real gRPC on loopback: every round of a
// 5,000-round sweep comes back exactly once and in order, page by page
// (small pages, the default, and pages cut short by size when diagnoses
// are included), and `tunefarm rounds` (FarmClient) prints each once. The
// same for sweeps, boards and teams; a token the server did not make is
// INVALID_ARGUMENT.
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "cli/farm_client.h"
#include "common/clock.h"
#include "gtest/gtest.h"
#include "ops/catalog.h"
#include "tests/coordinator/coordinator_harness.h"

namespace tunefarm {
namespace {

constexpr int kRounds = 5000;
constexpr char kSweepId[] = "sw-000001";

class PagingTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(disk_.MakeDir("paging_test").ok());
    ASSERT_TRUE(disk_.Open(&catalog_, &clock_, options_).ok());
    ASSERT_TRUE(
        services_.Start(disk_.coordinator(), disk_.store(), nullptr).ok());
  }

  // A finished sweep of kRounds rounds written straight into the store (a
  // real sweep that long takes minutes); the kept path is every 10th round.
  void WriteLongSweep(size_t diagnosis_bytes = 0) {
    WriteSet ws;
    v1::Sweep sweep;
    sweep.set_sweep_id(kSweepId);
    sweep.mutable_spec()->set_name("long");
    sweep.mutable_spec()->set_team("qa");
    sweep.set_state(v1::SWEEP_STATE_SUCCEEDED);
    int64_t best = 0;
    for (int i = 0; i < kRounds; ++i) {
      v1::Round r;
      r.set_sweep_id(kSweepId);
      r.set_round_id(i);
      r.set_parent_round(i == 0 ? -1 : (i - 1) / 10 * 10);
      r.set_state(v1::ROUND_STATE_DONE);
      r.mutable_result()->set_outcome(v1::OUTCOME_OK);
      r.mutable_result()->mutable_measurement()->set_median_us(1000 - i * 0.1);
      r.mutable_result()->mutable_measurement()->set_samples(5);
      if (i % 10 == 0) best = i;
      if (i == 7) r.set_rationale("exploration: a uniform untried draw");
      if (i == 8) {
        r.set_decision_reason("waiting to be judged: needs round 0's result");
      } else {
        r.set_decision(i == 0 ? v1::DECISION_BASELINE : v1::DECISION_KEPT);
      }
      if (diagnosis_bytes > 0) {
        r.mutable_diagnosis()->set_perf_analysis_md(
            std::string(diagnosis_bytes, 'd'));
      }
      ws.PutRound(r);
    }
    sweep.set_best_round(best);
    ws.PutSweep(sweep);
    ASSERT_TRUE(disk_.store()->Commit(ws).ok());
  }

  // Every page of ListRounds with `limit`; fails the test on an error.
  std::vector<v1::ListRoundsResponse> AllRoundPages(int limit,
                                                    bool diagnosis = false) {
    std::vector<v1::ListRoundsResponse> pages;
    std::string token;
    do {
      v1::ListRoundsRequest request;
      request.set_sweep_id(kSweepId);
      request.set_limit(limit);
      request.set_page_token(token);
      request.set_include_diagnosis(diagnosis);
      v1::ListRoundsResponse page;
      grpc::Status st = services_.farm()->ListRounds(
          LoopbackServices::As("").get(), request, &page);
      EXPECT_TRUE(st.ok()) << st.error_code() << ": " << st.error_message();
      if (!st.ok() || pages.size() > 2 * kRounds) break;
      token = page.next_page_token();
      pages.push_back(std::move(page));
    } while (!token.empty());
    return pages;
  }

  static void ExpectEveryRoundOnce(
      const std::vector<v1::ListRoundsResponse>& pages) {
    std::vector<int64_t> ids;
    for (const auto& page : pages) {
      for (const v1::Round& r : page.rounds()) ids.push_back(r.round_id());
    }
    ASSERT_EQ(ids.size(), static_cast<size_t>(kRounds));
    for (int i = 0; i < kRounds; ++i) {
      ASSERT_EQ(ids[i], i) << "rounds out of order or repeated";
    }
  }

  OperatorCatalog catalog_;
  FakeClock clock_;
  CoordinatorOptions options_;
  CoordinatorOnDisk disk_;
  LoopbackServices services_;
};

TEST_F(PagingTest, SmallPagesReturnEveryRoundOnce) {
  WriteLongSweep();
  std::vector<v1::ListRoundsResponse> pages = AllRoundPages(7);
  EXPECT_EQ(pages.size(), static_cast<size_t>((kRounds + 6) / 7));
  ExpectEveryRoundOnce(pages);
  ASSERT_FALSE(pages.empty());
  EXPECT_EQ(pages[0].kept_path_size(), kRounds / 10);
  for (size_t i = 1; i < pages.size(); ++i) {
    EXPECT_EQ(pages[i].kept_path_size(), 0) << "page " << i;
  }
}

TEST_F(PagingTest, DefaultPagesReturnEveryRoundOnce) {
  WriteLongSweep();
  std::vector<v1::ListRoundsResponse> pages = AllRoundPages(0);
  EXPECT_GT(pages.size(), 1u) << "5,000 rounds in one page";
  ExpectEveryRoundOnce(pages);
}

TEST_F(PagingTest, LargeRoundsArePagedBySizeUnderTheMessageLimit) {
  WriteLongSweep(/*diagnosis_bytes=*/20000);  // ~100 MB in all
  std::vector<v1::ListRoundsResponse> pages = AllRoundPages(1000, true);
  ExpectEveryRoundOnce(pages);
  for (const auto& page : pages) {
    EXPECT_LT(page.ByteSizeLong(), size_t{4} << 20);  // gRPC's default
  }
}

TEST_F(PagingTest, ForeignPageTokenIsInvalidArgument) {
  WriteLongSweep();
  for (const char* token : {"garbage", "-4", "r12x"}) {
    v1::ListRoundsRequest request;
    request.set_sweep_id(kSweepId);
    request.set_page_token(token);
    v1::ListRoundsResponse page;
    grpc::Status st = services_.farm()->ListRounds(
        LoopbackServices::As("").get(), request, &page);
    EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << token;
    EXPECT_NE(st.error_message().find("page_token"), std::string::npos)
        << st.error_message();
  }
  v1::ListRoundsRequest negative;
  negative.set_sweep_id(kSweepId);
  negative.set_limit(-1);
  v1::ListRoundsResponse page;
  EXPECT_EQ(services_.farm()
                ->ListRounds(LoopbackServices::As("").get(), negative, &page)
                .error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
}

TEST_F(PagingTest, TunefarmRoundsPrintsEveryRoundOnce) {
  WriteLongSweep();
  CliContext ctx;
  ctx.coordinator = absl::StrCat("127.0.0.1:", services_.port());
  FarmClient client(ctx);
  ::testing::internal::CaptureStdout();
  const int rc = client.Rounds(kSweepId);
  const std::string out = ::testing::internal::GetCapturedStdout();
  ASSERT_EQ(rc, kExitOk);
  std::map<int64_t, int> seen;
  for (absl::string_view line : absl::StrSplit(out, '\n')) {
    std::vector<absl::string_view> fields =
        absl::StrSplit(line, ' ', absl::SkipEmpty());
    int64_t id = 0;
    if (fields.size() > 2 && absl::SimpleAtoi(fields[0], &id)) ++seen[id];
  }
  ASSERT_EQ(seen.size(), static_cast<size_t>(kRounds));
  for (const auto& [id, n] : seen) {
    ASSERT_EQ(n, 1) << "round " << id << " printed " << n << " times";
  }
  EXPECT_NE(out.find("kept path: 0 10 20"), std::string::npos);
  // A round's rationale and an undecided round's reason, each under it.
  EXPECT_NE(out.find("\n      why: exploration: a uniform untried draw\n"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find(" pending "), std::string::npos) << out;
  EXPECT_NE(out.find("\n      waiting to be judged: needs round 0's result\n"),
            std::string::npos)
      << out;
}

TEST_F(PagingTest, SweepsBoardsAndTeamsPage) {
  constexpr int kSweeps = 250;
  WriteSet ws;
  for (int i = 1; i <= kSweeps; ++i) {
    v1::Sweep s;
    s.set_sweep_id(absl::StrFormat("sw-%06d", i));
    s.mutable_spec()->set_team(absl::StrCat("team", i % 3));
    s.set_state(v1::SWEEP_STATE_SUCCEEDED);
    ws.PutSweep(s);
  }
  ASSERT_TRUE(disk_.store()->Commit(ws).ok());
  std::vector<std::string> ids;
  std::string token;
  int pages = 0;
  do {
    v1::ListSweepsRequest request;
    request.set_limit(100);
    request.set_page_token(token);
    v1::ListSweepsResponse page;
    grpc::Status st = services_.farm()->ListSweeps(
        LoopbackServices::As("").get(), request, &page);
    ASSERT_TRUE(st.ok()) << st.error_message();
    for (const v1::Sweep& s : page.sweeps()) ids.push_back(s.sweep_id());
    token = page.next_page_token();
    ASSERT_LT(++pages, 10);
  } while (!token.empty());
  EXPECT_EQ(pages, 3);
  ASSERT_EQ(ids.size(), static_cast<size_t>(kSweeps));
  for (int i = 0; i < kSweeps; ++i) {
    EXPECT_EQ(ids[i], absl::StrFormat("sw-%06d", kSweeps - i));  // newest
  }

  constexpr int kBoards = 1200;
  v1::RegisterAgentRequest reg;
  reg.set_agent_id("a1");
  for (int i = 0; i < kBoards; ++i) {
    v1::BoardInfo* b = reg.add_boards();
    b->set_board_id(absl::StrFormat("a1/b%05d", i));
    b->set_kind("sim");
  }
  ASSERT_TRUE(disk_.coordinator()->RegisterAgent(reg).ok());
  std::set<std::string> boards;
  token.clear();
  pages = 0;
  do {
    v1::ListBoardsRequest request;
    request.set_page_token(token);
    v1::ListBoardsResponse page;
    grpc::Status st = services_.farm()->ListBoards(
        LoopbackServices::As("").get(), request, &page);
    ASSERT_TRUE(st.ok()) << st.error_message();
    for (const v1::BoardInfo& b : page.boards()) {
      EXPECT_TRUE(boards.insert(b.board_id()).second) << b.board_id();
    }
    token = page.next_page_token();
    ASSERT_LT(++pages, 10);
  } while (!token.empty());
  EXPECT_EQ(boards.size(), static_cast<size_t>(kBoards));
  EXPECT_EQ(pages, 3);  // 500 a page by default

  for (int t = 0; t < 5; ++t) {
    v1::TeamQuota q;
    q.set_team(absl::StrCat("quota-team-", t));
    q.set_weight(1);
    ASSERT_TRUE(disk_.coordinator()->SetTeamQuota(q).ok());
  }
  std::set<std::string> teams;
  token.clear();
  pages = 0;
  do {
    v1::ListTeamsRequest request;
    request.set_limit(2);
    request.set_page_token(token);
    v1::ListTeamsResponse page;
    grpc::Status st = services_.farm()->ListTeams(
        LoopbackServices::As("").get(), request, &page);
    ASSERT_TRUE(st.ok()) << st.error_message();
    for (const v1::TeamUsage& u : page.teams()) {
      EXPECT_TRUE(teams.insert(u.quota().team()).second) << u.quota().team();
    }
    token = page.next_page_token();
    ASSERT_LT(++pages, 10);
  } while (!token.empty());
  EXPECT_EQ(teams.size(), 5u);
}

}  // namespace
}  // namespace tunefarm
