// The sm80 kernel set's entry points: which problems it runs, the run-time to compile-time switch
// (dtype, head dim), and the backward's workspace.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "cuda/kernel_sets.h"
#include "cuda/sm80/backward_rows.cuh"
#include "cuda/sm80/kernel_registry.h"
#include "cuda/sm80/params.h"
#include "cuda/sm80/split_combine.cuh"
#include "cuda/sm80/split_rule.h"
#include "decode_heads_as_rows.h"
#include "env_switch.h"

namespace flashattn {
namespace sm80 {
namespace {

constexpr int kHeadDims[] = {32, 64, 96, 128, 192, 256};

// Head dims between the instantiated ones run in the next larger kernel with zero padding.
int kernel_headdim(int headdim) {
  for (int d : kHeadDims) {
    if (headdim <= d) return d;
  }
  return 0;
}

bool headdim_compiled(int d) {
  switch (d) {
#if defined(FLASHATTN_SM80_HDIM_32)
    case 32: return true;
#endif
#if defined(FLASHATTN_SM80_HDIM_64)
    case 64: return true;
#endif
#if defined(FLASHATTN_SM80_HDIM_96)
    case 96: return true;
#endif
#if defined(FLASHATTN_SM80_HDIM_128)
    case 128: return true;
#endif
#if defined(FLASHATTN_SM80_HDIM_192)
    case 192: return true;
#endif
#if defined(FLASHATTN_SM80_HDIM_256)
    case 256: return true;
#endif
    default: return false;
  }
}

bool dtype_compiled(DType dtype) {
#if defined(FLASHATTN_SM80_FP16)
  if (dtype == DType::kFloat16) return true;
#endif
#if defined(FLASHATTN_SM80_BF16)
  if (dtype == DType::kBFloat16) return true;
#endif
  (void)dtype;
  return false;
}

Status supports(const AttentionProblem& p) {
  if (p.dtype != DType::kFloat16 && p.dtype != DType::kBFloat16) {
    return Status::Unsupported(std::string("the sm80 CUDA kernels take float16 or bfloat16; dtype ") +
                               dtype_name(p.dtype) + " is not supported (convert to float16/bfloat16 or use backend cpu)");
  }
  if (!dtype_compiled(p.dtype)) {
    return Status::Unsupported(std::string("dtype ") + dtype_name(p.dtype) +
                               " was not compiled into the sm80 kernels (see FLASHATTN_DTYPES)");
  }
  const int d = kernel_headdim(p.headdim);
  if (d == 0 || !headdim_compiled(d)) {
    return Status::Unsupported("head dimension " + std::to_string(p.headdim) + " needs the sm80 kernel for head dim " +
                               std::to_string(d) + ", which was not compiled in (see FLASHATTN_HDIMS)");
  }
  // A key tile must lie inside one page, so that a tile's rows are a page's consecutive rows.
  if (p.paged() && p.page_size % forward_block_n(d) != 0) {
    return Status::Unsupported("the sm80 kernel reads pages of a multiple of " + std::to_string(forward_block_n(d)) +
                               " rows at head dim " + std::to_string(p.headdim) + "; page_size is " +
                               std::to_string(p.page_size));
  }
  if (p.nheads_q > 65535 || p.batch > 65535) {
    return Status::Unsupported("the sm80 CUDA kernels take at most 65535 heads and 65535 sequences; got nheads_q " +
                               std::to_string(p.nheads_q) + ", batch " + std::to_string(p.batch));
  }
  return Status::Ok();
}

template <typename Element>
cudaError_t run_forward(const KernelParams& kp, int d, cudaStream_t stream) {
  switch (d) {
#if defined(FLASHATTN_SM80_HDIM_32)
    case 32: return launch_forward<Element, 32>(kp, stream);
#endif
#if defined(FLASHATTN_SM80_HDIM_64)
    case 64: return launch_forward<Element, 64>(kp, stream);
#endif
#if defined(FLASHATTN_SM80_HDIM_96)
    case 96: return launch_forward<Element, 96>(kp, stream);
#endif
#if defined(FLASHATTN_SM80_HDIM_128)
    case 128: return launch_forward<Element, 128>(kp, stream);
#endif
#if defined(FLASHATTN_SM80_HDIM_192)
    case 192: return launch_forward<Element, 192>(kp, stream);
#endif
#if defined(FLASHATTN_SM80_HDIM_256)
    case 256: return launch_forward<Element, 256>(kp, stream);
#endif
    default: return cudaErrorNotSupported;
  }
}

template <typename Element>
cudaError_t run_backward(const KernelParams& kp, int d, cudaStream_t stream) {
  switch (d) {
#if defined(FLASHATTN_SM80_HDIM_32)
    case 32: return launch_backward<Element, 32>(kp, stream);
#endif
#if defined(FLASHATTN_SM80_HDIM_64)
    case 64: return launch_backward<Element, 64>(kp, stream);
#endif
#if defined(FLASHATTN_SM80_HDIM_96)
    case 96: return launch_backward<Element, 96>(kp, stream);
#endif
#if defined(FLASHATTN_SM80_HDIM_128)
    case 128: return launch_backward<Element, 128>(kp, stream);
#endif
#if defined(FLASHATTN_SM80_HDIM_192)
    case 192: return launch_backward<Element, 192>(kp, stream);
#endif
#if defined(FLASHATTN_SM80_HDIM_256)
    case 256: return launch_backward<Element, 256>(kp, stream);
#endif
    default: return cudaErrorNotSupported;
  }
}

// Calls fn.template operator()<Element>() for the problem's dtype (only compiled dtypes exist).
template <typename Fn>
cudaError_t with_element(DType dtype, Fn&& fn) {
#if defined(FLASHATTN_SM80_FP16)
  if (dtype == DType::kFloat16) return fn(__half{});
#endif
#if defined(FLASHATTN_SM80_BF16)
  if (dtype == DType::kBFloat16) return fn(__nv_bfloat16{});
#endif
  (void)dtype;
  (void)fn;
  return cudaErrorNotSupported;
}

Status launch_status(const char* what, cudaError_t err) {
  if (err == cudaSuccess) return Status::Ok();
  return Status::Runtime(std::string("sm80 ") + what + ": " + cudaGetErrorString(err));
}

size_t align_up(size_t bytes) { return (bytes + 255) / 256 * 256; }

}  // namespace

KernelParams make_params(const AttentionProblem& p) {
  KernelParams kp;
  kp.q = p.q;
  kp.k = p.k;
  kp.v = p.v;
  kp.out = p.out;
  kp.dout = p.dout;
  kp.dq = p.dq;
  kp.dk = p.dk;
  kp.dv = p.dv;
  kp.lse = p.lse;
  kp.lse_batch_stride = p.lse_batch_stride;
  kp.lse_head_stride = p.lse_head_stride;
  kp.lse_row_stride = p.lse_row_stride;
  kp.cu_seqlens_q = p.cu_seqlens_q;
  kp.cu_seqlens_k = p.cu_seqlens_k;
  kp.seqused_q = p.seqused_q;
  kp.seqused_k = p.seqused_k;
  kp.batch = p.batch;
  kp.seqlen_q = p.seqlen_q;
  kp.seqlen_k = p.seqlen_k;
  kp.nheads_q = p.nheads_q;
  kp.nheads_kv = p.nheads_kv;
  kp.heads_per_kv = p.heads_per_kv();
  kp.headdim = p.headdim;
  kp.headdim_chunks = p.headdim / 8;
  kp.total_q = p.total_q;
  kp.cu_rows_k = p.cu_rows_k();
  kp.score = p.score;
  kp.mask = p.mask;
  kp.scale_log2 = p.score.scale * 1.4426950408889634f;
  kp.alibi_slopes = p.alibi_slopes;
  kp.alibi_batch_stride = p.alibi_batch_stride;
  kp.score_mod = p.score.softcap > 0.0f || p.alibi_slopes != nullptr || !(p.score.scale > 0.0f);
  kp.deterministic = p.deterministic;
  kp.num_m_blocks = (p.seqlen_q + kBackwardBlockM - 1) / kBackwardBlockM;
  kp.block_table = p.block_table;
  kp.block_table_batch_stride = p.block_table_batch_stride;
  kp.page_size = p.page_size;
  kp.num_pages = p.num_pages;
  return kp;
}

}  // namespace sm80

Status sm80_supports_forward(const AttentionProblem& p) { return sm80::supports(p); }

Status sm80_supports_backward(const AttentionProblem& p) { return sm80::supports(p); }

namespace sm80 {
namespace {

// The key pieces of this forward (split_rule.h) and the key tiles each walks, into kp.
void choose_key_splits(const AttentionProblem& p, int d, KernelParams& kp) {
  SplitShape shape;
  const int64_t heads = static_cast<int64_t>(p.nheads_q) * p.batch;
  shape.tiles = (p.seqlen_q + forward_block_m(d) - 1) / forward_block_m(d) * heads;
  shape.piece_tiles = (p.seqlen_q + forward_block_m(d, true) - 1) / forward_block_m(d, true) * heads;
  shape.key_blocks = (p.seqlen_k + forward_block_n(d) - 1) / forward_block_n(d);
  shape.varlen = p.cu_seqlens_q != nullptr;
  kp.workspace_rows = p.cu_seqlens_q != nullptr ? p.total_q : static_cast<int64_t>(p.batch) * p.seqlen_q;
  shape.bytes_per_piece =
      static_cast<size_t>(p.nheads_q) * static_cast<size_t>(kp.workspace_rows) * (p.headdim + 1) * sizeof(float);
  shape.max_pieces = 65535 / std::max(1, p.batch);  // the grid's z holds (batch, piece)
  kp.num_splits = 1;
  if (p.num_splits == 1) return;
  if (p.num_splits == 0) {
    // FLASHATTN_SM80_KEY_SPLITS=0: the library cuts nothing by itself (an A/B's other side).
    if (!env_switch_on("FLASHATTN_SM80_KEY_SPLITS")) return;
    int sms = 0;
    if (cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, p.device_index) != cudaSuccess) return;
    // Two blocks of 128 threads an SM: the kernel's ~255 registers a thread hold it there.
    shape.resident_blocks = 2 * sms;
  }
  kp.num_splits = key_splits(p.num_splits, shape);
}

}  // namespace
}  // namespace sm80

