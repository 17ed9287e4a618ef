// Converters for ONNX's signal-processing and small linear-algebra operators, as decompositions
// into Kiln ops: HannWindow, HammingWindow, BlackmanWindow and MelWeightMatrix (constants
// computed at import, in double precision, as the ONNX reference computes them), DFT (one matmul
// by a constant DFT matrix whose cos/sin tables are computed at import in double precision),
// STFT (frames gathered from the signal, windowed, then the DFT), LRN (a sum of shifted squares
// over the channel axis), ReverseSequence (a gather of rows) and Det (cofactor expansion for
// matrices up to 4x4). Every input that sets an output shape must be a constant at import.
#include <algorithm>
#include <cmath>
#include <numbers>

#include "frontend/onnx/onnx_internal.h"

namespace kiln::onnx_import {
namespace {

using ir::Dim;
using ir::NodeId;
using ir::OpKind;
using ir::Shape;

// Input i as one integer (a scalar or a 1-element tensor), which must be a constant.
Result<int64_t> scalar_int_input(Importer& im, int i, std::string_view what) {
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> v, im.input_ints(i, what));
  if (v.size() != 1) return im.error(std::string(what) + " must be a scalar, got " + std::to_string(v.size()) + " values");
  return v[0];
}

// Input i as one number (a scalar or a 1-element tensor), which must be a constant.
Result<double> scalar_float_input(Importer& im, int i, std::string_view what) {
  KILN_ASSIGN_OR_RETURN(NodeId id, im.input(i));
  const ir::Tensor* t = im.const_data(id);
  if (t == nullptr) return im.unsupported(std::string(what) + " must be a constant (computed at import)");
  if (t->num_elements() != 1) return im.error(std::string(what) + " must be a scalar, got " + std::to_string(t->num_elements()) + " values");
  return t->element_as_double(0);
}

// The attribute output_datatype (default float) as a Kiln dtype.
Result<ir::DType> output_datatype(const Importer& im) {
  const auto onnx_type = int32_t(im.attr_int("output_datatype", 1));
  const std::optional<ir::DType> dtype = dtype_from_onnx(onnx_type);
  const std::string named = std::to_string(onnx_type) + " (" + onnx_type_name(onnx_type) + ")";
  if (!dtype) return im.unsupported("output_datatype " + named + " has no Kiln dtype");
  if (*dtype == ir::DType::kBool) return im.error("output_datatype " + named + " must be a numeric type");
  return *dtype;
}

// ---- windows ------------------------------------------------------------------------------

// HannWindow, HammingWindow and BlackmanWindow (opset 17): w[n] for n in [0, size) over the
// period N = size (periodic) or size - 1 (symmetric), as in onnx/reference/ops/op_*_window.py:
//   hann:     sin^2(pi n / N)
//   hamming:  25/46 - (21/46) cos(2 pi n / N)
//   blackman: 0.42 - 0.5 cos(2 pi n / N) + 0.08 cos(4 pi n / N)
// computed in double and rounded once to output_datatype (integer types truncate, as astype).
// A symmetric window of size 1 divides 0 by 0 and is NaN, as the reference's.
enum class WindowKind { kHann, kHamming, kBlackman };

Converter window_op(WindowKind kind) {
  return [kind](Importer& im) -> Status {
    KILN_ASSIGN_OR_RETURN(int64_t size, scalar_int_input(im, 0, "size"));
    if (size < 1 || size > kMaxImportElements) return im.error("size must be in [1, 2^26], got " + std::to_string(size));
    KILN_ASSIGN_OR_RETURN(ir::DType dtype, output_datatype(im));
    const bool periodic = im.attr_int("periodic", 1) != 0;
    const double period = double(periodic ? size : size - 1);
    constexpr double pi = std::numbers::pi;
    KILN_ASSIGN_OR_RETURN(ir::Tensor w, ir::Tensor::zeros(dtype, {size}));
    for (int64_t n = 0; n < size; ++n) {
      const double x = double(n);
      double v = 0;
      switch (kind) {
        case WindowKind::kHann: {
          const double s = std::sin(x * pi / period);
          v = s * s;
          break;
        }
        case WindowKind::kHamming: {
          constexpr double alpha = 25.0 / 46.0;
          v = alpha - std::cos(x * pi * 2 / period) * (1 - alpha);
          break;
        }
        case WindowKind::kBlackman:
          v = std::cos(x * (pi * 2) / period) * -0.5 + std::cos(x * (pi * 4) / period) * 0.08 + 0.42;
          break;
      }
      w.set_element_from_double(n, v);
    }
    return im.set_output(0, im.add_constant(std::move(w), "window"));
  };
}

// ---- MelWeightMatrix ------------------------------------------------------------------------

// Python's float floor division a // b (CPython's float_floor_div, which NumPy's floor_divide
// follows): the quotient of a - fmod(a, b), floored, so the bin edges match the reference.
double python_floor_divide(double a, double b) {
  double mod = std::fmod(a, b);
  double div = (a - mod) / b;
  if (mod != 0 && ((b < 0) != (mod < 0))) div -= 1.0;
  if (div == 0) return std::copysign(0.0, a / b);
  double floored = std::floor(div);
  if (div - floored > 0.5) floored += 1.0;
  return floored;
}

// MelWeightMatrix (opset 17): the [dft_length / 2 + 1, num_mel_bins] matrix of triangular mel
// filters, computed at import exactly as onnx/reference/ops/op_mel_weight_matrix.py does.
Status mel_weight_matrix(Importer& im) {
  KILN_ASSIGN_OR_RETURN(int64_t num_mel_bins, scalar_int_input(im, 0, "num_mel_bins"));
  KILN_ASSIGN_OR_RETURN(int64_t dft_length, scalar_int_input(im, 1, "dft_length"));
  KILN_ASSIGN_OR_RETURN(int64_t sample_rate, scalar_int_input(im, 2, "sample_rate"));
  KILN_ASSIGN_OR_RETURN(double lower_hertz, scalar_float_input(im, 3, "lower_edge_hertz"));
  KILN_ASSIGN_OR_RETURN(double upper_hertz, scalar_float_input(im, 4, "upper_edge_hertz"));
  KILN_ASSIGN_OR_RETURN(ir::DType dtype, output_datatype(im));
  if (num_mel_bins < 1 || dft_length < 1 || sample_rate < 1) {
    return im.error("num_mel_bins, dft_length and sample_rate must be positive");
  }
  const int64_t spectrogram_bins = dft_length / 2 + 1;
  KILN_RETURN_IF_ERROR(check_import_size(im, {Dim::of(spectrogram_bins), Dim::of(num_mel_bins)}, "the mel weight matrix"));
  const double ln10 = std::log(10.0);
  const double low_mel = 2595 * std::log1p(lower_hertz / 700) / ln10;
  const double high_mel = 2595 * std::log1p(upper_hertz / 700) / ln10;
  const double mel_step = (high_mel - low_mel) / double(num_mel_bins + 2);
  // The spectrogram bin of each band edge: num_mel_bins + 2 edges, evenly spaced in mel.
  std::vector<int64_t> edge(size_t(num_mel_bins + 2));
  for (int64_t i = 0; i < num_mel_bins + 2; ++i) {
    const double mel = double(i) * mel_step + low_mel;
    const double hertz = 700 * std::expm1(mel / 2595 * ln10);
    const double bin = python_floor_divide(double(dft_length + 1) * hertz, double(sample_rate));
    if (!(bin >= 0 && bin < double(spectrogram_bins))) {
      return im.error("mel band edge " + std::to_string(i) + " falls outside the " + std::to_string(spectrogram_bins) +
                      " spectrogram bins (check lower_edge_hertz and upper_edge_hertz against sample_rate / 2)");
    }
    edge[size_t(i)] = int64_t(bin);
  }
  std::vector<double> out(size_t(spectrogram_bins * num_mel_bins), 0.0);
  auto at = [&](int64_t bin, int64_t band) -> double& { return out[size_t(bin * num_mel_bins + band)]; };
  for (int64_t i = 0; i < num_mel_bins; ++i) {
    const int64_t left = edge[size_t(i)], center = edge[size_t(i + 1)], right = edge[size_t(i + 2)];
    const int64_t rise = center - left;
    if (rise == 0) {
      at(center, i) = 1;
    } else {
      // The reference's range is empty when the edges decrease.
      for (int64_t j = left; j <= center; ++j) at(j, i) = double(j - left) / double(rise);
    }
    const int64_t fall = right - center;
    for (int64_t j = center; fall > 0 && j < right; ++j) at(j, i) = double(right - j) / double(fall);
  }
  KILN_ASSIGN_OR_RETURN(ir::Tensor t, ir::Tensor::zeros(dtype, {spectrogram_bins, num_mel_bins}));
  for (size_t i = 0; i < out.size(); ++i) t.set_element_from_double(int64_t(i), out[i]);
  return im.set_output(0, im.add_constant(std::move(t), "mel_weights"));
}

// ---- DFT ------------------------------------------------------------------------------------

// The DFT of x ([..., n at `axis`, ..., c], c = 1 for real and 2 for complex values) over `axis`
// with `length` points, as onnx/reference/ops/op_dft.py: the signal is cut to `length` samples
// or zero-padded to it; the forward transform gives `length` complex bins (the first
// length / 2 + 1 when onesided), the inverse one divides by length; inverse and onesided
// together is NumPy's irfft: the first length / 2 + 1 bins of a Hermitian spectrum (cut or
// zero-padded to that) give `length` real samples, the imaginary parts of bin 0 and of the
// Nyquist bin are ignored.
//
// Lowered to one matmul: x with the axis moved next to the last dim, flattened to
// [rows, used * c], times a constant [used * c, bins * parts] matrix of the transform's cos/sin
// terms (angles reduced modulo the length, computed in double), reshaped to [..., bins, parts]
// and moved back. Padding needs no nodes: padded samples meet no matrix rows.
Result<NodeId> dft(Importer& im, NodeId x, int64_t axis, int64_t length, bool inverse, bool onesided) {
  const Shape s = im.type(x).shape;  // a copy: adding nodes moves types
  const int64_t rank = int64_t(s.size());
  const int64_t c = s.back().size();
  if (s[size_t(axis)].is_symbolic()) return im.unsupported("a DFT along a dynamic axis (" + s[size_t(axis)].to_string() + ")");
  const int64_t n = s[size_t(axis)].size();
  const bool irfft = inverse && onesided;
  const int64_t used = std::min(n, irfft ? length / 2 + 1 : length);
  const int64_t bins = irfft || !onesided ? length : length / 2 + 1;
  const int64_t parts = irfft ? 1 : 2;
  KILN_RETURN_IF_ERROR(check_import_size(im, {Dim::of(used * c), Dim::of(bins * parts)}, "the DFT matrix"));
  // Move the axis next to the last dim: [others..., n, c].
  std::vector<int64_t> to_inner;
  std::vector<int64_t> from_inner(static_cast<size_t>(rank));
  for (int64_t d = 0; d < rank - 1; ++d)
    if (d != axis) to_inner.push_back(d);
  to_inner.push_back(axis);
  to_inner.push_back(rank - 1);
  for (int64_t d = 0; d < rank; ++d) from_inner[size_t(to_inner[size_t(d)])] = d;
  NodeId v = x;
  if (axis != rank - 2) {
    KILN_ASSIGN_OR_RETURN(v, im.add(OpKind::kTranspose, {v}, ir::TransposeAttrs{to_inner}));
  }
  if (used < n) {
    KILN_ASSIGN_OR_RETURN(v, im.add(OpKind::kSlice, {v}, ir::SliceAttrs{{0}, {used}, {rank - 2}, {1}}));
  }
  Shape outer(im.type(v).shape.begin(), im.type(v).shape.end() - 2);
  KILN_ASSIGN_OR_RETURN(v, im.reshape(v, {Dim::of(-1), Dim::of(used * c)}));

  const ir::DType dtype = im.type(x).dtype;
  KILN_ASSIGN_OR_RETURN(ir::Tensor m, ir::Tensor::zeros(dtype, {used * c, bins * parts}));
  auto set = [&](int64_t sample, int64_t in_part, int64_t bin, int64_t out_part, double value) {
    m.set_element_from_double((sample * c + in_part) * (bins * parts) + bin * parts + out_part, value);
  };
  constexpr double two_pi = 2 * std::numbers::pi;
  for (int64_t j = 0; j < used; ++j) {
    for (int64_t k = 0; k < bins; ++k) {
      // The angle 2 pi j k / length, with j k reduced modulo the length first so that large
      // products lose no precision.
      const double angle = two_pi * double((j * k) % length) / double(length);
      const double cos_term = std::cos(angle), sin_term = std::sin(angle);
      if (irfft) {
        // Input bin j, output sample k: bins 1 .. ceil(length / 2) - 1 stand for themselves and
        // their conjugate mirror (weight 2); bin 0 and the Nyquist bin are real (weight 1).
        const bool self_conjugate = j == 0 || 2 * j == length;
        const double weight = (self_conjugate ? 1.0 : 2.0) / double(length);
        set(j, 0, k, 0, weight * cos_term);
        if (c == 2) set(j, 1, k, 0, self_conjugate ? 0.0 : -weight * sin_term);
        continue;
      }
      // (a + i b) e^(-+ i angle): forward e^(-i angle); inverse e^(+i angle) / length.
      const double sign = inverse ? -1.0 : 1.0, scale = inverse ? 1.0 / double(length) : 1.0;
      set(j, 0, k, 0, scale * cos_term);
      set(j, 0, k, 1, -sign * scale * sin_term);
      if (c == 2) {
        set(j, 1, k, 0, sign * scale * sin_term);
        set(j, 1, k, 1, scale * cos_term);
      }
    }
  }
  const NodeId matrix = im.add_constant(std::move(m), "dft_matrix");
  KILN_ASSIGN_OR_RETURN(NodeId y, im.apply(OpKind::kMatMul, {v, matrix}));
  Shape out = outer;
  out.insert(out.end(), {Dim::of(bins), Dim::of(parts)});
  KILN_ASSIGN_OR_RETURN(y, im.reshape(y, out));
  if (axis != rank - 2) {
    KILN_ASSIGN_OR_RETURN(y, im.add(OpKind::kTranspose, {y}, ir::TransposeAttrs{from_inner}));
  }
  return y;
}

// Checks a DFT/STFT signal: a float tensor whose static last dim is 1 (real) or 2 (complex).
Status check_signal(const Importer& im, NodeId x, std::string_view what, int64_t min_rank) {
  const ir::TensorType& t = im.type(x);
  if (!ir::is_float(t.dtype)) return im.error(std::string(what) + " must be a float tensor, got " + t.to_string());
  if (t.rank() < min_rank) {
    return im.error(std::string(what) + " must have rank " + std::to_string(min_rank) + " or more, got " + t.to_string());
  }
  const Dim& last = t.shape.back();
  if (last.is_symbolic() || (last.size() != 1 && last.size() != 2)) {
    return im.error(std::string(what) + "'s last dim must be 1 (real) or 2 (complex), got " + t.to_string());
  }
  return Status::ok();
}

// DFT (opsets 17 and 20): the axis is an attribute (default 1) before opset 20 and an input
// (default -2) from it; dft_length (input 1) and the axis must be constants.
Status dft_op(Importer& im) {
  KILN_ASSIGN_OR_RETURN(NodeId x, im.input(0));
  KILN_RETURN_IF_ERROR(check_signal(im, x, "the input", 2));
  const int64_t rank = im.type(x).rank();
  int64_t axis = im.opset >= 20 ? -2 : im.attr_int("axis", 1);
  if (im.opset >= 20 && im.has_input(2)) {
    KILN_ASSIGN_OR_RETURN(axis, scalar_int_input(im, 2, "axis"));
  }
  // The last dim holds the complex parts, so it is no signal axis.
  const int64_t normalized = axis < 0 ? axis + rank : axis;
  if (normalized < 0 || normalized > rank - 2) {
    return im.error("axis " + std::to_string(axis) + " is outside [-" + std::to_string(rank) + ", -2] and [0, " +
                    std::to_string(rank - 2) + "] (the last dim holds the complex parts)");
  }
  const bool inverse = im.attr_int("inverse", 0) != 0, onesided = im.attr_int("onesided", 0) != 0;
  const Dim extent = im.type(x).shape[size_t(normalized)];
  if (extent.is_symbolic()) return im.unsupported("a DFT along a dynamic axis (" + extent.to_string() + ")");
  int64_t length = inverse && onesided ? 2 * (extent.size() - 1) : extent.size();
  if (im.has_input(1)) {
    KILN_ASSIGN_OR_RETURN(length, scalar_int_input(im, 1, "dft_length"));
  }
  if (length < 1) return im.error("dft_length must be positive, got " + std::to_string(length));
  KILN_ASSIGN_OR_RETURN(NodeId y, dft(im, x, normalized, length, inverse, onesided));
  return im.set_output(0, y);
}

// STFT (opset 17), as onnx/reference/ops/op_stft.py: frames of frame_length samples every
// frame_step samples of signal [batch, length, c] (floor((length - frame_length) / frame_step)
// + 1 of them), each times the window, then the DFT of each frame (onesided by default). The
// frames are one gather of the signal by a constant [frames, frame_length] index table.
Status stft_op(Importer& im) {
  KILN_ASSIGN_OR_RETURN(NodeId signal, im.input(0));
  KILN_RETURN_IF_ERROR(check_signal(im, signal, "signal", 3));
  const Shape s = im.type(signal).shape;
  if (s.size() != 3) return im.error("signal must be [batch, signal_length, 1 or 2], got " + im.type(signal).to_string());
  if (s[1].is_symbolic()) return im.unsupported("STFT of a signal of dynamic length (" + s[1].to_string() + ")");
  const int64_t signal_length = s[1].size();
  KILN_ASSIGN_OR_RETURN(int64_t step, scalar_int_input(im, 1, "frame_step"));
  if (step < 1) return im.error("frame_step must be positive, got " + std::to_string(step));
  NodeId window = ir::kNoNode;
  std::optional<int64_t> frame_length;
  if (im.has_input(2)) {
    KILN_ASSIGN_OR_RETURN(window, im.input(2));
    const ir::TensorType& w = im.type(window);
    if (w.rank() != 1 || w.shape[0].is_symbolic()) return im.error("window must be 1-D of static length, got " + w.to_string());
    if (w.dtype != im.type(signal).dtype) return im.error("window and signal differ in type");
    frame_length = w.shape[0].size();
  }
  if (im.has_input(3)) {
    KILN_ASSIGN_OR_RETURN(int64_t given, scalar_int_input(im, 3, "frame_length"));
    if (frame_length && *frame_length != given) {
      return im.error("frame_length (" + std::to_string(given) + ") differs from the window's length (" +
                      std::to_string(*frame_length) + ")");
    }
    frame_length = given;
  }
  const int64_t width = frame_length.value_or(signal_length);
  if (width < 1 || width > signal_length) {
    return im.error("frame_length must be in [1, signal_length = " + std::to_string(signal_length) + "], got " +
                    std::to_string(width));
  }
  const int64_t frames = (signal_length - width) / step + 1;
  KILN_RETURN_IF_ERROR(check_import_size(im, {Dim::of(frames), Dim::of(width)}, "the STFT frame index table"));
  KILN_ASSIGN_OR_RETURN(ir::Tensor index, ir::Tensor::zeros(ir::DType::kI64, {frames, width}));
  for (int64_t f = 0; f < frames; ++f)
    for (int64_t j = 0; j < width; ++j) index.mutable_data_as<int64_t>()[f * width + j] = f * step + j;
  const NodeId index_node = im.add_constant(std::move(index), "frame_index");
  // [batch, frames, frame_length, c]
  KILN_ASSIGN_OR_RETURN(NodeId framed, im.add(OpKind::kGather, {signal, index_node}, ir::AxisAttrs{1}));
  if (window != ir::kNoNode) {
    KILN_ASSIGN_OR_RETURN(NodeId column, im.reshape(window, {Dim::of(width), Dim::of(1)}));
    KILN_ASSIGN_OR_RETURN(framed, im.apply(OpKind::kMul, {framed, column}));
  }
  const bool onesided = im.attr_int("onesided", 1) != 0;
  KILN_ASSIGN_OR_RETURN(NodeId y, dft(im, framed, 2, width, false, onesided));
  return im.set_output(0, y);
}

// ---- LRN ------------------------------------------------------------------------------------

// LRN: y = x / (bias + alpha / size * square_sum)^beta, square_sum at channel c summing x^2 over
// channels [c - floor((size - 1) / 2), c + ceil((size - 1) / 2)] within [0, C). The squares are
// zero-padded along the channel axis and the window is a sum of shifted slices; a window reaching
// past both ends is cut to the C - 1 channels that can exist on either side.
Status lrn_op(Importer& im) {
  KILN_ASSIGN_OR_RETURN(NodeId x, im.input(0));
  const ir::TensorType t = im.type(x);
  if (!ir::is_float(t.dtype)) return im.error("X must be a float tensor, got " + t.to_string());
  if (t.rank() < 2) return im.error("X must be (N, C, D1, ..., Dk), got " + t.to_string());
  if (t.shape[1].is_symbolic()) return im.unsupported("LRN over a dynamic channel count (" + t.shape[1].to_string() + ")");
  const int64_t channels = t.shape[1].size();
  if (!im.attr("size")) return im.error("the attribute size is required");
  const int64_t size = im.attr_int("size", 0);
  if (size < 1) return im.error("size must be positive, got " + std::to_string(size));
  const double alpha = im.attr_float("alpha", 0.0001), beta = im.attr_float("beta", 0.75), bias = im.attr_float("bias", 1.0);
  const int64_t before = std::min((size - 1) / 2, channels - 1);
  const int64_t after = std::min(size - 1 - (size - 1) / 2, channels - 1);
  KILN_ASSIGN_OR_RETURN(NodeId squares, im.apply(OpKind::kMul, {x, x}));
  NodeId padded = squares;
  if (before + after > 0) {
    KILN_ASSIGN_OR_RETURN(NodeId zero, im.scalar_like(x, 0.0));
    KILN_ASSIGN_OR_RETURN(padded, pad_axis(im, squares, zero, "constant", 1, before, after));
  }
  // Padded channel p holds channel p - before; output channel c sums padded [c, c + before + after].
  NodeId square_sum = ir::kNoNode;
  for (int64_t shift = 0; shift <= before + after; ++shift) {
    NodeId term = padded;
    if (before + after > 0) {
      KILN_ASSIGN_OR_RETURN(term, im.add(OpKind::kSlice, {padded}, ir::SliceAttrs{{shift}, {shift + channels}, {1}, {1}}));
    }
    KILN_ASSIGN_OR_RETURN(square_sum, im.add_term(square_sum, term));
  }
  KILN_ASSIGN_OR_RETURN(NodeId scale, im.scalar_like(x, alpha / double(size)));
  KILN_ASSIGN_OR_RETURN(NodeId bias_node, im.scalar_like(x, bias));
  KILN_ASSIGN_OR_RETURN(NodeId beta_node, im.scalar_like(x, beta));
  KILN_ASSIGN_OR_RETURN(NodeId scaled, im.apply(OpKind::kMul, {square_sum, scale}));
  KILN_ASSIGN_OR_RETURN(NodeId base, im.apply(OpKind::kAdd, {scaled, bias_node}));
  KILN_ASSIGN_OR_RETURN(NodeId denominator, im.apply(OpKind::kPow, {base, beta_node}));
  KILN_ASSIGN_OR_RETURN(NodeId y, im.apply(OpKind::kDiv, {x, denominator}));
  return im.set_output(0, y);
}

// ---- ReverseSequence ------------------------------------------------------------------------

// ReverseSequence (opset 10): for each batch entry b the first sequence_lens[b] steps along the
// time axis are reversed, the rest kept. Lowered to one gather: x moved to [batch, time, ...] and
// flattened to [batch * time, ...], rows picked at b * time + source(b, t) with source = len - 1
// - t for t < len and t otherwise. Run-time lengths are clamped to [0, time] (constant ones
// outside it are diagnosed), so a gather index never leaves its batch entry.
Status reverse_sequence(Importer& im) {
  KILN_ASSIGN_OR_RETURN(NodeId x, im.input(0));
  KILN_ASSIGN_OR_RETURN(NodeId lens, im.input(1));
  const Shape s = im.type(x).shape;
  const int64_t rank = int64_t(s.size());
  if (rank < 2) return im.error("input must have rank 2 or more, got " + im.type(x).to_string());
  const int64_t batch_axis = im.attr_int("batch_axis", 1), time_axis = im.attr_int("time_axis", 0);
  if (!((batch_axis == 0 && time_axis == 1) || (batch_axis == 1 && time_axis == 0))) {
    return im.error("batch_axis and time_axis must be 0 and 1 (in either order), got " + std::to_string(batch_axis) +
                    " and " + std::to_string(time_axis));
  }
  if (s[0].is_symbolic() || s[1].is_symbolic()) return im.unsupported("ReverseSequence with a dynamic batch or time dim");
  const int64_t batch = s[size_t(batch_axis)].size(), time = s[size_t(time_axis)].size();
  const ir::TensorType& lens_type = im.type(lens);
  if (!ir::is_integer(lens_type.dtype) || lens_type.rank() != 1 || lens_type.shape[0] != Dim::of(batch)) {
    return im.error("sequence_lens must be an integer tensor of shape [" + std::to_string(batch) + "], got " +
                    lens_type.to_string());
  }
  if (const ir::Tensor* known = im.const_data(lens)) {
    for (int64_t b = 0; b < batch; ++b) {
      const int64_t len = known->element_as_int(b);
      if (len < 0 || len > time) {
        return im.error("sequence_lens[" + std::to_string(b) + "] = " + std::to_string(len) + " is outside [0, " +
                        std::to_string(time) + "]");
      }
    }
  }
  KILN_RETURN_IF_ERROR(check_import_size(im, {Dim::of(batch), Dim::of(time)}, "the ReverseSequence index"));
  NodeId moved = x;
  if (batch_axis == 1) {
    std::vector<int64_t> swap_perm{1, 0};
    for (int64_t d = 2; d < rank; ++d) swap_perm.push_back(d);
    KILN_ASSIGN_OR_RETURN(moved, im.add(OpKind::kTranspose, {x}, ir::TransposeAttrs{swap_perm}));
  }
  Shape rows_shape{Dim::of(batch * time)};
  rows_shape.insert(rows_shape.end(), s.begin() + 2, s.end());
  KILN_ASSIGN_OR_RETURN(NodeId rows, im.reshape(moved, rows_shape));
  // len as i64 [batch, 1], clamped to [0, time].
  if (lens_type.dtype != ir::DType::kI64) {
    KILN_ASSIGN_OR_RETURN(lens, im.add(OpKind::kCast, {lens}, ir::CastAttrs{ir::DType::kI64}));
  }
  KILN_ASSIGN_OR_RETURN(NodeId len, im.reshape(lens, {Dim::of(batch), Dim::of(1)}));
  KILN_ASSIGN_OR_RETURN(len, im.add(OpKind::kClamp, {len}, ir::ClampAttrs{0.0, double(time)}));
  KILN_ASSIGN_OR_RETURN(NodeId step, im.iota(time, 1, 2));          // [1, time]
  KILN_ASSIGN_OR_RETURN(NodeId batch_index, im.iota(batch, 0, 2));  // [batch, 1]
  KILN_ASSIGN_OR_RETURN(NodeId one, im.scalar(1, ir::DType::kI64));
  KILN_ASSIGN_OR_RETURN(NodeId time_node, im.scalar(double(time), ir::DType::kI64));
  KILN_ASSIGN_OR_RETURN(NodeId inside, im.apply(OpKind::kLess, {step, len}));
  KILN_ASSIGN_OR_RETURN(NodeId last, im.apply(OpKind::kSub, {len, one}));
  KILN_ASSIGN_OR_RETURN(NodeId mirrored, im.apply(OpKind::kSub, {last, step}));
  KILN_ASSIGN_OR_RETURN(NodeId source, im.add(OpKind::kWhere, {inside, mirrored, step}, ir::NoAttrs{}));
  KILN_ASSIGN_OR_RETURN(NodeId base, im.apply(OpKind::kMul, {batch_index, time_node}));
  KILN_ASSIGN_OR_RETURN(NodeId index, im.apply(OpKind::kAdd, {base, source}));  // [batch, time]
  KILN_ASSIGN_OR_RETURN(NodeId y, im.add(OpKind::kGather, {rows, index}, ir::AxisAttrs{0}));
  if (batch_axis == 1) {
    std::vector<int64_t> swap_perm{1, 0};
    for (int64_t d = 2; d < rank; ++d) swap_perm.push_back(d);
    KILN_ASSIGN_OR_RETURN(y, im.add(OpKind::kTranspose, {y}, ir::TransposeAttrs{swap_perm}));
  }
  return im.set_output(0, y);
}

// ---- Det ------------------------------------------------------------------------------------

// Det: the determinant of each [M, M] matrix of x [*, M, M] by cofactor expansion along the first
// rows (the Leibniz formula, exact in real arithmetic), for M <= 4 where that is a few dozen
// products; larger matrices would need a pivoted LU factorization, which Kiln has no op for.
constexpr int64_t kMaxDetSize = 4;

Status det_op(Importer& im) {
  KILN_ASSIGN_OR_RETURN(NodeId x, im.input(0));
  const ir::TensorType t = im.type(x);
  if (!ir::is_float(t.dtype)) return im.error("X must be a float tensor, got " + t.to_string());
  if (t.rank() < 2) return im.error("X must be [*, M, M], got " + t.to_string());
  const Dim rows = t.shape[size_t(t.rank() - 2)], cols = t.shape.back();
  if (rows.is_symbolic() || cols.is_symbolic()) return im.unsupported("Det of matrices of dynamic size");
  if (rows != cols) return im.error("X's last two dims must be equal (square matrices), got " + t.to_string());
  const int64_t n = rows.size();
  if (n < 1) return im.error("Det of empty matrices");
  if (n > kMaxDetSize) {
    return im.unsupported("Det of " + std::to_string(n) + "x" + std::to_string(n) +
                          " matrices (Kiln expands determinants by cofactors only up to 4x4)");
  }
  const Shape batch(t.shape.begin(), t.shape.end() - 2);
  const int64_t rank = t.rank();
  // Element (i, j) of every matrix, as [*].
  std::vector<NodeId> element(size_t(n * n));
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      KILN_ASSIGN_OR_RETURN(NodeId e, im.add(OpKind::kSlice, {x}, ir::SliceAttrs{{i, j}, {i + 1, j + 1}, {rank - 2, rank - 1}, {1, 1}}));
      KILN_ASSIGN_OR_RETURN(element[size_t(i * n + j)], im.reshape(e, batch));
    }
  }
  // minor[mask]: the determinant of rows n - popcount(mask) .. n - 1 restricted to the columns
  // in mask, expanded along its first row; built from the smallest minors up and shared.
  std::vector<NodeId> minor(size_t(1) << n, ir::kNoNode);
  for (uint32_t mask = 1; mask < (1u << n); ++mask) {
    const int count = __builtin_popcount(mask);
    const int64_t row = n - count;
    NodeId sum = ir::kNoNode;
    int position = 0;  // the column's position within the mask, which sets the cofactor's sign
    for (int64_t j = 0; j < n; ++j) {
      if ((mask & (1u << j)) == 0) continue;
      NodeId term = element[size_t(row * n + j)];
      const uint32_t rest = mask & ~(1u << j);
      if (rest != 0) {
        KILN_ASSIGN_OR_RETURN(term, im.apply(OpKind::kMul, {term, minor[rest]}));
      }
      if (sum == ir::kNoNode) {
        sum = term;  // position 0: a plus sign
      } else {
        KILN_ASSIGN_OR_RETURN(sum, im.apply(position % 2 == 0 ? OpKind::kAdd : OpKind::kSub, {sum, term}));
      }
      ++position;
    }
    minor[mask] = sum;
  }
  return im.set_output(0, minor[(1u << n) - 1]);
}

}  // namespace

void register_signal_ops(std::map<std::string, Converter>& t) {
  t["HannWindow"] = window_op(WindowKind::kHann);
  t["HammingWindow"] = window_op(WindowKind::kHamming);
  t["BlackmanWindow"] = window_op(WindowKind::kBlackman);
  t["MelWeightMatrix"] = mel_weight_matrix;
  t["DFT"] = dft_op;
  t["STFT"] = stft_op;
  t["LRN"] = lrn_op;
  t["ReverseSequence"] = reverse_sequence;
  t["Det"] = det_op;
}

}  // namespace kiln::onnx_import
