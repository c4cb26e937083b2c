// The proposal path between the coordinator's Dispatcher and a real agent daemon
// (run_agent_daemon in a thread, over real ZeroMQ sockets, the Dispatcher's leases in a real
// redis-server): propose tasks reach only agents and evaluate tasks only evaluators; answers are
// template configurations that satisfy the constraints and are never repeated; a task the agent
// cannot serve comes back with an error; an agent that stops fails what it held, and a task no
// agent takes fails at its timeout -- each exactly once. And against a bare ROUTER speaking the
// protocol: a task sent again while the agent holds it is answered once.
#include "agent/agent_daemon.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <thread>

#include "coordinator/dispatcher.h"
#include "evaluator/evaluation.h"
#include "shared/redis_client.h"
#include "shared/transport.h"
#include "tests/support/test_env.h"

namespace kiln::agent {
namespace {

using Clock = std::chrono::steady_clock;

// The first value of every parameter of reduce's cpu template: a configuration to start from.
Params reduce_parent() {
  Result<TargetSpec> spec = testing::load_builtin_target("reduce");
  EXPECT_TRUE(spec.is_ok()) << spec.status().to_string();
  Params p;
  if (!spec.is_ok()) return p;
  for (const auto& [name, values] : spec->backend("cpu")->tunable->space) p[name] = std::to_string(values.front());
  return p;
}

proto::ProposeTask propose(const std::string& id, const std::string& target, const Params& parent) {
  proto::ProposeTask t;
  t.task_id = id;
  t.target = target;
  t.arch = "cpu/test";
  t.backend = "cpu";
  proto::ParentInfo p;
  p.candidate_id = "parent-of-" + id;
  p.params = parent;
  p.time_us = 100;
  t.parents.push_back(p);
  t.count = 2;
  return t;
}

class AgentDaemonTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(testing::connect_store(server_, &client_, &store_), "");
    coordinator::DispatcherOptions d;
    d.heartbeat.interval_ms = 50;
    d.proposal_timeout = std::chrono::milliseconds(1500);
    auto disp = coordinator::Dispatcher::create(ctx_, *store_, d);
    ASSERT_TRUE(disp.is_ok()) << disp.status().to_string();
    dispatcher_ = std::move(disp).value();
  }
  void TearDown() override { stop_agent(); }

  void start_agent() {
    AgentOptions a;
    a.connect = dispatcher_->endpoint();
    a.targets_dir = testing::builtin_targets_dir();
    a.worker_id = "agent-under-test";
    a.heartbeat.interval_ms = 50;
    agent_ = std::thread([this, a] { agent_status_ = run_agent_daemon(a, stop_); });
  }
  void stop_agent() {
    stop_.store(true);
    if (agent_.joinable()) agent_.join();
  }
  // Polls the dispatcher until `done` holds or 10 s pass; collects proposals.
  bool run_until(const std::function<bool()>& done) {
    const auto give_up = Clock::now() + std::chrono::seconds(10);
    while (Clock::now() < give_up) {
      auto r = dispatcher_->poll(10);
      EXPECT_TRUE(r.is_ok()) << r.status().to_string();
      for (auto& p : dispatcher_->take_proposals()) proposals_.push_back(std::move(p));
      if (done()) return true;
    }
    return false;
  }

  testing::RedisServer server_;
  std::optional<redis::RedisClient> client_;
  std::optional<redis::Store> store_;
  zmq::context_t ctx_;
  std::unique_ptr<coordinator::Dispatcher> dispatcher_;
  std::atomic<bool> stop_{false};
  std::thread agent_;
  Status agent_status_;
  std::vector<proto::Proposal> proposals_;
};

