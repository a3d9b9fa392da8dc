// Identity, authorisation, quotas and fair share, through the real gRPC
// services on loopback (port 0) over the real Coordinator and RocksDB.
// Every call is tried as nobody, with a bad token, as the wrong team and as
// the wrong role.
#include "coordinator/auth.h"

#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/clock.h"
#include "common/files.h"
#include "common/grpc_client.h"
#include "common/subprocess.h"
#include "coordinator/control_loop.h"
#include "coordinator/coordinator.h"
#include "coordinator/policy.h"
#include "coordinator/prometheus_metrics.h"
#include "coordinator/service.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "ops/catalog.h"
#include "prometheus/registry.h"
#include "prometheus/text_serializer.h"
#include "storage/store.h"
#include "tests/coordinator/coordinator_harness.h"

namespace tunefarm {
namespace {

constexpr char kTokens[] = R"(
tokens:
  - {name: alice, team: alpha, role: user, token: "alpha-token-0123456789"}
  - {name: bob, team: beta, role: user, token: "beta-token-0123456789ab"}
  - {name: ops, role: admin, token: "admin-token-0123456789a"}
  - {name: rack1, role: agent, token: "agent-token-0123456789a"}
)";
constexpr char kAlpha[] = "alpha-token-0123456789";
constexpr char kBeta[] = "beta-token-0123456789ab";
constexpr char kAdmin[] = "admin-token-0123456789a";
constexpr char kAgent[] = "agent-token-0123456789a";

std::string Spec(const std::string& team, int max_rounds = 50) {
  return absl::StrCat(R"(
name: auth-test
team: )",
                      team, R"(
operator: sim_matmul
workload: square_2k
goal: {speedup: 1000}
strategy: {name: random, seed: 5}
budget: {max_rounds: )",
                      max_rounds, R"(, max_rounds_without_gain: 100000}
boards: {kind: sim}
)");
}

TEST(TokenTableTest, ParsesAndRefusesBadEntriesNamingThem) {
  auto t = TokenTable::Parse(kTokens, "tokens.yaml");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->size(), 4u);
  auto alice = t->FromAuthorizationHeader(absl::StrCat("Bearer ", kAlpha));
  ASSERT_TRUE(alice.ok());
  EXPECT_EQ(alice->team, "alpha");
  EXPECT_EQ(t->Lookup("nope-nope-nope-nope").status().code(),
            absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(t->FromAuthorizationHeader("Basic abc").status().code(),
            absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(t->FromAuthorizationHeader("").status().code(),
            absl::StatusCode::kUnauthenticated);

  struct Bad {
    const char* yaml;
    const char* names;
  } bad[] = {
      {"tokens:\n  - {name: a, team: t, token: short}\n", "tokens[0].token"},
      {"tokens:\n  - {name: a, role: user, token: 0123456789abcdef}\n",
       "tokens[0].team"},
      {"tokens:\n  - {name: a, role: root, token: 0123456789abcdef}\n",
       "tokens[0].role"},
      {"tokens:\n  - {name: a, role: admin, token: 0123456789abcdef}\n"
       "  - {name: b, role: admin, token: 0123456789abcdef}\n",
       "tokens[1].token"},
      {"tokens:\n  - {name: a, role: admin, tokn: 0123456789abcdef}\n",
       "unknown key 'tokn'"},
      {"[1, 2", "not valid YAML"},
  };
  for (const Bad& b : bad) {
    auto r = TokenTable::Parse(b.yaml, "t.yaml");
    ASSERT_FALSE(r.ok()) << b.yaml;
    EXPECT_NE(std::string(r.status().message()).find(b.names),
              std::string::npos)
        << r.status();
  }
}

TEST(TeamPolicyTest, ParsesQuotasAndNamesBadFields) {
  auto p = ParseTeamPolicy(
      "default: {weight: 1, max_active_sweeps: 5}\n"
      "teams:\n  alpha: {weight: 3, max_boards: 2}\n",
      "policy.yaml");
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->default_quota.max_active_sweeps(), 5);
  EXPECT_EQ(p->teams.at("alpha").weight(), 3);
  EXPECT_EQ(p->teams.at("alpha").max_boards(), 2);
  auto bad = ParseTeamPolicy("teams:\n  alpha: {weight: -1}\n", "p.yaml");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(std::string(bad.status().message()).find("teams.alpha.weight"),
            std::string::npos);
  EXPECT_FALSE(ParseTeamPolicy("teams:\n  a: {max_boardz: 1}\n", "p").ok());
}

