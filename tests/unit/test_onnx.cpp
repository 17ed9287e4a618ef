// Unit tests for the ONNX importer (frontend/onnx): models are built here with the ONNX protobuf
// classes, serialized and imported from bytes. Compiled only when the build has kiln_onnx.
#ifdef KILN_HAVE_ONNX

#include <doctest/doctest.h>
#include <onnx/onnx_pb.h>

#include <cmath>
#include <filesystem>
#include <functional>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#include "frontend/onnx/onnx_importer.h"
#include "frontend/parser.h"
#include "ir/interpreter.h"
#include "ir/printer.h"

namespace {

using namespace kiln;

struct ModelBuilder {
  onnx::ModelProto model;
  onnx::GraphProto* graph;

  explicit ModelBuilder(int64_t opset = 13) {
    model.set_ir_version(8);
    auto* op = model.add_opset_import();
    op->set_domain("");
    op->set_version(opset);
    graph = model.mutable_graph();
    graph->set_name("test");
  }
  // dims: a number is static, "" an unnamed dynamic dim, anything else a dim_param.
  void input(const std::string& name, const std::vector<std::string>& dims,
             int elem = onnx::TensorProto::FLOAT) {
    auto* vi = graph->add_input();
    vi->set_name(name);
    auto* tt = vi->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(elem);
    auto* shape = tt->mutable_shape();
    for (const auto& d : dims) {
      auto* dim = shape->add_dim();
      if (!d.empty() && std::isdigit(static_cast<unsigned char>(d[0]))) dim->set_dim_value(std::stoll(d));
      else if (!d.empty()) dim->set_dim_param(d);
    }
  }
  void output(const std::string& name) { graph->add_output()->set_name(name); }
  onnx::NodeProto* node(const std::string& op, std::vector<std::string> ins, std::vector<std::string> outs,
                        const std::string& name = "") {
    auto* n = graph->add_node();
    n->set_op_type(op);
    n->set_name(name);
    for (auto& i : ins) n->add_input(i);
    for (auto& o : outs) n->add_output(o);
    return n;
  }
  onnx::TensorProto* init_floats(const std::string& name, std::vector<int64_t> dims, std::vector<float> v,
                                 bool raw = false) {
    auto* t = graph->add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::FLOAT);
    for (auto d : dims) t->add_dims(d);
    if (raw) {
      t->set_raw_data(std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float)));
    } else {
      for (float f : v) t->add_float_data(f);
    }
    return t;
  }
  void init_ints(const std::string& name, std::vector<int64_t> v) {
    auto* t = graph->add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::INT64);
    t->add_dims(int64_t(v.size()));
    for (auto x : v) t->add_int64_data(x);
  }
  std::string bytes() const { return model.SerializeAsString(); }
};

void set_int(onnx::NodeProto* n, const std::string& name, int64_t v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INT);
  a->set_i(v);
}
void set_ints(onnx::NodeProto* n, const std::string& name, std::vector<int64_t> v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INTS);
  for (auto x : v) a->add_ints(x);
}

void set_string(onnx::NodeProto* n, const std::string& name, const std::string& v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::STRING);
  a->set_s(v);
}
void set_strings(onnx::NodeProto* n, const std::string& name, std::vector<std::string> v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::STRINGS);
  for (auto& x : v) a->add_strings(x);
}
void set_float(onnx::NodeProto* n, const std::string& name, float v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::FLOAT);
  a->set_f(v);
}
void set_floats(onnx::NodeProto* n, const std::string& name, std::vector<float> v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::FLOATS);
  for (float x : v) a->add_floats(x);
}

Result<ir::Graph> import(const std::string& bytes, Diagnostics& diags, const std::string& base_dir = "") {
  return onnx_import::import_onnx_bytes(std::as_bytes(std::span(bytes.data(), bytes.size())), "model.onnx",
                                        base_dir, diags);
}

ir::Tensor floats(std::vector<int64_t> shape, std::vector<float> v) {
  auto t = ir::Tensor::zeros(ir::DType::kF32, shape);
  REQUIRE(t.is_ok());
  for (size_t i = 0; i < v.size(); ++i) t->mutable_data_as<float>()[i] = v[i];
  return *t;
}

int count_ops(const ir::Graph& g, ir::OpKind op) {
  int n = 0;
  for (const auto& node : g.nodes()) n += !node.erased && node.op == op;
  return n;
}

}  // namespace

TEST_CASE("onnx: malformed and truncated files are clean errors") {
  Diagnostics diags;
  auto r = import(std::string("\x0a\xff\xff\xff\xff\x0f garbage", 16), diags);
  CHECK_FALSE(r.is_ok());
  REQUIRE(diags.has_errors());
  CHECK(diags.to_string().find("model.onnx: error: ") == 0);

  ModelBuilder m;
  m.input("x", {"2"});
  m.node("Relu", {"x"}, {"y"});
  m.output("y");
  const std::string full = m.bytes();
  int errors = 0;
  for (size_t cut = 1; cut < full.size(); ++cut) {
    Diagnostics d;
    auto t = import(full.substr(0, cut), d);
    if (!t.is_ok()) {
      CHECK(d.has_errors());
      ++errors;
    }
  }
  CHECK(errors > 0);
  Diagnostics ok;
  CHECK(import(full, ok).is_ok());
}

TEST_CASE("onnx: every unsupported node is reported in one run") {
  ModelBuilder m(13);
  m.input("x", {"2", "3"});
  m.node("TfIdfVectorizer", {"x"}, {"a"}, "first");
  m.node("Relu", {"x"}, {"r"});
  m.node("NonZero", {"r"}, {"c"}, "second");
  set_int(m.node("Cast", {"r"}, {"d"}, "third"), "to", onnx::TensorProto::STRING);
  m.output("d");
  Diagnostics diags;
  auto r = import(m.bytes(), diags);
  CHECK_FALSE(r.is_ok());
  const std::string text = diags.to_string();
  CHECK(diags.error_count() == 3);
  CHECK(text.find("node 'first' (TfIdfVectorizer, opset 13): unsupported operator") != std::string::npos);
  CHECK(text.find("node 'second' (NonZero, opset 13): the number of nonzero elements depends on the input values; "
                  "data-dependent output sizes are not supported") != std::string::npos);
  CHECK(text.find("node 'third' (Cast, opset 13): cast to STRING is not supported") != std::string::npos);
}

TEST_CASE("onnx: opsets 18-28 import with their forms; later opsets are refused") {
  // Opset 18: ReduceMax takes axes as an input; Split takes num_outputs (ceil-sized parts).
  ModelBuilder m(18);
  m.input("x", {"2", "5"});
  m.init_ints("axes", {1});
  m.node("ReduceMax", {"x", "axes"}, {"r"});
  set_int(m.node("Split", {"x"}, {"a", "b"}), "axis", 1);
  set_int(m.graph->mutable_node(1), "num_outputs", 2);
  m.output("r");
  m.output("a");
  m.output("b");
  Diagnostics diags;
  auto g = import(m.bytes(), diags);
  REQUIRE_MESSAGE(g.is_ok(), diags.to_string());
  CHECK(g->node(g->outputs()[0].node).type.shape == (ir::Shape{ir::Dim::of(2), ir::Dim::of(1)}));
  CHECK(g->node(g->outputs()[1].node).type.shape == (ir::Shape{ir::Dim::of(2), ir::Dim::of(3)}));
  CHECK(g->node(g->outputs()[2].node).type.shape == (ir::Shape{ir::Dim::of(2), ir::Dim::of(2)}));

  ModelBuilder later(29);
  later.input("x", {"2"});
  later.node("Relu", {"x"}, {"y"});
  later.output("y");
  Diagnostics later_diags;
  CHECK_FALSE(import(later.bytes(), later_diags).is_ok());
  CHECK(later_diags.to_string().find("opset 29 is not supported (Kiln imports opsets 7 to 28)") != std::string::npos);
}

TEST_CASE("onnx: mistakes in Split, Pad, OneHot, GatherElements, GatherND, Resize and ConvTranspose are diagnosed at the node") {
  struct Case {
    const char* op;
    std::vector<std::string> inputs;
    std::function<void(onnx::NodeProto*)> attrs;
    const char* message;
  };
  const std::vector<Case> cases = {
      {"Split", {"x"}, [](onnx::NodeProto* n) { set_int(n, "num_outputs", 3); },
       "node 'bad' (Split, opset 18): num_outputs differs from the number of outputs"},
      {"Pad", {"x", "pads"}, [](onnx::NodeProto* n) {
         auto* a = n->add_attribute();
         a->set_name("mode");
         a->set_type(onnx::AttributeProto::STRING);
         a->set_s("mirror");
       }, "node 'bad' (Pad, opset 18): mode='mirror' is not supported"},
      {"Pad", {"x", "short_pads"}, [](onnx::NodeProto*) {},
       "node 'bad' (Pad, opset 18): pads must hold two entries per padded axis"},
      {"OneHot", {"x", "x", "x"}, [](onnx::NodeProto*) {},
       "node 'bad' (OneHot, opset 18): depth must be a constant (computed at import) of one element"},
      {"GatherElements", {"x", "pads"}, [](onnx::NodeProto*) {},
       "node 'bad' (GatherElements, opset 18): data and indices must have the same rank (at least 1)"},
      {"GatherElements", {"x", "x"}, [](onnx::NodeProto* n) { set_int(n, "axis", 2); },
       "node 'bad' (GatherElements, opset 18)"},
      {"Resize", {"x"}, [](onnx::NodeProto*) {},
       "node 'bad' (Resize, opset 18): exactly one of scales and sizes must be given"},
      {"Resize", {"x", "", "", "pads"}, [](onnx::NodeProto*) {},
       "node 'bad' (Resize, opset 18): sizes must hold one value per resized axis"},
      {"Resize", {"x", "", "", "short_pads"}, [](onnx::NodeProto* n) {
         auto* a = n->add_attribute();
         a->set_name("mode");
         a->set_type(onnx::AttributeProto::STRING);
         a->set_s("area");
       }, "node 'bad' (Resize, opset 18): mode='area' is not supported"},
      {"GatherND", {"x", "pads"}, [](onnx::NodeProto*) {},
       "node 'bad' (GatherND, opset 18): batch_dims and the index length do not fit the data's rank"},
      {"ConvTranspose", {"x", "x"}, [](onnx::NodeProto*) {},
       "node 'bad' (ConvTranspose, opset 18): only 1-D and 2-D transposed convolutions are supported"},
  };
  for (const Case& c : cases) {
    INFO(c.message);
    ModelBuilder m(18);
    m.input("x", {"2", "4"});
    m.init_ints("pads", {0, 1, 0, 1});
    m.init_ints("short_pads", {0, 1});
    c.attrs(m.node(c.op, c.inputs, {"y", "z"}, "bad"));
    m.output("y");
    Diagnostics diags;
    CHECK_FALSE(import(m.bytes(), diags).is_ok());
    CHECK(diags.to_string().find(c.message) != std::string::npos);
  }
}