// The coordinator's route to an agent's id can move away and back (two processes with one
// --worker-id); it may then hand a task the agent holds out again. The agent answers it once and
// offers the copy's slot back at once. A bare ROUTER stands in for the coordinator (the dispatcher
// never sends one id twice on its own).
TEST(AgentDaemon, ATaskSentAgainWhileHeldIsAnsweredOnce) {
  zmq::context_t ctx;
  Result<net::RouterSocket> bound = net::RouterSocket::bind(ctx, "tcp://127.0.0.1:*", {});
  ASSERT_TRUE(bound.is_ok()) << bound.status().to_string();
  net::RouterSocket router = std::move(bound).value();
  AgentOptions a;
  a.connect = router.last_endpoint();
  a.targets_dir = testing::builtin_targets_dir();
  a.worker_id = "agent-under-test";
  a.heartbeat.interval_ms = 200;
  std::atomic<bool> stop{false};
  Status status;
  std::thread agent([&] { status = run_agent_daemon(a, stop); });
  proto::IdGenerator ids{"test-coordinator"};
  std::string peer;
  // Every message but heartbeats (answered), for `ms` or until `until` holds for one.
  auto collect = [&](int ms, const std::function<bool(const proto::Envelope&)>& until) {
    std::vector<proto::Envelope> got;
    const auto deadline = Clock::now() + std::chrono::milliseconds(ms);
    while (Clock::now() < deadline) {
      Result<std::optional<net::RoutedMessage>> m = router.receive(50);
      if (!m.is_ok() || !m->has_value()) continue;
      peer = (*m)->peer;
      Result<proto::Envelope> env = proto::decode((*m)->payload);
      if (!env.is_ok()) continue;
      if (std::holds_alternative<proto::Heartbeat>(env->body)) {
        (void)router.send(peer,
                          proto::encode({proto::kProtocolVersion, ids.next(), proto::Heartbeat{}}));
        continue;
      }
      got.push_back(*env);
      if (until(got.back())) break;
    }
    return got;
  };
  auto is = [](auto tag) {
    return [](const proto::Envelope& e) { return std::holds_alternative<decltype(tag)>(e.body); };
  };
  ASSERT_FALSE(collect(10000, is(proto::Credit{})).empty());  // hello, then its credit
  const proto::ProposeTask task = propose("p7", "reduce", reduce_parent());
  for (int i = 0; i < 2; ++i)
    ASSERT_TRUE(
        router.send(peer, proto::encode({proto::kProtocolVersion, ids.next(), task})).is_ok());
  std::vector<proto::Envelope> got = collect(10000, is(proto::Proposal{}));
  for (proto::Envelope& e : collect(1500, [](const proto::Envelope&) { return false; }))
    got.push_back(std::move(e));
  stop.store(true);
  agent.join();
  int proposals = 0, credits = 0;
  for (const auto& e : got) {
    if (const auto* p = std::get_if<proto::Proposal>(&e.body)) {
      ++proposals;
      EXPECT_EQ(p->task_id, "p7");
      EXPECT_TRUE(p->error.empty()) << p->error;
    }
    if (const auto* c = std::get_if<proto::Credit>(&e.body)) credits += static_cast<int>(c->count);
  }
  EXPECT_EQ(proposals, 1) << "p7 was answered more than once";
  EXPECT_EQ(credits, 2);  // the copy's slot, and the answered task's
  EXPECT_TRUE(status.is_ok()) << status.to_string();
}

TEST_F(AgentDaemonTest, AnswersWithNewValidTemplateConfigurationsAndErrorsForWhatItCannotServe) {
  start_agent();
  ASSERT_TRUE(run_until([&] { return dispatcher_->agents() == 1; }));
  // An evaluate task is never handed to an agent, even one that names no backend.
  proto::EvaluateTask eval;
  eval.task_id = "e1";
  eval.candidate_id = "c1";
  eval.target = "reduce";
  eval.backend = "cpu";
  eval.source = "x";
  ASSERT_TRUE(dispatcher_->submit(eval));

  const Params parent = reduce_parent();
  ASSERT_TRUE(dispatcher_->submit_proposal(propose("p1", "reduce", parent)));
  ASSERT_FALSE(dispatcher_->submit_proposal(propose("p1", "reduce", parent)));  // same id: ignored
  ASSERT_TRUE(dispatcher_->submit_proposal(propose("p2", "no_such_target", parent)));
  ASSERT_TRUE(run_until([&] { return proposals_.size() == 2; }));
  EXPECT_EQ(dispatcher_->in_flight(), 0u);  // the evaluate task still waits for an evaluator
  EXPECT_EQ(dispatcher_->queued(), 1u);

  std::map<std::string, proto::Proposal> by_id;
  for (const auto& p : proposals_) by_id[p.task_id] = p;
  ASSERT_TRUE(by_id.count("p2"));
  EXPECT_TRUE(by_id["p2"].candidates.empty());
  EXPECT_NE(by_id["p2"].error.find("no_such_target"), std::string::npos) << by_id["p2"].error;
  ASSERT_TRUE(by_id.count("p1"));
  EXPECT_TRUE(by_id["p1"].error.empty()) << by_id["p1"].error;
  ASSERT_FALSE(by_id["p1"].candidates.empty());
  for (const auto& c : by_id["p1"].candidates) EXPECT_NE(c.params, parent);
  EXPECT_EQ(dispatcher_->stats().proposals, 1u);
  EXPECT_EQ(dispatcher_->stats().proposals_failed, 1u);
}

