// Dispatcher against a real redis-server (temporary unix socket) and real ZeroMQ sockets: workers
// are DEALER sockets driven by the test, so each fault (silence, a duplicate or malformed answer,
// a coordinator restart) happens exactly when the test says.
#include "coordinator/dispatcher.h"

#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <msgpack.hpp>
#include <optional>
#include <thread>

#include "shared/redis_client.h"
#include "shared/worker_link.h"
#include "tests/support/synthetic_worker.h"
#include "tests/support/test_env.h"

namespace kiln::coordinator {
namespace {

proto::EvaluateTask task(const std::string& id, const std::string& backend = "cpu") {
  proto::EvaluateTask t;
  t.task_id = "task-" + id;
  t.candidate_id = id;
  t.target = "rmsnorm";
  t.backend = backend;
  t.source = "// kernel " + id;
  return t;
}

// A worker the test drives by hand, message by message (so each fault happens exactly when the
// test says), with the hello the real evaluator sends (net::evaluator_hello).
class FakeWorker {
 public:
  FakeWorker(zmq::context_t& ctx, const std::string& endpoint, const std::string& name,
             std::vector<std::string> backends = {"cpu"}, const std::string& gpu_model = "",
             std::map<std::string, std::string> spec_hashes = {}, bool say_hello = true,
             std::string toolchain = "")
      : name_(name), ids_(name) {
    auto d = net::DealerSocket::connect(ctx, endpoint, net::SocketOptions{});
    EXPECT_TRUE(d.is_ok()) << d.status().to_string();
    dealer_.emplace(std::move(d).value());
    proto::Hello hello =
        net::evaluator_hello(name, backends.empty() ? "" : backends.front(), 1, gpu_model,
                             "cpu/test", std::move(spec_hashes), std::move(toolchain));
    hello.backends = std::move(backends);
    if (say_hello) send(hello);
  }
  void send(proto::Message body) {
    ASSERT_TRUE(dealer_->send(proto::encode({proto::kProtocolVersion, ids_.next(), std::move(body)})).is_ok());
  }
  void send_raw(const std::string& bytes) { ASSERT_TRUE(dealer_->send(bytes).is_ok()); }
  // The next message that is not a heartbeat, if one is waiting.
  std::optional<proto::Envelope> next() {
    while (true) {
      auto got = dealer_->receive(0);
      if (!got.is_ok() || !got->has_value()) return std::nullopt;
      auto env = proto::decode(**got);
      if (env.is_ok() && std::holds_alternative<proto::Heartbeat>(env->body)) continue;
      if (env.is_ok()) return std::move(env).value();
    }
  }
  proto::EvaluationResult answer(const proto::EvaluateTask& t) {
    return testing::verified_result(t, "cpu/test", 10);
  }

 private:
  std::string name_;
  proto::IdGenerator ids_;
  std::optional<net::DealerSocket> dealer_;
};

class DispatcherTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(testing::connect_store(server_, &client_, &store_), "");
    start();
  }
  void start(std::map<std::string, std::string> spec_hashes = {}, bool exact_gpu_models = false,
             std::string triton_toolchain = "") {
    DispatcherOptions o;
    o.triton_toolchain = std::move(triton_toolchain);
    o.spec_hashes = std::move(spec_hashes);
    o.exact_gpu_models = exact_gpu_models;
    o.heartbeat.interval_ms = 50;
    o.heartbeat.liveness = 3;
    auto d = Dispatcher::create(ctx_, *store_, o);
    ASSERT_TRUE(d.is_ok()) << d.status().to_string();
    dispatcher_ = std::move(d).value();
  }
  // Polls until `done` holds (or 5 s pass); collects merged results.
  bool run_until(const std::function<bool()>& done) {
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (std::chrono::steady_clock::now() < give_up) {
      for (FakeWorker* w : alive_) w->send(proto::Heartbeat{});
      auto r = dispatcher_->poll(10);
      EXPECT_TRUE(r.is_ok()) << r.status().to_string();
      if (r.is_ok()) results_.insert(results_.end(), r->begin(), r->end());
      if (done()) return true;
    }
    return false;
  }
  // Polls until `w` is refused (an error reply with code refused), skipping other messages;
  // returns the refusal's message, or nullopt when none came within run_until's 5 s.
  std::optional<std::string> refusal(FakeWorker& w) {
    std::optional<std::string> why;
    run_until([&] {
      while (auto env = w.next()) {
        const auto* e = std::get_if<proto::Error>(&env->body);
        if (e && e->code == proto::kErrorRefused) {
          why = e->message;
          return true;
        }
      }
      return false;
    });
    return why;
  }
  // Polls until `w` receives a task, which it returns.
  std::optional<proto::EvaluateTask> receive_task(FakeWorker& w) {
    std::optional<proto::EvaluateTask> got;
    run_until([&] {
      auto env = w.next();
      if (env) {
        if (auto* t = std::get_if<proto::EvaluateTask>(&env->body)) got = *t;
      }
      return got.has_value();
    });
    return got;
  }