TEST_CASE("onnx: mistakes in GridSample and AffineGrid are diagnosed at the node") {
  auto set_string = [](onnx::NodeProto* n, const std::string& name, const std::string& v) {
    auto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::STRING);
    a->set_s(v);
  };
  struct Case {
    int64_t opset;
    const char* op;
    // The node's inputs: "x" f32[2, 3, 4, 5], "grid" f32[2, 6, 7, 2], "x3" f32[2, 3, 4],
    // "dyn" f32[2, 3, h, 5], "ints" i64[2, 3, 4, 5], "igrid" i64[2, 6, 7, 2], "empty"
    // f32[2, 3, 0, 5], "theta" f32[2, 2, 3], "vtheta" f32[n, 2, 3], "itheta" i64[2, 2, 3];
    // initializers "size" [2, 3, 4, 5], "size3" [2, 3], "size_n" [3, 3, 4, 5], "size_0"
    // [2, 3, 0, 5]; "shape_dyn" is Shape(dyn), "sizes_in" a graph input.
    std::vector<std::string> inputs;
    std::function<void(onnx::NodeProto*)> attrs;
    const char* message;
  };
  auto none = [](onnx::NodeProto*) {};
  const std::vector<Case> cases = {
      {20, "GridSample", {"x", "grid"}, [&](onnx::NodeProto* n) { set_string(n, "mode", "area"); },
       "node 'bad' (GridSample, opset 20): unknown mode 'area'"},
      {20, "GridSample", {"x", "grid"}, [&](onnx::NodeProto* n) { set_string(n, "mode", "bicubic"); },
       "node 'bad' (GridSample, opset 20): mode='bicubic' is the opset 16-19 spelling; from opset 20 it is 'cubic'"},
      {16, "GridSample", {"x", "grid"}, [&](onnx::NodeProto* n) { set_string(n, "mode", "linear"); },
       "node 'bad' (GridSample, opset 16): mode='linear' needs opset 20; before it is 'bilinear'"},
      {20, "GridSample", {"x", "grid"}, [&](onnx::NodeProto* n) { set_string(n, "padding_mode", "wrap"); },
       "node 'bad' (GridSample, opset 20): unknown padding_mode 'wrap'"},
      {16, "GridSample", {"x3", "grid"}, none, "node 'bad' (GridSample, opset 16): X must be 4-D (N, C, H, W) before opset 20"},
      {20, "GridSample", {"x3", "grid"}, none,
       "node 'bad' (GridSample, opset 20): grid must be [N, W_out, 1] for X of rank 3, got f32[2, 6, 7, 2]"},
      {20, "GridSample", {"x", "x"}, none,
       "node 'bad' (GridSample, opset 20): grid must be [N, H_out, W_out, 2] for X of rank 4, got f32[2, 3, 4, 5]"},
      {20, "GridSample", {"x", "igrid"}, none, "node 'bad' (GridSample, opset 20): grid must be a float tensor, got i64[2, 6, 7, 2]"},
      {20, "GridSample", {"ints", "grid"}, none,
       "node 'bad' (GridSample, opset 20): linear and cubic modes need a float X, got i64 (mode='nearest' takes any dtype)"},
      {20, "GridSample", {"dyn", "grid"}, none, "node 'bad' (GridSample, opset 20): X's spatial dims must be static (dim 2 is h)"},
      {20, "GridSample", {"x", "grid3"}, none, "node 'bad' (GridSample, opset 20): X and grid differ in N (2 and 3)"},
      {20, "AffineGrid", {"theta", "size3"}, none,
       "node 'bad' (AffineGrid, opset 20): size must hold 4 (N, C, H, W) or 5 (N, C, D, H, W) entries, got 2"},
      {20, "AffineGrid", {"x3", "size"}, none,
       "node 'bad' (AffineGrid, opset 20): theta must be [N, 2, 3] for a 2-D size, got f32[2, 3, 4]"},
      {20, "AffineGrid", {"itheta", "size"}, none,
       "node 'bad' (AffineGrid, opset 20): theta must be a float tensor, got i64[2, 2, 3]"},
      {20, "AffineGrid", {"theta", "size_n"}, none,
       "node 'bad' (AffineGrid, opset 20): size[0] (3) differs from theta's N (2)"},
      {20, "AffineGrid", {"theta", "sizes_in"}, none,
       "node 'bad' (AffineGrid, opset 20): size must be a constant (computed at import)"},
      {20, "AffineGrid", {"vtheta", "shape_dyn"}, none,
       "node 'bad' (AffineGrid, opset 20): size's spatial entries must be constants (computed at import); entry 2 is h"},
      {20, "AffineGrid", {"theta", "size_0"}, none,
       "node 'bad' (AffineGrid, opset 20): an empty output grid (size entry 2 is 0)"},
  };
  for (const Case& c : cases) {
    INFO(c.message);
    ModelBuilder m(c.opset);
    m.input("x", {"2", "3", "4", "5"});
    m.input("grid", {"2", "6", "7", "2"});
    m.input("grid3", {"3", "6", "7", "2"});
    m.input("x3", {"2", "3", "4"});
    m.input("dyn", {"2", "3", "h", "5"});
    m.input("ints", {"2", "3", "4", "5"}, onnx::TensorProto::INT64);
    m.input("igrid", {"2", "6", "7", "2"}, onnx::TensorProto::INT64);
    m.input("theta", {"2", "2", "3"});
    m.input("vtheta", {"n", "2", "3"});
    m.input("itheta", {"2", "2", "3"}, onnx::TensorProto::INT64);
    m.input("sizes_in", {"4"}, onnx::TensorProto::INT64);
    m.init_ints("size", {2, 3, 4, 5});
    m.init_ints("size3", {2, 3});
    m.init_ints("size_n", {3, 3, 4, 5});
    m.init_ints("size_0", {2, 3, 0, 5});
    m.node("Shape", {"dyn"}, {"shape_dyn"});
    c.attrs(m.node(c.op, c.inputs, {"y"}, "bad"));
    m.output("y");
    Diagnostics diags;
    CHECK_FALSE(import(m.bytes(), diags).is_ok());
    CHECK(diags.to_string().find(c.message) != std::string::npos);
  }
}

TEST_CASE("onnx: mistakes in the signal operators, LRN, CumProd, ReverseSequence and Det are diagnosed at the node") {
  struct Case {
    int64_t opset;
    const char* op;
    // The node's inputs: "x" f32[2, 3, 4, 1], "c3" f32[2, 3, 4, 3], "dyn" f32[2, n, 4, 1], "ints"
    // i64[2, 3, 4, 1], "sig" f32[1, 10, 1], "sig4" f32[1, 10, 1, 1], "win" f32[4], "win2" f32[2, 2],
    // "m5" f32[5, 5], "m23" f32[2, 3], "dynaxis" f32[2, n], "rs" f32[3, 4], "runtime" i64[] (a
    // graph input); initializers "i0" [0], "i1" [1], "i2" [2], "i3" [3], "i4" [4], "i12" [12], "pair" [1, 2],
    // "lens3" [1, 2], "lens_big" [1, 2, 9], "f0" f32 [0], "f9k" f32 [9000], "f16k" f32 [16000].
    std::vector<std::string> inputs;
    std::function<void(onnx::NodeProto*)> attrs;
    const char* message;
  };
  auto none = [](onnx::NodeProto*) {};
  const std::vector<Case> cases = {
      {17, "HannWindow", {"runtime"}, none, "node 'bad' (HannWindow, opset 17): size must be a constant (computed at import)"},
      {17, "HammingWindow", {"pair"}, none, "node 'bad' (HammingWindow, opset 17): size must be a scalar, got 2 values"},
      {17, "BlackmanWindow", {"i0"}, none, "node 'bad' (BlackmanWindow, opset 17): size must be in [1, 2^26], got 0"},
      {17, "HannWindow", {"i4"}, [](onnx::NodeProto* n) { set_int(n, "output_datatype", onnx::TensorProto::UINT64); },
       "node 'bad' (HannWindow, opset 17): output_datatype 13 (UINT64) has no Kiln dtype"},
      {17, "HannWindow", {"i4"}, [](onnx::NodeProto* n) { set_int(n, "output_datatype", onnx::TensorProto::BOOL); },
       "node 'bad' (HannWindow, opset 17): output_datatype 9 (BOOL) must be a numeric type"},
      {17, "MelWeightMatrix", {"i4", "i12", "i0", "f0", "f9k"}, none,
       "node 'bad' (MelWeightMatrix, opset 17): num_mel_bins, dft_length and sample_rate must be positive"},
      {17, "MelWeightMatrix", {"i4", "i12", "runtime", "f0", "f9k"}, none,
       "node 'bad' (MelWeightMatrix, opset 17): sample_rate must be a constant (computed at import)"},
      {17, "MelWeightMatrix", {"i4", "i12", "f16k", "f0", "f9k"}, none,
       "node 'bad' (MelWeightMatrix, opset 17): sample_rate must be integers"},
      {17, "MelWeightMatrix", {"i4", "i12", "i12", "f0", "f9k"}, none,
       "node 'bad' (MelWeightMatrix, opset 17): mel band edge 1 falls outside the 7 spectrogram bins (check lower_edge_hertz and upper_edge_hertz against sample_rate / 2)"},
      {20, "DFT", {"ints"}, none, "node 'bad' (DFT, opset 20): the input must be a float tensor, got i64[2, 3, 4, 1]"},
      {20, "DFT", {"c3"}, none, "node 'bad' (DFT, opset 20): the input's last dim must be 1 (real) or 2 (complex), got f32[2, 3, 4, 3]"},
      {20, "DFT", {"x", "", "i3"}, none,
       "node 'bad' (DFT, opset 20): axis 3 is outside [-4, -2] and [0, 2] (the last dim holds the complex parts)"},
      {17, "DFT", {"x"}, [](onnx::NodeProto* n) { set_int(n, "axis", -1); },
       "node 'bad' (DFT, opset 17): axis -1 is outside [-4, -2] and [0, 2] (the last dim holds the complex parts)"},
      {20, "DFT", {"x", "runtime"}, none, "node 'bad' (DFT, opset 20): dft_length must be a constant (computed at import)"},
      {20, "DFT", {"x", "", "runtime"}, none, "node 'bad' (DFT, opset 20): axis must be a constant (computed at import)"},
      {20, "DFT", {"x", "i0"}, none, "node 'bad' (DFT, opset 20): dft_length must be positive, got 0"},
      {20, "DFT", {"x", "pair"}, none, "node 'bad' (DFT, opset 20): dft_length must be a scalar, got 2 values"},
      {20, "DFT", {"dyn", "", "i1"}, none, "node 'bad' (DFT, opset 20): a DFT along a dynamic axis (n)"},
      {17, "STFT", {"sig4", "i2"}, none, "node 'bad' (STFT, opset 17): signal must be [batch, signal_length, 1 or 2], got f32[1, 10, 1, 1]"},
      {17, "STFT", {"sig", "i0"}, none, "node 'bad' (STFT, opset 17): frame_step must be positive, got 0"},
      {17, "STFT", {"sig", "runtime"}, none, "node 'bad' (STFT, opset 17): frame_step must be a constant (computed at import)"},
      {17, "STFT", {"sig", "i2", "win", "i3"}, none,
       "node 'bad' (STFT, opset 17): frame_length (3) differs from the window's length (4)"},
      {17, "STFT", {"sig", "i2", "win2"}, none, "node 'bad' (STFT, opset 17): window must be 1-D of static length, got f32[2, 2]"},
      {17, "STFT", {"sig", "i2", "", "i12"}, none, "node 'bad' (STFT, opset 17): frame_length must be in [1, signal_length = 10], got 12"},
      {13, "LRN", {"x"}, none, "node 'bad' (LRN, opset 13): the attribute size is required"},
      {13, "LRN", {"x"}, [](onnx::NodeProto* n) { set_int(n, "size", 0); }, "node 'bad' (LRN, opset 13): size must be positive, got 0"},
      {13, "LRN", {"ints"}, [](onnx::NodeProto* n) { set_int(n, "size", 3); },
       "node 'bad' (LRN, opset 13): X must be a float tensor, got i64[2, 3, 4, 1]"},
      {13, "LRN", {"dynaxis"}, [](onnx::NodeProto* n) { set_int(n, "size", 3); },
       "node 'bad' (LRN, opset 13): LRN over a dynamic channel count (n)"},
      {26, "CumProd", {"dynaxis", "pair"}, none, "node 'bad' (CumProd, opset 26): axis must be one integer and the input at least 1-D"},
      {26, "CumProd", {"dyn", "i1"}, none, "node 'bad' (CumProd, opset 26): CumProd along an axis that is dynamic or longer than 2048"},
      {26, "CumProd", {"dyn", "runtime"}, none, "node 'bad' (CumProd, opset 26): axis must be a constant (computed at import)"},
      {10, "ReverseSequence", {"rs", "lens3"}, [](onnx::NodeProto* n) { set_int(n, "batch_axis", 0); set_int(n, "time_axis", 0); },
       "node 'bad' (ReverseSequence, opset 10): batch_axis and time_axis must be 0 and 1 (in either order), got 0 and 0"},
      {10, "ReverseSequence", {"rs", "lens3"}, none,
       "node 'bad' (ReverseSequence, opset 10): sequence_lens must be an integer tensor of shape [4], got i64[2]"},
      {10, "ReverseSequence", {"rs", "lens_big"}, [](onnx::NodeProto* n) { set_int(n, "batch_axis", 0); set_int(n, "time_axis", 1); },
       "node 'bad' (ReverseSequence, opset 10): sequence_lens[2] = 9 is outside [0, 4]"},
      {22, "Det", {"m23"}, none, "node 'bad' (Det, opset 22): X's last two dims must be equal (square matrices), got f32[2, 3]"},
      {22, "Det", {"m5"}, none, "node 'bad' (Det, opset 22): Det of 5x5 matrices (Kiln expands determinants by cofactors only up to 4x4)"},
      {22, "Det", {"dynaxis"}, none, "node 'bad' (Det, opset 22): Det of matrices of dynamic size"},
  };
  for (const Case& c : cases) {
    INFO(c.message);
    ModelBuilder m(c.opset);
    m.input("x", {"2", "3", "4", "1"});
    m.input("c3", {"2", "3", "4", "3"});
    m.input("dyn", {"2", "n", "4", "1"});
    m.input("ints", {"2", "3", "4", "1"}, onnx::TensorProto::INT64);
    m.input("sig", {"1", "10", "1"});
    m.input("sig4", {"1", "10", "1", "1"});
    m.input("win", {"4"});
    m.input("win2", {"2", "2"});
    m.input("m5", {"5", "5"});
    m.input("m23", {"2", "3"});
    m.input("dynaxis", {"2", "n"});
    m.input("rs", {"3", "4"});
    m.input("runtime", {}, onnx::TensorProto::INT64);
    m.init_ints("i0", {0});
    m.init_ints("i1", {1});
    m.init_ints("i2", {2});
    m.init_ints("i3", {3});
    m.init_ints("i4", {4});
    m.init_ints("i12", {12});
    m.init_ints("pair", {1, 2});
    m.init_ints("lens3", {1, 2});
    m.init_ints("lens_big", {1, 2, 9});
    m.init_floats("f0", {}, {0});
    m.init_floats("f9k", {}, {9000});
    m.init_floats("f16k", {}, {16000});
    c.attrs(m.node(c.op, c.inputs, {"y"}, "bad"));
    m.output("y");
    Diagnostics diags;
    CHECK_FALSE(import(m.bytes(), diags).is_ok());
    CHECK(diags.to_string().find(c.message) != std::string::npos);
  }
}

