// autocast.cpp: what the ops do under torch.autocast. Inside `with torch.autocast("cuda")` a
// Linear's output is bfloat16 (or float16) while a module's own parameters stay float32, so an op
// that takes both would see mixed dtypes. PyTorch's ops with several floating inputs (linear,
// addmm, lstm_cell, conv1d) cast them all to autocast's lower precision first; these kernels do
// the same for ours, then run the op again with the autocast key excluded. relu takes one tensor:
// the Autocast keys fall through for it and it runs in the input's dtype, as torch.relu does.
// reduce_sum follows torch.sum, which CUDA autocast runs in float32 (a sum of many bfloat16
// values needs float's range and precision); CPU autocast leaves torch.sum alone, and so do we.

// Not narrow: <ATen/autocast_mode.h> includes all of ATen's operators itself, so this is the one
// file of the package that parses them (chapter 1, "Narrow headers").
#include <ATen/autocast_mode.h>
#include <torch/library.h>

#include "checks.h"

namespace custom_ops {
namespace {

template <c10::DeviceType kDevice>
at::Tensor lower(const at::Tensor& t) {
  // cached_cast leaves float64, integers and other devices' tensors alone, and caches the cast of
  // a parameter (a leaf that requires grad) for the rest of the autocast region, as for a Linear.
  return at::autocast::cached_cast(at::autocast::get_lower_precision_fp_from_device_type(kDevice),
                                   t, kDevice);
}

template <c10::DeviceType kDevice>
c10::impl::ExcludeDispatchKeyGuard no_autocast() {
  return c10::impl::ExcludeDispatchKeyGuard(
      at::autocast::get_autocast_dispatch_key_from_device_type(kDevice));
}

template <c10::DeviceType kDevice>
at::Tensor fused_bias_relu_autocast(const at::Tensor& x, const at::Tensor& bias, double scale) {
  static const auto op = op_handle<at::Tensor(const at::Tensor&, const at::Tensor&, double)>(
      "custom_ops::fused_bias_relu");
  const auto guard = no_autocast<kDevice>();  // the call below skips this kernel: no loop
  return op.call(lower<kDevice>(x), lower<kDevice>(bias), scale);
}

using LstmOut = std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor>;

template <c10::DeviceType kDevice>
LstmOut lstm_cell_autocast(const at::Tensor& x, const at::Tensor& h, const at::Tensor& c,
                           const at::Tensor& w_ih, const at::Tensor& w_hh, const at::Tensor& b_ih,
                           const at::Tensor& b_hh) {
  static const auto op =
      op_handle<LstmOut(const at::Tensor&, const at::Tensor&, const at::Tensor&, const at::Tensor&,
                        const at::Tensor&, const at::Tensor&, const at::Tensor&)>(
          "custom_ops::lstm_cell");
  const auto guard = no_autocast<kDevice>();
  return op.call(lower<kDevice>(x), lower<kDevice>(h), lower<kDevice>(c), lower<kDevice>(w_ih),
                 lower<kDevice>(w_hh), lower<kDevice>(b_ih), lower<kDevice>(b_hh));
}

using LstmLayerOut = std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor>;

template <c10::DeviceType kDevice>
LstmLayerOut lstm_autocast(const at::Tensor& x, const at::Tensor& h0, const at::Tensor& c0,
                           const at::Tensor& w_ih, const at::Tensor& w_hh, const at::Tensor& b_ih,
                           const at::Tensor& b_hh) {
  static const auto op = op_handle<LstmLayerOut(
      const at::Tensor&, const at::Tensor&, const at::Tensor&, const at::Tensor&, const at::Tensor&,
      const at::Tensor&, const at::Tensor&)>("custom_ops::lstm");
  const auto guard = no_autocast<kDevice>();
  return op.call(lower<kDevice>(x), lower<kDevice>(h0), lower<kDevice>(c0), lower<kDevice>(w_ih),
                 lower<kDevice>(w_hh), lower<kDevice>(b_ih), lower<kDevice>(b_hh));
}

using LstmPackedOut =
    std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor>;

template <c10::DeviceType kDevice>
LstmPackedOut lstm_packed_autocast(const at::Tensor& x, const at::Tensor& batch_sizes,
                                   const at::Tensor& h0, const at::Tensor& c0,
                                   const at::Tensor& w_ih, const at::Tensor& w_hh,
                                   const at::Tensor& b_ih, const at::Tensor& b_hh,
                                   const std::optional<at::Tensor>& w_hr, bool reverse) {
  static const auto op = op_handle<LstmPackedOut(
      const at::Tensor&, const at::Tensor&, const at::Tensor&, const at::Tensor&, const at::Tensor&,
      const at::Tensor&, const at::Tensor&, const at::Tensor&, const std::optional<at::Tensor>&,
      bool)>("custom_ops::lstm_packed");
  const auto guard = no_autocast<kDevice>();
  const std::optional<at::Tensor> w_hr_low =
      w_hr.has_value() ? std::optional<at::Tensor>(lower<kDevice>(*w_hr)) : std::nullopt;
  // batch_sizes is int64 on the CPU: cached_cast would leave it alone, and it is left alone here.
  return op.call(lower<kDevice>(x), batch_sizes, lower<kDevice>(h0), lower<kDevice>(c0),
                 lower<kDevice>(w_ih), lower<kDevice>(w_hh), lower<kDevice>(b_ih),
                 lower<kDevice>(b_hh), w_hr_low, reverse);
}

template <c10::DeviceType kDevice>
at::Tensor conv_rnn_autocast(const at::Tensor& x, const at::Tensor& kernel,
                             const at::Tensor& hidden) {
  static const auto op =
      op_handle<at::Tensor(const at::Tensor&, const at::Tensor&, const at::Tensor&)>(
          "custom_ops::conv_rnn");
  const auto guard = no_autocast<kDevice>();
  return op.call(lower<kDevice>(x), lower<kDevice>(kernel), lower<kDevice>(hidden));
}

template <c10::DeviceType kDevice>
at::Tensor reduce_sum_autocast(const at::Tensor& x) {
  static const auto op = op_handle<at::Tensor(const at::Tensor&)>("custom_ops::reduce_sum");
  const auto guard = no_autocast<kDevice>();
  return op.call(at::autocast::cached_cast(at::kFloat, x, kDevice));
}

}  // namespace

TORCH_LIBRARY_IMPL(custom_ops, AutocastCUDA, m) {
  constexpr auto kCUDA = c10::DeviceType::CUDA;
  m.impl("fused_bias_relu", &fused_bias_relu_autocast<kCUDA>);
  m.impl("lstm_cell", &lstm_cell_autocast<kCUDA>);
  m.impl("lstm", &lstm_autocast<kCUDA>);  // in autocast's dtype (nn.LSTM's cuDNN path: float16)
  m.impl("lstm_packed", &lstm_packed_autocast<kCUDA>);
  m.impl("conv_rnn", &conv_rnn_autocast<kCUDA>);
  m.impl("reduce_sum", &reduce_sum_autocast<kCUDA>);
}

TORCH_LIBRARY_IMPL(custom_ops, AutocastCPU, m) {
  constexpr auto kCPU = c10::DeviceType::CPU;
  m.impl("fused_bias_relu", &fused_bias_relu_autocast<kCPU>);
  m.impl("lstm_cell", &lstm_cell_autocast<kCPU>);
  m.impl("lstm", &lstm_autocast<kCPU>);  // CPU autocast lowers torch.nn.LSTM as well
  m.impl("lstm_packed", &lstm_packed_autocast<kCPU>);
  m.impl("conv_rnn", &conv_rnn_autocast<kCPU>);
}

}  // namespace custom_ops