// /metrics has no authentication: team names and per-team counts appear
// only when the operator opts in (--metrics_team_labels).
TEST(MetricsTeamLabelsTest, TeamNamesOnlyWhenOptedIn) {
  auto scrape = [](bool team_labels) {
    prometheus::Registry registry;
    std::unique_ptr<FarmMetrics> m =
        NewPrometheusFarmMetrics(registry, team_labels);
    m->TeamRound("secret-team-alpha", "OUTCOME_OK", 2.5);
    m->TeamRound("secret-team-beta", "OUTCOME_PRECISION_FAILED", 1.0);
    return prometheus::TextSerializer().Serialize(registry.Collect());
  };
  const std::string hidden = scrape(false);
  EXPECT_EQ(hidden.find("secret-team"), std::string::npos) << hidden;
  // The farm-wide totals are still there.
  EXPECT_NE(hidden.find("tunefarm_team_board_seconds_total"),
            std::string::npos);
  EXPECT_NE(hidden.find("3.5"), std::string::npos) << hidden;
  const std::string shown = scrape(true);
  EXPECT_NE(shown.find("team=\"secret-team-alpha\""), std::string::npos)
      << shown;
}

// Each board's series say the state SetBoardStates last gave it, one 1
// among 0s, whether a call names every board or only those that moved.
TEST(MetricsBoardStatesTest, EachBoardsSeriesFollowItsState) {
  prometheus::Registry registry;
  std::unique_ptr<FarmMetrics> m = NewPrometheusFarmMetrics(registry, false);
  v1::BoardInfo a;
  a.set_board_id("n/0");
  a.set_node("n");
  a.set_chip("c");
  a.set_state(v1::BOARD_STATE_IDLE);
  v1::BoardInfo b = a;
  b.set_board_id("n/1");
  // The value of a board's series for `state` in a scrape; -1 when absent.
  auto value = [&](const std::string& board, const std::string& state) {
    const std::string text =
        prometheus::TextSerializer().Serialize(registry.Collect());
    const std::string series =
        absl::StrCat("tunefarm_board_state{board=\"", board,
                     "\",chip=\"c\",node=\"n\",state=\"", state, "\"} ");
    const size_t at = text.find(series);
    if (at == std::string::npos) return -1.0;
    return std::stod(text.substr(at + series.size()));
  };
  // The board's series for `state` says 1, the other four 0.
  auto only = [&](const std::string& board, const std::string& state) {
    for (const char* s : {"idle", "busy", "lost", "quarantined", "draining"}) {
      EXPECT_EQ(value(board, s), s == state ? 1 : 0) << board << " " << s;
    }
  };
  m->SetBoardStates({a, b});
  only("n/0", "idle");
  only("n/1", "idle");
  b.set_state(v1::BOARD_STATE_BUSY);
  m->SetBoardStates({a, b});
  only("n/0", "idle");
  only("n/1", "busy");
  m->SetBoardStates({a, b});  // unchanged: still right
  only("n/1", "busy");
  a.set_state(v1::BOARD_STATE_LOST);
  m->SetBoardStates({a});  // only the one that moved
  only("n/0", "lost");
  only("n/1", "busy");
}

class AuthServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto catalog = OperatorCatalog::LoadFromDirs({TUNEFARM_SOURCE_DIR "/ops"});
    ASSERT_TRUE(catalog.ok()) << catalog.status();
    catalog_ = std::make_unique<OperatorCatalog>(std::move(*catalog));
    auto tokens = TokenTable::Parse(kTokens, "tokens.yaml");
    ASSERT_TRUE(tokens.ok());
    tokens_ = std::make_unique<TokenTable>(std::move(*tokens));
    CoordinatorOptions o;
    o.lease_duration = absl::Hours(1);
    o.agent_timeout = absl::Hours(1);
    o.default_quota.set_weight(1);
    o.team_quotas["beta"].set_team("beta");
    o.team_quotas["beta"].set_weight(3);
    ASSERT_TRUE(disk_.MakeDir("auth_test").ok());
    absl::Status st = disk_.Open(catalog_.get(), &clock_, o);
    ASSERT_TRUE(st.ok()) << st;
    st = services_.Start(disk_.coordinator(), disk_.store(), tokens_.get());
    ASSERT_TRUE(st.ok()) << st;
  }

  static std::unique_ptr<grpc::ClientContext> As(const std::string& token) {
    return LoopbackServices::As(token);
  }
  Coordinator* coordinator() { return disk_.coordinator(); }
  Store* store() { return disk_.store(); }
  v1::TuneFarm::Stub* farm() { return services_.farm(); }
  v1::AgentService::Stub* agent() { return services_.agent(); }

  grpc::Status Submit(const std::string& token, const std::string& team,
                      std::string* id = nullptr, int max_rounds = 50) {
    v1::SubmitSweepRequest req;
    req.set_spec_yaml(Spec(team, max_rounds));
    v1::SubmitSweepResponse resp;
    grpc::Status st = farm()->SubmitSweep(As(token).get(), req, &resp);
    if (id != nullptr) *id = resp.sweep().sweep_id();
    return st;
  }

  // Every user-service call on `sweep_id`, as `token`: their codes.
  std::vector<std::pair<std::string, grpc::StatusCode>> SweepCalls(
      const std::string& token, const std::string& sweep_id) {
    std::vector<std::pair<std::string, grpc::StatusCode>> out;
    {
      v1::GetSweepRequest r;
      r.set_sweep_id(sweep_id);
      v1::Sweep s;
      out.emplace_back("GetSweep",
                       farm()->GetSweep(As(token).get(), r, &s).error_code());
    }
    {
      v1::ListRoundsRequest r;
      r.set_sweep_id(sweep_id);
      v1::ListRoundsResponse s;
      out.emplace_back("ListRounds",
                       farm()->ListRounds(As(token).get(), r, &s).error_code());
    }
    {
      v1::GetReportRequest r;
      r.set_sweep_id(sweep_id);
      v1::GetReportResponse s;
      out.emplace_back("GetReport",
                       farm()->GetReport(As(token).get(), r, &s).error_code());
    }
    {
      v1::WatchSweepRequest r;
      r.set_sweep_id(sweep_id);
      auto ctx = As(token);
      auto reader = farm()->WatchSweep(ctx.get(), r);
      v1::SweepEvent ev;
      const bool got = reader->Read(&ev);
      if (got) ctx->TryCancel();
      grpc::Status st = reader->Finish();
      out.emplace_back("WatchSweep",
                       got ? grpc::StatusCode::OK : st.error_code());
    }
    {
      v1::CancelSweepRequest r;
      r.set_sweep_id(sweep_id);
      v1::Sweep s;
      out.emplace_back(
          "CancelSweep",
          farm()->CancelSweep(As(token).get(), r, &s).error_code());
    }
    return out;
  }

  FakeClock clock_;
  std::unique_ptr<OperatorCatalog> catalog_;
  std::unique_ptr<TokenTable> tokens_;
  CoordinatorOnDisk disk_;
  LoopbackServices services_;  // after disk_: stops first
};

TEST_F(AuthServiceTest, NobodyAndBadTokensAreUnauthenticatedEverywhere) {
  std::string id;
  ASSERT_TRUE(Submit(kAlpha, "alpha", &id).ok());
  for (const std::string& token :
       {std::string(), std::string("forged-token-0000000000")}) {
    EXPECT_EQ(Submit(token, "alpha").error_code(),
              grpc::StatusCode::UNAUTHENTICATED);
    for (const auto& [call, code] : SweepCalls(token, id)) {
      EXPECT_EQ(code, grpc::StatusCode::UNAUTHENTICATED) << call;
    }
    v1::ListSweepsRequest ls;
    v1::ListSweepsResponse lsr;
    EXPECT_EQ(farm()->ListSweeps(As(token).get(), ls, &lsr).error_code(),
              grpc::StatusCode::UNAUTHENTICATED);
    v1::ListBoardsRequest lb;
    v1::ListBoardsResponse lbr;
    EXPECT_EQ(farm()->ListBoards(As(token).get(), lb, &lbr).error_code(),
              grpc::StatusCode::UNAUTHENTICATED);
    v1::RegisterAgentRequest reg;
    reg.set_agent_id("evil");
    reg.add_boards()->set_board_id("evil/b0");
    v1::RegisterAgentResponse regr;
    EXPECT_EQ(agent()->RegisterAgent(As(token).get(), reg, &regr).error_code(),
              grpc::StatusCode::UNAUTHENTICATED);
    v1::LeaseWorkRequest lw;
    v1::LeaseWorkResponse lwr;
    EXPECT_EQ(agent()->LeaseWork(As(token).get(), lw, &lwr).error_code(),
              grpc::StatusCode::UNAUTHENTICATED);
    v1::ReportResultRequest rr;
    v1::ReportResultResponse rrr;
    EXPECT_EQ(agent()->ReportResult(As(token).get(), rr, &rrr).error_code(),
              grpc::StatusCode::UNAUTHENTICATED);
  }
}