TEST_CASE("onnx: Det by cofactors and CumProd as a masked product are exact") {
  // det [[2, 0, 1], [1, 3, 2], [1, 1, 1]] = 2 (3 - 2) - 0 + 1 (1 - 3) = 0; the 4x4 one is
  // 58 (NumPy's LU: 57.999999999999986), which the integer cofactor products give exactly.
  ModelBuilder m(22);
  m.input("x3", {"3", "3"});
  m.input("x4", {"4", "4"});
  m.node("Det", {"x3"}, {"d3"});
  m.node("Det", {"x4"}, {"d4"});
  m.output("d3");
  m.output("d4");
  Diagnostics diags;
  auto r = import(m.bytes(), diags);
  REQUIRE_MESSAGE(r.is_ok(), diags.to_string());
  CHECK(r->outputs().at(0).declared.to_string() == "f32[]");
  std::vector<ir::Tensor> inputs;
  inputs.push_back(floats({3, 3}, {2, 0, 1, 1, 3, 2, 1, 1, 1}));
  inputs.push_back(floats({4, 4}, {1, 2, 0, 1, 0, 1, 3, 2, 4, 0, 1, 1, 2, 1, 0, 3}));
  auto out = ir::interpret(*r, inputs);
  REQUIRE_MESSAGE(out.is_ok(), out.status().message());
  CHECK((*out)[0].data_as<float>()[0] == 0.0f);
  CHECK((*out)[1].data_as<float>()[0] == 58.0f);

  // A zero and an infinity in one row: the exclusive reverse product leaves each out in turn,
  // with no 0 * inf (NaN) from multiplying the masked-out entries.
  ModelBuilder p(26);
  p.input("x", {"1", "4"});
  p.init_ints("axis", {1});
  auto* n = p.node("CumProd", {"x", "axis"}, {"y"});
  set_int(n, "exclusive", 1);
  set_int(n, "reverse", 1);
  p.output("y");
  Diagnostics pd;
  auto pr = import(p.bytes(), pd);
  REQUIRE_MESSAGE(pr.is_ok(), pd.to_string());
  const float inf = std::numeric_limits<float>::infinity();
  const ir::Tensor x = floats({1, 4}, {3, 0, inf, 2});
  auto y = ir::interpret(*pr, std::span(&x, 1));
  REQUIRE_MESSAGE(y.is_ok(), y.status().message());
  const float* got = (*y)[0].data_as<float>();
  CHECK(std::isnan(got[0]));  // 0 * inf * 2, as NumPy's cumprod
  CHECK(got[1] == inf);
  CHECK(got[2] == 2.0f);
  CHECK(got[3] == 1.0f);
}

TEST_CASE("onnx: AffineGrid over Shape(x) and GridSample with a dynamic batch; nearest rounds half to even") {
  // A spatial transformer: the identity theta samples every pixel centre, so y == x.
  ModelBuilder m(20);
  m.input("x", {"batch", "2", "3", "4"});
  m.input("theta", {"batch", "2", "3"});
  m.node("Shape", {"x"}, {"size"});
  m.node("AffineGrid", {"theta", "size"}, {"grid"});
  m.node("GridSample", {"x", "grid"}, {"y"});
  m.output("y");
  Diagnostics diags;
  auto r = import(m.bytes(), diags);
  REQUIRE_MESSAGE(r.is_ok(), diags.to_string());
  CHECK(r->outputs().at(0).declared.to_string() == "f32[batch, 2, 3, 4]");
  std::vector<float> xs(2 * 2 * 3 * 4), thetas;
  for (size_t i = 0; i < xs.size(); ++i) xs[i] = float(i) * 0.5f - 3.0f;
  for (int b = 0; b < 2; ++b) thetas.insert(thetas.end(), {1, 0, 0, 0, 1, 0});
  std::vector<ir::Tensor> inputs;
  inputs.push_back(floats({2, 2, 3, 4}, xs));
  inputs.push_back(floats({2, 2, 3}, thetas));
  auto out = ir::interpret(*r, inputs);
  REQUIRE_MESSAGE(out.is_ok(), out.status().message());
  for (size_t i = 0; i < xs.size(); ++i) CHECK((*out)[0].data_as<float>()[i] == doctest::Approx(xs[i]));

  // 1-D nearest over [0, 10, 20, 30]: -0.5, 0 and 0.5 land on positions 0.5, 1.5 and 2.5, which
  // round to 0, 2 and 2; 1.25 is outside (zeros padding).
  ModelBuilder n(20);
  n.input("x", {"1", "1", "4"});
  n.input("grid", {"1", "4", "1"});
  auto* node = n.node("GridSample", {"x", "grid"}, {"y"});
  auto* mode = node->add_attribute();
  mode->set_name("mode");
  mode->set_type(onnx::AttributeProto::STRING);
  mode->set_s("nearest");
  n.output("y");
  Diagnostics nearest_diags;
  auto nearest = import(n.bytes(), nearest_diags);
  REQUIRE_MESSAGE(nearest.is_ok(), nearest_diags.to_string());
  std::vector<ir::Tensor> nearest_inputs;
  nearest_inputs.push_back(floats({1, 1, 4}, {0, 10, 20, 30}));
  nearest_inputs.push_back(floats({1, 4, 1}, {-0.5f, 0.0f, 0.5f, 1.25f}));
  auto picked = ir::interpret(*nearest, nearest_inputs);
  REQUIRE_MESSAGE(picked.is_ok(), picked.status().message());
  const std::vector<float> expected = {0, 20, 20, 0};
  for (size_t i = 0; i < expected.size(); ++i) CHECK((*picked)[0].data_as<float>()[i] == expected[i]);
}

TEST_CASE("onnx: Shape -> Gather -> Concat -> Reshape keeps a dynamic batch symbolic") {
  ModelBuilder m(13);
  m.input("x", {"batch", "4", "6"});
  m.init_ints("idx", {0});
  m.init_ints("rest", {2, 12});
  m.node("Shape", {"x"}, {"s"});
  m.node("Gather", {"s", "idx"}, {"b"});
  set_int(m.node("Concat", {"b", "rest"}, {"target"}), "axis", 0);
  m.node("Reshape", {"x", "target"}, {"y"});
  m.output("y");
  Diagnostics diags;
  auto r = import(m.bytes(), diags);
  REQUIRE_MESSAGE(r.is_ok(), diags.to_string());
  CHECK(count_ops(*r, ir::OpKind::kReshape) == 1);
  CHECK(count_ops(*r, ir::OpKind::kGather) == 0);
  CHECK(count_ops(*r, ir::OpKind::kConcat) == 0);
  CHECK(r->outputs().at(0).declared.to_string() == "f32[batch, 2, 12]");
}

TEST_CASE("onnx: Range, ConstantOfShape, Slice and shape arithmetic over a dynamic sequence length") {
  // position ids = buffer[:, 0:seq]; steps = Range(0, seq); zeros = ConstantOfShape(shape);
  // seq - seq + seq * 1 stays seq; Equal(shape, -1) is false.
  ModelBuilder m(13);
  m.input("ids", {"batch", "seq"}, onnx::TensorProto::INT64);
  m.init_ints("i0", {0});
  m.init_ints("i1", {1});
  m.init_ints("minus_one", {-1});
  auto* buffer = m.graph->add_initializer();
  buffer->set_name("buffer");
  buffer->set_data_type(onnx::TensorProto::INT64);
  buffer->add_dims(1);
  buffer->add_dims(64);
  for (int64_t i = 0; i < 64; ++i) buffer->add_int64_data(100 + i);
  m.node("Shape", {"ids"}, {"shape"});
  m.node("Gather", {"shape", "i1"}, {"seq"});
  m.node("Sub", {"seq", "seq"}, {"zero"});
  m.node("Mul", {"seq", "i1"}, {"seq_again"});
  m.node("Add", {"zero", "seq_again"}, {"seq_sum"});
  m.node("Slice", {"buffer", "i0", "seq_sum", "i1"}, {"positions"});
  m.node("Squeeze", {"seq_sum", "i0"}, {"seq_scalar"});
  auto* s0 = m.graph->add_initializer();
  s0->set_name("s0");
  s0->set_data_type(onnx::TensorProto::INT64);
  s0->add_int64_data(0);
  auto* s1 = m.graph->add_initializer();
  s1->set_name("s1");
  s1->set_data_type(onnx::TensorProto::INT64);
  s1->add_int64_data(1);
  m.node("Range", {"s0", "seq_scalar", "s1"}, {"steps"});
  m.node("Equal", {"shape", "minus_one"}, {"is_minus_one"});
  m.node("Where", {"is_minus_one", "i1", "shape"}, {"target"});
  m.node("ConstantOfShape", {"target"}, {"zeros"});
  m.node("Add", {"ids", "positions"}, {"y"});
  // HF BERT's token types: a [1, 64] buffer expanded to [batch, 64], gathered at [1, seq].
  m.node("Gather", {"shape", "i0"}, {"batch_dim"});
  set_int(m.node("Concat", {"batch_dim", "sixty_four"}, {"wide"}), "axis", 0);
  m.init_ints("sixty_four", {64});
  m.node("Expand", {"buffer", "wide"}, {"expanded"});
  m.node("Unsqueeze", {"steps", "i0"}, {"step_row"});
  set_int(m.node("GatherElements", {"expanded", "step_row"}, {"picked"}), "axis", 1);
  m.node("Reshape", {"shape", "minus_one"}, {"shape_again"});
  m.node("Expand", {"picked", "shape_again"}, {"types"});
  m.output("y");
  m.output("steps");
  m.output("zeros");
  m.output("types");
  Diagnostics diags;
  auto r = import(m.bytes(), diags);
  REQUIRE_MESSAGE(r.is_ok(), diags.to_string());
  CHECK(r->outputs().at(0).declared.to_string() == "i64[batch, seq]");
  CHECK(r->outputs().at(1).declared.to_string() == "i64[seq]");
  CHECK(r->outputs().at(2).declared.to_string() == "f32[batch, seq]");
  CHECK(r->outputs().at(3).declared.to_string() == "i64[batch, seq]");
  CHECK(count_ops(*r, ir::OpKind::kIota) == 2);  // Range, and the slice's gather positions

  ir::Tensor ids = *ir::Tensor::zeros(ir::DType::kI64, {2, 3});
  std::vector<ir::Tensor> inputs;
  inputs.push_back(std::move(ids));
  auto out = ir::interpret(*r, inputs);
  REQUIRE_MESSAGE(out.is_ok(), out.status().message());
  CHECK((*out)[0].element_as_int(5) == 102);  // ids[1][2] + buffer[0][2]
  CHECK((*out)[1].num_elements() == 3);
  CHECK((*out)[1].element_as_int(2) == 2);
  CHECK((*out)[2].num_elements() == 6);
  CHECK((*out)[3].element_as_int(4) == 101);  // buffer[0][steps[1]]
}

TEST_CASE("onnx: nn.MultiheadAttention's batch*heads reshapes over a dynamic batch") {
  // [seq, batch, 8] -> [seq, batch*2, 4] -> [seq*batch*2, 4] -> back: products of symbols.
  ModelBuilder m(13);
  m.input("x", {"seq", "batch", "8"});
  m.init_ints("i0", {0});
  m.init_ints("i1", {1});
  m.init_ints("two", {2});
  m.init_ints("four", {4});
  m.init_ints("eight", {8});
  m.node("Shape", {"x"}, {"shape"});
  m.node("Gather", {"shape", "i0"}, {"seq"});
  m.node("Gather", {"shape", "i1"}, {"batch"});
  m.node("Mul", {"batch", "two"}, {"batch_heads"});
  set_int(m.node("Concat", {"seq", "batch_heads", "four"}, {"split"}), "axis", 0);
  m.node("Reshape", {"x", "split"}, {"heads"});
  m.node("Relu", {"heads"}, {"r"});
  set_int(m.node("Concat", {"seq", "batch", "eight"}, {"merge"}), "axis", 0);
  m.node("Reshape", {"r", "merge"}, {"y"});
  m.output("heads");
  m.output("y");
  Diagnostics diags;
  auto r = import(m.bytes(), diags);
  REQUIRE_MESSAGE(r.is_ok(), diags.to_string());
  CHECK(r->outputs().at(0).declared.to_string() == "f32[seq, 2*batch, 4]");
  CHECK(r->outputs().at(1).declared.to_string() == "f32[seq, batch, 8]");
  // Printed, the products parse back.
  Diagnostics parse_diags;
  auto again = frontend::parse_graph_text(ir::print_graph(*r), "printed.graph", "", parse_diags);
  REQUIRE_MESSAGE(again.is_ok(), parse_diags.to_string());
  ir::Tensor x = *ir::Tensor::zeros(ir::DType::kF32, {3, 5, 8});
  for (int64_t i = 0; i < x.num_elements(); ++i) x.set_element_from_double(i, double(i % 7) - 3);
  std::vector<ir::Tensor> inputs;
  inputs.push_back(std::move(x));
  auto out = ir::interpret(*again, inputs);
  REQUIRE_MESSAGE(out.is_ok(), out.status().message());
  CHECK((*out)[0].shape() == std::vector<int64_t>{3, 10, 4});
  CHECK((*out)[1].element_as_double(0) == 0.0);  // relu(-3)
  CHECK((*out)[1].element_as_double(4) == 1.0);  // relu(1)
}

