// What a target's search tells the agents it asks: the template configurations its population
// already has (ProposeTask.evaluated), the latest kMaxEvaluatedSent of them, and not the
// configurations of an agent's own kernels.
#include "coordinator/target_search.h"

#include <gtest/gtest.h>

#include <string>

#include "shared/target_spec.h"
#include "tests/support/test_env.h"

namespace kiln::coordinator {
namespace {

TEST(TargetSearch, AnAgentsTaskCarriesTheTemplateConfigurationsProposedTheLatestFirst) {
  Result<TargetSpec> spec = testing::load_builtin_target("reduce");
  ASSERT_TRUE(spec.is_ok()) << spec.status().to_string();
  TargetSearch st(*spec, "", "cpu", SearchParams{});
  ASSERT_NE(st.backend, nullptr);
  ASSERT_TRUE(st.backend->tunable.has_value());
  const std::string tmpl = st.backend->tunable->source;
  Individual parent;
  parent.id = "parent";
  parent.params = {{"UNROLL", "1"}};

  st.child_proposed("c1", tmpl, {{"UNROLL", "2"}}, 0, parent.id);
  st.child_proposed("c2", "// an agent's own kernel\n", {{"UNROLL", "9"}}, 0, parent.id);
  st.child_proposed("c3", tmpl, {{"UNROLL", "4"}}, 0, parent.id);
  proto::ProposeTask task = st.agent_task(parent, nullptr, "cpu");
  EXPECT_EQ(task.evaluated, (std::vector<Params>{{{"UNROLL", "2"}}, {{"UNROLL", "4"}}}));

  // Bounded: the oldest go first.
  const size_t limit = proto::ProposeTask::kMaxEvaluatedSent;
  for (size_t i = 0; i < limit; ++i) {
    st.child_proposed("d" + std::to_string(i), tmpl, {{"UNROLL", std::to_string(100 + i)}}, 0,
                      parent.id);
  }
  task = st.agent_task(parent, nullptr, "cpu");
  ASSERT_EQ(task.evaluated.size(), limit);
  EXPECT_EQ(task.evaluated.front(), (Params{{"UNROLL", "100"}}));
  EXPECT_EQ(task.evaluated.back(), (Params{{"UNROLL", std::to_string(100 + limit - 1)}}));
}

}  // namespace
}  // namespace kiln::coordinator