TEST(BuiltinAgent, ProposesDistinctValidChildrenOfAParentAndNeverRepeatsThem) {
  const std::string dir = testing::builtin_targets_dir();
  Result<TargetSpec> spec = load_target(dir + "/reduce");
  ASSERT_TRUE(spec.is_ok()) << spec.status().to_string();
  const KernelSpec& tmpl = *spec->backend("cpu")->tunable;
  const Params parent = reduce_parent();

  BuiltinAgent agent(dir, 7);
  std::set<Params> seen = {parent};
  size_t proposed = 0;
  for (int round = 0; round < 3; ++round) {
    proto::Proposal p = agent.answer(propose("t" + std::to_string(round), "reduce", parent));
    EXPECT_EQ(p.task_id, "t" + std::to_string(round));
    EXPECT_EQ(p.target, "reduce");
    for (const auto& c : p.candidates) {
      EXPECT_EQ(c.source, tmpl.source);
      EXPECT_EQ(c.parent_id, "parent-of-t" + std::to_string(round));
      EXPECT_FALSE(c.operator_name.empty());
      for (const auto& [name, values] : tmpl.space) {
        ASSERT_TRUE(c.params.count(name)) << name;
      }
      EXPECT_TRUE(seen.insert(c.params).second) << "proposed twice or the parent itself";
      ++proposed;
    }
    if (p.candidates.empty()) {
      EXPECT_FALSE(p.error.empty());
    }
  }
  EXPECT_GE(proposed, 2u);  // reduce's cpu template has room for at least two children
  // A backend the target lacks, or a task without parents, gets an error that says why.
  proto::ProposeTask other = propose("y", "reduce", parent);
  other.backend = "rocm";
  proto::Proposal bad = agent.answer(other);
  EXPECT_TRUE(bad.candidates.empty());
  EXPECT_NE(bad.error.find("rocm"), std::string::npos) << bad.error;
  proto::ProposeTask orphan = propose("z", "reduce", parent);
  orphan.parents.clear();
  EXPECT_NE(agent.answer(orphan).error.find("no parent"), std::string::npos);
}

// A task names its target: a path, a traversal or a name that is not an identifier is refused
// before any folder is read (quoted short), a target without a template says so, and the agent
// goes on answering.
TEST(BuiltinAgent, RefusesTargetNamesThatAreNotIdentifiersAndTargetsWithoutATemplate) {
  testing::TempDir dir;
  const std::string targets = dir.path() + "/targets";
  std::filesystem::create_directories(targets);
  std::filesystem::copy(testing::builtin_targets_dir() + "/reduce", targets + "/reduce");
  std::filesystem::copy(testing::builtin_targets_dir() + "/reduce", targets + "/plain");
  nlohmann::json spec = testing::read_json(targets + "/plain/target.json");
  spec["name"] = "plain";
  spec["backends"]["cpu"].erase("template");
  std::ofstream(targets + "/plain/target.json") << spec.dump(2);

  BuiltinAgent agent(targets, 3);
  const Params parent = reduce_parent();
  std::vector<std::string> names = {"../reduce", "..", "", "re duce"};
  names.push_back(targets + "/reduce");
  names.push_back(std::string(5000, 'a'));
  for (const std::string& name : names) {
    proto::Proposal p = agent.answer(propose("n", name, parent));
    EXPECT_TRUE(p.candidates.empty()) << name;
    EXPECT_NE(p.error.find("bad target name"), std::string::npos) << p.error;
    EXPECT_LT(p.error.size(), 200u) << p.error;
  }
  proto::Proposal plain = agent.answer(propose("p", "plain", parent));
  EXPECT_NE(plain.error.find("has no cpu template"), std::string::npos) << plain.error;
  proto::Proposal ok = agent.answer(propose("r", "reduce", parent));
  EXPECT_TRUE(ok.error.empty()) << ok.error;
  EXPECT_FALSE(ok.candidates.empty());
}