  testing::RedisServer server_;
  std::optional<redis::RedisClient> client_;
  std::optional<redis::Store> store_;
  zmq::context_t ctx_;
  std::unique_ptr<Dispatcher> dispatcher_;
  std::vector<proto::EvaluationResult> results_;
  std::vector<FakeWorker*> alive_;  // workers that heartbeat on every turn
};

TEST_F(DispatcherTest, SendsOnlyMatchingTasksAndMergesEachResultOnce) {
  FakeWorker w(ctx_, dispatcher_->endpoint(), "w1", {"cpu"});
  w.send(proto::Credit{2});
  dispatcher_->submit(task("gpu-only", "cuda"));
  dispatcher_->submit(task("a"));
  EXPECT_FALSE(dispatcher_->submit(task("a")));  // the same task twice is one task
  auto t = receive_task(w);
  ASSERT_TRUE(t.has_value());
  EXPECT_EQ(t->candidate_id, "a");
  EXPECT_EQ(dispatcher_->queued(), 1u);  // the cuda task waits for a cuda worker
  EXPECT_TRUE(store_->lease_payload(t->task_id)->has_value());

  w.send(w.answer(*t));
  w.send(w.answer(*t));  // a duplicate
  ASSERT_TRUE(run_until([&] { return dispatcher_->stats().duplicates == 1; }));
  ASSERT_EQ(results_.size(), 1u);
  EXPECT_EQ(results_[0].candidate_id, "a");
  EXPECT_TRUE(store_->get_result("a", "cpu/test")->has_value());
  EXPECT_FALSE(store_->lease_payload(t->task_id)->has_value());
  EXPECT_EQ(dispatcher_->in_flight(), 0u);
}

TEST_F(DispatcherTest, AnUrgentTaskLeavesBeforeEveryTaskQueuedBeforeIt) {
  dispatcher_->submit(task("first"));
  dispatcher_->submit(task("second"));
  dispatcher_->submit(task("retime"), /*urgent=*/true);
  FakeWorker w(ctx_, dispatcher_->endpoint(), "w1", {"cpu"});
  w.send(proto::Credit{1});
  auto t = receive_task(w);
  ASSERT_TRUE(t.has_value());
  EXPECT_EQ(t->candidate_id, "retime");
  w.send(w.answer(*t));
  w.send(proto::Credit{1});
  t = receive_task(w);
  ASSERT_TRUE(t.has_value());
  EXPECT_EQ(t->candidate_id, "first");  // the others in their order
}