TEST_F(AuthServiceTest, ATeamSeesAndStopsOnlyItsOwnSweeps) {
  std::string alpha_sweep;
  ASSERT_TRUE(Submit(kAlpha, "alpha", &alpha_sweep).ok());
  // Submitting for another team is refused, and records nothing.
  EXPECT_EQ(Submit(kAlpha, "beta").error_code(),
            grpc::StatusCode::PERMISSION_DENIED);
  // Another team's sweep looks exactly like one that does not exist
  // (NOT_FOUND, same message shape), so ids cannot be probed.
  for (const auto& [call, code] : SweepCalls(kBeta, alpha_sweep)) {
    EXPECT_EQ(code, grpc::StatusCode::NOT_FOUND) << call;
  }
  for (const auto& [call, code] : SweepCalls(kBeta, "sw-999999")) {
    EXPECT_EQ(code, grpc::StatusCode::NOT_FOUND) << call;
  }
  auto get_message = [&](const std::string& id) {
    v1::GetSweepRequest r;
    r.set_sweep_id(id);
    v1::Sweep s;
    grpc::Status st = farm()->GetSweep(As(kBeta).get(), r, &s);
    std::string m = st.error_message();
    // The id itself is the only difference.
    m.replace(m.find(id), id.size(), "<id>");
    return m;
  };
  EXPECT_EQ(get_message(alpha_sweep), get_message("sw-999999"));
  // beta's list does not show alpha's sweep; asking for alpha's is refused.
  v1::ListSweepsRequest ls;
  v1::ListSweepsResponse lsr;
  ASSERT_TRUE(farm()->ListSweeps(As(kBeta).get(), ls, &lsr).ok());
  EXPECT_EQ(lsr.sweeps_size(), 0);
  ls.set_team("alpha");
  EXPECT_EQ(farm()->ListSweeps(As(kBeta).get(), ls, &lsr).error_code(),
            grpc::StatusCode::PERMISSION_DENIED);
  // The sweep is untouched by beta's cancel attempt; alpha can do all.
  v1::Sweep sweep;
  ASSERT_TRUE(store()->GetSweep(alpha_sweep).ok());
  EXPECT_EQ(store()->GetSweep(alpha_sweep)->state(), v1::SWEEP_STATE_QUEUED);
  for (const auto& [call, code] : SweepCalls(kAlpha, alpha_sweep)) {
    EXPECT_EQ(code, grpc::StatusCode::OK) << call;
  }
  EXPECT_EQ(store()->GetSweep(alpha_sweep)->state(), v1::SWEEP_STATE_CANCELLED);
}