// The coordinator asks agents about the seed too: its parameters are no configuration of the
// template, so the built-in agent answers with the template's valid configurations drawn at
// random, each once, until the space is spent.
TEST(BuiltinAgent, ASeedParentGetsEveryConfigurationOfTheTemplateOnceInRandomOrder) {
  // reduce with a cpu template of 8 configurations (the built-in one has 3).
  testing::TempDir tmp;
  const std::string dir = tmp.path();
  std::filesystem::copy(testing::builtin_targets_dir() + "/reduce", dir + "/reduce",
                        std::filesystem::copy_options::recursive);
  {
    std::ifstream in(dir + "/reduce/target.json");
    nlohmann::json j = nlohmann::json::parse(in);
    j["backends"]["cpu"]["template"]["params"]["UNROLL"] = {1, 2, 3, 4, 5, 6, 7, 8};
    std::ofstream(dir + "/reduce/target.json") << j.dump(2);
  }
  Result<TargetSpec> spec = load_target(dir + "/reduce");
  ASSERT_TRUE(spec.is_ok()) << spec.status().to_string();
  const BackendSpec& cpu = *spec->backend("cpu");
  std::vector<Params> sweep;
  eval::for_each_config(*cpu.tunable, spec->benchmark_for("cpu"), cpu.dtypes.front(),
                        [&](const Params& c) {
                          sweep.push_back(c);
                          return true;
                        });
  ASSERT_EQ(sweep.size(), 8u);

  BuiltinAgent agent(dir, 7);
  std::vector<Params> got;
  for (size_t round = 0; round <= sweep.size(); ++round) {
    proto::ProposeTask task = propose("s" + std::to_string(round), "reduce", cpu.seed.defines);
    task.count = 2;
    proto::Proposal p = agent.answer(task);
    if (got.size() == sweep.size()) {  // spent: an error that says so, no candidate
      EXPECT_TRUE(p.candidates.empty());
      EXPECT_NE(p.error.find("every configuration"), std::string::npos) << p.error;
      break;
    }
    ASSERT_TRUE(p.error.empty()) << p.error;
    ASSERT_FALSE(p.candidates.empty());
    for (const auto& c : p.candidates) {
      EXPECT_EQ(c.operator_name, "template");
      EXPECT_EQ(c.source, cpu.tunable->source);
      got.push_back(c.params);
    }
  }
  EXPECT_NE(got, sweep) << "drawn in sweep order";  // by chance: 1 in 8!
  std::sort(got.begin(), got.end());
  std::vector<Params> sorted = sweep;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(got, sorted);

  // What the population already has (the task's `evaluated`) is not drawn: with 6 of the 8
  // evaluated, a new agent draws exactly the other 2, then says the space is spent.
  BuiltinAgent fresh(dir, 11);
  proto::ProposeTask task = propose("e1", "reduce", cpu.seed.defines);
  task.count = 4;
  task.evaluated.assign(sweep.begin(), sweep.begin() + 6);
  proto::Proposal p = fresh.answer(task);
  ASSERT_TRUE(p.error.empty()) << p.error;
  std::set<Params> drawn;
  for (const auto& c : p.candidates) drawn.insert(c.params);
  EXPECT_EQ(drawn, (std::set<Params>{sweep[6], sweep[7]}));
  task.task_id = "e2";
  p = fresh.answer(task);
  EXPECT_TRUE(p.candidates.empty());
  EXPECT_NE(p.error.find("every configuration"), std::string::npos) << p.error;
}

TEST_F(AgentDaemonTest, ProposalsHeldByAnAgentThatStopsFailOnceAndUntakenOnesTimeOut) {
  // No agent: the task waits in the queue, then fails at its timeout, once.
  ASSERT_TRUE(dispatcher_->submit_proposal(propose("lonely", "reduce", {})));
  ASSERT_TRUE(run_until([&] { return !proposals_.empty(); }));
  ASSERT_EQ(proposals_.size(), 1u);
  EXPECT_EQ(proposals_[0].task_id, "lonely");
  EXPECT_NE(proposals_[0].error.find("timeout"), std::string::npos) << proposals_[0].error;
  EXPECT_EQ(dispatcher_->proposals_pending(), 0u);
  EXPECT_EQ(dispatcher_->stats().proposals_failed, 1u);
  // The same id may be asked again once it is answered; an agent that arrives later takes it.
  EXPECT_TRUE(dispatcher_->submit_proposal(propose("lonely", "reduce", reduce_parent())));
  start_agent();
  ASSERT_TRUE(run_until([&] { return proposals_.size() == 2; }));
  EXPECT_TRUE(proposals_[1].error.empty()) << proposals_[1].error;
  EXPECT_FALSE(proposals_[1].candidates.empty());

  // An agent that leaves (bye) is no longer counted.
  stop_agent();
  ASSERT_TRUE(run_until([&] { return dispatcher_->agents() == 0; }));
  EXPECT_TRUE(agent_status_.is_ok()) << agent_status_.to_string();
}

}  // namespace
}  // namespace kiln::agent