TEST_F(DispatcherTest, ATaskQueuedBetweenTurnsLeavesBeforeTheNextTurnWaits) {
  // The engine queues a child when a result comes in, then polls again. That child must go out
  // at the start of the turn, not after the turn's wait: a result to it is then merged in the
  // same turn. (Before, each task sat out one whole poll timeout with its worker idle.)
  FakeWorker w(ctx_, dispatcher_->endpoint(), "w1", {"cpu"});
  w.send(proto::Credit{1});
  dispatcher_->submit(task("first"));
  auto first = receive_task(w);
  ASSERT_TRUE(first.has_value());
  w.send(proto::Credit{1});  // before the answer: handled once the answer is merged
  w.send(w.answer(*first));
  ASSERT_TRUE(run_until([&] { return results_.size() == 1; }));

  dispatcher_->submit(task("second"));
  std::thread worker([&] {  // answers the task as soon as it arrives
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (std::chrono::steady_clock::now() < give_up) {
      if (auto env = w.next()) {
        if (auto* t = std::get_if<proto::EvaluateTask>(&env->body)) {
          w.send(w.answer(*t));
          return;
        }
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  });
  auto turn = dispatcher_->poll(4000);  // one turn
  worker.join();
  ASSERT_TRUE(turn.is_ok()) << turn.status().to_string();
  ASSERT_EQ(turn->size(), 1u);
  EXPECT_EQ((*turn)[0].candidate_id, "second");
}

TEST_F(DispatcherTest, ATaskNamingAGpuModelGoesOnlyToAnEvaluatorOfThatModel) {
  FakeWorker h100(ctx_, dispatcher_->endpoint(), "h100", {"cuda"}, "NVIDIA H100 80GB HBM3");
  FakeWorker h200(ctx_, dispatcher_->endpoint(), "h200", {"cuda"}, "NVIDIA H200");
  alive_ = {&h100, &h200};
  h100.send(proto::Credit{4});
  h200.send(proto::Credit{4});
  ASSERT_TRUE(run_until([&] { return dispatcher_->evaluator_gpu_models("cuda").size() == 2; }));
  proto::EvaluateTask for_h200 = task("on-h200", "cuda");
  for_h200.gpu_model = "NVIDIA H200";
  proto::EvaluateTask any = task("anywhere", "cuda");
  dispatcher_->submit(for_h200);
  auto got = receive_task(h200);
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->candidate_id, "on-h200");
  EXPECT_EQ(got->gpu_model, "NVIDIA H200");
  EXPECT_FALSE(h100.next().has_value());
  EXPECT_EQ(dispatcher_->evaluator_gpu_models("cuda"),
            (std::set<std::string>{"NVIDIA H100 80GB HBM3", "NVIDIA H200"}));
  EXPECT_TRUE(dispatcher_->evaluator_gpu_models("cpu").empty());
  // A task that names no model goes to any evaluator of its backend.
  dispatcher_->submit(any);
  ASSERT_TRUE(run_until([&] { return dispatcher_->in_flight() == 2; }));
}

// Populations per model (--gpu-models auto): the population of evaluators that name no model is
// one model too, and its tasks do not go to an evaluator that names one. The merged result says
// where it came from, from the lease and the hello, whatever the worker wrote there.
TEST_F(DispatcherTest, WithExactModelsAnUnnamedTaskGoesOnlyToAnUnnamedEvaluator) {
  dispatcher_.reset();
  start({}, true);
  FakeWorker named(ctx_, dispatcher_->endpoint(), "named", {"cpu"}, "big-box");
  alive_ = {&named};
  named.send(proto::Credit{4});
  ASSERT_TRUE(run_until([&] { return dispatcher_->evaluator_gpu_models("cpu").size() == 1; }));
  dispatcher_->submit(task("unnamed-model"));
  EXPECT_FALSE(run_until([&] { return dispatcher_->in_flight() > 0; }));
  EXPECT_FALSE(named.next().has_value());

  FakeWorker unnamed(ctx_, dispatcher_->endpoint(), "unnamed", {"cpu"}, "");
  alive_ = {&named, &unnamed};
  unnamed.send(proto::Credit{4});
  auto got = receive_task(unnamed);
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->candidate_id, "unnamed-model");
  proto::EvaluationResult r = unnamed.answer(*got);
  r.unit = "forged";
  r.evaluator = "someone-else";
  r.evaluator_gpu_model = "big-box";
  unnamed.send(r);
  ASSERT_TRUE(run_until([&] { return !results_.empty(); }));
  EXPECT_EQ(results_[0].unit, "rmsnorm");
  EXPECT_EQ(results_[0].evaluator, "unnamed");
  EXPECT_EQ(results_[0].evaluator_gpu_model, "");
}