Status sm80_forward(const AttentionProblem& problem) {
  Status s = sm80::supports(problem);
  if (!s.ok()) return s;
  // A GQA / MQA decode step's query heads of a KV head as its query rows (decode_heads_as_rows.h):
  // one thread block then reads that head's K and V once, not once a query head.
  // FLASHATTN_SM80_HEADS_AS_ROWS=0 keeps the heads apart (an A/B's other side).
  const AttentionProblem p =
      env_switch_on("FLASHATTN_SM80_HEADS_AS_ROWS") ? decode_heads_as_rows(problem) : problem;
  sm80::KernelParams kp = sm80::make_params(p);
  const int d = sm80::kernel_headdim(p.headdim);
  cudaStream_t stream = static_cast<cudaStream_t>(p.stream);
  if (p.seqlen_q == 0) return Status::Ok();
  sm80::choose_key_splits(p, d, kp);
  // Paged k / v run the twin, which writes pieces (one at least) that the combine merges.
  if (kp.num_splits > 1 || p.paged()) {
    // The pieces' workspace: O (splits, heads, rows, head dim) then lse (splits, heads, rows).
    const size_t lse_count = static_cast<size_t>(kp.num_splits) * p.nheads_q * static_cast<size_t>(kp.workspace_rows);
    const size_t o_bytes = sm80::align_up(lse_count * p.headdim * sizeof(float));
    char* workspace = nullptr;
    cudaError_t err = cudaMallocAsync(reinterpret_cast<void**>(&workspace), o_bytes + lse_count * sizeof(float), stream);
    if (err == cudaSuccess) {
      kp.o_pieces = reinterpret_cast<float*>(workspace);
      kp.lse_pieces = reinterpret_cast<float*>(workspace + o_bytes);
      err = sm80::with_element(p.dtype, [&](auto element) {
        const cudaError_t e = sm80::run_forward<decltype(element)>(kp, d, stream);
        return e != cudaSuccess ? e : sm80::launch_combine_pieces<decltype(element)>(kp, stream);
      });
      const cudaError_t free_err = cudaFreeAsync(workspace, stream);
      if (err == cudaSuccess) err = free_err;
      return sm80::launch_status("forward with key splits", err);
    }
    // Pieces the caller asked for need their workspace; pieces the library chose are only faster,
    // so without the memory it runs the tile whole (the failed allocation's error is not sticky:
    // cleared, so the launch's check does not report it). Not under graph capture, which a failed
    // allocation has already invalidated: there the allocation's error is the one to report.
    cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
    if (p.num_splits != 0 || p.paged() || err != cudaErrorMemoryAllocation ||
        cudaStreamIsCapturing(stream, &capture) != cudaSuccess || capture != cudaStreamCaptureStatusNone) {
      return sm80::launch_status("forward key-split workspace allocation", err);
    }
    (void)cudaGetLastError();
    kp.num_splits = 1;
  }
  const cudaError_t err = sm80::with_element(p.dtype, [&](auto element) {
    return sm80::run_forward<decltype(element)>(kp, d, stream);
  });
  return sm80::launch_status("forward", err);
}

