#include "shared/status.h"

#include <gtest/gtest.h>

#include "shared/hash.h"

namespace kiln {
namespace {

Result<int> parse_positive(int x) {
  if (x <= 0) return invalid_argument("expected a positive number, got " + std::to_string(x));
  return x;
}

Result<int> doubled(int x) {
  KILN_ASSIGN_OR_RETURN(int v, parse_positive(x));
  return 2 * v;
}

TEST(Status, DefaultIsOk) {
  Status s;
  EXPECT_TRUE(s.is_ok());
  EXPECT_EQ(s.to_string(), "OK");
}

TEST(Status, ContextIsPrefixedAsErrorsPropagate) {
  Status s = invalid_argument("expected int").with_context("field 'port'").with_context("run.json");
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "run.json: field 'port': expected int");
  EXPECT_EQ(s.to_string(), "INVALID_ARGUMENT: run.json: field 'port': expected int");
}

TEST(Result, CarriesValueOrErrorThroughAssignOrReturn) {
  Result<int> good = doubled(21);
  ASSERT_TRUE(good.is_ok());
  EXPECT_EQ(*good, 42);
  Result<int> bad = doubled(-1);
  ASSERT_FALSE(bad.is_ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("-1"), std::string::npos);
  EXPECT_EQ(bad.value_or(7), 7);
}

TEST(ResultDeathTest, ValueOfErrorAbortsWithFileAndLine) {
  Result<int> bad = invalid_argument("nope");
  EXPECT_DEATH((void)bad.value(), "invariant failed at .*status.h");
}

TEST(Hash, Sha256MatchesKnownVector) {
  EXPECT_EQ(sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(sha256_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
}

TEST(Hash, FieldHashIsLengthPrefixedSoBoundariesMatter) {
  std::string ab_c = Sha256().add("ab").add("c").hex();
  std::string a_bc = Sha256().add("a").add("bc").hex();
  EXPECT_NE(ab_c, a_bc);
  EXPECT_EQ(ab_c, Sha256().add("ab").add("c").hex());
  EXPECT_EQ(ab_c.size(), 64u);
}

}  // namespace
}  // namespace kiln
