// Reference evaluation of convolution and pooling, NCHW or NHWC (channels_last, ImageAxes).
//
// conv2d: x [N, C, H, W], w [O, C/groups, KH, KW] (NHWC: [N, H, W, C], [O, KH, KW, C/groups]),
// optional bias [O]; pads are
// [top, left, bottom, right]; out = floor((H + top + bottom - dil*(KH-1) - 1) / stride) + 1.
// Float convolutions and averages accumulate in the context's compute type (double, or float in
// the device-faithful mode, as the kernels' accumulators, bias added last as they add it);
// integers exactly in int64.
// max_pool2d: padding never wins (it is -inf); a window entirely in padding yields -inf (or the
// dtype's lowest integer). avg_pool2d: divides by the kernel area when count_include_pad, else
// by the number of in-bounds elements (an empty window gives 0). Integer averages truncate.
// global_avg_pool2d: mean over H and W, keeping them as size 1.
#include <algorithm>
#include <cmath>
#include <limits>

#include "ir/interp_internal.h"

namespace kiln::ir::interp {
namespace {

// The logical sizes of a 4-D image tensor and the element strides of each logical axis in its
// layout; at(n, c, h, w) is the element's offset.
struct Dims4 {
  int64_t n, c, h, w;
  int64_t sn, sc, sh, sw;
  int64_t at(int64_t in, int64_t ic, int64_t ih, int64_t iw) const { return in * sn + ic * sc + ih * sh + iw * sw; }
};

Dims4 image_dims(const std::vector<int64_t>& shape, bool channels_last) {
  const ImageAxes ax = image_axes(channels_last);
  int64_t stride[4];
  stride[3] = 1;
  for (int d = 2; d >= 0; --d) stride[d] = stride[d + 1] * shape[size_t(d + 1)];
  return Dims4{shape[ax.n], shape[ax.c], shape[ax.h], shape[ax.w],
               stride[ax.n], stride[ax.c], stride[ax.h], stride[ax.w]};
}

// The shape of an image tensor of logical sizes (n, c, h, w) in the layout.
std::vector<int64_t> image_shape(int64_t n, int64_t c, int64_t h, int64_t w, bool channels_last) {
  return channels_last ? std::vector<int64_t>{n, h, w, c} : std::vector<int64_t>{n, c, h, w};
}

Result<Dims4> image(const EvalContext& ctx, const Tensor& t, const char* what, bool channels_last) {
  if (t.rank() != 4) {
    return node_error(ctx, std::string(what) + " must be 4-D (" + (channels_last ? "NHWC" : "NCHW") + "), got " +
                               sizes_to_string(t.shape()));
  }
  return image_dims(t.shape(), channels_last);
}

Result<int64_t> output_extent(const EvalContext& ctx, int64_t in, int64_t pad_begin, int64_t pad_end,
                              int64_t kernel, int64_t stride, int64_t dilation) {
  if (stride <= 0 || dilation <= 0 || kernel <= 0 || pad_begin < 0 || pad_end < 0) {
    return node_error(ctx, "kernel, strides and dilations must be positive and pads non-negative");
  }
  const int64_t span = dilation * (kernel - 1) + 1;
  const int64_t padded = in + pad_begin + pad_end;
  if (padded < span) {
    return node_error(ctx, "the window (" + std::to_string(span) + ") is larger than the padded input (" +
                               std::to_string(padded) + ")");
  }
  return (padded - span) / stride + 1;
}

template <class T>
std::vector<T> conv2d(const std::vector<T>& x, const std::vector<T>& w, const std::vector<T>* bias,
                      const Dims4& xd, const Dims4& wd, int64_t groups, int64_t oh, int64_t ow,
                      const Conv2dAttrs& a) {
  std::vector<T> out(size_t(xd.n * wd.n * oh * ow), T(0));
  const Dims4 od = image_dims(image_shape(xd.n, wd.n, oh, ow, a.channels_last), a.channels_last);
  const int64_t out_per_group = wd.n / groups;
  const int64_t in_per_group = wd.c;
  // Each (image, output channel) plane is one thread's: planes are split over the threads.
  parallel_ranges(xd.n * wd.n, oh * ow * in_per_group * wd.h * wd.w, [&](int64_t first, int64_t last) {
    for (int64_t plane = first; plane < last; ++plane) {
      const int64_t n = plane / wd.n, o = plane % wd.n;
      const int64_t g = o / out_per_group;
      for (int64_t y = 0; y < oh; ++y) {
        for (int64_t xo = 0; xo < ow; ++xo) {
          T acc = T(0);
          for (int64_t ci = 0; ci < in_per_group; ++ci) {
            const int64_t c = g * in_per_group + ci;
            for (int64_t ky = 0; ky < wd.h; ++ky) {
              const int64_t iy = y * a.strides[0] - a.pads[0] + ky * a.dilations[0];
              if (iy < 0 || iy >= xd.h) continue;
              for (int64_t kx = 0; kx < wd.w; ++kx) {
                const int64_t ix = xo * a.strides[1] - a.pads[1] + kx * a.dilations[1];
                if (ix < 0 || ix >= xd.w) continue;
                const T xv = x[size_t(xd.at(n, c, iy, ix))];
                const T wv = w[size_t(wd.at(o, ci, ky, kx))];
                if constexpr (std::is_same_v<T, int64_t>) {
                  acc = int64_t(uint64_t(acc) + uint64_t(xv) * uint64_t(wv));
                } else {
                  acc += xv * wv;
                }
              }
            }
          }
          if (bias) {
            if constexpr (std::is_same_v<T, int64_t>) {
              acc = int64_t(uint64_t(acc) + uint64_t((*bias)[o]));
            } else {
              acc += (*bias)[o];
            }
          }
          out[size_t(od.at(n, o, y, xo))] = acc;
        }
      }
    }
  });
  return out;
}

}  // namespace

Result<Tensor> eval_conv2d(const EvalContext& ctx) {
  const auto* attrs = std::get_if<Conv2dAttrs>(&ctx.node.attrs);
  if (attrs == nullptr) return node_error(ctx, "missing conv2d attributes");
  const Tensor& x = *ctx.inputs[0];
  const Tensor& w = *ctx.inputs[1];
  const Tensor* bias = ctx.inputs.size() > 2 ? ctx.inputs[2] : nullptr;
  KILN_ASSIGN_OR_RETURN(Dims4 xd, image(ctx, x, "input", attrs->channels_last));
  KILN_ASSIGN_OR_RETURN(Dims4 wd, image(ctx, w, "weight", attrs->channels_last));
  const int64_t groups = attrs->groups;
  if (groups <= 0 || xd.c % groups != 0 || wd.n % groups != 0 || wd.c * groups != xd.c) {
    return node_error(ctx, "weight " + sizes_to_string(w.shape()) + " and groups=" + std::to_string(groups) +
                               " do not fit input " + sizes_to_string(x.shape()));
  }
  if (bias && (bias->rank() != 1 || bias->shape()[0] != wd.n)) {
    return node_error(ctx, "bias must be [" + std::to_string(wd.n) + "], got " + sizes_to_string(bias->shape()));
  }
  KILN_ASSIGN_OR_RETURN(int64_t oh, output_extent(ctx, xd.h, attrs->pads[0], attrs->pads[2], wd.h,
                                                  attrs->strides[0], attrs->dilations[0]));
  KILN_ASSIGN_OR_RETURN(int64_t ow, output_extent(ctx, xd.w, attrs->pads[1], attrs->pads[3], wd.w,
                                                  attrs->strides[1], attrs->dilations[1]));
  const std::vector<int64_t> out_shape = image_shape(xd.n, wd.n, oh, ow, attrs->channels_last);
  if (is_float(x.dtype())) {
    return with_compute_type(ctx, [&]<class T>(T) {
      std::vector<T> b;
      if (bias) b = load_values<T>(*bias);
      std::vector<T> out = conv2d<T>(load_values<T>(x), load_values<T>(w), bias ? &b : nullptr, xd, wd, groups, oh,
                                     ow, *attrs);
      return tensor_from_values<T>(ctx.out_dtype, out_shape, out);
    });
  }
  std::vector<int64_t> b;
  if (bias) b = load_ints(*bias);
  std::vector<int64_t> out = conv2d<int64_t>(load_ints(x), load_ints(w), bias ? &b : nullptr, xd, wd,
                                             groups, oh, ow, *attrs);
  return tensor_from_ints(ctx.out_dtype, out_shape, out);
}

namespace {

// One pooled value per output position of the window `attrs`: max or average of the in-bounds
// elements. V is the element type (the float compute type, or int64 for integers): floats
// propagate NaN in max like NumPy and divide the sum in V; integers wrap and truncate.
template <class V>
std::vector<V> pool2d(const std::vector<V>& x, const Dims4& xd, const Dims4& od, int64_t oh, int64_t ow,
                      const Pool2dAttrs& attrs, bool is_max) {
  constexpr bool kFloat = !std::is_same_v<V, int64_t>;
  const int64_t kh = attrs.kernel[0], kw = attrs.kernel[1];
  std::vector<V> out(size_t(xd.n * xd.c * oh * ow));
  for (int64_t plane = 0; plane < xd.n * xd.c; ++plane) {
    const int64_t n = plane / std::max<int64_t>(xd.c, 1), c = plane % std::max<int64_t>(xd.c, 1);
    for (int64_t y = 0; y < oh; ++y) {
      for (int64_t xo = 0; xo < ow; ++xo) {
        V best = kFloat ? -std::numeric_limits<V>::infinity() : std::numeric_limits<V>::min();
        V sum = 0;
        int64_t valid = 0;
        for (int64_t ky = 0; ky < kh; ++ky) {
          const int64_t iy = y * attrs.strides[0] - attrs.pads[0] + ky;
          if (iy < 0 || iy >= xd.h) continue;
          for (int64_t kx = 0; kx < kw; ++kx) {
            const int64_t ix = xo * attrs.strides[1] - attrs.pads[1] + kx;
            if (ix < 0 || ix >= xd.w) continue;
            const V v = x[size_t(xd.at(n, c, iy, ix))];
            ++valid;
            if constexpr (kFloat) {
              // NaN propagates like NumPy's max.
              if (!std::isnan(best) && (std::isnan(v) || v > best)) best = v;
              sum += v;
            } else {
              best = std::max(best, v);
              sum = int64_t(uint64_t(sum) + uint64_t(v));
            }
          }
        }
        const int64_t divisor = attrs.count_include_pad ? kh * kw : valid;
        out[size_t(od.at(n, c, y, xo))] = is_max ? best : (divisor ? sum / V(divisor) : V(0));
      }
    }
  }
  return out;
}

}  // namespace

Result<Tensor> eval_pool2d(const EvalContext& ctx) {
  const auto* attrs = std::get_if<Pool2dAttrs>(&ctx.node.attrs);
  if (attrs == nullptr) return node_error(ctx, "missing pooling attributes");
  const Tensor& x = *ctx.inputs[0];
  KILN_ASSIGN_OR_RETURN(Dims4 xd, image(ctx, x, "input", attrs->channels_last));
  const bool is_max = ctx.node.op == OpKind::kMaxPool2d;
  KILN_ASSIGN_OR_RETURN(int64_t oh, output_extent(ctx, xd.h, attrs->pads[0], attrs->pads[2], attrs->kernel[0],
                                                  attrs->strides[0], 1));
  KILN_ASSIGN_OR_RETURN(int64_t ow, output_extent(ctx, xd.w, attrs->pads[1], attrs->pads[3], attrs->kernel[1],
                                                  attrs->strides[1], 1));
  const std::vector<int64_t> out_shape = image_shape(xd.n, xd.c, oh, ow, attrs->channels_last);
  const Dims4 od = image_dims(out_shape, attrs->channels_last);
  if (is_float(x.dtype())) {
    return with_compute_type(ctx, [&]<class T>(T) {
      std::vector<T> out = pool2d<T>(load_values<T>(x), xd, od, oh, ow, *attrs, is_max);
      return tensor_from_values<T>(ctx.out_dtype, out_shape, out);
    });
  }
  return tensor_from_ints(ctx.out_dtype, out_shape, pool2d<int64_t>(load_ints(x), xd, od, oh, ow, *attrs, is_max));
}

Result<Tensor> eval_global_avg_pool2d(const EvalContext& ctx) {
  const Tensor& x = *ctx.inputs[0];
  KILN_ASSIGN_OR_RETURN(Dims4 xd, image(ctx, x, "input", false));
  const std::vector<int64_t> out_shape = {xd.n, xd.c, 1, 1};
  const int64_t area = xd.h * xd.w;
  if (is_float(x.dtype())) {
    return with_compute_type(ctx, [&]<class T>(T) {
      std::vector<T> v = load_values<T>(x), out(size_t(xd.n * xd.c));
      for (int64_t p = 0; p < xd.n * xd.c; ++p) {
        T sum = 0;
        for (int64_t i = 0; i < area; ++i) sum += v[p * area + i];
        out[p] = sum / T(area);  // NaN for an empty plane, like NumPy's mean
      }
      return tensor_from_values<T>(ctx.out_dtype, out_shape, out);
    });
  }
  std::vector<int64_t> v = load_ints(x), out(size_t(xd.n * xd.c));
  for (int64_t p = 0; p < xd.n * xd.c; ++p) {
    int64_t sum = 0;
    for (int64_t i = 0; i < area; ++i) sum = int64_t(uint64_t(sum) + uint64_t(v[p * area + i]));
    out[p] = area ? sum / area : 0;
  }
  return tensor_from_ints(ctx.out_dtype, out_shape, out);
}

}  // namespace kiln::ir::interp