namespace sm80 {
namespace {

// The backward's workspace (fp32 dQ accumulator, D = rowsum(dO * O), the deterministic-mode
// semaphores) in kp for the duration of run(), which returns a cudaError_t or a Status.
template <typename Run>
Status with_workspace(const AttentionProblem& p, KernelParams& kp, Run&& run) {
  cudaStream_t stream = static_cast<cudaStream_t>(p.stream);
  const size_t rows = static_cast<size_t>(p.nheads_q) * static_cast<size_t>(p.total_q);
  const size_t dq_bytes = align_up(rows * p.headdim * sizeof(float));
  const size_t dsum_bytes = align_up(rows * sizeof(float));
  const size_t sem_count = p.deterministic ? static_cast<size_t>(p.batch) * p.nheads_q * kp.num_m_blocks : 0;
  const size_t sem_bytes = align_up(sem_count * sizeof(int));
  const size_t total = dq_bytes + dsum_bytes + sem_bytes;
  char* workspace = nullptr;
  if (total > 0) {
    cudaError_t err = cudaMallocAsync(reinterpret_cast<void**>(&workspace), total, stream);
    if (err != cudaSuccess) return launch_status("backward workspace allocation", err);
  }
  kp.dq_accum = reinterpret_cast<float*>(workspace);
  kp.dsum = reinterpret_cast<float*>(workspace + dq_bytes);
  kp.dq_semaphore = sem_count ? reinterpret_cast<int*>(workspace + dq_bytes + dsum_bytes) : nullptr;

  cudaError_t err = cudaSuccess;
  if (sem_count) err = cudaMemsetAsync(kp.dq_semaphore, 0, sem_count * sizeof(int), stream);
  Status s = err == cudaSuccess ? run() : launch_status("backward", err);
  if (workspace != nullptr) {
    const cudaError_t free_err = cudaFreeAsync(workspace, stream);
    if (s.ok() && free_err != cudaSuccess) s = launch_status("backward workspace release", free_err);
  }
  return s;
}

}  // namespace
}  // namespace sm80

