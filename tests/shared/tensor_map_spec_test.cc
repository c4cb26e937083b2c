// Tensor maps in target.json: what loads, what is refused with the field named, and the map a
// launch gets at a shape (dims innermost first, byte strides, boxes from the parameters, `when`,
// shapes whose rows cannot be encoded), and its wire form.
#include "shared/tensor_map_spec.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>

#include "shared/target_spec.h"
#include "tests/support/test_env.h"

namespace kiln {
namespace {

// rmsnorm (x [M, N], w [N], y [M, N]) copied into `dir` with `edit` applied to its target.json.
Result<TargetSpec> load_edited(testing::TempDir& dir,
                               const std::function<void(nlohmann::json&)>& edit) {
  const std::string from = testing::builtin_targets_dir() + "/rmsnorm";
  for (const auto& e : std::filesystem::directory_iterator(from)) {
    std::filesystem::copy(e.path(), dir.path() + "/" + e.path().filename().string());
  }
  std::ifstream in(dir.file("target.json"));
  nlohmann::json j = nlohmann::json::parse(in);
  edit(j);
  dir.write("target.json", j.dump(2));
  return load_target(dir.path());
}

nlohmann::json x_tiles() {
  return {{"name", "x_tiles"}, {"tensor", "x"}, {"box", {"ROWS", "64"}}, {"swizzle", 128}};
}

TEST(TensorMapSpec, LoadsAndGivesTheDriversLayoutAtAShape) {
  testing::TempDir dir;
  Result<TargetSpec> t = load_edited(dir, [](nlohmann::json& j) {
    j["backends"]["cuda"]["seed"]["defines"] = {{"ROWS", "8"}};
    j["backends"]["cuda"]["seed"]["tensor_maps"] = {
        x_tiles(),
        {{"name", "w_all"}, {"tensor", "w"}, {"box", {"min(N, 256)"}}, {"when", "ROWS > 4"}},
        {{"name", "y_tiles"}, {"tensor", "y"}, {"box", {"1", "64"}}, {"when", "ROWS > 8"}}};
  });
  ASSERT_TRUE(t.is_ok()) << t.status().to_string();
  const KernelSpec& seed = t->backends.at("cuda").seed;
  ASSERT_EQ(seed.tensor_maps.size(), 3u);
  EXPECT_EQ(seed.tensor_maps[0].swizzle, 128);
  EXPECT_EQ(seed.tensor_maps[2].when, "ROWS > 8");

  Result<std::vector<TensorMapArg>> maps =
      tensor_maps_at(*t, seed.tensor_maps, seed.defines, {{"M", 300}, {"N", 4096}}, DType::kBF16);
  ASSERT_TRUE(maps.is_ok()) << maps.status().to_string();
  ASSERT_EQ(maps->size(), 2u) << "y_tiles' `when` does not hold";
  const TensorMapArg x = (*maps)[0];  // a copy: `maps` is reassigned below
  EXPECT_EQ(x.tensor, 0);
  EXPECT_EQ(x.dtype, DType::kBF16);
  EXPECT_EQ(x.dims, (std::vector<uint64_t>{4096, 300}));    // innermost first
  EXPECT_EQ(x.strides_bytes, std::vector<uint64_t>{8192});  // a row of 4096 bf16
  EXPECT_EQ(x.box, (std::vector<uint32_t>{64, 8}));
  EXPECT_TRUE(x.encodable);
  const TensorMapArg& w = (*maps)[1];
  EXPECT_EQ(w.tensor, 1);
  EXPECT_EQ(w.dims, std::vector<uint64_t>{4096});
  EXPECT_TRUE(w.strides_bytes.empty());
  EXPECT_EQ(w.box, std::vector<uint32_t>{256});

  // A row of 4099 bf16 is not a multiple of 16 bytes: passed, but as zeros for the kernel to see.
  maps = tensor_maps_at(*t, seed.tensor_maps, seed.defines, {{"M", 3}, {"N", 4099}}, DType::kBF16);
  ASSERT_TRUE(maps.is_ok()) << maps.status().to_string();
  EXPECT_FALSE((*maps)[0].encodable);
  EXPECT_TRUE((*maps)[1].encodable) << "a 1-d map has no row stride";

  // The wire form round-trips.
  Result<TensorMapArg> back = tensor_map_from_json(tensor_map_json(x)["tmap"]);
  ASSERT_TRUE(back.is_ok()) << back.status().to_string();
  EXPECT_EQ(back->dims, x.dims);
  EXPECT_EQ(back->strides_bytes, x.strides_bytes);
  EXPECT_EQ(back->box, x.box);
  EXPECT_EQ(back->swizzle, 128);
  EXPECT_EQ(back->dtype, DType::kBF16);
}

// Boxes the hardware cannot take are errors of the configuration, naming the map.
TEST(TensorMapSpec, ABoxTheHardwareCannotTakeIsAnErrorNamingTheMap) {
  testing::TempDir dir;
  Result<TargetSpec> t = load_edited(dir, [](nlohmann::json& j) {
    j["backends"]["cuda"]["seed"]["defines"] = {{"ROWS", "8"}};
    j["backends"]["cuda"]["seed"]["tensor_maps"] = {x_tiles()};
  });
  ASSERT_TRUE(t.is_ok()) << t.status().to_string();
  const std::vector<TensorMapSpec> maps = t->backends.at("cuda").seed.tensor_maps;
  const Shape shape = {{"M", 64}, {"N", 1024}};
  auto error = [&](const std::map<std::string, std::string>& params, DType d) {
    Result<std::vector<TensorMapArg>> r = tensor_maps_at(*t, maps, params, shape, d);
    return r.is_ok() ? std::string("ok") : r.status().message();
  };
  EXPECT_EQ(error({{"ROWS", "8"}}, DType::kF16), "ok");
  EXPECT_NE(error({{"ROWS", "300"}}, DType::kF16).find("box size 300 of dim 'M' is outside 1..256"),
            std::string::npos);
  // 64 f32 = 256 bytes per box row: wider than a 128-byte swizzle span.
  EXPECT_NE(error({{"ROWS", "8"}}, DType::kF32).find("wider than the 128-byte swizzle"),
            std::string::npos);
  EXPECT_NE(error({}, DType::kF16).find("tensor map 'x_tiles'"), std::string::npos);

  std::vector<TensorMapSpec> odd = maps;
  odd[0].box = {"8", "4"};  // 4 f16 = 8 bytes
  Result<std::vector<TensorMapArg>> r = tensor_maps_at(*t, odd, {}, shape, DType::kF16);
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("8 bytes; it must be a multiple of 16"), std::string::npos)
      << r.status().message();
  odd[0].box = {"8", "64"};
  odd[0].when = "N > 4";  // `when` sees the parameters only: the signature may not vary by shape
  r = tensor_maps_at(*t, odd, {}, shape, DType::kF16);
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("'when' (of the parameters alone)"), std::string::npos)
      << r.status().message();
}