TEST_CASE("onnx: dynamic sizes as tensor data, and GatherND over dynamic dims") {
  ModelBuilder m(13);
  m.input("x", {"batch", "seq"});
  m.input("idx", {"n", "2"}, onnx::TensorProto::INT64);
  m.init_ints("i1", {1});
  m.node("Shape", {"x"}, {"shape"});
  m.node("Gather", {"shape", "i1"}, {"seq"});
  set_int(m.node("Cast", {"seq"}, {"seq_f"}), "to", onnx::TensorProto::FLOAT);
  m.node("Mul", {"x", "seq_f"}, {"scaled"});
  m.node("GatherND", {"x", "idx"}, {"picked"});
  m.output("scaled");
  m.output("picked");
  Diagnostics diags;
  auto r = import(m.bytes(), diags);
  REQUIRE_MESSAGE(r.is_ok(), diags.to_string());
  CHECK(r->outputs().at(1).declared.to_string() == "f32[n]");
  ir::Tensor x = floats({2, 3}, {0, 1, 2, 3, 4, 5});
  ir::Tensor idx = *ir::Tensor::zeros(ir::DType::kI64, {2, 2});
  idx.mutable_data_as<int64_t>()[0] = 1;   // x[1][2] = 5
  idx.mutable_data_as<int64_t>()[1] = 2;
  idx.mutable_data_as<int64_t>()[2] = 0;   // x[0][-1] = 2
  idx.mutable_data_as<int64_t>()[3] = -1;
  std::vector<ir::Tensor> inputs;
  inputs.push_back(std::move(x));
  inputs.push_back(std::move(idx));
  auto out = ir::interpret(*r, inputs);
  REQUIRE_MESSAGE(out.is_ok(), out.status().message());
  CHECK((*out)[0].element_as_double(4) == 12.0);  // 4 * seq
  CHECK((*out)[1].element_as_double(0) == 5.0);
  CHECK((*out)[1].element_as_double(1) == 2.0);
}

namespace {
ir::Tensor int64s(std::vector<int64_t> shape, std::vector<int64_t> v) {
  auto t = ir::Tensor::zeros(ir::DType::kI64, shape);
  REQUIRE(t.is_ok());
  for (size_t i = 0; i < v.size(); ++i) t->mutable_data_as<int64_t>()[i] = v[i];
  return *t;
}
}  // namespace

TEST_CASE("onnx: ScatterElements and ScatterND of values computed at run time, over dynamic dims") {
  ModelBuilder m(18);
  m.input("x", {"batch", "3"});
  m.input("cols", {"batch", "2"}, onnx::TensorProto::INT64);
  m.input("vals", {"batch", "2"});
  m.input("tuples", {"n", "2"}, onnx::TensorProto::INT64);
  m.input("add", {"n"});
  set_int(m.node("ScatterElements", {"x", "cols", "vals"}, {"rows"}), "axis", 1);
  set_string(m.node("ScatterND", {"x", "tuples", "add"}, {"sums"}), "reduction", "add");
  set_string(m.node("ScatterElements", {"x", "cols", "vals"}, {"peaks"}), "reduction", "max");
  m.output("rows");
  m.output("sums");
  m.output("peaks");
  Diagnostics diags;
  auto r = import(m.bytes(), diags);
  REQUIRE_MESSAGE(r.is_ok(), diags.to_string());
  CHECK(count_ops(*r, ir::OpKind::kScatter) == 3);
  CHECK(r->outputs().at(1).declared.to_string() == "f32[batch, 3]");
  std::vector<ir::Tensor> inputs;
  inputs.push_back(floats({2, 3}, {0, 1, 2, 3, 4, 5}));
  inputs.push_back(int64s({2, 2}, {-1, 0, 1, 1}));  // duplicates in row 1: the later update wins
  inputs.push_back(floats({2, 2}, {10, 20, 30, 40}));
  // (1, -1) and (0, 0) twice add; (2, 0) and (0, 3) are out of range, dropped (not wrapped into
  // another row).
  inputs.push_back(int64s({5, 2}, {1, -1, 0, 0, 2, 0, 0, 3, 0, 0}));
  inputs.push_back(floats({5}, {100, 200, 300, 400, 500}));
  auto out = ir::interpret(*r, inputs);
  REQUIRE_MESSAGE(out.is_ok(), out.status().message());
  auto values = [](const ir::Tensor& t) {
    std::vector<double> v;
    for (int64_t i = 0; i < t.num_elements(); ++i) v.push_back(t.element_as_double(i));
    return v;
  };
  CHECK(values((*out)[0]) == std::vector<double>{20, 1, 10, 3, 40, 5});
  CHECK(values((*out)[1]) == std::vector<double>{700, 1, 2, 3, 4, 105});
  // Axis 0 (the default): the updates of column 0 go to rows -1 (= 1) and 1, those of column 1
  // to rows 0 and 1; each element keeps the largest of its value and its updates.
  CHECK(values((*out)[2]) == std::vector<double>{0, 20, 2, 30, 40, 5});
}

TEST_CASE("onnx: mistakes in ScatterElements, Scatter and ScatterND are diagnosed at the node") {
  struct Case {
    int64_t opset;
    const char* op;
    std::vector<std::string> inputs;
    std::function<void(onnx::NodeProto*)> attrs;
    const char* message;
  };
  auto none = [](onnx::NodeProto*) {};
  const std::vector<Case> cases = {
      {18, "ScatterElements", {"x", "i2", "u2"}, [](onnx::NodeProto* n) { set_string(n, "reduction", "sum"); },
       "node 'bad' (ScatterElements, opset 18): unknown reduction 'sum' (none, add, mul, max or min)"},
      {13, "ScatterElements", {"x", "i2", "u2"}, [](onnx::NodeProto* n) { set_string(n, "reduction", "add"); },
       "node 'bad' (ScatterElements, opset 13): reduction 'add' needs opset 16 or later"},
      {16, "ScatterND", {"x", "t1", "u4"}, [](onnx::NodeProto* n) { set_string(n, "reduction", "max"); },
       "node 'bad' (ScatterND, opset 16): reduction 'max' needs opset 18 or later"},
      {18, "ScatterElements", {"x", "far", "u2"}, none,
       "node 'bad' (ScatterElements, opset 18): index 2 is out of range for a dim of size 2"},
      {10, "Scatter", {"x", "i2", "u4"}, none,
       "node 'bad' (Scatter, opset 10): data, indices and updates must have the same rank (at least 1) and "
       "updates the shape of indices, got f32[2, 4], i64[1, 2] and f32[4]"},
      {18, "ScatterElements", {"x", "u2", "u2"}, none,
       "node 'bad' (ScatterElements, opset 18): indices must be int32 or int64, got f32[1, 2]"},
      {18, "ScatterElements", {"x", "wide", "uwide"}, [](onnx::NodeProto* n) { set_int(n, "axis", 0); },
       "node 'bad' (ScatterElements, opset 18): scatter updates f32[1, 5] are larger than the data f32[2, 4] along axis 1"},
      {18, "ScatterND", {"x", "t3", "u4"}, none,
       "node 'bad' (ScatterND, opset 18): the last dim of indices (3) must be in 1..rank(data) = 1..2"},
      {18, "ScatterND", {"x", "t1", "u2"}, none,
       "node 'bad' (ScatterND, opset 18): updates f32[1, 2] do not have the shape [1, 4] that indices i64[1, 1] "
       "and data f32[2, 4] imply"},
      {18, "ScatterND", {"x", "tfar", "u1"}, none,
       "node 'bad' (ScatterND, opset 18): index -3 is out of range for a dim of size 2"},
      {18, "ScatterND", {"x", "tdyn", "u4"}, none,
       "node 'bad' (ScatterND, opset 18): ScatterND with indices whose last dim (the index length) "
       "is dynamic: i64[1, k]"},
  };
  for (const Case& c : cases) {
    INFO(c.message);
    ModelBuilder m(c.opset);
    m.input("x", {"2", "4"});
    m.input("tdyn", {"1", "k"}, onnx::TensorProto::INT64);
    auto ints = [&](const std::string& name, std::vector<int64_t> dims, std::vector<int64_t> v) {
      auto* t = m.graph->add_initializer();
      t->set_name(name);
      t->set_data_type(onnx::TensorProto::INT64);
      for (auto d : dims) t->add_dims(d);
      for (auto x : v) t->add_int64_data(x);
    };
    ints("i2", {1, 2}, {0, 1});
    ints("far", {1, 2}, {-2, 2});
    ints("wide", {1, 5}, {0, 1, 0, 1, 0});
    ints("t1", {1, 1}, {1});
    ints("t3", {1, 3}, {0, 0, 0});
    ints("tfar", {1, 2}, {-3, 0});
    m.init_floats("u2", {1, 2}, {1, 2});
    m.init_floats("u4", {4}, {1, 2, 3, 4});
    m.init_floats("u1", {1}, {1});
    m.init_floats("uwide", {1, 5}, {1, 2, 3, 4, 5});
    c.attrs(m.node(c.op, c.inputs, {"y"}, "bad"));
    m.output("y");
    Diagnostics diags;
    CHECK_FALSE(import(m.bytes(), diags).is_ok());
    CHECK(diags.to_string().find(c.message) != std::string::npos);
  }
}

TEST_CASE("onnx: Einsum as batched matmuls, sums and transposes; diagonals are reported") {
  // One equation per case over A [2, 3, 4] and B [2, 5, 4] (values i+1 and 2*i+1), checked
  // against a direct evaluation of the sum.
  auto run = [](const std::string& equation, bool binary, std::vector<int64_t> out_shape,
                const std::function<double(const std::vector<int64_t>&)>& expected) {
    ModelBuilder m(13);
    m.input("a", {"2", "3", "4"});
    if (binary) m.input("b", {"2", "5", "4"});
    auto* n = m.node("Einsum", binary ? std::vector<std::string>{"a", "b"} : std::vector<std::string>{"a"}, {"y"}, "e");
    auto* attr = n->add_attribute();
    attr->set_name("equation");
    attr->set_type(onnx::AttributeProto::STRING);
    attr->set_s(equation);
    m.output("y");
    Diagnostics diags;
    auto r = import(m.bytes(), diags);
    REQUIRE_MESSAGE(r.is_ok(), diags.to_string());
    std::vector<ir::Tensor> inputs;
    inputs.push_back(*ir::Tensor::zeros(ir::DType::kF32, {2, 3, 4}));
    for (int64_t i = 0; i < 24; ++i) inputs[0].mutable_data_as<float>()[i] = float(i + 1);
    if (binary) {
      inputs.push_back(*ir::Tensor::zeros(ir::DType::kF32, {2, 5, 4}));
      for (int64_t i = 0; i < 40; ++i) inputs[1].mutable_data_as<float>()[i] = float(2 * i + 1);
    }
    auto out = ir::interpret(*r, inputs);
    REQUIRE_MESSAGE(out.is_ok(), out.status().message());
    CHECK((*out)[0].shape() == out_shape);
    int64_t count = 1;
    for (int64_t d : out_shape) count *= d;
    for (int64_t i = 0; i < count; ++i) {
      std::vector<int64_t> idx(out_shape.size());
      for (int64_t rem = i, d = int64_t(out_shape.size()) - 1; d >= 0; --d) {
        idx[size_t(d)] = rem % out_shape[size_t(d)];
        rem /= out_shape[size_t(d)];
      }
      CHECK_MESSAGE((*out)[0].element_as_double(i) == doctest::Approx(expected(idx)), equation);
    }
  };
  auto A = [](int64_t b, int64_t i, int64_t j) { return double(b * 12 + i * 4 + j + 1); };
  auto B = [](int64_t b, int64_t k, int64_t j) { return double(2 * (b * 20 + k * 4 + j) + 1); };
  run("bij,bkj->bki", true, {2, 5, 3}, [&](const std::vector<int64_t>& o) {
    double s = 0;
    for (int64_t j = 0; j < 4; ++j) s += A(o[0], o[2], j) * B(o[0], o[1], j);
    return s;
  });
  run("bij,bkj", true, {3, 5}, [&](const std::vector<int64_t>& o) {  // implicit: "ik" (b is repeated)
    double s = 0;
    for (int64_t b = 0; b < 2; ++b)
      for (int64_t j = 0; j < 4; ++j) s += A(b, o[0], j) * B(b, o[1], j);
    return s;
  });
  run("bij,ckl->", true, {}, [&](const std::vector<int64_t>&) {
    double sa = 0, sb = 0;
    for (int64_t i = 0; i < 24; ++i) sa += double(i + 1);
    for (int64_t i = 0; i < 40; ++i) sb += double(2 * i + 1);
    return sa * sb;
  });
  run("bij->jb", false, {4, 2}, [&](const std::vector<int64_t>& o) {
    double s = 0;
    for (int64_t i = 0; i < 3; ++i) s += A(o[1], i, o[0]);
    return s;
  });
  ModelBuilder m(13);
  m.input("a", {"3", "3"});
  auto* n = m.node("Einsum", {"a"}, {"y"}, "diag");
  auto* attr = n->add_attribute();
  attr->set_name("equation");
  attr->set_type(onnx::AttributeProto::STRING);
  attr->set_s("ii->i");
  m.output("y");
  Diagnostics diags;
  CHECK_FALSE(import(m.bytes(), diags).is_ok());
  CHECK(diags.to_string().find("node 'diag' (Einsum, opset 13): operand labels 'ii' (repeated labels, i.e. diagonals, "
                               "are not supported)") != std::string::npos);
}

TEST_CASE("onnx: sizes Kiln cannot name are reported at the node") {
  auto diagnose = [](const std::string& op, bool range) {
    ModelBuilder m(13);
    m.input("x", {"seq"});
    m.init_ints("two", {2});
    m.node("Shape", {"x"}, {"shape"});
    if (range) {
      auto* start = m.graph->add_initializer();
      start->set_name("start");
      start->set_data_type(onnx::TensorProto::INT64);
      start->add_int64_data(1);
      m.node("Squeeze", {"shape"}, {"n"});
      m.node("Range", {"start", "n", "start"}, {"y"}, "range");
    } else {
      m.node(op, {"shape", "two"}, {"s2"}, "arith");
      m.node("Reshape", {"x", "s2"}, {"y"});
    }
    m.output("y");
    Diagnostics diags;
    auto r = import(m.bytes(), diags);
    CHECK_FALSE(r.is_ok());
    return diags.to_string();
  };
  CHECK(diagnose("Add", false).find("node 'arith' (Add, opset 13): Add of the sizes seq and 2: the result is not a size "
                                    "Kiln can name") != std::string::npos);
  CHECK(diagnose("Sub", false).find("Sub of the sizes seq and 2") != std::string::npos);
  // A product is a size, but [seq] has seq elements, not 2*seq.
  CHECK(diagnose("Mul", false).find("reshape cannot turn f32[seq] into [2*seq]") != std::string::npos);
  CHECK(diagnose("", true).find("node 'range' (Range, opset 13): a Range up to the dynamic size 'seq' must start at a "
                                "constant 0 with a constant step of 1") != std::string::npos);
}

