// The structure-aware .kiln mutator (see artifact_mutator.h): FlatBuffers reflection over the
// schema embedded by flatc (kiln_bfbs_generated.h) finds every field of the model; the object
// API re-serializes it with defaults present.
#include "tests/fuzz/artifact_mutator.h"

#include <flatbuffers/flatbuffers.h>
#include <flatbuffers/reflection.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <optional>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "artifact/artifact.h"
#include "kiln_bfbs_generated.h"
#include "kiln_generated.h"

extern "C" size_t LLVMFuzzerMutate(uint8_t* data, size_t size, size_t max_size);

namespace kiln::fuzz {
namespace {

using Rng = std::minstd_rand;

// The parts of a .kiln file; `model` is a verified Model FlatBuffer.
struct ArtifactParts {
  bool has_header = false;  // format 3 and later; formats 1-2 are one Model buffer
  std::vector<uint8_t> data_segment;
  std::vector<uint8_t> model;
};

// Whether the object API (UnPackModel, used below) can read the verified model: it dereferences
// the table of every typed union, which the verifier allows to be absent (the reader refuses such
// a node; byte-level mutation still reaches it).
bool unpackable(const fb::Model& model) {
  if (!model.graph() || !model.graph()->nodes()) return true;
  for (const fb::Node* node : *model.graph()->nodes())
    if (node && node->attrs_type() != fb::Attrs::NONE && !node->attrs()) return false;
  return true;
}

bool verify_model(const std::vector<uint8_t>& model) {
  flatbuffers::Verifier verifier(model.data(), model.size());
  // The identifier sits at bytes 4-7: a shorter buffer has none (and must not be read past).
  return model.size() >= 8 && flatbuffers::BufferHasIdentifier(model.data(), fb::ModelIdentifier()) &&
         fb::VerifyModelBuffer(verifier) && unpackable(*fb::GetModel(model.data()));
}

std::optional<ArtifactParts> split(std::span<const uint8_t> file) {
  ArtifactParts parts;
  flatbuffers::Verifier header_verifier(file.data(), std::min(file.size(), artifact::kFileHeaderBytes));
  if (file.size() >= artifact::kFileHeaderBytes &&
      header_verifier.VerifyBuffer<fb::FileHeader>(fb::ModelIdentifier()) &&
      flatbuffers::GetRoot<fb::FileHeader>(file.data())->format_version() >= 3) {
    const auto* header = flatbuffers::GetRoot<fb::FileHeader>(file.data());
    const uint64_t data_offset = header->data_offset(), data_size = header->data_size();
    const uint64_t model_offset = header->model_offset();
    if (data_offset > file.size() || data_size > file.size() - data_offset || model_offset >= file.size())
      return std::nullopt;
    parts.has_header = true;
    parts.data_segment.assign(file.begin() + data_offset, file.begin() + data_offset + data_size);
    parts.model.assign(file.begin() + model_offset, file.end());
  } else {
    parts.model.assign(file.begin(), file.end());
  }
  if (!verify_model(parts.model)) return std::nullopt;
  return parts;
}

// The model again, with every scalar field stored (ForceDefaults), so each can be mutated in place.
std::vector<uint8_t> with_defaults_present(const std::vector<uint8_t>& model) {
  std::unique_ptr<fb::ModelT> object = fb::UnPackModel(model.data());
  flatbuffers::FlatBufferBuilder builder;
  builder.ForceDefaults(true);
  fb::FinishModelBuffer(builder, fb::Model::Pack(builder, object.get()));
  return std::vector<uint8_t>(builder.GetBufferPointer(), builder.GetBufferPointer() + builder.GetSize());
}

// Where the fields of a model buffer are. Offsets are into the buffer (stable until a mutation
// resizes it); pointers are used for one resizing mutation only.
struct Sites {
  struct Scalar {
    size_t offset;
    reflection::BaseType type;
  };
  struct Vector {
    const flatbuffers::VectorOfAny* vector;
    reflection::BaseType element;
  };
  std::vector<Scalar> scalars;
  std::vector<Vector> vectors;
  std::vector<const flatbuffers::String*> strings;
};

class SiteCollector {
 public:
  SiteCollector(const reflection::Schema& schema, const uint8_t* base, Sites& sites)
      : schema_(schema), base_(base), sites_(sites) {}

