// Internals of the C-family emitter (codegen/c_family.h), shared by its files:
//   c_family.cpp          dialect vocabulary, types, loads/stores, elementwise expressions, assembly
//   c_family_prelude.cpp  the helper functions every kernel starts with
//   c_family_pointwise.cpp  the pointwise template and its anchors (layout, conv, pooling)
//   c_family_rows.cpp     the row-reduction template (reduce, argmax, normalizations) and matmul
//   c_family_attention.cpp  the attention template (one query row per work item)
//   cuda/c_family_cuda.cpp  CUDA C: loads/stores, launch configuration and its own templates
//   cuda/c_family_cuda_conv.cpp  CUDA C: conv2d as an implicit GEMM
//   cuda/c_family_cuda_attention.cpp  CUDA C: 16-bit attention on tensor cores
// Not a public header. An Emitter renders one kernel once; it is not thread-safe.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "codegen/c_family.h"

namespace kiln::codegen::cfam {

// How a kernel runs on CUDA (cuda/c_family_cuda.cpp): chosen from the model alone, so the emitter and
// cuda_dispatch() agree without passing it around.
struct CudaConfig {
  enum class Mode : uint8_t {
    kPointwise,      // one thread per output element, grid-stride (layout, conv, pooling)
    kVectorized,     // pure elementwise: `vector_width` elements per thread, 16-byte accesses
    kRowsPerThread,  // reductions not over the innermost axis: one thread per row (coalesced)
    kRowsPerWarp,    // short rows: one warp per row, warp shuffles only
    kRowsPerBlock,   // long rows: one block per row, shuffles + shared memory across warps
    kMatMul,         // register-blocked tiles staged in shared memory
    kConvGemm,       // conv2d as an implicit GEMM: kMatMul's tiles, A gathered from the input
    kAttentionRows,  // attention, one thread per query row (the C-family template)
    kAttentionMma,   // 16-bit attention: 64-row query tiles on tensor cores, flash-attention style
    kAttentionFma,   // f32 attention: 32-row query tiles, FMA register tiles, flash-attention style
  };
  Mode mode = Mode::kPointwise;
  uint32_t block = 256;         // threads per block
  uint32_t vector_width = 1;    // kVectorized: elements per thread per pass
  uint32_t row_threads = 1;     // rows: threads that share one row (1, 32 or `block`)
  uint32_t row_registers = 0;   // rows: elements per thread kept in registers (0: stream the row)
  uint32_t bm = 0, bn = 0, bk = 0, tm = 0, tn = 0;  // kMatMul: block tile, k step, thread tile
  bool tensor_cores = false;    // kMatMul: f16/bf16 operands multiplied by mma.sync (warp tiles)
};
CudaConfig cuda_config(const KernelModel& model);
// cuda/c_family_cuda_conv.cpp: whether a conv2d kernel runs as an implicit GEMM (then sets c's mode,
// block and tiles), and its dispatch (work units: output tiles).
bool cuda_conv_gemm_config(const KernelModel& model, CudaConfig& c);
artifact::KernelDispatch cuda_conv_gemm_dispatch(const KernelModel& model, const CudaConfig& c);
// cuda/c_family_cuda_attention.cpp: whether an attention kernel runs flash-attention style (on
// tensor cores in 16 bits, FMA tiles in f32; then sets c's mode, block and query rows per block
// bm), and its dispatch (work units: query tiles).
bool cuda_flash_attention_config(const KernelModel& model, CudaConfig& c);
artifact::KernelDispatch cuda_flash_attention_dispatch(const KernelModel& model, const CudaConfig& c);

// Compute kinds: every value in registers is a 32-bit float (F), a 32-bit int (I: i32, i8, u8,
// bool) or a 64-bit int (L: i64).
enum class Num : uint8_t { kF, kI, kL };
Num num_of(ir::DType dtype);

// A point of an index space: the coordinates (expressions) and the values already computed there.
struct Point {
  ir::Shape space;
  std::vector<std::string> coords;
  std::map<ir::NodeId, std::string> vals;
  // The row-major linear index of coords in space, when the template has it: a buffer shaped as
  // the whole space is then accessed at it (consecutive, so vectorizers see unit strides).
  std::string linear;
};

// The prelude: macros (IDX, TO_F, TO_I, TO_L, TO_U, F2U, U2F) and k_* helpers for the dialect;
// the i64 and 8-bit float helpers only where asked for (GLSL and OpenCL C: a kernel that needs
// them; PoCL compiles every function of a kernel's source, used or not).
std::string prelude(Dialect dialect, bool with_i64, bool with_float8);
// An 8-bit float dtype's element: its f32 value from an expression of its bits (a uint), and its
// bits (a uint) from an f32 expression (the prelude's k_f8_to_f and k_f_to_f8).
std::string float8_decode(ir::DType dtype, const std::string& bits);
std::string float8_encode(ir::DType dtype, const std::string& value);

class Emitter {
 public:
  Emitter(const KernelModel& model, Dialect dialect) : m_(model), d_(dialect) {}
  Result<RenderedKernel> render();