TEST_CASE("onnx: unnamed dynamic dims get generated symbols; names become Kiln identifiers") {
  ModelBuilder m(13);
  m.input("in/put:0", {"", "3"});
  m.node("Neg", {"in/put:0"}, {"1out"});
  m.output("1out");
  Diagnostics diags;
  auto r = import(m.bytes(), diags);
  REQUIRE_MESSAGE(r.is_ok(), diags.to_string());
  const ir::Node& in = r->node(r->inputs().at(0));
  CHECK(in.name == "in_put_0");
  CHECK(in.type.shape.at(0).is_symbolic());
  CHECK(r->outputs().at(0).name == "v_1out");
}

TEST_CASE("onnx: initializers from typed fields, raw_data and external data") {
  const auto dir = std::filesystem::temp_directory_path() / "kiln_onnx_unit_external";
  std::filesystem::create_directories(dir);
  const std::vector<float> ext = {5, 6};
  {
    std::ofstream f(dir / "w.bin", std::ios::binary);
    f.write("pad!", 4);
    f.write(reinterpret_cast<const char*>(ext.data()), 8);
  }
  ModelBuilder m(13);
  m.input("x", {"2"});
  m.init_floats("a", {2}, {1, 2});
  m.init_floats("b", {2}, {3, 4}, /*raw=*/true);
  auto* c = m.graph->add_initializer();
  c->set_name("c");
  c->set_data_type(onnx::TensorProto::FLOAT);
  c->add_dims(2);
  c->set_data_location(onnx::TensorProto::EXTERNAL);
  for (auto [k, v] : {std::pair{"location", "w.bin"}, {"offset", "4"}, {"length", "8"}}) {
    auto* e = c->add_external_data();
    e->set_key(k);
    e->set_value(v);
  }
  m.node("Add", {"x", "a"}, {"t1"});
  m.node("Add", {"t1", "b"}, {"t2"});
  m.node("Add", {"t2", "c"}, {"y"});
  m.output("y");
  Diagnostics diags;
  auto r = import(m.bytes(), diags, dir.string());
  REQUIRE_MESSAGE(r.is_ok(), diags.to_string());
  const ir::Tensor x = floats({2}, {10, 20});
  auto out = ir::interpret(*r, std::span(&x, 1));
  REQUIRE(out.is_ok());
  CHECK((*out)[0].data_as<float>()[0] == 10 + 1 + 3 + 5);
  CHECK((*out)[0].data_as<float>()[1] == 20 + 2 + 4 + 6);

  // A location that leaves the model's directory, and a size that disagrees, are refused.
  c->mutable_external_data(0)->set_value("../w.bin");
  Diagnostics escape;
  CHECK_FALSE(import(m.bytes(), escape, dir.string()).is_ok());
  CHECK(escape.to_string().find("leaves the model's directory") != std::string::npos);
  c->mutable_external_data(0)->set_value("w.bin");
  c->mutable_external_data(2)->set_value("12");
  Diagnostics bad_size;
  CHECK_FALSE(import(m.bytes(), bad_size, dir.string()).is_ok());
  std::filesystem::remove_all(dir);
}

TEST_CASE("onnx: a raw_data size that disagrees with the dims is an error") {
  ModelBuilder m(13);
  m.input("x", {"4"});
  auto* t = m.init_floats("w", {4}, {1, 2, 3, 4}, true);
  t->set_raw_data(t->raw_data().substr(0, 7));
  m.node("Mul", {"x", "w"}, {"y"});
  m.output("y");
  Diagnostics diags;
  CHECK_FALSE(import(m.bytes(), diags).is_ok());
  CHECK(diags.to_string().find("initializer 'w'") != std::string::npos);
}

// CumSum on floats along the first of two axes, every exclusive/reverse form, NaN kept out of
// the sums it is not in (the node tests' float cases are float64, which Kiln lacks).
TEST_CASE("onnx: CumSum along a non-last axis, exclusive and reverse") {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  // x = [[1, 2], [3, nan], [5, 6]] (3 x 2), summed down the rows (axis 0).
  const ir::Tensor x = floats({3, 2}, {1, 2, 3, nan, 5, 6});
  struct Case {
    int exclusive, reverse;
    std::vector<float> expected;
  };
  const std::vector<Case> cases = {
      {0, 0, {1, 2, 4, nan, 9, nan}},
      {1, 0, {0, 0, 1, 2, 4, nan}},
      {0, 1, {9, nan, 8, nan, 5, 6}},
      {1, 1, {8, nan, 5, 6, 0, 0}},
  };
  for (const Case& c : cases) {
    CAPTURE(c.exclusive);
    CAPTURE(c.reverse);
    ModelBuilder m(14);
    m.input("x", {"3", "2"});
    m.init_ints("axis", {0});
    auto* n = m.node("CumSum", {"x", "axis"}, {"y"});
    set_int(n, "exclusive", c.exclusive);
    set_int(n, "reverse", c.reverse);
    m.output("y");
    Diagnostics diags;
    auto r = import(m.bytes(), diags);
    REQUIRE_MESSAGE(r.is_ok(), diags.to_string());
    auto out = ir::interpret(*r, std::span(&x, 1));
    REQUIRE(out.is_ok());
    for (size_t i = 0; i < c.expected.size(); ++i) {
      const float got = (*out)[0].data_as<float>()[i];
      if (std::isnan(c.expected[i])) CHECK(std::isnan(got));
      else CHECK(got == c.expected[i]);
    }
  }
}

TEST_CASE("onnx: Gemm with transB, alpha and beta; BatchNormalization folds into mul/add") {
  ModelBuilder m(13);
  m.input("a", {"1", "2"});
  m.init_floats("b", {3, 2}, {1, 0, 0, 1, 1, 1});  // B^T = [[1,0,1],[0,1,1]]
  m.init_floats("c", {3}, {1, 2, 3});
  auto* g = m.node("Gemm", {"a", "b", "c"}, {"y"});
  set_int(g, "transB", 1);
  auto* alpha = g->add_attribute();
  alpha->set_name("alpha");
  alpha->set_type(onnx::AttributeProto::FLOAT);
  alpha->set_f(2.0f);
  m.output("y");
  Diagnostics diags;
  auto r = import(m.bytes(), diags);
  REQUIRE_MESSAGE(r.is_ok(), diags.to_string());
  const ir::Tensor a = floats({1, 2}, {3, 4});
  auto out = ir::interpret(*r, std::span(&a, 1));
  REQUIRE(out.is_ok());
  // 2 * [3, 4, 7] + [1, 2, 3]
  CHECK((*out)[0].data_as<float>()[0] == 7);
  CHECK((*out)[0].data_as<float>()[1] == 10);
  CHECK((*out)[0].data_as<float>()[2] == 17);

  ModelBuilder bn(13);
  bn.input("x", {"1", "2", "1", "1"});
  bn.init_floats("s", {2}, {2, 1});
  bn.init_floats("bias", {2}, {1, 0});
  bn.init_floats("mean", {2}, {1, 1});
  bn.init_floats("var", {2}, {3, 0});
  bn.node("BatchNormalization", {"x", "s", "bias", "mean", "var"}, {"y"});
  bn.output("y");
  Diagnostics d2;
  auto r2 = import(bn.bytes(), d2);
  REQUIRE_MESSAGE(r2.is_ok(), d2.to_string());
  CHECK(count_ops(*r2, ir::OpKind::kRsqrt) == 0);  // scale and shift folded at import
  const ir::Tensor x = floats({1, 2, 1, 1}, {5, 5});
  auto y = ir::interpret(*r2, std::span(&x, 1));
  REQUIRE(y.is_ok());
  CHECK((*y)[0].data_as<float>()[0] == doctest::Approx((5 - 1) / std::sqrt(3 + 1e-5) * 2 + 1));
}

TEST_CASE("onnx: MaxPool ceil_mode and SAME_UPPER become explicit pads") {
  ModelBuilder m(12);
  m.input("x", {"1", "1", "4", "4"});
  auto* p = m.node("MaxPool", {"x"}, {"y"});
  set_ints(p, "kernel_shape", {3, 3});
  set_ints(p, "strides", {2, 2});
  set_int(p, "ceil_mode", 1);
  m.output("y");
  Diagnostics diags;
  auto r = import(m.bytes(), diags);
  REQUIRE_MESSAGE(r.is_ok(), diags.to_string());
  CHECK(r->outputs().at(0).declared.to_string() == "f32[1, 1, 2, 2]");
  const auto& attrs = std::get<ir::Pool2dAttrs>(r->node(r->outputs()[0].node).attrs);
  CHECK(attrs.pads == std::array<int64_t, 4>{0, 0, 1, 1});
}

TEST_CASE("onnx: the imported graph prints as .graph text that parses back") {
  ModelBuilder m(13);
  m.input("x", {"N", "2"});
  m.init_floats("w", {2, 2}, {1, 2, 3, 4});
  m.node("MatMul", {"x", "w"}, {"h"});
  m.node("Tanh", {"h"}, {"y"});
  m.output("y");
  Diagnostics diags;
  auto r = import(m.bytes(), diags);
  REQUIRE_MESSAGE(r.is_ok(), diags.to_string());
  const std::string text = ir::print_graph(*r);
  Diagnostics reparse;
  auto back = frontend::parse_graph_text(text, "printed.graph", "", reparse);
  const std::string why = reparse.to_string() + text;
  REQUIRE_MESSAGE(back.is_ok(), why);
  CHECK(ir::print_graph(*back) == text);
}

TEST_CASE("onnx: mistakes in the bitwise operators and BitCast are diagnosed at the node") {
  struct Case {
    const char* op;
    std::vector<std::string> inputs;  // "ints" i64[2, 3], "x" f32[2, 3] (graph inputs)
    std::function<void(onnx::NodeProto*)> attrs;
    const char* message;
  };
  const std::vector<Case> cases = {
      {"BitShift", {"ints", "ints"}, [](onnx::NodeProto* n) { set_string(n, "direction", "UP"); },
       "node 'bad' (BitShift, opset 26): direction must be \"LEFT\" or \"RIGHT\", got \"UP\""},
      {"BitwiseAnd", {"x", "x"}, [](onnx::NodeProto*) {}, "bitwise_and needs an integer operand, got f32[2, 3]"},
      {"BitCast", {"ints"}, [](onnx::NodeProto* n) { set_int(n, "to", onnx::TensorProto::INT32); },
       "node 'bad' (BitCast, opset 26): BitCast between types of different widths (i64 and i32)"},
      {"BitCast", {"x"}, [](onnx::NodeProto* n) { set_int(n, "to", onnx::TensorProto::INT32); },
       "node 'bad' (BitCast, opset 26): BitCast between float and integer types of a run-time value is not supported"},
  };
  for (const Case& c : cases) {
    INFO(c.message);
    ModelBuilder m(26);
    m.input("ints", {"2", "3"}, onnx::TensorProto::INT64);
    m.input("x", {"2", "3"});
    c.attrs(m.node(c.op, c.inputs, {"y"}, "bad"));
    m.output("y");
    Diagnostics diags;
    CHECK_FALSE(import(m.bytes(), diags).is_ok());
    CHECK(diags.to_string().find(c.message) != std::string::npos);
  }
}

TEST_CASE("onnx: TensorProto .pb files decode, and bad ones are errors") {
  onnx::TensorProto t;
  t.set_data_type(onnx::TensorProto::INT64);
  t.add_dims(3);
  for (int64_t v : {7, -1, 9}) t.add_int64_data(v);
  const std::string bytes = t.SerializeAsString();
  auto r = onnx_import::parse_tensor_proto(std::as_bytes(std::span(bytes.data(), bytes.size())), "t.pb");
  REQUIRE(r.is_ok());
  CHECK(r->element_as_int(1) == -1);
  t.add_dims(1000000000);  // claims far more values than it holds
  const std::string lying = t.SerializeAsString();
  auto bad = onnx_import::parse_tensor_proto(std::as_bytes(std::span(lying.data(), lying.size())), "t.pb");
  CHECK_FALSE(bad.is_ok());
  t.set_data_type(onnx::TensorProto::UINT64);
  const std::string u64 = t.SerializeAsString();
  auto unsupported = onnx_import::parse_tensor_proto(std::as_bytes(std::span(u64.data(), u64.size())), "t.pb");
  CHECK(unsupported.status().code() == ErrorCode::kUnsupported);
}