  void table(const reflection::Object& object, const flatbuffers::Table& table, int depth) {
    if (depth > 16) return;
    for (const reflection::Field* field : *object.fields()) {
      if (field->deprecated()) continue;
      const reflection::BaseType type = field->type()->base_type();
      if (flatbuffers::IsScalar(type)) {
        if (table.CheckField(field->offset()))
          sites_.scalars.push_back({size_t(table.GetAddressOf(field->offset()) - base_), type});
        continue;
      }
      switch (type) {
        case reflection::String:
          if (const flatbuffers::String* s = flatbuffers::GetFieldS(table, *field)) sites_.strings.push_back(s);
          break;
        case reflection::Obj:
          if (const flatbuffers::Table* t = flatbuffers::GetFieldT(table, *field))
            this->table(*schema_.objects()->Get(field->type()->index()), *t, depth + 1);
          break;
        case reflection::Union:
          if (const flatbuffers::Table* t = flatbuffers::GetFieldT(table, *field))
            this->table(flatbuffers::GetUnionType(schema_, object, *field, table), *t, depth + 1);
          break;
        case reflection::Vector:
          if (const flatbuffers::VectorOfAny* v = flatbuffers::GetFieldAnyV(table, *field))
            vector(*field, *v, depth);
          break;
        default: break;
      }
    }
  }

 private:
  void vector(const reflection::Field& field, const flatbuffers::VectorOfAny& v, int depth) {
    const reflection::BaseType element = field.type()->element();
    sites_.vectors.push_back({&v, element});
    if (element == reflection::String) {
      for (flatbuffers::uoffset_t i = 0; i < v.size(); ++i)
        sites_.strings.push_back(flatbuffers::GetAnyVectorElemPointer<const flatbuffers::String>(&v, i));
    } else if (element == reflection::Obj) {
      const reflection::Object& object = *schema_.objects()->Get(field.type()->index());
      for (flatbuffers::uoffset_t i = 0; i < v.size(); ++i)
        table(object, *flatbuffers::GetAnyVectorElemPointer<const flatbuffers::Table>(&v, i), depth + 1);
    }
  }

