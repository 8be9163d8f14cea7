// The head dims the sm90 kernels are instantiated at in a full build, one X-macro per kernel set.
// This is the one list: cmake/sm90.cmake (which instantiations to compile) and
// tools/generate_sm90_kernels.py (which to write) read the X(<digits>) items of these two lines,
// and the dispatch (sm90_forward.cu, sm90_backward.cu) expands them. cmake defines
// FLASHATTN_SM90_<BF16|FP16>_HDIM<D> as 1 or 0 for each forward head dim: whether this build
// (FLASHATTN_DTYPES x FLASHATTN_HDIMS) compiled it.
#pragma once

#include <cstddef>
#include <string>

#define FLASHATTN_SM90_FORWARD_HEAD_DIMS(X) X(64) X(96) X(128) X(192) X(256)
#define FLASHATTN_SM90_BACKWARD_HEAD_DIMS(X) X(64) X(128) X(256)

// 1 where this build compiled the (dtype, head dim) instantiation (bf16: a bool), else 0.
#define FLASHATTN_SM90_BUILT(bf16, HD) ((bf16) ? FLASHATTN_SM90_BF16_HDIM##HD : FLASHATTN_SM90_FP16_HDIM##HD)

namespace flashattn {
namespace sm90 {

#define FLASHATTN_SM90_LIST_ITEM(HD) HD,
// Ascending.
inline constexpr int kForwardHeadDims[] = {FLASHATTN_SM90_FORWARD_HEAD_DIMS(FLASHATTN_SM90_LIST_ITEM)};
inline constexpr int kBackwardHeadDims[] = {FLASHATTN_SM90_BACKWARD_HEAD_DIMS(FLASHATTN_SM90_LIST_ITEM)};
#undef FLASHATTN_SM90_LIST_ITEM

// "64, 128 and 256", for messages.
template <std::size_t N>
std::string head_dims_text(const int (&head_dims)[N]) {
  std::string text;
  for (std::size_t i = 0; i < N; ++i) {
    text += (i == 0 ? "" : i + 1 == N ? " and " : ", ") + std::to_string(head_dims[i]);
  }
  return text;
}

}  // namespace sm90
}  // namespace flashattn