TEST_CASE("onnx: RNN, GRU and LSTM mistakes and unsupported forms are diagnosed at the node") {
  // X [seq 4, batch 2, input 3]; hidden 2; W / R sized for the op's gates.
  struct Case {
    const char* op;
    std::vector<std::string> x_dims;
    std::vector<std::string> inputs;
    std::function<void(onnx::NodeProto*)> attrs;
    const char* message;
    int64_t opset = 14;
  };
  const std::vector<Case> cases = {
      {"RNN", {"4", "2", "3"}, {"x", "w", "r"}, [](onnx::NodeProto* n) { set_strings(n, "activations", {"Gelu"}); },
       "node 'bad' (RNN, opset 14): activation 'Gelu' is not supported"},
      {"GRU", {"4", "2", "3"}, {"x", "w", "r"}, [](onnx::NodeProto* n) { set_strings(n, "activations", {"Sigmoid"}); },
       "node 'bad' (GRU, opset 14): activations lists 1 functions; the operator takes 2 per direction (2 here)"},
      {"LSTM", {"4", "2", "3"}, {"x", "w", "r"}, [](onnx::NodeProto* n) { set_string(n, "direction", "sideways"); },
       "node 'bad' (LSTM, opset 14): unknown direction 'sideways'"},
      {"LSTM", {"4", "2", "3"}, {"x", "w", "r"}, [](onnx::NodeProto* n) { set_int(n, "hidden_size", 5); },
       "node 'bad' (LSTM, opset 14): hidden_size is 5 but R is [1, 8, 2]"},
      {"GRU", {"seq", "2", "3"}, {"x", "w", "r"}, [](onnx::NodeProto*) {},
       "node 'bad' (GRU, opset 14): the sequence length 'seq' is dynamic"},
      {"RNN", {"1025", "2", "3"}, {"x", "w", "r"}, [](onnx::NodeProto*) {},
       "node 'bad' (RNN, opset 14): a sequence of 1025 steps is not supported (Kiln unrolls 1 to 1024 steps)"},
      {"RNN", {"4", "2", "3"}, {"x", "w", "r"}, [](onnx::NodeProto* n) { set_strings(n, "activations", {"Affine"}); },
       "node 'bad' (RNN, opset 14): activation Affine needs its alpha in activation_alpha"},
      {"RNN", {"4", "2", "3"}, {"x", "w", "r"}, [](onnx::NodeProto* n) { set_floats(n, "activation_alpha", {0.5f}); },
       "node 'bad' (RNN, opset 14): activation_alpha / activation_beta hold 1 / 0 values, but the activations take "
       "only 0 / 0"},
      {"LSTM", {"4", "2", "3"}, {"x", "w", "r"}, [](onnx::NodeProto* n) { set_float(n, "clip", -1.0f); },
       "node 'bad' (LSTM, opset 14): clip must be positive"},
      {"GRU", {"4", "2", "3"}, {"x", "w", "r", "", "lens"}, [](onnx::NodeProto*) {},
       "node 'bad' (GRU, opset 14): sequence_lens holds 5, outside [0, 4]"},
      {"GRU", {"4", "2", "3"}, {"x", "w", "r", "", "", "h0"}, [](onnx::NodeProto*) {},
       "node 'bad' (GRU, opset 14): initial_h has shape [2, 2]; expected [1, 2, 2]"},
      {"LSTM", {"4", "2", "3"}, {"x", "w", "r"}, [](onnx::NodeProto* n) { set_int(n, "layout", 1); },
       "node 'bad' (LSTM, opset 13): layout is an attribute from opset 14", 13},
      {"LSTM", {"4", "2", "3"}, {"x", "w", "r"}, [](onnx::NodeProto*) {},
       "node 'bad' (LSTM, opset 6): the opset 6 form of LSTM is not supported", 6},
  };
  for (const Case& c : cases) {
    INFO(c.message);
    const int64_t gates = std::string(c.op) == "LSTM" ? 4 : std::string(c.op) == "GRU" ? 3 : 1;
    ModelBuilder m(c.opset);
    m.input("x", c.x_dims);
    m.init_floats("w", {1, gates * 2, 3}, std::vector<float>(size_t(gates * 6), 0.5f));
    m.init_floats("r", {1, gates * 2, 2}, std::vector<float>(size_t(gates * 4), 0.5f));
    m.init_ints("lens", {5, 1});
    m.init_floats("h0", {2, 2}, {0, 0, 0, 0});
    c.attrs(m.node(c.op, c.inputs, {"y", "y_h"}, "bad"));
    m.output("y");
    Diagnostics diags;
    CHECK_FALSE(import(m.bytes(), diags).is_ok());
    CHECK(diags.to_string().find(c.message) != std::string::npos);
  }
}

TEST_CASE("onnx: a bidirectional RNN is one input projection and one product per step; sequence_lens mask it") {
  // Affine(x) = x, hidden 1, input 1, W = 1, R = 2: H(t) = x(t) + 2 H(t-1). Batch entry 1 has
  // length 2 (given at run time): its third step is masked.
  ModelBuilder m(14);
  m.input("x", {"3", "2", "1"});
  m.input("lens", {"2"}, onnx::TensorProto::INT32);
  m.input("h0", {"2", "2", "1"});
  m.init_floats("w", {2, 1, 1}, {1, 1});
  m.init_floats("r", {2, 1, 1}, {2, 2});
  auto* n = m.node("RNN", {"x", "w", "r", "", "lens", "h0"}, {"y", "y_h"}, "rnn");
  set_string(n, "direction", "bidirectional");
  set_strings(n, "activations", {"Affine", "Affine"});
  set_floats(n, "activation_alpha", {1, 1});
  set_floats(n, "activation_beta", {0, 0});
  m.output("y");
  m.output("y_h");
  Diagnostics diags;
  auto r = import(m.bytes(), diags);
  REQUIRE_MESSAGE(r.is_ok(), diags.to_string());
  // X * W^T for every step and direction, then H * R^T once per step and direction.
  CHECK(count_ops(*r, ir::OpKind::kMatMul) == 1 + 2 * 3);
  auto lens = ir::Tensor::zeros(ir::DType::kI32, {2});
  REQUIRE(lens.is_ok());
  lens->set_element_from_double(0, 3);
  lens->set_element_from_double(1, 2);
  const std::vector<ir::Tensor> inputs = {floats({3, 2, 1}, {1, 10, 2, 20, 3, 30}), *lens,
                                          floats({2, 2, 1}, {0, 0, 0, 0})};
  auto out = ir::interpret(*r, inputs);
  REQUIRE(out.is_ok());
  // Y [seq, direction, batch, 1]. Forward: 1, 4, 11 and 10, 40, (masked: 0). Reverse: entry 0
  // runs 3, 8, 17 from t = 2; entry 1 starts at its own last step t = 1: 20, 50.
  const std::vector<float> y = {1, 10, 17, 50, 4, 40, 8, 20, 11, 0, 3, 0};
  const std::vector<float> y_h = {11, 40, 17, 50};  // entry 1's forward state held at 40
  REQUIRE((*out)[0].num_elements() == int64_t(y.size()));
  for (size_t i = 0; i < y.size(); ++i) CHECK((*out)[0].data_as<float>()[i] == y[i]);
  REQUIRE((*out)[1].num_elements() == int64_t(y_h.size()));
  for (size_t i = 0; i < y_h.size(); ++i) CHECK((*out)[1].data_as<float>()[i] == y_h[i]);
}

TEST_CASE("onnx: RotaryEmbedding, SwiGLU, CausalConvWithState and LinearAttention mistakes are diagnosed at the node") {
  struct Case {
    int64_t opset;
    const char* op;
    std::vector<std::string> inputs;
    std::function<void(onnx::NodeProto*)> attrs;
    const char* message;
  };
  auto none = [](onnx::NodeProto*) {};
  // LinearAttention's required head counts, plus an update rule unless empty.
  auto heads = [](int64_t q, int64_t kv, std::string rule) {
    return [=](onnx::NodeProto* n) {
      set_int(n, "q_num_heads", q);
      set_int(n, "kv_num_heads", kv);
      if (!rule.empty()) set_string(n, "update_rule", rule);
    };
  };
  const std::vector<Case> cases = {
      {23, "RotaryEmbedding", {"x3", "cos", "sin", "ids"}, none,
       "node 'bad' (RotaryEmbedding, opset 23): a 3-D X needs a positive num_heads attribute"},
      {23, "RotaryEmbedding", {"x3", "cos", "sin", "ids"}, [](onnx::NodeProto* n) { set_int(n, "num_heads", 5); },
       "node 'bad' (RotaryEmbedding, opset 23): X's hidden size (32) must be a multiple of num_heads (5)"},
      {23, "RotaryEmbedding", {"x2", "cos", "sin", "ids"}, none,
       "node 'bad' (RotaryEmbedding, opset 23): X must be 4-D (batch, heads, sequence, head_size) or 3-D (batch, "
       "sequence, hidden), got f32[2, 8]"},
      {23, "RotaryEmbedding", {"x4", "cos", "sin", "ids"}, [](onnx::NodeProto* n) { set_int(n, "rotary_embedding_dim", 10); },
       "node 'bad' (RotaryEmbedding, opset 23): rotary_embedding_dim (10) must be between 0 and the head size (8)"},
      {23, "RotaryEmbedding", {"x4", "cos", "sin", "ids"}, [](onnx::NodeProto* n) { set_int(n, "rotary_embedding_dim", 3); },
       "node 'bad' (RotaryEmbedding, opset 23): the rotated part of each head (3 entries: rotary_embedding_dim, or the "
       "head size when it is 0) must be even"},
      {23, "RotaryEmbedding", {"x4", "cos3", "sin3", "ids"}, none,
       "node 'bad' (RotaryEmbedding, opset 23): with position_ids, cos_cache and sin_cache must be 2-D "
       "(max_position_id_plus_1, rotary_embedding_dim / 2), got f32[2, 3, 4]"},
      {23, "RotaryEmbedding", {"x4", "cos", "sin"}, none,
       "node 'bad' (RotaryEmbedding, opset 23): without position_ids, cos_cache and sin_cache must be 3-D (batch, "
       "sequence, rotary_embedding_dim / 2), got f32[50, 4]"},
      {23, "RotaryEmbedding", {"x4", "cos_odd", "sin", "ids"}, none,
       "node 'bad' (RotaryEmbedding, opset 23): the last dim of cos_cache (3) must be rotary_embedding_dim / 2 (4)"},
      {28, "SwiGLU", {"a", "b"}, none,
       "node 'bad' (SwiGLU, opset 28): A and B must have identical shapes (SwiGLU does not broadcast), got f32[2, 4] "
       "and f32[2, 1]"},
      {28, "SwiGLU", {"an", "bm"}, none,
       "node 'bad' (SwiGLU, opset 28): A and B must have identical shapes, which Kiln cannot show at import for "
       "f32[n, 4] and f32[m, 4]"},
      {27, "CausalConvWithState", {"ci", "cw"}, [](onnx::NodeProto* n) { set_string(n, "activation", "gelu"); },
       "node 'bad' (CausalConvWithState, opset 27): activation must be 'none', 'silu' or 'swish', got 'gelu'"},
      {27, "CausalConvWithState", {"ci", "cw2"}, none,
       "node 'bad' (CausalConvWithState, opset 27): weight must be (channels, 1, k) = (4, 1, k >= 1) of the input's "
       "type, got f32[4, 2, 4]"},
      {27, "CausalConvWithState", {"ci", "cw", "", "cpast"}, none,
       "node 'bad' (CausalConvWithState, opset 27): past_state must be (batch, channels, k - 1) = f32[2, 4, 3], got "
       "f32[2, 4, 2]"},
      {27, "CausalConvWithState", {"cdyn", "cw"}, none,
       "node 'bad' (CausalConvWithState, opset 27): the length must be static (Kiln joins past_state and the input "
       "into a sequence of static length), got f32[2, 4, len]"},
      {27, "LinearAttention", {"q", "k", "v", "", "decay", "beta"}, heads(4, 4, "softmax"),
       "node 'bad' (LinearAttention, opset 27): update_rule must be 'linear', 'gated', 'delta' or 'gated_delta', got "
       "'softmax'"},
      {27, "LinearAttention", {"q", "k", "v", "", "decay", "beta"}, [](onnx::NodeProto* n) { set_int(n, "q_num_heads", 4); },
       "node 'bad' (LinearAttention, opset 27): the q_num_heads and kv_num_heads attributes are required"},
      {27, "LinearAttention", {"q", "k", "v", "", "decay", "beta"}, heads(6, 4, ""),
       "node 'bad' (LinearAttention, opset 27): q_num_heads (6) must be a positive multiple of kv_num_heads (4)"},
      {27, "LinearAttention", {"q", "k", "v"}, heads(4, 4, "gated"),
       "node 'bad' (LinearAttention, opset 27): update_rule 'gated' needs the decay input"},
      {27, "LinearAttention", {"q", "k", "v", "", "", "beta"}, heads(4, 4, "linear"),
       "node 'bad' (LinearAttention, opset 27): update_rule 'linear' takes no beta input"},
      {27, "LinearAttention", {"q", "k", "v", "", "decay5", "beta"}, heads(4, 4, ""),
       "node 'bad' (LinearAttention, opset 27): decay must be (B, T, kv_num_heads) or (B, T, kv_num_heads * d_k) of "
       "query's type, i.e. last dim 4 or 32, got f32[2, 4, 5]"},
      {27, "LinearAttention", {"q", "k", "v", "", "decay", "beta3"}, heads(4, 4, ""),
       "node 'bad' (LinearAttention, opset 27): beta must be (B, T, kv_num_heads) or (B, T, 1) of query's type, i.e. "
       "last dim 4 or 1, got f32[2, 4, 3]"},
      {27, "LinearAttention", {"q", "k", "v", "past_bad", "decay", "beta"}, heads(4, 4, ""),
       "node 'bad' (LinearAttention, opset 27): past_state must be floating-point of shape f32[2, 4, 8, 8] (B, "
       "kv_num_heads, d_k, d_v), got f32[2, 4, 8, 4]"},
      {27, "LinearAttention", {"q", "k16", "v", "", "decay", "beta"}, heads(4, 4, ""),
       "node 'bad' (LinearAttention, opset 27): key's head size (4) must be query's (8)"},
      {27, "LinearAttention", {"qn", "km", "km"}, heads(4, 4, "linear"),
       "node 'bad' (LinearAttention, opset 27): key's batch and sequence dims must be query's, got f32[m, 4, 32] and "
       "f32[n, 4, 32], which Kiln cannot compare at import"},
      {27, "LinearAttention", {"q", "qlong", "qlong"}, heads(4, 4, "linear"),
       "node 'bad' (LinearAttention, opset 27): key's batch and sequence dims must be query's, got f32[2, 1025, 32] "
       "and f32[2, 4, 32]"},
      {27, "LinearAttention", {"qdyn", "qdyn", "qdyn"}, heads(4, 4, "linear"),
       "node 'bad' (LinearAttention, opset 27): the sequence length must be static, got f32[2, t, 32]"},
      {27, "LinearAttention", {"qlong", "qlong", "qlong", "", "", "betalong"}, heads(4, 4, "delta"),
       "node 'bad' (LinearAttention, opset 27): update_rule 'delta' over 1025 steps: Kiln unrolls the delta rule's "
       "sequential solve, up to 1024 steps"},
      {27, "LinearAttention", {"qlong", "qlong", "qlong", "", "qlong"}, heads(4, 4, "gated"),
       "node 'bad' (LinearAttention, opset 27): a per-key-dimension decay over 1025 steps with d_k = 8: Kiln builds "
       "the decay between every two steps ((T, T, d_k) = 8405000 elements per head, at most 4194304)"},
  };
  for (const Case& c : cases) {
    INFO(c.message);
    ModelBuilder m(c.opset);
    m.input("x4", {"2", "4", "3", "8"});
    m.input("x3", {"2", "3", "32"});
    m.input("x2", {"2", "8"});
    m.input("cos", {"50", "4"});
    m.input("sin", {"50", "4"});
    m.input("cos_odd", {"50", "3"});
    m.input("cos3", {"2", "3", "4"});
    m.input("sin3", {"2", "3", "4"});
    m.input("ids", {"2", "3"}, onnx::TensorProto::INT64);
    m.input("a", {"2", "4"});
    m.input("b", {"2", "1"});
    m.input("an", {"n", "4"});
    m.input("bm", {"m", "4"});
    m.input("ci", {"2", "4", "8"});
    m.input("cdyn", {"2", "4", "len"});
    m.input("cw", {"4", "1", "4"});
    m.input("cw2", {"4", "2", "4"});
    m.input("cpast", {"2", "4", "2"});
    m.input("q", {"2", "4", "32"});
    m.input("k", {"2", "4", "32"});
    m.input("k16", {"2", "4", "16"});
    m.input("v", {"2", "4", "32"});
    m.input("decay", {"2", "4", "32"});
    m.input("decay5", {"2", "4", "5"});
    m.input("beta", {"2", "4", "4"});
    m.input("beta3", {"2", "4", "3"});
    m.input("past_bad", {"2", "4", "8", "4"});
    m.input("qdyn", {"2", "t", "32"});
    m.input("qn", {"n", "4", "32"});
    m.input("km", {"m", "4", "32"});
    m.input("qlong", {"2", "1025", "32"});
    m.input("betalong", {"2", "1025", "4"});
    c.attrs(m.node(c.op, c.inputs, {"y"}, "bad"));
    m.output("y");
    Diagnostics diags;
    CHECK_FALSE(import(m.bytes(), diags).is_ok());
    CHECK(diags.to_string().find(c.message) != std::string::npos);
  }
}

