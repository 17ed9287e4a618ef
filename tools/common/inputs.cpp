#include "tools/common/inputs.h"

#include <map>
#include <optional>
#include <random>
#include <set>

#include "ir/npy.h"

namespace kiln::tools {
namespace {

void fill_random(ir::Tensor& tensor, uint64_t seed) {
  std::mt19937_64 rng(seed);
  const int64_t n = tensor.num_elements();
  const ir::DType dtype = tensor.dtype();
  for (int64_t i = 0; i < n; ++i) {
    const uint64_t bits = rng();
    double v;
    if (ir::is_float(dtype)) {
      v = double(bits >> 11) * 0x1.0p-53 * 2.0 - 1.0;  // uniform in [-1, 1)
    } else if (dtype == ir::DType::kBool) {
      v = double(bits >> 63);
    } else {
      v = double(bits >> 62);  // 0..3
    }
    tensor.set_element_from_double(i, v);
  }
}

}  // namespace

Result<std::vector<PreparedInput>> prepare_inputs(
    const std::vector<runtime::TensorSpec>& specs,
    const std::vector<std::pair<std::string, std::string>>& files,
    const std::vector<std::pair<std::string, int64_t>>& dims, uint64_t seed,
    std::vector<std::string>& warnings) {
  std::vector<std::optional<PreparedInput>> prepared(specs.size());
  auto index_of = [&](const std::string& name) -> std::optional<size_t> {
    for (size_t i = 0; i < specs.size(); ++i)
      if (specs[i].name == name) return i;
    return std::nullopt;
  };
  auto input_names = [&]() {
    std::string s;
    for (const auto& spec : specs) s += (s.empty() ? "'" : ", '") + spec.name + "'";
    return s.empty() ? std::string("none") : s;
  };

  // Given inputs, in command-line order.
  for (const auto& [name, path] : files) {
    std::optional<size_t> index = index_of(name);
    if (!index)
      return invalid_argument("--input " + name + "=" + path + ": the artifact has no input named '" +
                              name + "' (its inputs: " + input_names() + ")");
    if (prepared[*index]) return invalid_argument("input '" + name + "' is given twice");
    Result<ir::Tensor> tensor = ir::read_npy(path);
    if (!tensor.is_ok())
      return invalid_argument("input '" + name + "': " + tensor.status().message());
    Result<ir::Tensor> converted = ir::convert_npy_tensor(*tensor, specs[*index].type.dtype);
    if (!converted.is_ok()) {
      const ir::Tensor& t = *tensor;
      std::string given = std::string(ir::dtype_name(t.dtype())) + "[";
      for (size_t d = 0; d < t.shape().size(); ++d) given += (d ? ", " : "") + std::to_string(t.shape()[d]);
      given += "]";
      return invalid_argument("input '" + name + "': expected " + specs[*index].type.to_string() +
                              ", given " + given + " in " + path + " (dtype " +
                              std::string(ir::dtype_name(t.dtype())) + " instead of " +
                              std::string(ir::dtype_name(specs[*index].type.dtype)) + ")");
    }
    prepared[*index] = PreparedInput{std::move(converted).value(), path};
  }

  // Symbols: every symbol of the signature, with sizes from given inputs, then --dim.
  std::set<std::string> symbols;
  for (const auto& spec : specs)
    for (const ir::Dim& d : spec.type.shape)
      if (d.is_symbolic()) symbols.insert(d.symbol_name());
  std::map<std::string, std::pair<int64_t, std::string>> bound;  // symbol -> (size, from)
  for (size_t i = 0; i < specs.size(); ++i) {
    if (!prepared[i]) continue;
    const ir::Tensor& t = prepared[i]->tensor;
    if (t.rank() != specs[i].type.rank()) continue;  // the session reports the rank mismatch
    for (size_t d = 0; d < specs[i].type.shape.size(); ++d) {
      const ir::Dim& dim = specs[i].type.shape[d];
      if (dim.is_symbolic())
        bound.emplace(dim.symbol_name(), std::make_pair(t.shape()[d], "input '" + specs[i].name + "'"));
    }
  }
  for (const auto& [symbol, size] : dims) {
    if (!symbols.count(symbol)) {
      // A warning, not an error: scripts pass the same --dim list to several artifacts.
      std::string known;
      for (const std::string& s : symbols) known += (known.empty() ? "" : ", ") + s;
      warnings.push_back("--dim " + symbol + "=" + std::to_string(size) +
                         " is unused: the artifact has no symbolic dimension '" + symbol + "' (" +
                         (known.empty() ? std::string("it has none") : "its symbols: " + known) + ")");
      continue;
    }
    auto [it, inserted] = bound.emplace(symbol, std::make_pair(size, "--dim"));
    if (!inserted && it->second.first != size)
      return invalid_argument("--dim " + symbol + "=" + std::to_string(size) + " disagrees with " +
                              it->second.second + ", which has " + symbol + " = " +
                              std::to_string(it->second.first));
  }

  // Random inputs for the rest. Each input gets its own stream, derived from the seed and its
  // position, so giving one input from a file does not change the others' random values.
  std::vector<PreparedInput> out;
  for (size_t i = 0; i < specs.size(); ++i) {
    if (prepared[i]) {
      out.push_back(std::move(*prepared[i]));
      continue;
    }
    std::vector<int64_t> sizes;
    for (const ir::Dim& d : specs[i].type.shape) {
      if (d.is_static()) {
        sizes.push_back(d.size());
        continue;
      }
      auto it = bound.find(d.symbol_name());
      if (it == bound.end())
        return invalid_argument("input '" + specs[i].name + "' (" + specs[i].type.to_string() +
                                ") is random and its dimension " + d.symbol_name() +
                                " has no size: give --dim " + d.symbol_name() +
                                "=SIZE or the input with --input " + specs[i].name + "=FILE.npy");
      sizes.push_back(it->second.first);
    }
    Result<ir::Tensor> tensor = ir::Tensor::zeros(specs[i].type.dtype, sizes);
    if (!tensor.is_ok())
      return invalid_argument("input '" + specs[i].name + "': " + tensor.status().message());
    fill_random(*tensor, seed * 0x9E3779B97F4A7C15ull + i + 1);
    out.push_back({std::move(tensor).value(), "random (seed " + std::to_string(seed) + ")"});
  }
  return out;
}

ir::SymbolBindings bound_symbols(const std::vector<runtime::TensorSpec>& specs,
                                 const std::vector<PreparedInput>& inputs) {
  ir::SymbolBindings symbols;
  for (size_t i = 0; i < specs.size() && i < inputs.size(); ++i)
    for (size_t d = 0; d < specs[i].type.shape.size() && d < inputs[i].tensor.shape().size(); ++d)
      if (specs[i].type.shape[d].is_symbolic())
        symbols.emplace(specs[i].type.shape[d].symbol_name(), inputs[i].tensor.shape()[d]);
  return symbols;
}

}  // namespace kiln::tools