Status sm80_backward(const AttentionProblem& p) {
  Status s = sm80::supports(p);
  if (!s.ok()) return s;
  sm80::KernelParams kp = sm80::make_params(p);
  const int d = sm80::kernel_headdim(p.headdim);
  cudaStream_t stream = static_cast<cudaStream_t>(p.stream);
  return sm80::with_workspace(p, kp, [&] {
    return sm80::launch_status("backward", sm80::with_element(p.dtype, [&](auto element) {
      return sm80::run_backward<decltype(element)>(kp, d, stream);
    }));
  });
}

Status sm80_backward_around(const AttentionProblem& p, BackwardMain main, bool dq_chunks_rotated) {
  Status s = sm80::supports(p);
  if (!s.ok()) return s;
  if (p.deterministic) return Status::Unsupported("sm80_backward_around: no deterministic mode");
  sm80::KernelParams kp = sm80::make_params(p);
  kp.dq_blocked = false;  // the other main kernel adds into the row-major layout
  kp.dq_chunks_rotated = dq_chunks_rotated;
  cudaStream_t stream = static_cast<cudaStream_t>(p.stream);
  return sm80::with_workspace(p, kp, [&] {
    cudaError_t err = sm80::with_element(p.dtype, [&](auto element) {
      return sm80::launch_prepare<decltype(element)>(kp, stream);
    });
    if (err != cudaSuccess) return sm80::launch_status("backward preparation", err);
    Status main_status = main(p, kp.dq_accum, kp.dsum);
    if (!main_status.ok()) return main_status;
    err = sm80::with_element(p.dtype, [&](auto element) {
      return sm80::launch_convert_dq<decltype(element)>(kp, stream);
    });
    return sm80::launch_status("backward dQ conversion", err);
  });
}

}  // namespace flashattn
