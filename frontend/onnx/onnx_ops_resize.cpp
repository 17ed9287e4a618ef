// Resize (opsets 10, 11, 13, 18, 19) and Upsample (7, 9) as separable interpolation.
//
// Every interpolation mode ONNX defines (nearest with its four rounding rules, linear, cubic,
// with or without antialiasing, exclude_outside, tf_crop_and_resize's extrapolation) computes
// each output element along a resized axis as a weighted sum of a fixed number of input
// elements along that axis, and the modes are separable: an N-D resize is the 1-D resize of
// each axis in turn (the ONNX reference evaluates it that way). So, per resized axis, the
// importer works out at import time, for every output position, which input positions ("taps")
// it reads and with which weights, and emits
//   y = sum over taps t of  gather(x, index_t, axis) * weight_t   [+ extrapolation constant]
// with the indices and weights as constants ([out] and [out, 1, ..., 1]). Nearest is one
// gather per axis with no arithmetic. The input's resized dims must therefore be static; the
// others (the batch) may be symbolic. Integer tensors resize with mode=nearest only.
#include <algorithm>
#include <cmath>

#include "frontend/onnx/onnx_internal.h"

namespace kiln::onnx_import {
namespace {

using ir::Dim;
using ir::NodeId;
using ir::OpKind;
using ir::Shape;

struct ResizeMode {
  std::string mode = "nearest";          // nearest | linear | cubic
  std::string coordinates = "half_pixel";  // coordinate_transformation_mode
  std::string nearest = "round_prefer_floor";
  double cubic_a = -0.75;
  bool exclude_outside = false;
  bool antialias = false;
  double extrapolation = 0.0;
};

// The weights of the taps around a position whose distance past its left neighbour is `ratio`
// (in (0, 1]: an exact position counts as 1 past the previous one), as ONNX's reference defines
// them; their count is fixed per axis.
std::vector<double> coefficients(const ResizeMode& m, double ratio, double scale) {
  if (m.mode == "nearest") {
    if (ratio == 1.0) return {0.0, 1.0};
    bool right = false;
    if (m.nearest == "round_prefer_floor") right = ratio > 0.5;
    else if (m.nearest == "round_prefer_ceil") right = ratio >= 0.5;
    else if (m.nearest == "ceil") right = true;
    return {right ? 0.0 : 1.0, right ? 1.0 : 0.0};
  }
  const double s = std::min(scale, 1.0);  // antialiasing widens the filter when downsampling
  std::vector<double> c;
  if (m.mode == "linear") {
    if (!m.antialias) return {1.0 - ratio, ratio};
    const int64_t start = int64_t(std::floor(-1.0 / s) + 1);
    for (int64_t i = start; i < start + 2 - 2 * start; ++i) c.push_back(std::clamp(1.0 - std::abs((double(i) - ratio) * s), 0.0, 1.0));
  } else {
    const double a = m.cubic_a;
    auto kernel = [a](double x) {
      x = std::abs(x);
      if (x <= 1) return ((a + 2) * x - (a + 3)) * x * x + 1;
      if (x < 2) return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a;
      return 0.0;
    };
    if (!m.antialias) return {kernel(ratio + 1), kernel(ratio), kernel(1 - ratio), kernel(2 - ratio)};
    const int64_t start = int64_t(std::floor(-2.0 / s) + 1);
    for (int64_t i = start; i < 2 - start; ++i) c.push_back(kernel(s * (double(i) - ratio)));
  }
  double sum = 0;
  for (double v : c) sum += v;
  for (double& v : c) v /= sum;
  return c;
}

// One resized axis: for each tap, the input index and weight of every output position, and
// the constant added where tf_crop_and_resize extrapolates.
struct AxisTaps {
  std::vector<std::vector<int64_t>> index;  // [tap][out]
  std::vector<std::vector<double>> weight;  // [tap][out]
  std::vector<double> constant;             // [out]
  bool extrapolates = false;
};

Result<AxisTaps> axis_taps(const Importer& im, const ResizeMode& m, int64_t in, int64_t out, double scale,
                           double roi_start, double roi_end) {
  AxisTaps taps;
  taps.constant.assign(size_t(out), 0.0);
  const double out_width = scale * double(in);
  for (int64_t o = 0; o < out; ++o) {
    const double x = double(o);
    double x_ori = 0;
    const std::string& c = m.coordinates;
    if (c == "align_corners") {
      x_ori = out_width == 1 ? 0.0 : x * double(in - 1) / (out_width - 1);
    } else if (c == "asymmetric") {
      x_ori = x / scale;
    } else if (c == "tf_crop_and_resize") {
      x_ori = out_width == 1 ? (roi_end - roi_start) * double(in - 1) / 2
                             : x * (roi_end - roi_start) * double(in - 1) / (out_width - 1);
      x_ori += roi_start * double(in - 1);
    } else if (c == "pytorch_half_pixel") {
      x_ori = out_width == 1 ? -0.5 : (x + 0.5) / scale - 0.5;
    } else if (c == "half_pixel") {
      x_ori = (x + 0.5) / scale - 0.5;
    } else if (c == "half_pixel_symmetric") {
      const double offset = double(in) / 2 * (1 - double(out) / out_width);
      x_ori = offset + (x + 0.5) / scale - 0.5;
    } else {
      return im.unsupported("coordinate_transformation_mode='" + c + "' is not supported");
    }
    const bool outside = c == "tf_crop_and_resize" && (x_ori < 0 || x_ori > double(in - 1));
    const double x_floor = std::floor(x_ori);
    const double ratio = x_ori == x_floor ? 1.0 : x_ori - x_floor;
    std::vector<double> coeffs = coefficients(m, ratio, scale);
    const int64_t n = int64_t(coeffs.size());
    if (taps.index.empty()) {
      taps.index.assign(size_t(n), std::vector<int64_t>(size_t(out)));
      taps.weight.assign(size_t(n), std::vector<double>(size_t(out)));
    } else if (size_t(n) != taps.index.size()) {
      return internal_error("Resize: the tap count changed along an axis");
    }
    // The n input positions nearest to x_ori (ties to the smaller) in the input padded by
    // ceil(n/2) edge copies, in ascending order.
    const int64_t pad = (n + 1) / 2;
    std::vector<int64_t> near;
    for (int64_t i = int64_t(x_floor) - n - 1; i <= int64_t(x_floor) + n + 1; ++i)
      if (i >= -pad && i < in + pad) near.push_back(i);
    std::sort(near.begin(), near.end(), [&](int64_t a, int64_t b) {
      const double da = std::abs(x_ori - double(a)), db = std::abs(x_ori - double(b));
      return da != db ? da < db : a < b;
    });
    if (int64_t(near.size()) < n) return im.unsupported("Resize: the input is too short for the filter");
    near.resize(size_t(n));
    std::sort(near.begin(), near.end());
    if (m.exclude_outside) {
      double sum = 0;
      for (int64_t t = 0; t < n; ++t) {
        if (near[size_t(t)] < 0 || near[size_t(t)] >= in) coeffs[size_t(t)] = 0;
        sum += coeffs[size_t(t)];
      }
      if (sum != 0)
        for (double& v : coeffs) v /= sum;
    }
    for (int64_t t = 0; t < n; ++t) {
      taps.index[size_t(t)][size_t(o)] = std::clamp<int64_t>(near[size_t(t)], 0, in - 1);
      taps.weight[size_t(t)][size_t(o)] = outside ? 0.0 : coeffs[size_t(t)];
    }
    if (outside) {
      taps.constant[size_t(o)] = m.extrapolation;
      taps.extrapolates = true;
    }
  }
  return taps;
}

// True when the taps copy the input unchanged (same length, each output reads its own index).
bool is_identity(const AxisTaps& taps, int64_t in, int64_t out) {
  if (in != out || taps.extrapolates) return false;
  for (int64_t o = 0; o < out; ++o) {
    for (size_t t = 0; t < taps.index.size(); ++t) {
      const double w = taps.weight[t][size_t(o)];
      if (w != 0 && (w != 1 || taps.index[t][size_t(o)] != o)) return false;
    }
  }
  return true;
}

// `values` as a constant of x's dtype shaped [out, 1, ..., 1] to broadcast along `axis`.
Result<NodeId> along_axis(Importer& im, const std::vector<double>& values, ir::DType dtype, int64_t axis, int64_t rank) {
  std::vector<int64_t> shape(size_t(rank - axis), 1);
  shape[0] = int64_t(values.size());
  KILN_ASSIGN_OR_RETURN(ir::Tensor data, ir::Tensor::zeros(dtype, shape));
  for (size_t i = 0; i < values.size(); ++i) data.set_element_from_double(int64_t(i), values[i]);
  return im.add_constant(std::move(data), "resize_weights");
}

Result<NodeId> resize_axis(Importer& im, NodeId x, int64_t axis, const AxisTaps& taps) {
  const ir::DType dtype = im.type(x).dtype;
  const int64_t rank = im.type(x).rank();
  NodeId sum = ir::kNoNode;
  for (size_t t = 0; t < taps.index.size(); ++t) {
    const std::vector<double>& w = taps.weight[t];
    const bool all_zero = std::all_of(w.begin(), w.end(), [](double v) { return v == 0; });
    if (all_zero && !(t + 1 == taps.index.size() && sum == ir::kNoNode)) continue;  // keep one term
    KILN_ASSIGN_OR_RETURN(NodeId index, im.ints_constant(taps.index[t]));
    KILN_ASSIGN_OR_RETURN(NodeId term, im.add(OpKind::kGather, {x, index}, ir::AxisAttrs{axis}));
    if (!std::all_of(w.begin(), w.end(), [](double v) { return v == 1; })) {
      if (!ir::is_float(dtype)) return im.unsupported("mode='linear' or 'cubic' on an integer tensor");
      KILN_ASSIGN_OR_RETURN(NodeId weight, along_axis(im, w, dtype, axis, rank));
      KILN_ASSIGN_OR_RETURN(term, im.apply(OpKind::kMul, {term, weight}));
    }
    KILN_ASSIGN_OR_RETURN(sum, im.add_term(sum, term));
  }
  if (taps.extrapolates) {
    if (!ir::is_float(dtype)) return im.unsupported("tf_crop_and_resize extrapolation on an integer tensor");
    KILN_ASSIGN_OR_RETURN(NodeId constant, along_axis(im, taps.constant, dtype, axis, rank));
    KILN_ASSIGN_OR_RETURN(sum, im.add_term(sum, constant));
  }
  return sum;
}

// Float data of a constant input (scales, roi); empty when the input is absent or empty.
Result<std::vector<double>> input_floats(Importer& im, int i, std::string_view what) {
  if (!im.has_input(i)) return std::vector<double>{};
  KILN_ASSIGN_OR_RETURN(NodeId id, im.input(i));
  const ir::Tensor* t = im.const_data(id);
  if (t == nullptr) return im.unsupported(std::string(what) + " must be a constant (computed at import)");
  std::vector<double> out;
  for (int64_t k = 0; k < t->num_elements(); ++k) out.push_back(t->element_as_double(k));
  return out;
}

Status resize(Importer& im, bool upsample) {
  KILN_ASSIGN_OR_RETURN(NodeId x, im.input(0));
  const Shape shape = im.type(x).shape;  // a copy: adding nodes moves the graph's
  const int64_t rank = int64_t(shape.size());
  ResizeMode m;
  m.mode = im.attr_string("mode", "nearest");
  if (upsample && m.mode == "bilinear") m.mode = "linear";  // Upsample-7's spelling
  if (m.mode != "nearest" && m.mode != "linear" && m.mode != "cubic") {
    return im.unsupported("mode='" + m.mode + "' is not supported");
  }
  // Opset 10's Resize and Upsample map output to input positions asymmetrically and round
  // nearest down (ONNX's 10 -> 11 converter spells the same).
  const bool legacy = upsample || im.opset < 11;
  if (legacy) {
    if (m.mode == "cubic") return im.error("mode='cubic' needs opset 11");
    m.coordinates = "asymmetric";
    m.nearest = "floor";
  } else {
    m.coordinates = im.attr_string("coordinate_transformation_mode", "half_pixel");
    m.nearest = im.attr_string("nearest_mode", "round_prefer_floor");
    m.cubic_a = im.attr_float("cubic_coeff_a", -0.75);
    m.exclude_outside = im.attr_int("exclude_outside", 0) != 0;
    m.extrapolation = im.attr_float("extrapolation_value", 0.0);
    m.antialias = im.attr_int("antialias", 0) != 0;
    if (m.antialias && m.mode == "nearest") return im.error("antialias needs mode='linear' or 'cubic'");
  }
  if (m.nearest != "round_prefer_floor" && m.nearest != "round_prefer_ceil" && m.nearest != "floor" && m.nearest != "ceil") {
    return im.unsupported("nearest_mode='" + m.nearest + "' is not supported");
  }

  // The resized axes and, per axis, a scale or an output size (and a roi).
  std::vector<int64_t> axes;
  if (const auto listed = im.attr_ints("axes"); listed && im.opset >= 18) {
    for (int64_t a : *listed) {
      Result<int64_t> axis = ir::normalize_axis(a, rank);
      if (!axis.is_ok()) return im.error(axis.status().message());
      axes.push_back(*axis);
    }
  } else {
    for (int64_t a = 0; a < rank; ++a) axes.push_back(a);
  }
  const size_t naxes = axes.size();
  std::vector<double> scales, roi;
  std::vector<int64_t> sizes;
  if (upsample && im.opset < 9) {
    const onnx::AttributeProto* a = im.attr("scales");
    if (a != nullptr)
      for (float v : a->floats()) scales.push_back(v);
  } else if (legacy) {
    KILN_ASSIGN_OR_RETURN(scales, input_floats(im, 1, "scales"));
  } else {
    KILN_ASSIGN_OR_RETURN(roi, input_floats(im, 1, "roi"));
    KILN_ASSIGN_OR_RETURN(scales, input_floats(im, 2, "scales"));
    if (im.has_input(3)) {
      KILN_ASSIGN_OR_RETURN(sizes, im.input_ints(3, "sizes"));
    }
  }
  if (scales.empty() == sizes.empty()) return im.error("exactly one of scales and sizes must be given");
  if (!scales.empty() && scales.size() != naxes) return im.error("scales must hold one value per resized axis");
  if (!sizes.empty() && sizes.size() != naxes) return im.error("sizes must hold one value per resized axis");
  if (m.coordinates == "tf_crop_and_resize" && roi.size() != 2 * naxes) {
    return im.error("tf_crop_and_resize needs a roi of two values per resized axis");
  }
  for (int64_t a : axes) {
    if (!shape[size_t(a)].is_static()) return im.unsupported("Resize along a dynamic dim");
  }
  std::vector<double> axis_scale(naxes);
  std::vector<int64_t> axis_out(naxes);
  if (!scales.empty()) {
    for (size_t i = 0; i < naxes; ++i) {
      if (!(scales[i] > 0)) return im.error("scales must be positive");
      axis_scale[i] = scales[i];
      axis_out[i] = int64_t(scales[i] * double(shape[size_t(axes[i])].size()));
    }
  } else {
    const std::string policy = im.opset >= 18 ? im.attr_string("keep_aspect_ratio_policy", "stretch") : "stretch";
    if (policy != "stretch" && policy != "not_larger" && policy != "not_smaller") {
      return im.error("unknown keep_aspect_ratio_policy '" + policy + "'");
    }
    for (size_t i = 0; i < naxes; ++i) {
      const int64_t in = shape[size_t(axes[i])].size();
      if (sizes[i] <= 0 || in == 0) return im.error("sizes and the resized dims must be positive");
      axis_scale[i] = double(sizes[i]) / double(in);
      axis_out[i] = sizes[i];
    }
    if (policy != "stretch") {
      const double scale = policy == "not_larger" ? *std::min_element(axis_scale.begin(), axis_scale.end())
                                                  : *std::max_element(axis_scale.begin(), axis_scale.end());
      for (size_t i = 0; i < naxes; ++i) {
        axis_scale[i] = scale;
        axis_out[i] = int64_t(scale * double(shape[size_t(axes[i])].size()) + 0.5);
      }
    }
  }

  NodeId y = x;
  for (size_t i = 0; i < naxes; ++i) {
    const int64_t in = shape[size_t(axes[i])].size();
    if (axis_out[i] < 1) return im.error("the output would be empty along axis " + std::to_string(axes[i]));
    KILN_RETURN_IF_ERROR(check_import_size(im, {Dim::of(axis_out[i])}, "Resize output"));
    const double roi_start = roi.empty() ? 0.0 : roi[i], roi_end = roi.empty() ? 1.0 : roi[i + naxes];
    KILN_ASSIGN_OR_RETURN(AxisTaps taps, axis_taps(im, m, in, axis_out[i], axis_scale[i], roi_start, roi_end));
    if (is_identity(taps, in, axis_out[i])) continue;
    KILN_ASSIGN_OR_RETURN(y, resize_axis(im, y, axes[i], taps));
  }
  return im.set_output(0, y);
}

}  // namespace

void register_resize_ops(std::map<std::string, Converter>& t) {
  t["Resize"] = [](Importer& im) { return resize(im, false); };
  t["Upsample"] = [](Importer& im) { return resize(im, true); };
}

}  // namespace kiln::onnx_import
