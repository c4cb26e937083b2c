// The triton backend's binary: a header line, JSON metadata, then the cubin.
#include "evaluator/triton/triton_binary.h"

#include <nlohmann/json.hpp>

namespace kiln::eval {
namespace {
constexpr std::string_view kMagic = "kiln-triton-cubin 2\n";
}  // namespace

std::string encode_triton_binary(const TritonKernel& k) {
  nlohmann::json meta = {{"name", k.name},
                         {"shared_bytes", k.shared_bytes},
                         {"num_warps", k.num_warps},
                         {"hidden_args", k.hidden_args},
                         {"triton_version", k.triton_version},
                         {"cubin_bytes", k.cubin.size()}};
  std::string tail;
  if (k.divisible) {
    meta["divisible"] = {{"name", k.divisible->name},
                         {"shared_bytes", k.divisible->shared_bytes},
                         {"args", k.divisible->args},
                         {"cubin_bytes", k.divisible->cubin.size()}};
    tail = k.divisible->cubin;
  }
  return std::string(kMagic) + meta.dump() + "\n" + k.cubin + tail;
}

bool is_triton_binary(const std::string& binary) {
  return binary.compare(0, kMagic.size(), kMagic) == 0;
}

Result<TritonKernel> decode_triton_binary(const std::string& binary) {
  if (!is_triton_binary(binary)) return invalid_argument("not a triton binary (no header)");
  const size_t nl = binary.find('\n', kMagic.size());
  if (nl == std::string::npos) return invalid_argument("triton binary: no metadata line");
  const nlohmann::json meta =
      nlohmann::json::parse(binary.substr(kMagic.size(), nl - kMagic.size()), nullptr, false);
  if (!meta.is_object()) return invalid_argument("triton binary: the metadata is not JSON");
  TritonKernel k;
  try {
    k.name = meta.at("name").get<std::string>();
    k.shared_bytes = meta.at("shared_bytes").get<unsigned>();
    k.num_warps = meta.at("num_warps").get<unsigned>();
    k.hidden_args = meta.at("hidden_args").get<unsigned>();
    k.triton_version = meta.at("triton_version").get<std::string>();
    const size_t bytes = meta.at("cubin_bytes").get<size_t>();
    size_t divisible_bytes = 0;
    if (meta.contains("divisible")) {
      const nlohmann::json& d = meta.at("divisible");
      TritonDivisible v;
      v.name = d.at("name").get<std::string>();
      v.shared_bytes = d.at("shared_bytes").get<unsigned>();
      v.args = d.at("args").get<std::vector<unsigned>>();
      divisible_bytes = d.at("cubin_bytes").get<size_t>();
      if (v.name.empty() || divisible_bytes == 0) {
        return invalid_argument("triton binary: the divisible variant has no entry point or cubin");
      }
      k.divisible = std::move(v);
    }
    if (binary.size() - (nl + 1) != bytes + divisible_bytes) {
      return invalid_argument("triton binary: the cubins are cut short (or run on)");
    }
    k.cubin = binary.substr(nl + 1, bytes);
    if (k.divisible) k.divisible->cubin = binary.substr(nl + 1 + bytes);
  } catch (const nlohmann::json::exception& e) {
    return invalid_argument(std::string("triton binary: metadata: ") + e.what());
  }
  // The launch convention kiln implements (its hidden trailing scratch pointers, the metadata
  // read above) is Triton 3's: a cubin of another major version is refused, not guessed at.
  if (k.triton_version.rfind("3.", 0) != 0) {
    return invalid_argument("triton binary: compiled by Triton '" + k.triton_version +
                            "'; kiln launches the cubins of Triton 3.x (KILN_TRITON_PYTHON names "
                            "the python whose Triton compiles them)");
  }
  if (k.name.empty() || k.num_warps == 0 || k.num_warps > 32) {
    return invalid_argument("triton binary: an empty entry point or a warp count outside 1..32");
  }
  return k;
}

}  // namespace kiln::eval