TEST_F(DispatcherTest, AResultWhoseArchCannotBeAKeyIsStoredUnderASafeName) {
  FakeWorker w(ctx_, dispatcher_->endpoint(), "w1", {"cpu"});
  w.send(proto::Credit{1});
  dispatcher_->submit(task("odd"));
  auto t = receive_task(w);
  ASSERT_TRUE(t.has_value());
  proto::EvaluationResult r = w.answer(*t);
  r.arch = "sm_90a/NVIDIA H100 80GB: [HBM3]";
  w.send(r);
  ASSERT_TRUE(run_until([&] { return results_.size() == 1; }));
  EXPECT_TRUE(store_->get_result("odd", "sm_90a/NVIDIA_H100_80GB___HBM3_")->has_value());
}

TEST_F(DispatcherTest, AWorkerThatReconnectsGetsItsTasksBackAtOnceNotWhenTheLeaseExpires) {
  FakeWorker first(ctx_, dispatcher_->endpoint(), "w1", {"cpu"});
  first.send(proto::Credit{1});
  dispatcher_->submit(task("held"));
  auto t = receive_task(first);
  ASSERT_TRUE(t.has_value());
  // The same worker from a new connection (it thought the coordinator silent): the task it held
  // is handed out again at once (the lease is minutes away).
  FakeWorker again(ctx_, dispatcher_->endpoint(), "w1", {"cpu"});
  alive_ = {&again};
  again.send(proto::Credit{1});
  auto t2 = receive_task(again);
  ASSERT_TRUE(t2.has_value());
  EXPECT_EQ(t2->candidate_id, "held");
  EXPECT_EQ(dispatcher_->workers(), 1u);
  EXPECT_EQ(dispatcher_->stats().requeued, 1u);
  // Either answer is merged once; the other is a duplicate.
  again.send(again.answer(*t2));
  ASSERT_TRUE(run_until([&] { return results_.size() == 1; }));
  first.send(first.answer(*t));
  ASSERT_TRUE(run_until([&] { return dispatcher_->stats().duplicates == 1; }));
  EXPECT_EQ(results_.size(), 1u);
}

TEST_F(DispatcherTest, MalformedMessagesGetAnErrorAndTheLoopGoesOn) {
  FakeWorker w(ctx_, dispatcher_->endpoint(), "w1");
  w.send_raw("this is not msgpack");
  std::optional<proto::Envelope> reply;
  ASSERT_TRUE(run_until([&] { return (reply = w.next()).has_value(); }));
  ASSERT_TRUE(std::holds_alternative<proto::Error>(reply->body));
  EXPECT_EQ(dispatcher_->stats().malformed, 1u);
  w.send(proto::Credit{1});
  dispatcher_->submit(task("b"));
  EXPECT_TRUE(receive_task(w).has_value());  // still dispatching
}

// A result-shaped message the schema refuses (no candidate_id, outcome "great"), then a result
// for the right task under another candidate: neither changes anything; the task stays in flight
// under its lease until the real answer, which is merged once.
TEST_F(DispatcherTest, MalformedAndMismatchedResultsChangeNothingAndTheRealOneIsMergedOnce) {
  FakeWorker w(ctx_, dispatcher_->endpoint(), "w1");
  alive_.push_back(&w);
  w.send(proto::Credit{1});
  dispatcher_->submit(task("m"));
  auto t = receive_task(w);
  ASSERT_TRUE(t.has_value());

  msgpack::sbuffer buf;
  msgpack::packer<msgpack::sbuffer> pk(buf);
  pk.pack_map(5);
  pk.pack(std::string("v"));
  pk.pack(proto::kProtocolVersion);
  pk.pack(std::string("type"));
  pk.pack(std::string("result"));
  pk.pack(std::string("id"));
  pk.pack(std::string("bad-1"));
  pk.pack(std::string("task_id"));
  pk.pack(t->task_id);
  pk.pack(std::string("outcome"));
  pk.pack(std::string("great"));
  w.send_raw(std::string(buf.data(), buf.size()));
  std::optional<proto::Envelope> reply;
  ASSERT_TRUE(run_until([&] { return (reply = w.next()).has_value(); }));
  ASSERT_TRUE(std::holds_alternative<proto::Error>(reply->body));
  EXPECT_EQ(dispatcher_->stats().malformed, 1u);

  proto::EvaluationResult wrong = w.answer(*t);
  wrong.candidate_id = "someone-else";
  w.send(wrong);
  ASSERT_TRUE(run_until([&] { return dispatcher_->stats().duplicates == 1; }));
  EXPECT_TRUE(results_.empty());
  EXPECT_EQ(dispatcher_->in_flight(), 1u);
  EXPECT_TRUE(store_->lease_payload(t->task_id)->has_value());
  EXPECT_FALSE(store_->get_result("someone-else", "cpu/test")->has_value());

  w.send(w.answer(*t));
  ASSERT_TRUE(run_until([&] { return results_.size() == 1; }));
  EXPECT_EQ(results_[0].candidate_id, "m");
  EXPECT_EQ(dispatcher_->in_flight(), 0u);
  EXPECT_FALSE(store_->lease_payload(t->task_id)->has_value());
}