TEST_CASE("onnx: LinearAttention's delta rule solves its steps without a matmul per step") {
  // The decayed K K^T, the state reads and the output products are batched over the sequence;
  // each unrolled step of the forward substitution is two slices and an elementwise update.
  ModelBuilder m(27);
  for (const char* name : {"q", "k", "v", "decay"}) m.input(name, {"2", "16", "32"});
  m.input("beta", {"2", "16", "4"});
  m.input("past", {"2", "4", "8", "8"});
  auto* n = m.node("LinearAttention", {"q", "k", "v", "past", "decay", "beta"}, {"y", "state"}, "la");
  set_int(n, "q_num_heads", 4);
  set_int(n, "kv_num_heads", 4);
  m.output("y");
  m.output("state");
  Diagnostics diags;
  auto r = import(m.bytes(), diags);
  REQUIRE_MESSAGE(r.is_ok(), diags.to_string());
  CHECK(count_ops(*r, ir::OpKind::kMatMul) <= 6);
  CHECK(count_ops(*r, ir::OpKind::kConcat) == 0);
  CHECK(count_ops(*r, ir::OpKind::kSlice) <= 2 * 16);
}

#endif  // KILN_HAVE_ONNX

TEST_CASE("onnx: quantization forms Kiln cannot import exactly are diagnosed at the node") {
  struct Case {
    const char* op;
    std::vector<std::string> inputs;
    std::function<void(onnx::NodeProto*)> attrs;
    const char* message;
  };
  const std::vector<Case> cases = {
      {"QuantizeLinear", {"x", "scale"}, [](onnx::NodeProto* n) { set_int(n, "output_dtype", onnx::TensorProto::INT32); },
       "node 'bad' (QuantizeLinear, opset 23): quantization to i32 is not supported (Kiln quantizes to int8, uint8, int16, "
       "uint16 and the float8 types)"},
      {"QuantizeLinear", {"x", "scale"}, [](onnx::NodeProto* n) { set_int(n, "precision", onnx::TensorProto::FLOAT16); },
       "node 'bad' (QuantizeLinear, opset 23): precision=FLOAT16 is not supported (Kiln divides by the scale in float32)"},
      {"QuantizeLinear", {"i", "scale"}, [](onnx::NodeProto*) {},
       "node 'bad' (QuantizeLinear, opset 23): quantizing a i32 input is not supported (float inputs only)"},
      {"QuantizeLinear", {"x", "scale3"}, [](onnx::NodeProto*) {},
       "node 'bad' (QuantizeLinear, opset 23): y_scale has 3 entries for an axis of 4"},
      {"QuantizeLinear", {"x", "scale3"}, [](onnx::NodeProto* n) { set_int(n, "block_size", 2); },
       "node 'bad' (QuantizeLinear, opset 23): y_scale must have the input's rank for blocked quantization"},
      {"DequantizeLinear", {"q", "scale", "zp_i8"}, [](onnx::NodeProto*) {},
       "node 'bad' (DequantizeLinear, opset 23): x_zero_point must have x's type"},
      // A runtime weight of 4 x 3 x 3 x 300 8-bit values may accumulate 255 * 255 * 2700.
      {"ConvInteger", {"image", "weight"}, [](onnx::NodeProto*) {},
       "node 'bad' (ConvInteger, opset 23): the int32 accumulation of this quantized convolution may reach 175567500, "
       "beyond float32's exact integers (2^24); Kiln has no integer convolution"},
      {"QLinearConv", {"small_image", "scale", "zp_u8", "small_weight", "scale", "zp_u8", "scale", "zp_u8", "bias"},
       [](onnx::NodeProto*) {},
       "node 'bad' (QLinearConv, opset 23): a quantized convolution with a bias computed at run time is not supported"},
  };
  for (const Case& c : cases) {
    INFO(c.message);
    ModelBuilder m(23);
    m.input("x", {"2", "4"});
    m.input("i", {"2", "4"}, onnx::TensorProto::INT32);
    m.input("q", {"2", "4"}, onnx::TensorProto::UINT8);
    m.input("scale", {});
    m.input("scale3", {"3"});
    m.input("zp_i8", {}, onnx::TensorProto::INT8);
    m.input("zp_u8", {}, onnx::TensorProto::UINT8);
    m.input("image", {"1", "300", "8", "8"}, onnx::TensorProto::UINT8);
    m.input("weight", {"4", "300", "3", "3"}, onnx::TensorProto::UINT8);
    m.input("small_image", {"1", "2", "8", "8"}, onnx::TensorProto::UINT8);
    m.input("small_weight", {"4", "2", "3", "3"}, onnx::TensorProto::UINT8);
    m.input("bias", {"4"}, onnx::TensorProto::INT32);
    c.attrs(m.node(c.op, c.inputs, {"y"}, "bad"));
    m.output("y");
    Diagnostics diags;
    CHECK_FALSE(import(m.bytes(), diags).is_ok());
    CHECK(diags.to_string().find(c.message) != std::string::npos);
  }
}

TEST_CASE("onnx: 8-bit float casts saturate by clamping first; their quantization needs a zero zero point") {
  constexpr int32_t kFloat8E4M3FN = 17;  // newer than the onnx 1.12 headers
  auto model = [&](const std::string& op, int64_t saturate, std::optional<int32_t> zero_point_bits) {
    ModelBuilder m(23);
    m.input("x", {"4"});
    m.init_floats("scale", {}, {2.0f});
    std::vector<std::string> inputs = {"x"};
    if (op == "QuantizeLinear") inputs.push_back("scale");
    if (zero_point_bits) {
      auto* zp = m.graph->add_initializer();
      zp->set_name("zp");
      zp->set_data_type(kFloat8E4M3FN);
      zp->add_int32_data(*zero_point_bits);  // int32_data holds the bit pattern
      inputs.push_back("zp");
    }
    auto* n = m.node(op, inputs, {"y"}, "n");
    if (op == "Cast") set_int(n, "to", kFloat8E4M3FN);
    if (saturate >= 0) set_int(n, "saturate", saturate);
    m.output("y");
    return m.bytes();
  };
  struct Case {
    std::string op;
    int64_t saturate;  // -1: the default
    int clamps;
  };
  for (const Case& c : {Case{"Cast", -1, 1}, Case{"Cast", 1, 1}, Case{"Cast", 0, 0}, Case{"QuantizeLinear", -1, 1},
                        Case{"QuantizeLinear", 0, 0}}) {
    INFO(c.op << " saturate=" << c.saturate);
    Diagnostics diags;
    Result<ir::Graph> g = import(model(c.op, c.saturate, c.op == "Cast" ? std::nullopt : std::optional<int32_t>(0)), diags);
    REQUIRE_MESSAGE(g.is_ok(), diags.to_string());
    CHECK(count_ops(*g, ir::OpKind::kClamp) == c.clamps);
    CHECK(g->node(g->outputs()[0].node).type.dtype == ir::DType::kF8E4M3FN);
  }
  Diagnostics diags;
  CHECK_FALSE(import(model("QuantizeLinear", -1, 0x38), diags).is_ok());  // 0x38 is 1.0
  CHECK(diags.to_string().find("node 'n' (QuantizeLinear, opset 23): the zero point of an 8-bit float type must be zero") !=
        std::string::npos);
}

TEST_CASE("onnx: 3-D and dilated pools unroll over their window; too large a window is diagnosed") {
  ModelBuilder m(22);
  m.input("x", {"1", "2", "6", "6", "6"});
  auto* pool = m.node("AveragePool", {"x"}, {"y"}, "pool");
  set_ints(pool, "kernel_shape", {2, 2, 2});
  set_ints(pool, "dilations", {2, 2, 2});
  set_int(pool, "count_include_pad", 1);
  set_ints(pool, "pads", {1, 1, 1, 1, 1, 1});
  m.output("y");
  Diagnostics diags;
  Result<ir::Graph> g = import(m.bytes(), diags);
  REQUIRE(g.is_ok());
  // 8 window positions, each a strided slice of the padded input; the divisor counts the padding.
  CHECK(count_ops(*g, ir::OpKind::kSlice) == 8);

  ModelBuilder big(22);
  big.input("x", {"1", "1", "40", "40", "40"});
  set_ints(big.node("MaxPool", {"x"}, {"y"}, "big"), "kernel_shape", {9, 9, 9});
  big.output("y");
  Diagnostics big_diags;
  CHECK_FALSE(import(big.bytes(), big_diags).is_ok());
  CHECK(big_diags.to_string().find("node 'big' (MaxPool, opset 22): a pooling window of 729 positions is not supported here") !=
        std::string::npos);
}