  const reflection::Schema& schema_;
  const uint8_t* base_;
  Sites& sites_;
};

template <class T>
T pick(Rng& rng, const std::vector<T>& from) {
  return from[std::uniform_int_distribution<size_t>(0, from.size() - 1)(rng)];
}

// An interesting new value for an integer of `bytes` bytes (signed or not) that holds `value`.
int64_t interesting_integer(Rng& rng, int64_t value, size_t bytes, bool is_signed) {
  const int64_t max = bytes >= 8 ? std::numeric_limits<int64_t>::max()
                      : is_signed ? (int64_t(1) << (8 * bytes - 1)) - 1
                                  : (int64_t(1) << (8 * bytes)) - 1;
  switch (std::uniform_int_distribution<int>(0, 9)(rng)) {
    case 0: return 0;
    case 1: return 1;
    case 2: return -1;
    // Wrapping arithmetic: the neighbours of an extreme wrap around, as the field would.
    case 3: return int64_t(uint64_t(value) + 1);
    case 4: return int64_t(uint64_t(value) - 1);
    case 5: return int64_t(uint64_t(value) * 2);
    case 6: return max;
    case 7: return is_signed ? -max - 1 : max - 1;
    case 8: return std::uniform_int_distribution<int64_t>(0, 8)(rng);
    default: return int64_t(rng()) << 32 | rng();
  }
}

double interesting_float(Rng& rng, double value) {
  switch (std::uniform_int_distribution<int>(0, 6)(rng)) {
    case 0: return 0.0;
    case 1: return -value;
    case 2: return std::numeric_limits<double>::quiet_NaN();
    case 3: return std::numeric_limits<double>::infinity();
    case 4: return 1e30;
    case 5: return value * 2;
    default: return std::uniform_real_distribution<double>(-4, 4)(rng);
  }
}

// Mutates the scalar of `type` at `p` in place; `same_type` may supply a value seen elsewhere.
void mutate_scalar(Rng& rng, uint8_t* p, reflection::BaseType type, std::optional<int64_t> same_type) {
  if (type == reflection::Float || type == reflection::Double) {
    const double old = flatbuffers::GetAnyValueF(type, p);
    flatbuffers::SetAnyValueF(type, p, interesting_float(rng, old));
    return;
  }
  const size_t bytes = flatbuffers::GetTypeSize(type);
  const bool is_signed = type == reflection::Byte || type == reflection::Short || type == reflection::Int ||
                         type == reflection::Long;
  const int64_t old = flatbuffers::GetAnyValueI(type, p);
  const int64_t value = same_type && rng() % 4 == 0 ? *same_type : interesting_integer(rng, old, bytes, is_signed);
  flatbuffers::SetAnyValueI(type, p, value);  // truncates to the field's width
}

// One structure-aware mutation of a model buffer (defaults present). False when it found
// nothing to mutate.
bool mutate_model(Rng& rng, std::vector<uint8_t>& model) {
  const reflection::Schema& schema = *reflection::GetSchema(fb::ModelBinarySchema::data());
  Sites sites;
  SiteCollector(schema, model.data(), sites)
      .table(*schema.root_table(), *flatbuffers::GetAnyRoot(model.data()), 0);
  const int kind = std::uniform_int_distribution<int>(0, 9)(rng);
  if (kind < 5 && !sites.scalars.empty()) {  // a table's scalar field
    const Sites::Scalar site = pick(rng, sites.scalars);
    std::optional<int64_t> other;
    const Sites::Scalar donor = pick(rng, sites.scalars);
    if (donor.type == site.type) other = flatbuffers::GetAnyValueI(donor.type, model.data() + donor.offset);
    mutate_scalar(rng, model.data() + site.offset, site.type, other);
    return true;
  }
  if (kind < 7) {  // a scalar vector element (node inputs, kernel nodes, shapes, strides, bytes)
    std::vector<Sites::Vector> scalar_vectors;
    for (const Sites::Vector& v : sites.vectors)
      if (flatbuffers::IsScalar(v.element) && v.vector->size() > 0) scalar_vectors.push_back(v);
    if (scalar_vectors.empty()) return false;
    const Sites::Vector site = pick(rng, scalar_vectors);
    const size_t elem_size = flatbuffers::GetTypeSize(site.element);
    const size_t index = std::uniform_int_distribution<size_t>(0, site.vector->size() - 1)(rng);
    uint8_t* p = const_cast<uint8_t*>(site.vector->Data()) + index * elem_size;
    mutate_scalar(rng, p, site.element, std::nullopt);
    return true;
  }
  if (kind < 9 && !sites.strings.empty()) {  // a string, rewritten in place (never longer)
    auto* site = const_cast<flatbuffers::String*>(pick(rng, sites.strings));
    const size_t capacity = site->size();
    uint8_t* chars = reinterpret_cast<uint8_t*>(site->data());
    size_t length = 0;
    switch (rng() % 3) {
      case 0: {
        const flatbuffers::String* donor = pick(rng, sites.strings);
        length = std::min<size_t>(capacity, donor->size());
        std::memmove(chars, donor->data(), length);
        break;
      }
      case 1: break;  // empty
      default: length = capacity == 0 ? 0 : LLVMFuzzerMutate(chars, capacity, capacity);
    }
    // A FlatBuffers string is its length, its bytes and a NUL: shortening it in place keeps the
    // buffer's layout (the bytes after the new NUL become padding).
    flatbuffers::WriteScalar<flatbuffers::uoffset_t>(reinterpret_cast<uint8_t*>(site), flatbuffers::uoffset_t(length));
    chars[length] = 0;
    return true;
  }
  // A vector loses its last element, in place (its length prefix): an element of a vector of
  // offsets cannot move (offsets are relative to their own position).
  std::vector<Sites::Vector> nonempty;
  for (const Sites::Vector& v : sites.vectors)
    if (v.vector->size() > 0) nonempty.push_back(v);
  if (nonempty.empty()) return false;
  const Sites::Vector site = pick(rng, nonempty);
  auto* length = reinterpret_cast<uint8_t*>(const_cast<flatbuffers::VectorOfAny*>(site.vector));
  flatbuffers::WriteScalar<flatbuffers::uoffset_t>(length, site.vector->size() - 1);
  return true;
}

// header (format 3), data segment, model: each 64-byte aligned, file_size and offsets consistent.
std::vector<uint8_t> assemble(const ArtifactParts& parts, Rng& rng, bool perturb_header) {
  const auto align = [](uint64_t n) {
    return (n + artifact::kConstantAlignment - 1) / artifact::kConstantAlignment * artifact::kConstantAlignment;
  };
  std::vector<uint8_t> model = parts.model;
  fb::Model* root = fb::GetMutableModel(model.data());
  if (!parts.has_header) {
    root->mutate_file_size(model.size());
    return model;
  }
  uint64_t data_offset = artifact::kFileHeaderBytes, data_size = parts.data_segment.size();
  uint64_t model_offset = align(data_offset + data_size);
  const uint64_t file_size = model_offset + model.size();
  root->mutate_file_size(file_size);
  if (perturb_header) {
    uint64_t& field = rng() % 3 == 0 ? data_offset : rng() % 2 == 0 ? data_size : model_offset;
    field = uint64_t(interesting_integer(rng, int64_t(field), 8, false));
  }
  flatbuffers::FlatBufferBuilder builder;
  builder.ForceDefaults(true);
  builder.Finish(fb::CreateFileHeader(builder, root->format_version(), data_offset, data_size, model_offset),
                 fb::ModelIdentifier());
  std::vector<uint8_t> file(file_size, 0);
  std::memcpy(file.data(), builder.GetBufferPointer(), std::min<size_t>(builder.GetSize(), artifact::kFileHeaderBytes));
  std::copy(parts.data_segment.begin(), parts.data_segment.end(), file.begin() + artifact::kFileHeaderBytes);
  std::copy(model.begin(), model.end(), file.end() - model.size());
  return file;
}

}  // namespace

size_t mutate_artifact(uint8_t* data, size_t size, size_t max_size, unsigned int seed) {
  Rng rng(seed);
  // libFuzzer's buffer need not be 8-byte aligned, and the FlatBuffers verifier checks alignment
  // relative to the buffer's start only: the header's 64-bit fields are read from an aligned copy.
  const std::vector<uint8_t> original(data, data + size);
  std::optional<ArtifactParts> parts = split(original);
  if (!parts || rng() % 8 == 0) return LLVMFuzzerMutate(data, size, max_size);
  parts->model = with_defaults_present(parts->model);
  bool perturb_header = false;
  const unsigned choice = rng() % 16;
  if (choice == 0 && parts->has_header) {
    perturb_header = true;
  } else if (choice == 1 && !parts->data_segment.empty()) {
    std::vector<uint8_t>& segment = parts->data_segment;
    segment.resize(LLVMFuzzerMutate(segment.data(), segment.size(), segment.size()));
  } else if (!mutate_model(rng, parts->model)) {
    return LLVMFuzzerMutate(data, size, max_size);
  }
  const std::vector<uint8_t> file = assemble(*parts, rng, perturb_header);
  if (file.size() > max_size) return LLVMFuzzerMutate(data, size, max_size);
  std::memcpy(data, file.data(), file.size());
  return file.size();
}

}  // namespace kiln::fuzz