TEST_F(DispatcherTest, ASilentWorkersTaskGoesToAnotherAndALateAnswerIsDropped) {
  FakeWorker a(ctx_, dispatcher_->endpoint(), "a");
  a.send(proto::Credit{1});
  dispatcher_->submit(task("c"));
  auto first = receive_task(a);
  ASSERT_TRUE(first.has_value());
  FakeWorker b(ctx_, dispatcher_->endpoint(), "b");
  b.send(proto::Credit{1});
  alive_.push_back(&b);
  // a says nothing more: after 3 silent intervals it is declared dead and b gets the task.
  auto second = receive_task(b);
  ASSERT_TRUE(second.has_value());
  EXPECT_EQ(second->task_id, first->task_id);
  EXPECT_EQ(dispatcher_->stats().workers_lost, 1u);
  b.send(b.answer(*second));
  ASSERT_TRUE(run_until([&] { return results_.size() == 1; }));
  a.send(a.answer(*first));  // a was only slow: its answer arrives late and changes nothing
  run_until([&] { return dispatcher_->stats().duplicates == 1; });
  EXPECT_EQ(results_.size(), 1u);
  EXPECT_EQ(dispatcher_->stats().duplicates, 1u);
}

TEST_F(DispatcherTest, ATaskThatOutlivesThreeWorkersIsQuarantined) {
  dispatcher_->submit(task("poison"));
  for (int i = 0; i < 3; ++i) {
    FakeWorker w(ctx_, dispatcher_->endpoint(), "victim" + std::to_string(i));
    w.send(proto::Credit{1});
    ASSERT_TRUE(receive_task(w).has_value()) << i;
    // w dies with the task (goes silent, then its socket closes)
    ASSERT_TRUE(run_until([&] { return dispatcher_->stats().workers_lost == static_cast<uint64_t>(i + 1); }));
  }
  ASSERT_EQ(dispatcher_->quarantined().size(), 1u);
  EXPECT_EQ(dispatcher_->quarantined()[0].task.candidate_id, "poison");
  EXPECT_NE(dispatcher_->quarantined()[0].reason.find("3 workers"), std::string::npos);
  EXPECT_EQ(dispatcher_->queued(), 0u);
  EXPECT_FALSE(store_->lease_payload("task-poison")->has_value());
}

TEST_F(DispatcherTest, AfterARestartLeasedTasksAreQueuedAgainFromRedis) {
  FakeWorker w(ctx_, dispatcher_->endpoint(), "w1");
  w.send(proto::Credit{1});
  dispatcher_->submit(task("d"));
  dispatcher_->submit(task("e"));
  ASSERT_TRUE(receive_task(w).has_value());  // d is in flight, e still queued (in memory only)
  dispatcher_.reset();                       // the coordinator dies
  start();                                   // and comes back on the same Redis
  auto recovered = dispatcher_->recover();
  ASSERT_TRUE(recovered.is_ok()) << recovered.status().to_string();
  EXPECT_EQ(*recovered, 1u);  // the leased task; queued ones are the search's to resubmit
  EXPECT_EQ(dispatcher_->queued(), 1u);
  FakeWorker again(ctx_, dispatcher_->endpoint(), "w2");
  again.send(proto::Credit{1});
  auto t = receive_task(again);
  ASSERT_TRUE(t.has_value());
  EXPECT_EQ(t->candidate_id, "d");
  again.send(again.answer(*t));
  ASSERT_TRUE(run_until([&] { return results_.size() == 1; }));
}