TEST_F(AuthServiceTest, RolesKeepToTheirService) {
  // A user cannot act as an agent; an agent cannot use the user service.
  v1::RegisterAgentRequest reg;
  reg.set_agent_id("a1");
  reg.add_boards()->set_board_id("a1/b0");
  reg.mutable_boards(0)->set_kind("sim");
  v1::RegisterAgentResponse regr;
  EXPECT_EQ(agent()->RegisterAgent(As(kAlpha).get(), reg, &regr).error_code(),
            grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(Submit(kAgent, "alpha").error_code(),
            grpc::StatusCode::PERMISSION_DENIED);
  // An admin manages agents but is not one: it cannot register a (fake)
  // agent, nor lease, renew or report as one.
  EXPECT_EQ(agent()->RegisterAgent(As(kAdmin).get(), reg, &regr).error_code(),
            grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_TRUE(agent()->RegisterAgent(As(kAgent).get(), reg, &regr).ok());
  for (const std::string& token : {std::string(kAdmin), std::string(kAlpha)}) {
    v1::HeartbeatRequest hb;
    hb.set_agent_id("a1");
    v1::HeartbeatResponse hbr;
    EXPECT_EQ(agent()->Heartbeat(As(token).get(), hb, &hbr).error_code(),
              grpc::StatusCode::PERMISSION_DENIED)
        << token;
    v1::LeaseWorkRequest lw;
    lw.set_agent_id("a1");
    lw.set_board_id("a1/b0");
    v1::LeaseWorkResponse lwr;
    EXPECT_EQ(agent()->LeaseWork(As(token).get(), lw, &lwr).error_code(),
              grpc::StatusCode::PERMISSION_DENIED)
        << token;
    v1::RenewLeaseRequest rl;
    v1::RenewLeaseResponse rlr;
    EXPECT_EQ(agent()->RenewLease(As(token).get(), rl, &rlr).error_code(),
              grpc::StatusCode::PERMISSION_DENIED)
        << token;
    v1::ReportResultRequest rr;
    v1::ReportResultResponse rrr;
    EXPECT_EQ(agent()->ReportResult(As(token).get(), rr, &rrr).error_code(),
              grpc::StatusCode::PERMISSION_DENIED)
        << token;
  }

  // Admin-only calls.
  v1::BoardAdminRequest drain;
  drain.set_board_id("a1/b0");
  v1::BoardInfo board;
  EXPECT_EQ(farm()->DrainBoard(As(kAlpha).get(), drain, &board).error_code(),
            grpc::StatusCode::PERMISSION_DENIED);
  v1::SetTeamQuotaRequest q;
  q.mutable_quota()->set_team("alpha");
  q.mutable_quota()->set_weight(100);
  v1::TeamQuota quota;
  EXPECT_EQ(farm()->SetTeamQuota(As(kAlpha).get(), q, &quota).error_code(),
            grpc::StatusCode::PERMISSION_DENIED);
  ASSERT_TRUE(farm()->DrainBoard(As(kAdmin).get(), drain, &board).ok());
  EXPECT_EQ(board.state(), v1::BOARD_STATE_DRAINING);
  // A drained board gets no work.
  std::string id;
  ASSERT_TRUE(Submit(kAlpha, "alpha", &id).ok());
  v1::LeaseWorkRequest lw;
  lw.set_agent_id("a1");
  lw.set_board_id("a1/b0");
  v1::LeaseWorkResponse lwr;
  ASSERT_TRUE(agent()->LeaseWork(As(kAgent).get(), lw, &lwr).ok());
  EXPECT_FALSE(lwr.granted());
  ASSERT_TRUE(farm()->AdmitBoard(As(kAdmin).get(), drain, &board).ok());
  ASSERT_TRUE(agent()->LeaseWork(As(kAgent).get(), lw, &lwr).ok());
  EXPECT_TRUE(lwr.granted());
  // Users see boards but not which sweep holds them.
  v1::ListBoardsRequest lb;
  v1::ListBoardsResponse lbr;
  ASSERT_TRUE(farm()->ListBoards(As(kBeta).get(), lb, &lbr).ok());
  ASSERT_EQ(lbr.boards_size(), 1);
  EXPECT_TRUE(lbr.boards(0).current_lease_id().empty());
  ASSERT_TRUE(farm()->ListBoards(As(kAdmin).get(), lb, &lbr).ok());
  EXPECT_FALSE(lbr.boards(0).current_lease_id().empty());
}

// Every RPC of both services, tried as nobody, with a forged token, with
// the agent credential on the user service and with user and admin
// credentials on the agent service: none is let through.
TEST_F(AuthServiceTest, EveryRpcRefusesTheWrongCredential) {
  std::string sweep;
  ASSERT_TRUE(Submit(kAlpha, "alpha", &sweep).ok());
  using Call = std::function<grpc::StatusCode(const std::string&)>;
  auto code = [](const grpc::Status& st) { return st.error_code(); };
  const std::vector<std::pair<std::string, Call>> user_rpcs = {
      {"SubmitSweep",
       [&](const std::string& t) {
         v1::SubmitSweepRequest r;
         r.set_spec_yaml(Spec("alpha"));
         v1::SubmitSweepResponse out;
         return code(farm()->SubmitSweep(As(t).get(), r, &out));
       }},
      {"GetSweep",
       [&](const std::string& t) {
         v1::GetSweepRequest r;
         r.set_sweep_id(sweep);
         v1::Sweep out;
         return code(farm()->GetSweep(As(t).get(), r, &out));
       }},
      {"ListSweeps",
       [&](const std::string& t) {
         v1::ListSweepsResponse out;
         return code(farm()->ListSweeps(As(t).get(), {}, &out));
       }},
      {"WatchSweep",
       [&](const std::string& t) {
         v1::WatchSweepRequest r;
         r.set_sweep_id(sweep);
         auto ctx = As(t);
         auto reader = farm()->WatchSweep(ctx.get(), r);
         v1::SweepEvent ev;
         if (reader->Read(&ev)) {
           ctx->TryCancel();
           (void)reader->Finish();
           return grpc::StatusCode::OK;
         }
         return code(reader->Finish());
       }},
      {"CancelSweep",
       [&](const std::string& t) {
         v1::CancelSweepRequest r;
         r.set_sweep_id(sweep);
         v1::Sweep out;
         return code(farm()->CancelSweep(As(t).get(), r, &out));
       }},
      {"GetReport",
       [&](const std::string& t) {
         v1::GetReportRequest r;
         r.set_sweep_id(sweep);
         v1::GetReportResponse out;
         return code(farm()->GetReport(As(t).get(), r, &out));
       }},
      {"ListBoards",
       [&](const std::string& t) {
         v1::ListBoardsResponse out;
         return code(farm()->ListBoards(As(t).get(), {}, &out));
       }},
      {"ListRounds",
       [&](const std::string& t) {
         v1::ListRoundsRequest r;
         r.set_sweep_id(sweep);
         v1::ListRoundsResponse out;
         return code(farm()->ListRounds(As(t).get(), r, &out));
       }},
      {"DrainBoard",
       [&](const std::string& t) {
         v1::BoardAdminRequest r;
         r.set_board_id("x/b0");
         v1::BoardInfo out;
         return code(farm()->DrainBoard(As(t).get(), r, &out));
       }},
      {"AdmitBoard",
       [&](const std::string& t) {
         v1::BoardAdminRequest r;
         r.set_board_id("x/b0");
         v1::BoardInfo out;
         return code(farm()->AdmitBoard(As(t).get(), r, &out));
       }},
      {"SetTeamQuota",
       [&](const std::string& t) {
         v1::SetTeamQuotaRequest r;
         r.mutable_quota()->set_team("alpha");
         r.mutable_quota()->set_weight(9);
         v1::TeamQuota out;
         return code(farm()->SetTeamQuota(As(t).get(), r, &out));
       }},
      {"ListTeams",
       [&](const std::string& t) {
         v1::ListTeamsResponse out;
         return code(farm()->ListTeams(As(t).get(), {}, &out));
       }},
      {"ReserveBoards",
       [&](const std::string& t) {
         v1::ReserveBoardsRequest r;
         r.mutable_reservation()->set_board_id("x/b0");
         r.mutable_reservation()->set_team("alpha");
         v1::ListReservationsResponse out;
         return code(farm()->ReserveBoards(As(t).get(), r, &out));
       }},
      {"UnreserveBoards",
       [&](const std::string& t) {
         v1::ReserveBoardsRequest r;
         r.mutable_reservation()->set_board_id("x/b0");
         v1::ListReservationsResponse out;
         return code(farm()->UnreserveBoards(As(t).get(), r, &out));
       }},
  };
  const std::vector<std::pair<std::string, Call>> agent_rpcs = {
      {"RegisterAgent",
       [&](const std::string& t) {
         v1::RegisterAgentRequest r;
         r.set_agent_id("evil");
         r.add_boards()->set_board_id("evil/b0");
         v1::RegisterAgentResponse out;
         return code(agent()->RegisterAgent(As(t).get(), r, &out));
       }},
      {"Heartbeat",
       [&](const std::string& t) {
         v1::HeartbeatRequest r;
         r.set_agent_id("evil");
         v1::HeartbeatResponse out;
         return code(agent()->Heartbeat(As(t).get(), r, &out));
       }},
      {"LeaseWork",
       [&](const std::string& t) {
         v1::LeaseWorkRequest r;
         r.set_agent_id("evil");
         r.set_board_id("evil/b0");
         v1::LeaseWorkResponse out;
         return code(agent()->LeaseWork(As(t).get(), r, &out));
       }},
      {"RenewLease",
       [&](const std::string& t) {
         v1::RenewLeaseRequest r;
         r.set_agent_id("evil");
         v1::RenewLeaseResponse out;
         return code(agent()->RenewLease(As(t).get(), r, &out));
       }},
      {"ReportResult",
       [&](const std::string& t) {
         v1::ReportResultRequest r;
         r.set_agent_id("evil");
         v1::ReportResultResponse out;
         return code(agent()->ReportResult(As(t).get(), r, &out));
       }},
  };
  for (const std::string token : {"", "forged-token-0000000000"}) {
    for (const auto& [name, call] : user_rpcs) {
      EXPECT_EQ(call(token), grpc::StatusCode::UNAUTHENTICATED)
          << name << " as '" << token << "'";
    }
    for (const auto& [name, call] : agent_rpcs) {
      EXPECT_EQ(call(token), grpc::StatusCode::UNAUTHENTICATED)
          << name << " as '" << token << "'";
    }
  }
  for (const auto& [name, call] : user_rpcs) {
    EXPECT_EQ(call(kAgent), grpc::StatusCode::PERMISSION_DENIED)
        << name << " with the agent credential";
  }
  for (const char* token : {kAlpha, kBeta, kAdmin}) {
    for (const auto& [name, call] : agent_rpcs) {
      EXPECT_EQ(call(token), grpc::StatusCode::PERMISSION_DENIED)
          << name << " as " << token;
    }
  }
  // The wrong team: alpha's sweep does not exist for beta; admin-only
  // calls are refused.
  for (const char* name :
       {"GetSweep", "WatchSweep", "CancelSweep", "GetReport", "ListRounds"}) {
    for (const auto& [n, call] : user_rpcs) {
      if (n == name) {
        EXPECT_EQ(call(kBeta), grpc::StatusCode::NOT_FOUND) << name;
      }
    }
  }
  for (const char* name : {"DrainBoard", "AdmitBoard", "SetTeamQuota",
                           "ReserveBoards", "UnreserveBoards"}) {
    for (const auto& [n, call] : user_rpcs) {
      if (n == name) {
        EXPECT_EQ(call(kBeta), grpc::StatusCode::PERMISSION_DENIED) << name;
      }
    }
  }
  // Nothing leaked or changed: alpha's sweep still runs, no agent 'evil'.
  EXPECT_EQ(store()->GetSweep(sweep)->state(), v1::SWEEP_STATE_QUEUED);
  v1::ListBoardsResponse boards;
  ASSERT_TRUE(farm()->ListBoards(As(kAdmin).get(), {}, &boards).ok());
  for (const v1::BoardInfo& b : boards.boards()) {
    EXPECT_NE(b.board_id(), "evil/b0");
  }
}

TEST_F(AuthServiceTest, QuotaOfActiveSweepsIsResourceExhausted) {
  v1::SetTeamQuotaRequest q;
  q.mutable_quota()->set_team("alpha");
  q.mutable_quota()->set_weight(1);
  q.mutable_quota()->set_max_active_sweeps(1);
  v1::TeamQuota quota;
  ASSERT_TRUE(farm()->SetTeamQuota(As(kAdmin).get(), q, &quota).ok());
  ASSERT_TRUE(Submit(kAlpha, "alpha").ok());
  grpc::Status second = Submit(kAlpha, "alpha");
  EXPECT_EQ(second.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_NE(second.error_message().find("quota is 1"), std::string::npos)
      << second.error_message();
  EXPECT_TRUE(Submit(kBeta, "beta").ok()) << "another team is not affected";
  // Quotas set by an admin survive a restart (stored).
  v1::ListTeamsRequest lt;
  v1::ListTeamsResponse ltr;
  ASSERT_TRUE(farm()->ListTeams(As(kAlpha).get(), lt, &ltr).ok());
  ASSERT_EQ(ltr.teams_size(), 1) << "a user sees only its own team";
  EXPECT_EQ(ltr.teams(0).quota().max_active_sweeps(), 1);
}

// Boards scarce, two teams always wanting more: over a long run each team's
// share of board time stays within 10% of its weight (beta 3, alpha 1).
TEST_F(AuthServiceTest, WeightedFairShareOfBoardTime) {
  ASSERT_TRUE(Submit(kAlpha, "alpha", nullptr, 100000).ok());
  ASSERT_TRUE(Submit(kBeta, "beta", nullptr, 100000).ok());
  v1::RegisterAgentRequest reg;
  reg.set_agent_id("a1");
  for (int i = 0; i < 4; ++i) {
    v1::BoardInfo* b = reg.add_boards();
    b->set_board_id(absl::StrCat("a1/b", i));
    b->set_kind("sim");
  }
  v1::RegisterAgentResponse regr;
  ASSERT_TRUE(agent()->RegisterAgent(As(kAgent).get(), reg, &regr).ok());
  int rounds = 0;
  for (int step = 0; step < 300; ++step) {
    std::vector<v1::WorkItem> work;
    for (int i = 0; i < 4; ++i) {
      v1::LeaseWorkRequest lw;
      lw.set_agent_id("a1");
      lw.set_board_id(absl::StrCat("a1/b", i));
      v1::LeaseWorkResponse lwr;
      ASSERT_TRUE(agent()->LeaseWork(As(kAgent).get(), lw, &lwr).ok());
      if (lwr.granted()) work.push_back(lwr.work());
    }
    clock_.Advance(absl::Seconds(1));  // every round takes one board-second
    for (size_t i = 0; i < work.size(); ++i) {
      v1::ReportResultRequest rr;
      rr.set_agent_id("a1");
      rr.set_board_id(work[i].lease_id().empty() ? ""
                                                 : absl::StrCat("a1/b", i));
      rr.set_lease_id(work[i].lease_id());
      rr.set_epoch(work[i].epoch());
      rr.set_sweep_id(work[i].sweep_id());
      rr.set_round_id(work[i].round_id());
      rr.mutable_result()->set_outcome(v1::OUTCOME_OK);
      rr.mutable_result()->mutable_measurement()->set_median_us(1000 +
                                                                (rounds++ % 7));
      rr.mutable_result()->mutable_measurement()->set_samples(5);
      v1::ReportResultResponse rrr;
      ASSERT_TRUE(agent()->ReportResult(As(kAgent).get(), rr, &rrr).ok());
      ASSERT_TRUE(rrr.accepted()) << rrr.reason();
    }
  }
  v1::ListTeamsRequest lt;
  v1::ListTeamsResponse ltr;
  ASSERT_TRUE(farm()->ListTeams(As(kAdmin).get(), lt, &ltr).ok());
  double alpha = 0, beta = 0;
  for (const v1::TeamUsage& u : ltr.teams()) {
    if (u.quota().team() == "alpha") alpha = u.board_seconds();
    if (u.quota().team() == "beta") beta = u.board_seconds();
  }
  ASSERT_GT(alpha + beta, 1000);
  const double beta_share = beta / (alpha + beta);
  EXPECT_NEAR(beta_share, 0.75, 0.075) << "alpha " << alpha << " beta " << beta;
  EXPECT_NEAR(1 - beta_share, 0.25, 0.025) << "alpha " << alpha;
}

// TLS and mutual TLS with certificates the test makes with openssl.
class TlsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::access("/usr/bin/openssl", X_OK) != 0) {
      GTEST_SKIP() << "openssl is not installed: cannot make certificates";
    }
    auto dir = MakeTempDir("tls_test");
    ASSERT_TRUE(dir.ok());
    dir_ = *dir;
    auto run = [&](std::vector<std::string> args) {
      args.insert(args.begin(), "/usr/bin/openssl");
      auto p = Subprocess::Start(args, dir_ + "/openssl.log");
      ASSERT_TRUE(p.ok());
      auto st = (*p)->Wait(absl::Seconds(60));
      ASSERT_TRUE(st.has_value() && WIFEXITED(*st) && WEXITSTATUS(*st) == 0)
          << ReadFile(dir_ + "/openssl.log").value_or("");
    };
    const std::string d = dir_ + "/";
    run({"req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj",
         "/CN=tunefarm-test-ca", "-keyout", d + "ca.key", "-out",
         d + "ca.crt"});
    for (const std::string name : {"server", "client"}) {
      run({"req", "-newkey", "rsa:2048", "-nodes", "-subj",
           "/CN=" + std::string(name == "server" ? "localhost" : "agent"),
           "-keyout", d + name + ".key", "-out", d + name + ".csr"});
      ASSERT_TRUE(WriteFileAtomic(d + name + ".ext",
                                  "subjectAltName=DNS:localhost,IP:127.0.0.1\n")
                      .ok());
      run({"x509", "-req", "-in", d + name + ".csr", "-CA", d + "ca.crt",
           "-CAkey", d + "ca.key", "-CAcreateserial", "-days", "1", "-extfile",
           d + name + ".ext", "-out", d + name + ".crt"});
    }
  }
  void TearDown() override {
    if (!dir_.empty()) (void)RemoveAll(dir_);
  }

  // A server with the health of a real one: the TuneFarm service over TLS.
  std::unique_ptr<grpc::Server> Serve(bool mutual, int* port) {
    grpc::SslServerCredentialsOptions ssl(
        mutual ? GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY
               : GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE);
    ssl.pem_key_cert_pairs.push_back(
        {*ReadFile(dir_ + "/server.key"), *ReadFile(dir_ + "/server.crt")});
    if (mutual) ssl.pem_root_certs = *ReadFile(dir_ + "/ca.crt");
    grpc::ServerBuilder b;
    b.AddListeningPort("127.0.0.1:0", grpc::SslServerCredentials(ssl), port);
    b.RegisterService(&service_);
    return b.BuildAndStart();
  }

  grpc::StatusCode Call(int port, const ClientSecurity& sec) {
    auto ch = MakeChannel(absl::StrCat("localhost:", port), sec);
    EXPECT_TRUE(ch.ok()) << ch.status();
    auto stub = v1::TuneFarm::NewStub(*ch);
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() +
                     std::chrono::seconds(5));
    v1::GetSweepRequest r;
    v1::Sweep s;
    return stub->GetSweep(&ctx, r, &s).error_code();
  }

  std::string dir_;
  // Answers UNIMPLEMENTED: reaching it proves the TLS handshake passed.
  v1::TuneFarm::Service service_;
};

TEST_F(TlsTest, TlsAndMutualTls) {
  int port = 0;
  auto server = Serve(/*mutual=*/false, &port);
  ASSERT_NE(port, 0);
  ClientSecurity tls;
  tls.tls_ca_file = dir_ + "/ca.crt";
  EXPECT_EQ(Call(port, tls), grpc::StatusCode::UNIMPLEMENTED);
  EXPECT_EQ(Call(port, ClientSecurity{}), grpc::StatusCode::UNAVAILABLE)
      << "plaintext to a TLS port must fail";
  server->Shutdown();

  auto mtls = Serve(/*mutual=*/true, &port);
  EXPECT_NE(Call(port, tls), grpc::StatusCode::UNIMPLEMENTED)
      << "no client certificate: refused";
  ClientSecurity with_cert = tls;
  with_cert.tls_cert_file = dir_ + "/client.crt";
  with_cert.tls_key_file = dir_ + "/client.key";
  EXPECT_EQ(Call(port, with_cert), grpc::StatusCode::UNIMPLEMENTED);
  mtls->Shutdown();
}

}  // namespace
}  // namespace tunefarm