  // ---- shared by the template files ----
  bool glsl() const { return d_ == Dialect::kGlsl; }
  bool cuda() const { return d_ == Dialect::kCuda; }
  bool cpu() const { return d_ == Dialect::kCpu; }
  // The loop header over this thread's work units [0, total): on GPUs a grid-stride loop over
  // the threads of work-groups of `group_size` (0: one unit per work-group), on the CPU the
  // function's [begin, end) range.
  std::string units_loop(const std::string& var, const std::string& total, uint32_t group_size) const;
  void line(const std::string& text);
  void open(const std::string& head) { line(head + " {"); ++indent_; }
  void close() { --indent_; line("}"); }
  std::string fresh(const std::string& base) { return base + std::to_string(counter_++); }
  void fail(Status status) { if (error_.is_ok()) error_ = std::move(status); }
  std::string barrier() const;
  // Declares a shared (work-group local) array; returns its name.
  std::string shared_array(const std::string& type, const std::string& base, uint32_t size);

  std::string ctype(Num n) const { return n == Num::kF ? "float" : n == Num::kI ? "int" : "I64"; }
  std::string lit(Num n, const std::string& v) const;
  std::string float_lit(double v) const;
  std::string dim(const ir::Dim& d) const;
  std::string product(const ir::Shape& shape) const;
  // Declares coordinates of `lin` in `shape` (row-major); returns their names.
  std::vector<std::string> decompose(const std::string& lin, const ir::Shape& shape);
  std::string row_major_offset(const ir::Shape& shape, const std::vector<std::string>& coords) const;
  // Offset of an element of a value of `shape` read broadcast at `coords` (right-aligned).
  std::string broadcast_offset(const ir::Shape& shape, const std::vector<std::string>& coords) const;

  std::string load(int buffer, const std::string& offset) const;  // an expression of num_of(dtype)
  void store(int buffer, const std::string& offset, const std::string& value);
  // GLSL word storage (c_family_glsl_words.cpp, render_glsl_word_storage): whether buffer
  // `buffer` is a 1- or 2-byte dtype accessed as uint words; its load/store and the helpers.
  bool word_buffer(int buffer) const;
  std::string load_word(int buffer, const std::string& offset) const;
  void store_word(int buffer, const std::string& offset, const std::string& value);
  static std::string word_storage_prelude();
  // Converts a value of kind `from` to the dtype `to` (its compute kind, wrapped / saturated).
  std::string convert(const std::string& e, Num from, ir::DType to) const;
  // An f32 value `v` of a node of dtype `d` as the node holds it: rounded when `d` is an 8-bit
  // float (as convert does for elementwise results), else v. For the anchors whose templates
  // compute in f32 and do not convert their result (reductions, normalizations).
  std::string float8_rounded(const std::string& v, ir::DType d) const {
    return ir::is_float8(d) ? convert(v, Num::kF, d) : v;
  }
  // Expands a C expression template of the operator table (ir::CExpr: {0} operands, {k},
  // {lit:V}, and {lowest} / {highest}, the extreme values of `kind`).
  std::string expand(std::string_view form, const std::vector<std::string>& operands, Num kind) const;
  // The float form of n's op in this dialect (its override, or the attribute-dependent form).
  std::string_view float_form(const ir::Node& n) const;
  // Wrap-safe integer arithmetic helpers by kind: "k_add_i" / "k_add_l".
  std::string int_fn(const char* op, Num n) const { return std::string("k_") + op + (n == Num::kL ? "_l" : "_i"); }