TEST_F(DispatcherTest, RecoverFindsEveryLeaseNotOnlyTheFirstThousand) {
  for (int i = 0; i < 1005; ++i) {
    proto::EvaluateTask t = task("bulk" + std::to_string(i));
    ASSERT_TRUE(store_->lease_task(t.task_id, proto::encode({proto::kProtocolVersion, t.task_id, t}),
                                   4102444800000 + i).is_ok());
  }
  auto recovered = dispatcher_->recover();
  ASSERT_TRUE(recovered.is_ok()) << recovered.status().to_string();
  EXPECT_EQ(*recovered, 1005u);
  EXPECT_EQ(dispatcher_->queued(), 1005u);
}

// A peer that was never given the task sends `verified` first: refused and counted; the answer of
// the worker that holds the lease is the one merged.
TEST_F(DispatcherTest, OnlyTheLeaseHolderCanAnswerATask) {
  FakeWorker holder(ctx_, dispatcher_->endpoint(), "holder");
  FakeWorker rogue(ctx_, dispatcher_->endpoint(), "rogue");
  alive_ = {&holder, &rogue};
  holder.send(proto::Credit{1});
  dispatcher_->submit(task("x"));
  auto t = receive_task(holder);
  ASSERT_TRUE(t.has_value());
  proto::EvaluationResult forged = testing::verified_result(*t, "cpu/test", 0.001);
  rogue.send(forged);
  ASSERT_TRUE(run_until([&] { return dispatcher_->stats().forged == 1; }));
  EXPECT_TRUE(results_.empty());
  EXPECT_EQ(dispatcher_->in_flight(), 1u);
  EXPECT_FALSE(store_->get_result("x", "cpu/test")->has_value());
  holder.send(holder.answer(*t));
  ASSERT_TRUE(run_until([&] { return results_.size() == 1; }));
  EXPECT_EQ(results_[0].timing.median_us, 10);
}

// A `verified` result without the stages a verified result runs, even from the lease holder, is
// refused and the task is evaluated again.
TEST_F(DispatcherTest, AVerifiedResultWithoutItsStagesIsRefusedAndTheTaskRunsAgain) {
  FakeWorker w(ctx_, dispatcher_->endpoint(), "w1");
  alive_ = {&w};
  w.send(proto::Credit{1});
  dispatcher_->submit(task("bare"));
  auto t = receive_task(w);
  ASSERT_TRUE(t.has_value());
  proto::EvaluationResult bare = w.answer(*t);
  bare.stages.erase(bare.stages.begin() + 3);  // no adversarial stage
  w.send(bare);
  ASSERT_TRUE(run_until([&] { return dispatcher_->stats().forged == 1; }));
  proto::EvaluationResult untimed = w.answer(*t);
  untimed.timing.samples = 0;
  EXPECT_NE(proto::result_inconsistency(untimed), "");
  EXPECT_EQ(proto::result_inconsistency(w.answer(*t)), "");
  EXPECT_TRUE(results_.empty());
  w.send(proto::Credit{1});
  auto again = receive_task(w);
  ASSERT_TRUE(again.has_value());
  EXPECT_EQ(again->task_id, t->task_id);
  w.send(w.answer(*again));
  ASSERT_TRUE(run_until([&] { return results_.size() == 1; }));
}

// A peer that never said hello (or was dropped) is told so with kErrorUnknownPeer, whatever it
// sends, and gets no work until it announces itself.
TEST_F(DispatcherTest, AnUnknownPeerIsToldToSayHello) {
  FakeWorker stranger(ctx_, dispatcher_->endpoint(), "stranger", {"cpu"}, "", {},
                      /*say_hello=*/false);
  stranger.send(proto::Credit{1});
  dispatcher_->submit(task("u"));
  std::optional<proto::Envelope> reply;
  ASSERT_TRUE(run_until([&] { return (reply = stranger.next()).has_value(); }));
  auto* e = std::get_if<proto::Error>(&reply->body);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->code, proto::kErrorUnknownPeer);
  EXPECT_EQ(dispatcher_->in_flight(), 0u);
  EXPECT_EQ(dispatcher_->stats().unknown_peers, 1u);
}