TEST_CASE("onnx: a 3-D Conv matches a direct convolution (strides, dilations, asymmetric pads, groups, bias)") {
  struct Case {
    int64_t group;
    std::vector<int64_t> strides, dilations, pads;
  };
  const std::vector<Case> cases = {{1, {2, 1, 2}, {1, 2, 1}, {1, 0, 1, 1, 1, 0}}, {3, {1, 1, 1}, {1, 1, 1}, {0, 0, 0, 0, 0, 0}}};
  for (const Case& c : cases) {
    CAPTURE(c.group);
    const int64_t N = 2, C = 3, D = 5, H = 6, W = 7, O = 6, KD = 3, KH = 2, KW = 3, Cg = C / c.group, Og = O / c.group;
    std::vector<float> xv(static_cast<size_t>(N * C * D * H * W)), wv(static_cast<size_t>(O * Cg * KD * KH * KW)),
        bv(static_cast<size_t>(O));
    for (size_t i = 0; i < xv.size(); ++i) xv[i] = float((i * 37) % 17) / 8.0f - 1.0f;
    for (size_t i = 0; i < wv.size(); ++i) wv[i] = float((i * 11) % 13) / 6.0f - 1.0f;
    for (size_t i = 0; i < bv.size(); ++i) bv[i] = float(i) - 2.5f;
    ModelBuilder m(13);
    m.input("x", {"2", "3", "5", "6", "7"});
    m.init_floats("w", {O, Cg, KD, KH, KW}, wv);
    m.init_floats("b", {O}, bv);
    auto* n = m.node("Conv", {"x", "w", "b"}, {"y"});
    set_int(n, "group", c.group);
    set_ints(n, "strides", c.strides);
    set_ints(n, "dilations", c.dilations);
    set_ints(n, "pads", c.pads);
    m.output("y");
    Diagnostics diags;
    auto r = import(m.bytes(), diags);
    REQUIRE_MESSAGE(r.is_ok(), diags.to_string());
    const ir::Tensor x = floats({N, C, D, H, W}, xv);
    auto out = ir::interpret(*r, std::span(&x, 1));
    REQUIRE(out.is_ok());
    const int64_t in[3] = {D, H, W}, k[3] = {KD, KH, KW};
    int64_t o[3];
    for (int a = 0; a < 3; ++a) {
      o[a] = (in[a] + c.pads[a] + c.pads[3 + a] - c.dilations[a] * (k[a] - 1) - 1) / c.strides[a] + 1;
    }
    REQUIRE((*out)[0].shape() == std::vector<int64_t>{N, O, o[0], o[1], o[2]});
    const float* y = (*out)[0].data_as<float>();
    size_t at = 0;
    for (int64_t b = 0; b < N; ++b)
      for (int64_t oc = 0; oc < O; ++oc)
        for (int64_t od = 0; od < o[0]; ++od)
          for (int64_t oh = 0; oh < o[1]; ++oh)
            for (int64_t ow = 0; ow < o[2]; ++ow, ++at) {
              double sum = bv[size_t(oc)];
              for (int64_t ic = 0; ic < Cg; ++ic)
                for (int64_t kd = 0; kd < KD; ++kd)
                  for (int64_t kh = 0; kh < KH; ++kh)
                    for (int64_t kw = 0; kw < KW; ++kw) {
                      const int64_t id = od * c.strides[0] + kd * c.dilations[0] - c.pads[0];
                      const int64_t ih = oh * c.strides[1] + kh * c.dilations[1] - c.pads[1];
                      const int64_t iw = ow * c.strides[2] + kw * c.dilations[2] - c.pads[2];
                      if (id < 0 || id >= D || ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
                      const int64_t channel = (oc / Og) * Cg + ic;
                      sum += double(xv[size_t((((b * C + channel) * D + id) * H + ih) * W + iw)]) *
                             wv[size_t((((oc * Cg + ic) * KD + kd) * KH + kh) * KW + kw)];
                    }
              CHECK(y[at] == doctest::Approx(sum).epsilon(1e-5));
            }
  }
}

TEST_CASE("onnx: RoiAlign needs a fixed sampling grid") {
  ModelBuilder m(16);
  m.input("x", {"1", "2", "8", "8"});
  m.input("rois", {"3", "4"});
  m.input("batch", {"3"}, onnx::TensorProto::INT64);
  m.node("RoiAlign", {"x", "rois", "batch"}, {"y"}, "align");
  m.output("y");
  Diagnostics diags;
  CHECK_FALSE(import(m.bytes(), diags).is_ok());
  CHECK(diags.to_string().find("node 'align' (RoiAlign, opset 16): sampling_ratio=0 (a sampling grid sized by each box, "
                               "known only from the data) is not supported") != std::string::npos);
}

TEST_CASE("onnx: local functions are inlined with their attribute references bound") {
  ModelBuilder m(18);
  auto* domain = m.model.add_opset_import();
  domain->set_domain("my.domain");
  domain->set_version(1);
  // Scale(x) = x * factor, factor an attribute of the call.
  onnx::FunctionProto* f = m.model.add_functions();
  f->set_name("Scale");
  f->set_domain("my.domain");
  f->add_input("x");
  f->add_output("y");
  f->add_attribute("factor");
  f->add_opset_import()->set_version(18);
  onnx::NodeProto* c = f->add_node();
  c->set_op_type("Constant");
  c->add_output("c");
  auto* ref = c->add_attribute();
  ref->set_name("value_float");
  ref->set_type(onnx::AttributeProto::FLOAT);
  ref->set_ref_attr_name("factor");
  onnx::NodeProto* mul = f->add_node();
  mul->set_op_type("Mul");
  mul->add_input("x");
  mul->add_input("c");
  mul->add_output("y");
  m.input("x", {"3"});
  for (const char* out : {"a", "b"}) {  // two calls: the body's names must not collide
    onnx::NodeProto* call = m.node("Scale", {std::string(out) == "a" ? "x" : "a"}, {out});
    call->set_domain("my.domain");
    auto* factor = call->add_attribute();
    factor->set_name("factor");
    factor->set_type(onnx::AttributeProto::FLOAT);
    factor->set_f(std::string(out) == "a" ? 3.0f : 0.5f);
  }
  m.output("b");
  Diagnostics diags;
  auto r = import(m.bytes(), diags);
  REQUIRE_MESSAGE(r.is_ok(), diags.to_string());
  const ir::Tensor x = floats({3}, {1, 2, -4});
  auto out = ir::interpret(*r, std::span(&x, 1));
  REQUIRE(out.is_ok());
  CHECK((*out)[0].data_as<float>()[0] == 1.5f);
  CHECK((*out)[0].data_as<float>()[2] == -6.0f);
}

TEST_CASE("onnx: control flow decided at run time is diagnosed at the node") {
  // Loop with a trip count that is a graph input.
  {
    ModelBuilder m(13);
    m.input("n", {}, onnx::TensorProto::INT64);
    m.input("x", {"2"});
    onnx::NodeProto* loop = m.node("Loop", {"n", "", "x"}, {"y"}, "loop");
    auto* body_attr = loop->add_attribute();
    body_attr->set_name("body");
    body_attr->set_type(onnx::AttributeProto::GRAPH);
    onnx::GraphProto* body = body_attr->mutable_g();
    for (const char* in : {"i", "cond_in", "v"}) body->add_input()->set_name(in);
    onnx::NodeProto* id = body->add_node();
    id->set_op_type("Identity");
    id->add_input("cond_in");
    id->add_output("cond_out");
    onnx::NodeProto* twice = body->add_node();
    twice->set_op_type("Add");
    twice->add_input("v");
    twice->add_input("v");
    twice->add_output("v_out");
    body->add_output()->set_name("cond_out");
    body->add_output()->set_name("v_out");
    m.output("y");
    Diagnostics diags;
    CHECK_FALSE(import(m.bytes(), diags).is_ok());
    CHECK(diags.to_string().find("node 'loop' (Loop, opset 13): the trip count M must be a constant (computed at import)") !=
          std::string::npos);
  }
  // If on a run-time condition whose branches compute different shapes.
  {
    ModelBuilder m(13);
    m.input("c", {}, onnx::TensorProto::BOOL);
    m.input("x", {"2"});
    m.input("z", {"3"});
    onnx::NodeProto* node = m.node("If", {"c"}, {"y"}, "choose");
    for (const char* branch : {"then_branch", "else_branch"}) {
      auto* a = node->add_attribute();
      a->set_name(branch);
      a->set_type(onnx::AttributeProto::GRAPH);
      onnx::NodeProto* n = a->mutable_g()->add_node();
      n->set_op_type("Identity");
      n->add_input(std::string(branch) == "then_branch" ? "x" : "z");
      n->add_output("out");
      a->mutable_g()->add_output()->set_name("out");
    }
    m.output("y");
    Diagnostics diags;
    CHECK_FALSE(import(m.bytes(), diags).is_ok());
    CHECK(diags.to_string().find("node 'choose' (If, opset 13): output 0 is f32[2] in then_branch and f32[3] in else_branch") !=
          std::string::npos);
  }
}

TEST_CASE("onnx: Compress selects at constant positions; a run-time condition is diagnosed") {
  ModelBuilder m(13);
  m.input("x", {"3", "2"});
  m.input("keep", {"3"}, onnx::TensorProto::BOOL);
  set_int(m.node("Compress", {"x", "keep"}, {"y"}, "pick"), "axis", 0);
  m.output("y");
  Diagnostics diags;
  CHECK_FALSE(import(m.bytes(), diags).is_ok());
  CHECK(diags.to_string().find("node 'pick' (Compress, opset 13): the condition must be a constant (computed at import)") !=
        std::string::npos);
}

TEST_CASE("onnx: MaxPool's Indices are the first maximum's flattened position, row- or column-major") {
  // One 3 x 3 plane (the second of two), a 2 x 2 window with stride 1: the maximum 9 is at
  // (h=2, w=1), twice in windows; ties keep the first in the window's row-major order.
  const std::vector<float> plane = {1, 5, 5, 2, 3, 4, 8, 9, 0};
  std::vector<float> values(18, 0.0f);
  std::copy(plane.begin(), plane.end(), values.begin() + 9);
  for (int64_t order : {0, 1}) {
    CAPTURE(order);
    ModelBuilder m(12);
    m.input("x", {"1", "2", "3", "3"});
    auto* n = m.node("MaxPool", {"x"}, {"y", "i"});
    set_ints(n, "kernel_shape", {2, 2});
    set_int(n, "storage_order", order);
    m.output("y");
    m.output("i");
    Diagnostics diags;
    auto r = import(m.bytes(), diags);
    REQUIRE_MESSAGE(r.is_ok(), diags.to_string());
    const ir::Tensor x = floats({1, 2, 3, 3}, values);
    auto out = ir::interpret(*r, std::span(&x, 1));
    REQUIRE(out.is_ok());
    const int64_t* got = (*out)[1].data_as<int64_t>();
    // Second plane, windows (0,0), (0,1), (1,0), (1,1): maxima 5 at (0,1), 5 at (0,1), 9, 9 at (2,1).
    auto at = [&](int64_t h, int64_t w) { return 9 + (order == 0 ? h * 3 + w : w * 3 + h); };
    CHECK(got[4] == at(0, 1));
    CHECK(got[5] == at(0, 1));
    CHECK(got[6] == at(2, 1));
    CHECK(got[7] == at(2, 1));
  }
}

TEST_CASE("onnx: TensorScatter's update must match the cache off the sequence axis") {
  ModelBuilder m(24);
  m.input("past", {"2", "4", "8", "16"});
  m.input("update", {"2", "3", "1", "16"});
  m.node("TensorScatter", {"past", "update"}, {"present"}, "cache");
  m.output("present");
  Diagnostics diags;
  CHECK_FALSE(import(m.bytes(), diags).is_ok());
  CHECK(diags.to_string().find("node 'cache' (TensorScatter, opset 24): update [2, 3, 1, 16] must match past_cache "
                               "[2, 4, 8, 16] off the sequence axis") != std::string::npos);
}

TEST_CASE("onnx: Col2Im's columns must match the image, block and strides") {
  ModelBuilder m(18);
  m.input("cols", {"1", "5", "24"});
  m.init_ints("image", {5, 5});
  m.init_ints("block", {1, 5});
  m.node("Col2Im", {"cols", "image", "block"}, {"y"}, "fold");
  m.output("y");
  Diagnostics diags;
  CHECK_FALSE(import(m.bytes(), diags).is_ok());
  CHECK(diags.to_string().find("node 'fold' (Col2Im, opset 18): the input [1, 5, 24] does not hold C * 5 rows of 5 blocks") !=
        std::string::npos);
}

TEST_CASE("onnx: DeformConv's offsets must hold two coordinates per tap and output position") {
  ModelBuilder m(19);
  m.input("x", {"1", "2", "5", "5"});
  m.input("w", {"4", "2", "3", "3"});
  m.input("offset", {"1", "9", "3", "3"});
  m.node("DeformConv", {"x", "w", "offset"}, {"y"}, "dcn");
  m.output("y");
  Diagnostics diags;
  CHECK_FALSE(import(m.bytes(), diags).is_ok());
  CHECK(diags.to_string().find("node 'dcn' (DeformConv, opset 19): offset must be [N, offset_group * kH * kW * 2, oH, oW] = "
                               "[N, 18, 3, 3], got [1, 9, 3, 3]") != std::string::npos);
}

TEST_CASE("onnx: Scan's opset 8 form needs sequence_lens equal to the sequence length") {
  ModelBuilder m(8);
  m.input("lens", {"1"}, onnx::TensorProto::INT64);
  m.input("init", {"1", "2"});
  m.input("xs", {"1", "3", "2"});
  onnx::NodeProto* scan = m.node("Scan", {"lens", "init", "xs"}, {"y", "z"}, "scan");
  set_int(scan, "num_scan_inputs", 1);
  auto* body_attr = scan->add_attribute();
  body_attr->set_name("body");
  body_attr->set_type(onnx::AttributeProto::GRAPH);
  onnx::GraphProto* body = body_attr->mutable_g();
  for (const char* in : {"sum_in", "next"}) body->add_input()->set_name(in);
  onnx::NodeProto* add = body->add_node();
  add->set_op_type("Add");
  add->add_input("sum_in");
  add->add_input("next");
  add->add_output("sum_out");
  onnx::NodeProto* copy = body->add_node();
  copy->set_op_type("Identity");
  copy->add_input("sum_out");
  copy->add_output("scan_out");
  body->add_output()->set_name("sum_out");
  body->add_output()->set_name("scan_out");
  m.output("y");
  m.output("z");
  auto* lens = m.graph->add_initializer();
  lens->set_name("lens");
  lens->set_data_type(onnx::TensorProto::INT64);
  lens->add_dims(1);
  lens->add_int64_data(2);
  Diagnostics diags;
  CHECK_FALSE(import(m.bytes(), diags).is_ok());
  CHECK(diags.to_string().find("node 'scan' (Scan, opset 8): sequence_lens shorter than the sequence (per-entry lengths) "
                               "is not supported") != std::string::npos);
}
