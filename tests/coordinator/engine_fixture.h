// What every engine test starts from: a private redis-server and a store on it, a ZeroMQ context
// for the Dispatcher and the workers, and the targets the search runs on.
#pragma once

#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <utility>
#include <vector>
#include <zmq.hpp>

#include "shared/redis_store.h"
#include "shared/target_spec.h"
#include "tests/support/test_env.h"

namespace kiln::coordinator {

// Base is ::testing::Test, or ::testing::TestWithParam<P> for a parameterised suite.
template <class Base = ::testing::Test>
class EngineFixtureT : public Base {
 protected:
  // Starts the redis-server and connects the store; call as ASSERT_NO_FATAL_FAILURE(start_store()).
  void start_store() { ASSERT_EQ(testing::connect_store(server_, &client_, &store_), ""); }
  // Loads the target in `dir` (or the built-in one of that name) and returns it, or fails the test.
  TargetSpec* add_target(const std::string& dir_or_name) {
    Result<TargetSpec> t = dir_or_name.find('/') == std::string::npos
                               ? testing::load_builtin_target(dir_or_name)
                               : load_target(dir_or_name);
    EXPECT_TRUE(t.is_ok()) << t.status().to_string();
    if (!t.is_ok()) return nullptr;
    targets_.push_back(std::move(t).value());
    return &targets_.back();
  }

  testing::RedisServer server_;
  std::optional<redis::RedisClient> client_;
  std::optional<redis::Store> store_;
  zmq::context_t ctx_;
  std::vector<TargetSpec> targets_;
};
using EngineFixture = EngineFixtureT<>;

}  // namespace kiln::coordinator