// A hello with a field beyond the bounds (a 300-byte worker id, a 10 KB session) is answered with
// bad_message naming the field; the peer does not join, and a normal hello from it then does.
TEST_F(DispatcherTest, AHelloBeyondItsBoundsIsRefusedAndTheWorkerCanSayHelloAgain) {
  const std::string long_id(300, 'w');
  FakeWorker w(ctx_, dispatcher_->endpoint(), long_id);
  std::optional<proto::Envelope> reply;
  ASSERT_TRUE(run_until([&] { return (reply = w.next()).has_value(); }));
  auto* e = std::get_if<proto::Error>(&reply->body);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->code, proto::kErrorBadMessage);
  EXPECT_NE(e->message.find("field 'worker_id' is 300 bytes"), std::string::npos) << e->message;
  EXPECT_TRUE(dispatcher_->worker_views().empty());

  proto::Hello hello = net::evaluator_hello("w1", "cpu", 1, "", "cpu/test", {});
  hello.session = std::string(10000, 's');
  w.send(hello);
  ASSERT_TRUE(run_until([&] { return (reply = w.next()).has_value(); }));
  e = std::get_if<proto::Error>(&reply->body);
  ASSERT_NE(e, nullptr);
  EXPECT_NE(e->message.find("field 'session'"), std::string::npos) << e->message;
  EXPECT_EQ(dispatcher_->stats().malformed, 2u);

  hello.session = "w-0123456789abcdef";
  w.send(hello);
  ASSERT_TRUE(run_until([&] { return dispatcher_->worker_views().size() == 1; }));
  EXPECT_EQ(dispatcher_->worker_views()[0].worker_id, "w1");
}

// The run's targets have spec hashes: an evaluator whose copy differs, or lacks one, is refused
// with what to do; one with the same copy gets work.
TEST_F(DispatcherTest, AnEvaluatorWithOtherTargetSpecsIsRefused) {
  dispatcher_.reset();
  start({{"rmsnorm", "aaaa1111"}});
  FakeWorker other(ctx_, dispatcher_->endpoint(), "other", {"cpu"}, "", {{"rmsnorm", "bbbb2222"}});
  FakeWorker none(ctx_, dispatcher_->endpoint(), "none", {"cpu"}, "", {{"softmax", "cccc"}});
  other.send(proto::Credit{1});
  none.send(proto::Credit{1});
  dispatcher_->submit(task("s"));
  for (FakeWorker* w : {&other, &none}) {
    std::optional<std::string> why = refusal(*w);
    ASSERT_TRUE(why.has_value());
    EXPECT_NE(why->find("--targets-dir"), std::string::npos) << *why;
  }
  EXPECT_EQ(dispatcher_->stats().refused_workers, 2u);
  EXPECT_EQ(dispatcher_->in_flight(), 0u);
  FakeWorker same(ctx_, dispatcher_->endpoint(), "same", {"cpu"}, "", {{"rmsnorm", "aaaa1111"}});
  same.send(proto::Credit{1});
  EXPECT_TRUE(receive_task(same).has_value());
}

