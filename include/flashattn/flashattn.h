// flashattn: exact attention without materialising the score matrix.
//
// Layouts follow flash_attn 2.x:
//   fixed length:    q (batch, seqlen_q, nheads_q, headdim), k/v (batch, seqlen_k, nheads_kv, headdim),
//                    lse (batch, nheads_q, seqlen_q) float32
//   variable length: q (total_q, nheads_q, headdim), k/v (total_k, nheads_kv, headdim),
//                    cu_seqlens_q/k int32 (batch + 1), lse (nheads_q, total_q) float32
// The last dimension must be contiguous; every other stride is free, except that an output
// (out, lse, dq, dk, dv) needs a distinct address for each of its elements: taken from the
// smallest stride up, each stride must step past what the smaller ones span (no zero strides).
//
// Scores: s = scale * q.k; with softcap c > 0, s = c * tanh(s / c); with ALiBi, s -= slope * |i + sk - sq - j|.
// Masks are aligned to the bottom-right corner: query i sees key j when
//   j <= i + (sk - sq) + window_right   (causal means window_right = 0)
//   j >= i + (sk - sq) - window_left
// where a window side of -1 is unbounded. A query row that sees no key gets output 0 and lse = -inf.
// sq and sk are the lengths of one sequence: seqlen, the cu_seqlens span, or seqused where given.
//
// Every argument is checked before anything runs, and a bad one returns kInvalidArgument naming
// it, with one exception: while the stream is being captured into a CUDA graph, device memory
// cannot be read back, so cu_seqlens and seqused on the GPU are not checked there (as flash_attn
// never checks them) and max_seqlen_q / max_seqlen_k must be given. The kernels then clamp what
// they read: a cu_seqlens entry to [0, the tensor's rows], a sequence's length to max_seqlen, a
// seqused entry to [0, its sequence's span], a block_table entry to [0, num_pages). A bad entry
// gives a wrong result for its sequence, not an error, but no read or write outside the tensors.
#pragma once

#include "flashattn/types.h"

namespace flashattn {

enum class Backend : int {
  kAuto = 0,          // CUDA when the tensors live on a GPU, else CPU flash
  kCPU = 1,           // CPU FlashAttention-2 (tiled, online softmax)
  kCPUReference = 2,  // CPU naive materialised softmax in float64: the oracle
  kCUDA = 3,
};

const char* backend_name(Backend backend);

// The most pieces a query tile's keys may be cut into (AttentionParams::num_splits).
constexpr int kMaxNumSplits = 256;

struct AttentionParams {
  float softmax_scale = 0.0f;  // 0 means 1 / sqrt(headdim)
  bool causal = false;
  int window_left = -1;   // -1: unbounded
  int window_right = -1;  // -1: unbounded
  float softcap = 0.0f;   // 0: off; else at least FLT_MIN (the kernels divide by it)
  // Optional float32 (nheads_q) or (batch, nheads_q), finite (checked where they are on the host;
  // on the GPU a NaN or infinite slope is the caller's error, as reading them back would wait).
  TensorView alibi_slopes;

  // Variable length batches: both given or neither.
  TensorView cu_seqlens_q;  // int32 (batch + 1)
  TensorView cu_seqlens_k;  // int32 (batch + 1)
  int max_seqlen_q = 0;
  int max_seqlen_k = 0;

  // Used lengths (FlashAttention-3's seqused): optional int32 (batch), each given alone or both.
  // Sequence b then takes part with only its first seqused_q[b] query rows and seqused_k[b] key
  // rows (at most its cu_seqlens span, or seqlen for fixed length), and the masks align to these
  // lengths. Rows past them are neither read nor written: out, lse and dq rows past seqused_q and
  // dk, dv rows past seqused_k keep whatever the caller put there.
  TensorView seqused_q;
  TensorView seqused_k;

  bool deterministic = false;  // backward: bitwise reproducible gradients (CPU: at any num_threads)
  Backend backend = Backend::kAuto;
  int num_threads = 0;      // CPU: 0 means all hardware threads; more than there are runs that many
  void* stream = nullptr;   // CUDA: a cudaStream_t; null is the default stream
  // CUDA forward, 0 .. kMaxNumSplits: into how many pieces the keys of a query tile may be cut, each piece
  // run by a CTA of its own and merged after (flash_attn's num_splits). 0 lets the library choose;
  // 1 cuts nothing (no split tail either); more sets the pieces of the GQA-packed Hopper kernel,
  // which serves decode, MHA decode (seqlen_q <= 64) included, and of the sm80 kernel (other
  // Hopper kernels take > 1 as 0), at most one a key block and as many as a 1 GiB workspace holds.
  int num_splits = 0;

  // Paged k and v (forward only; vLLM's PagedAttention layout, flash_attn's block_table): optional
  // int32 (batch, max_pages). k and v are then pages (num_pages, page_size, nheads_kv, headdim), and
  // key row j of sequence b is row j % page_size of page block_table[b][j / page_size]: each
  // sequence has max_pages * page_size keys, or seqused_k[b]. With variable length (cu_seqlens),
  // q stays rows (total_q, nheads_q, headdim) and cu_seqlens_k gives each sequence's number of
  // keys only (its keys are rows 0.. of its pages; the last entry bounds nothing), which must fit
  // in max_pages * page_size (flash_attn_varlen_func's block_table). The entries a
  // sequence's keys reach must name pages of k (checked, except under CUDA graph capture, where
  // the kernel clamps them as it clamps lengths: see the top of this file); entries past them are
  // never read (-1 padding is fine). The CUDA backend reads pages
  // in its sm80 kernel, whose key tiles must lie inside a page: page_size a multiple of 128 at
  // head dim <= 64, of 64 above. Where the library chooses no key pieces it runs one, whose
  // float32 workspace (heads x rows of q x (headdim + 1)) a long q must find memory for.
  TensorView block_table;

  // The caller has checked the entries of seqused_q, seqused_k and block_table on the GPU (a
  // serving loop that wrote them, or the Python kvcache path after its own read-back): the API
  // then reads none of them back, so the call does not wait for the device. Wrong entries are then
  // the caller's error, clamped as under CUDA graph capture (top of this file). cu_seqlens and CPU
  // tensors are checked as ever.
  bool indices_checked = false;
};

// Outputs (out, lse; dq, dk, dv) need memory of their own: an output on an input or on another
// output is a wrong answer whose form depends on the backend. Refused, naming it, where that can be
// told from the two views' spans (src/overlap.h): they start at the same address, or one of them is
// dense (no gaps, dimensions in any order) and the other's first or last element lies inside it,
// which covers an output passed as an input or cut from the same buffer. Two views with gaps that
// interleave are taken, touching or not: gradients interleaved in one packed buffer, each element
// its own, are right; strided views that share elements (q with a head stride of 2 * headdim and
// out a few elements after it, with the same strides) are the caller's error, and not caught.
// (Inputs may share memory.)
struct ForwardArgs {
  TensorView q, k, v;
  TensorView out;  // same shape and dtype as q
  TensorView lse;  // float32; optional (may be left undefined)
};

struct BackwardArgs {
  TensorView q, k, v, out, dout;
  TensorView lse;         // float32, as written by forward
  TensorView dq, dk, dv;  // shapes of q, k, v; dtype of q
};

Status forward(const ForwardArgs& args, const AttentionParams& params);
Status backward(const BackwardArgs& args, const AttentionParams& params);

// True when a CUDA device is usable by this build.
bool cuda_available();

}  // namespace flashattn