  // The compute value of `v` at point p (loading it from its buffer the first time).
  std::string value(ir::NodeId v, Point& p);
  // Computes the elementwise node n at p and records it.
  void emit_elementwise(ir::NodeId n, Point& p);
  // Stores every kernel output that p holds, at p's row-major offset.
  void store_outputs(Point& p);
  // Binds the anchor's value at p (a fresh variable of C type `type` = `value`), computes the
  // epilogue there and stores the outputs: how every anchored template finishes an element.
  void finish_anchor(Point& p, const std::string& type, const std::string& value);

  // ---- templates ----
  // A reduce_* anchor's identity value and combining expression over operands of kind xk.
  struct RowReduction {
    std::string init;
    std::function<std::string(const std::string&, const std::string&)> combine;
  };
  RowReduction row_reduction(ir::OpKind op, Num xk);
  // The extreme value argmax starts from, and its comparison function, for operands of kind xk.
  std::string argmax_lowest(Num xk) const { return expand("{lowest}", {}, xk); }
  static std::string argmax_better(Num xk);
  // Finishes a reduced row: `result` as the anchor's value at the row's output element (the
  // row's coordinates, 0 on reduced axes when the rank is kept), the epilogue and the stores.
  void emit_row_result(const std::vector<std::string>& row_coords, const std::string& result);
  void emit_pointwise();
  // The pointwise loop over linear output indices [start, total), `step` apart: the whole
  // pointwise template, and on CUDA also the scalar tail of the vectorized one.
  void emit_pointwise_loop(const std::string& start, const std::string& step, const std::string& bound = "total");
  // One output element at p: the anchor's value (`anchor_value`, given the anchor node), the
  // other nodes, the stores.
  void emit_pointwise_element(Point& p, const std::function<std::string(const ir::Node&)>& anchor_value);
  // CPU: the pointwise template over rows of the innermost axis (c_family_pointwise.cpp).
  void emit_cpu_pointwise();
  // Pooling anchors (max_pool2d, avg_pool2d, global_avg_pool2d): the accumulator's initial
  // value, the statement folding input value x into it, the result from the accumulator and the
  // count of in-bounds window positions, and the window's loops around the output element at
  // out_coords (visit(input coordinates) at each in-bounds position, which bumps `count`).
  std::string pool_init(const ir::Node& a) const;
  std::string pool_accumulate(const ir::Node& a, const std::string& acc, const std::string& x) const;
  std::string pool_result(const ir::Node& a, const std::string& acc, const std::string& count) const;
  void pool_window(const ir::Node& a, const ir::Pool2dAttrs& pa, const std::vector<std::string>& out_coords,
                   const std::function<void(const std::vector<std::string>&)>& visit, const std::string& count);
  // CPU, channels-last pooling: a stack row of accumulators over the row's channels
  // [col_begin, col_end), filled by one vectorized pass per window position (the window's
  // output position at window_coords, channel 0); returns the array's name (NAME[col], and
  // NAME_count the in-bounds positions).
  std::string emit_cpu_pool_row(const ir::Node& a, const ir::Pool2dAttrs& pa,
                                const std::vector<std::string>& window_coords);
  void emit_rows();
  // What both matmul templates (emit_matmul, emit_cuda_matmul) read off the anchor: its operands'
  // buffers, the numeric kind, M, K and N as IDX text (1 for a vector operand's missing dim),
  // and the batch shapes of the output space, a and b (for broadcast_offset).
  struct MatmulOperands {
    const ir::Node* anchor = nullptr;
    int a_buffer = -1, b_buffer = -1;
    bool a_vector = false, b_vector = false;  // rank-1 operands
    Num kind = Num::kF;
    std::string m, k, n;
    ir::Shape batch, a_batch, b_batch;
  };
  // Fails (and returns nullopt) when an operand is not in memory.
  std::optional<MatmulOperands> matmul_operands();
  // Finishes the output element at (batch_coords..., row, col), with `row` and `col` variables in
  // scope (a vector operand has no such axis): the accumulator `acc`, of the operands' kind,
  // becomes the anchor's value, then the epilogue and the stores (every matmul template's end).
  void finish_matmul_element(const MatmulOperands& o, const std::vector<std::string>& batch_coords,
                             const std::string& acc);
  // `acc += x * y;` in the kind's arithmetic (wrapping integer helpers for integers).
  std::string multiply_add(Num kind, const std::string& acc, const std::string& x, const std::string& y) const;
  void emit_matmul();
  void emit_cpu_matmul();  // CPU: register-blocked rows of the output, vectorized over columns
  // What both attention templates (emit_attention, emit_cuda_flash_attention) read off the
  // anchor: the buffers (mask -1 when absent), the logical sizes as IDX text, the batch shape,
  // and offsets of a row's first element in q, k, v, the output (at batch coordinates bc and
  // sequence position `row`) and of mask element (i, j).
  struct AttentionOperands {
    const ir::Node* anchor = nullptr;
    const ir::AttentionAttrs* attrs = nullptr;
    int q = -1, k = -1, v = -1, mask = -1, out = -1;
    ir::AttentionShape shape;
    std::string sq, sk;
    int64_t d = 0, dv = 0;  // static head sizes
  };
  // Fails (and returns nullopt) when an operand is not in memory or a head size is symbolic.
  std::optional<AttentionOperands> attention_operands();
  // Offset of element [bc..., row, 0] of attention operand `value` (the stored layout).
  std::string attention_row(const AttentionOperands& o, ir::NodeId value, const std::vector<std::string>& bc,
                            const std::string& row) const;
  std::string attention_mask(const AttentionOperands& o, const std::vector<std::string>& bc, const std::string& i,
                             const std::string& j) const;
  void emit_attention(uint32_t group_size);  // work items per group (the dispatch's)
  // CUDA templates (cuda/c_family_cuda.cpp), chosen by cuda_config().
  void emit_cuda();
  void emit_cuda_pointwise(const CudaConfig& c);
  void emit_cuda_vectorized(const CudaConfig& c);
  void emit_cuda_rows(const CudaConfig& c);
  // One variant of the rows template: `vec` > 1 moves the cached row in 16-byte vectors.
  void emit_cuda_rows_body(const CudaConfig& c, uint32_t vec);
  // 16-byte (or narrower) accesses of points.size() consecutive elements of a buffer.
  void cuda_vector_load(int buffer, const std::string& offset, std::vector<Point>& points);
  void cuda_vector_store(int buffer, const std::string& offset, const std::vector<Point>& points);
  void emit_cuda_matmul(const CudaConfig& c);
  // Both CUDA matmul templates: M, K, N, the grid-stride loop over c.bm x c.bn output tiles
  // (left open), each tile's row0/col0 and its operands' batch offsets a_base/b_base; returns the
  // batch coordinates.
  std::vector<std::string> open_matmul_tiles(const CudaConfig& c, const MatmulOperands& o);
  void emit_cuda_mma_matmul(const CudaConfig& c, const MatmulOperands& o);
  // acc[0..3] += a[0..3] x (b0, b1): one mma.sync.m16n8k16 with f32 accumulators, `type` "f16"
  // or "bf16" (PTX's fragment layouts; the arguments are C expressions of the registers).
  void emit_mma_m16n8k16(const std::string& type, const std::string& acc, const std::string& a,
                         const std::string& b0, const std::string& b1);
  void emit_cuda_conv_gemm(const CudaConfig& c);  // cuda/c_family_cuda_conv.cpp
  void emit_cuda_flash_attention(const CudaConfig& c);  // cuda/c_family_cuda_attention.cpp
  void emit_cuda_f32_attention(const CudaConfig& c);    // cuda/c_family_cuda_attention.cpp
  // Pointwise anchors: returns the anchor's compute value at p (lin = linear output index).
  std::string pointwise_anchor(const ir::Node& anchor, Point& p, const std::string& lin);

  const KernelModel& m_;
  Dialect d_;
  std::string body_;
  std::string shared_decls_;
  int indent_ = 1;
  int counter_ = 0;
  bool uses_i64_ = false;
  bool uses_float8_ = false;
  std::set<std::string> features_;
  Status error_ = Status::ok();
  bool word_storage_ = false;  // GLSL: 1- and 2-byte buffers as uint words (the fallback variant)

 private:
  std::string elementwise_expr(const ir::Node& n, const std::vector<std::string>& a,
                               const std::vector<ir::DType>& t, Num& kind);
};

}  // namespace kiln::codegen::cfam