struct BrokenMap {
  const char* label;
  std::function<void(nlohmann::json&)> edit;
  const char* expected;
};
void PrintTo(const BrokenMap& c, std::ostream* os) { *os << c.label; }

class TensorMapSpecRejects : public ::testing::TestWithParam<BrokenMap> {};

TEST_P(TensorMapSpecRejects, WithTheFieldAndTheProblem) {
  testing::TempDir dir;
  Result<TargetSpec> t = load_edited(dir, [](nlohmann::json& j) {
    j["backends"]["cuda"]["seed"]["defines"] = {{"ROWS", "8"}};
    j["backends"]["cuda"]["seed"]["tensor_maps"] = {x_tiles()};
    GetParam().edit(j);
  });
  ASSERT_FALSE(t.is_ok()) << GetParam().label;
  EXPECT_NE(t.status().message().find("target.json"), std::string::npos) << t.status().message();
  EXPECT_NE(t.status().message().find(GetParam().expected), std::string::npos)
      << GetParam().label << ": " << t.status().message();
}

nlohmann::json& first_map(nlohmann::json& j) {
  return j["backends"]["cuda"]["seed"]["tensor_maps"][0];
}

INSTANTIATE_TEST_SUITE_P(
    Table, TensorMapSpecRejects,
    ::testing::Values(
        BrokenMap{"not an array", [](auto& j) { j["backends"]["cuda"]["seed"]["tensor_maps"] = 3; },
                  "field 'backends.cuda.seed.tensor_maps': expected an array"},
        BrokenMap{"unknown key", [](auto& j) { first_map(j)["boxes"] = {"8"}; },
                  "tensor_maps[0].boxes"},
        BrokenMap{"no box", [](auto& j) { first_map(j).erase("box"); },
                  "field 'backends.cuda.seed.tensor_maps[0].box': missing"},
        BrokenMap{"no such tensor", [](auto& j) { first_map(j)["tensor"] = "z"; },
                  "'z' is not a tensor argument of the target"},
        BrokenMap{"a scalar", [](auto& j) { first_map(j)["tensor"] = "eps"; },
                  "'eps' is not a tensor argument"},
        BrokenMap{"box rank", [](auto& j) { first_map(j)["box"] = {"64"}; },
                  "'box' needs one size per dim of 'x' (2, at most 5)"},
        BrokenMap{"swizzle", [](auto& j) { first_map(j)["swizzle"] = 48; },
                  "'swizzle' is 0, 32, 64 or 128"},
        BrokenMap{
            "two of a name",
            [](auto& j) { j["backends"]["cuda"]["seed"]["tensor_maps"].push_back(x_tiles()); },
            "a second map of this name"},
        BrokenMap{"cpu backend",
                  [](auto& j) { j["backends"]["cpu"]["seed"]["tensor_maps"] = {x_tiles()}; },
                  "tensor maps are for the cuda backend only"}));

}  // namespace
}  // namespace kiln