// Triton cubins depend on the Triton version and kiln's compile worker: the first triton evaluator
// sets the run's toolchain, and one that compiles with another is refused with what to do; one
// with the same toolchain gets work; cpu evaluators' toolchains are not compared.
TEST_F(DispatcherTest, ATritonEvaluatorWithAnotherTritonIsRefused) {
  const std::string run = "triton 3.6.0, worker 0123456789ab";
  FakeWorker first(ctx_, dispatcher_->endpoint(), "first", {"triton"}, "H200", {}, true, run);
  first.send(proto::Credit{1});
  dispatcher_->submit(task("t1", "triton"));
  ASSERT_TRUE(receive_task(first).has_value());

  FakeWorker older(ctx_, dispatcher_->endpoint(), "older", {"triton"}, "H200", {}, true,
                   "triton 3.5.0, worker 0123456789ab");
  older.send(proto::Credit{1});
  std::optional<std::string> why = refusal(older);
  ASSERT_TRUE(why.has_value());
  EXPECT_NE(why->find("triton 3.5.0"), std::string::npos) << *why;
  EXPECT_NE(why->find(run), std::string::npos) << *why;
  EXPECT_NE(why->find("KILN_TRITON_PYTHON"), std::string::npos) << *why;
  EXPECT_EQ(dispatcher_->stats().refused_workers, 1u);

  FakeWorker same(ctx_, dispatcher_->endpoint(), "same", {"triton"}, "H200", {}, true, run);
  same.send(proto::Credit{1});
  dispatcher_->submit(task("t2", "triton"));
  EXPECT_TRUE(receive_task(same).has_value());
  FakeWorker cpu(ctx_, dispatcher_->endpoint(), "cpu", {"cpu"}, "", {}, true, "c++ 13");
  cpu.send(proto::Credit{1});
  dispatcher_->submit(task("c1"));
  EXPECT_TRUE(receive_task(cpu).has_value());
  EXPECT_EQ(dispatcher_->stats().refused_workers, 1u);
}

// A coordinator that has Triton itself made its candidate ids with that toolchain: even the first
// triton evaluator must have it.
TEST_F(DispatcherTest, TheCoordinatorsOwnTritonIsTheRunsToolchain) {
  dispatcher_.reset();
  start({}, false, "triton 3.6.0, worker 0123456789ab");
  FakeWorker other(ctx_, dispatcher_->endpoint(), "other", {"triton"}, "H200", {}, true,
                   "triton 3.7.0, worker 0123456789ab");
  other.send(proto::Credit{1});
  std::optional<std::string> why = refusal(other);
  ASSERT_TRUE(why.has_value());
  EXPECT_NE(why->find("triton 3.7.0"), std::string::npos) << *why;
  FakeWorker same(ctx_, dispatcher_->endpoint(), "same", {"triton"}, "H200", {}, true,
                  "triton 3.6.0, worker 0123456789ab");
  same.send(proto::Credit{1});
  dispatcher_->submit(task("t1", "triton"));
  EXPECT_TRUE(receive_task(same).has_value());
}

// An evaluator that cannot run a task (worker_fault) does not judge the candidate: the task goes
// to another evaluator, never back to one that could not run it; after max_kills such evaluators
// it is quarantined.
TEST_F(DispatcherTest, AWorkerFaultSendsTheTaskElsewhereNotBackToTheSameEvaluator) {
  FakeWorker broken(ctx_, dispatcher_->endpoint(), "broken");
  alive_ = {&broken};
  broken.send(proto::Credit{1});
  dispatcher_->submit(task("f"));
  auto t = receive_task(broken);
  ASSERT_TRUE(t.has_value());
  proto::EvaluationResult fault;
  fault.task_id = t->task_id;
  fault.candidate_id = t->candidate_id;
  fault.outcome = proto::Outcome::kInternalError;
  fault.worker_fault = true;
  fault.log = "target 'rmsnorm' differs";
  broken.send(fault);
  broken.send(proto::Credit{1});
  ASSERT_TRUE(run_until([&] { return dispatcher_->stats().worker_faults == 1; }));
  run_until([&] { return dispatcher_->in_flight() > 0; });
  EXPECT_EQ(dispatcher_->in_flight(), 0u) << "handed back to the evaluator that could not run it";
  EXPECT_TRUE(results_.empty());
  FakeWorker good(ctx_, dispatcher_->endpoint(), "good");
  alive_.push_back(&good);
  good.send(proto::Credit{1});
  auto again = receive_task(good);
  ASSERT_TRUE(again.has_value());
  EXPECT_EQ(again->task_id, t->task_id);
  good.send(good.answer(*again));
  ASSERT_TRUE(run_until([&] { return results_.size() == 1; }));
  EXPECT_EQ(results_[0].outcome, proto::Outcome::kVerified);
}

}  // namespace
}  // namespace kiln::coordinator
