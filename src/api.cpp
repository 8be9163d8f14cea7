// The one place where arguments are validated and a backend is chosen. Every message names the
// argument, the value seen and what is allowed.
#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <new>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "backends.h"
#include "overlap.h"
#include "paged_rows.h"
#include "flashattn/flashattn.h"

namespace flashattn {
namespace {

// Messages are built with std::to_string, not iostreams: inside a Python extension that links
// its own C++ runtime, a stream's locale can belong to another runtime and crash on first use.
std::string dims_str(std::initializer_list<int64_t> dims) {
  std::string s = "(";
  int d = 0;
  for (int64_t v : dims) s += (d++ ? ", " : "") + std::to_string(v);
  return s + ")";
}

std::string shape_str(const TensorView& t) {
  std::string s = "(";
  for (int d = 0; d < t.ndim; ++d) s += (d ? ", " : "") + std::to_string(t.shape[d]);
  return s + ")";
}

// std::to_string prints a float as %f: a denormal softcap or tiny scale would read as 0.000000.
std::string float_str(float x) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%g", static_cast<double>(x));
  return buf;
}

std::string strides_str(const TensorView& t) {
  std::string s = "(";
  for (int d = 0; d < t.ndim; ++d) s += (d ? ", " : "") + std::to_string(t.stride[d]);
  return s + ")";
}

const char* device_name(Device d) {
  switch (d) {
    case Device::kCPU: return "cpu";
    case Device::kCUDA: return "cuda";
  }
  return "an unknown device";
}

Status invalid(const char* arg, const std::string& what) {
  return Status::Invalid(std::string("argument '") + arg + "': " + what);
}

bool is_float_dtype(DType d) {
  return d == DType::kFloat32 || d == DType::kFloat16 || d == DType::kBFloat16;
}

// The fields a view's other checks (and their messages) read: ndim indexes shape and stride,
// dtype sizes every byte count, device picks the memory. Any view passed, given or not: an
// optional one with a negative ndim would otherwise pass for absent.
Status check_view_fields(const char* arg, const TensorView& t) {
  if (t.ndim < 0 || t.ndim > TensorView::kMaxDims) {
    return invalid(arg, "has " + std::to_string(t.ndim) + " dimensions; expected 0 (absent) to " +
                            std::to_string(TensorView::kMaxDims));
  }
  if (!t.defined()) return Status::Ok();
  if (dtype_size(t.dtype) == 0) {
    return invalid(arg, "dtype " + std::to_string(static_cast<int>(t.dtype)) + " is not a DType");
  }
  if (t.device != Device::kCPU && t.device != Device::kCUDA) {
    return invalid(arg, "device " + std::to_string(static_cast<int>(t.device)) + " is not a Device (cpu or cuda)");
  }
  return Status::Ok();
}

// Structural checks that hold for every tensor argument.
Status check_tensor(const char* arg, const TensorView& t, int expected_ndim) {
  Status s = check_view_fields(arg, t);
  if (!s.ok()) return s;
  if (!t.defined()) return invalid(arg, "is missing (ndim 0)");
  if (t.ndim != expected_ndim) {
    return invalid(arg, "has " + std::to_string(t.ndim) + " dimensions " + shape_str(t) + "; expected " +
                            std::to_string(expected_ndim));
  }
  for (int d = 0; d < t.ndim; ++d) {
    if (t.shape[d] < 0) return invalid(arg, "has a negative size in shape " + shape_str(t));
  }
  if (t.numel() == 0) return Status::Ok();  // empty tensors are valid no-ops; data may be null
  // A count past 64 bits is refused by name: numel() saturates there (to INT64_MAX) rather than
  // wrap to 0, which would pass for an empty tensor and skip every check below.
  if (t.numel() == INT64_MAX) {
    return invalid(arg, "shape " + shape_str(t) + " has more elements than 64 bits count");
  }
  if (t.data == nullptr) return invalid(arg, "data pointer is null for shape " + shape_str(t));
  if (t.stride[t.ndim - 1] != 1 && t.shape[t.ndim - 1] != 1) {
    return invalid(arg, "last-dimension stride is " + std::to_string(t.stride[t.ndim - 1]) +
                            "; expected 1 (the last dimension must be contiguous)");
  }
  for (int d = 0; d < t.ndim; ++d) {
    if (t.stride[d] < 0) return invalid(arg, "stride " + std::to_string(t.stride[d]) + " of dimension " +
                                                 std::to_string(d) + " is negative; expected >= 0");
  }
  // The backends address elements as 64-bit offsets in bytes: a span past that range wraps onto
  // other elements (or other memory) instead of reaching the last one.
  const int64_t size = dtype_size(t.dtype);
  int64_t span = size;  // bytes from the first element to one past the last
  for (int d = 0; d < t.ndim; ++d) {
    int64_t step = 0;
    if (__builtin_mul_overflow(t.stride[d], t.shape[d] - 1, &step) || __builtin_mul_overflow(step, size, &step) ||
        __builtin_add_overflow(span, step, &span)) {
      return invalid(arg, "strides " + strides_str(t) + " over shape " + shape_str(t) +
                              " span more bytes than 64-bit offsets reach");
    }
  }
  const auto addr = reinterpret_cast<uintptr_t>(t.data);
  if (addr > UINTPTR_MAX - static_cast<uintptr_t>(span)) {
    return invalid(arg, "strides " + strides_str(t) + " over shape " + shape_str(t) + " run past the end of the address space");
  }
  if (addr % size != 0) {
    return invalid(arg, "data pointer is not aligned to its element size " + std::to_string(size) + " bytes");
  }
  return Status::Ok();
}

// The GPU kernels move 16 bytes at a time along rows.
Status check_vector_alignment(const char* arg, const TensorView& t) {
  if (t.numel() == 0) return Status::Ok();
  const auto addr = reinterpret_cast<uintptr_t>(t.data);
  if (addr % 16 != 0) {
    char where[32];
    std::snprintf(where, sizeof(where), "%p", t.data);
    return invalid(arg, std::string("data pointer ") + where + " is not aligned to 16 bytes, which the CUDA backend requires");
  }
  for (int d = 0; d + 1 < t.ndim; ++d) {
    if (t.shape[d] > 1 && (t.stride[d] * dtype_size(t.dtype)) % 16 != 0) {
      return invalid(arg, "stride " + std::to_string(t.stride[d]) + " of dimension " + std::to_string(d) +
                              " is not a multiple of 16 bytes, which the CUDA backend requires");
    }
  }
  return Status::Ok();
}

// An output needs its own address for every element: where two share one (a zero stride, as
// torch's expand gives, or strides too small for the sizes inside them), which write lands
// there depends on the backend's order, so the result would be neither element. The rule, taken
// one dimension at a time from the smallest stride up: each stride must step past everything
// the smaller ones span. It is sufficient, not necessary (strides that interleave blocks without
// touching are refused too), and no layout a framework allocates breaks it. (Inputs may share
// memory: reading one element twice is well defined.)
Status check_distinct_elements(const char* arg, const TensorView& t) {
  if (t.numel() == 0) return Status::Ok();
  int order[TensorView::kMaxDims];
  const int n = dims_by_stride(t, order);
  int64_t span = 1;  // elements from the first to one past the last of the dimensions so far
  for (int i = 0; i < n; ++i) {
    const int d = order[i];
    int64_t reach = 0;
    if (t.stride[d] < span || __builtin_mul_overflow(t.stride[d], t.shape[d] - 1, &reach) ||
        __builtin_add_overflow(span, reach, &span)) {
      return invalid(arg, "may have elements that share memory (shape " + shape_str(t) + ", strides " +
                              strides_str(t) + "); an output needs each stride, from the smallest up, to step past "
                              "what the smaller ones span");
    }
  }
  return Status::Ok();
}

Status check_same_shape(const char* arg, const TensorView& t, const char* ref_arg, const TensorView& ref) {
  bool same = t.ndim == ref.ndim;
  for (int d = 0; same && d < t.ndim; ++d) same = t.shape[d] == ref.shape[d];
  if (!same) {
    return invalid(arg, "shape " + shape_str(t) + " does not match " + ref_arg + " shape " + shape_str(ref));
  }
  return Status::Ok();
}

Status check_dtype(const char* arg, const TensorView& t, DType expected, const char* why) {
  if (t.dtype != expected) {
    return invalid(arg, std::string("dtype is ") + dtype_name(t.dtype) + "; expected " + dtype_name(expected) +
                            " (" + why + ")");
  }
  return Status::Ok();
}

struct NamedTensor {
  const char* name;
  const TensorView* t;
};

// What every call reads: q, k, v and the tensors among the params.
std::vector<NamedTensor> read_tensors(const TensorView& q, const TensorView& k, const TensorView& v,
                                      const AttentionParams& params) {
  return {{"q", &q},
          {"k", &k},
          {"v", &v},
          {"alibi_slopes", &params.alibi_slopes},
          {"cu_seqlens_q", &params.cu_seqlens_q},
          {"cu_seqlens_k", &params.cu_seqlens_k},
          {"seqused_q", &params.seqused_q},
          {"seqused_k", &params.seqused_k},
          {"block_table", &params.block_table}};
}

// No output may share memory with an input or with another output (overlap.h, provably_overlap:
// what can be proven from the two spans, which covers an output passed as an input or inside one).
Status check_outputs_apart(const std::vector<NamedTensor>& outputs, const std::vector<NamedTensor>& inputs) {
  for (size_t i = 0; i < outputs.size(); ++i) {
    const NamedTensor& o = outputs[i];
    for (const NamedTensor& in : inputs) {
      if (provably_overlap(*o.t, *in.t)) {
        return invalid(o.name, std::string("shares memory with input '") + in.name +
                                   "'; an output needs memory of its own");
      }
    }
    for (size_t j = 0; j < i; ++j) {
      if (provably_overlap(*o.t, *outputs[j].t)) {
        return invalid(o.name, std::string("shares memory with output '") + outputs[j].name +
                                   "'; each output needs memory of its own");
      }
    }
  }
  return Status::Ok();
}

Status check_devices(const std::vector<NamedTensor>& tensors) {
  const NamedTensor& first = tensors.front();
  for (const NamedTensor& nt : tensors) {
    if (!nt.t->defined()) continue;
    if (nt.t->device != first.t->device || nt.t->device_index != first.t->device_index) {
      return invalid(nt.name, std::string("is on ") + device_name(nt.t->device) + ":" +
                                  std::to_string(nt.t->device_index) + " but '" + first.name + "' is on " +
                                  device_name(first.t->device) + ":" + std::to_string(first.t->device_index) +
                                  "; all tensors must be on one device");
    }
  }
  return Status::Ok();
}

// For the CUDA backend the tags of the views are checked against what the driver knows, so that
// a host pointer tagged as device memory is refused instead of faulting in a kernel.
Status check_device_tags(const std::vector<NamedTensor>& tensors) {
  for (const NamedTensor& nt : tensors) {
    if (!nt.t->defined() || nt.t->numel() == 0) continue;
    Device actual;
    int index = 0;
    Status s = cuda_pointer_device(nt.t->data, &actual, &index);
    if (!s.ok()) return s;
    if (actual != nt.t->device || (actual == Device::kCUDA && index != nt.t->device_index)) {
      return invalid(nt.name, std::string("is tagged ") + device_name(nt.t->device) + ":" +
                                  std::to_string(nt.t->device_index) + " but its memory belongs to " +
                                  device_name(actual) + ":" + std::to_string(index));
    }
  }
  return Status::Ok();
}

// Host copy of a small int32 vector (cu_seqlens, seqused) that the checks read before any backend
// runs; where its memory is not where its tag says, the read is refused instead of faulting.
Status read_int32_vector(const char* arg, const TensorView& t, void* stream, std::vector<int32_t>* out) {
  out->resize(static_cast<size_t>(t.shape[0]));
  const size_t bytes = out->size() * sizeof(int32_t);
  if (cuda_backend_compiled()) {
    Status s = check_device_tags({NamedTensor{arg, &t}});
    if (!s.ok()) return s;
  }
  if (t.device == Device::kCPU) {
    for (size_t i = 0; i < out->size(); ++i) (*out)[i] = static_cast<const int32_t*>(t.data)[i * t.stride[0]];
    return Status::Ok();
  }
  if (t.stride[0] != 1) return invalid(arg, "must be contiguous on the GPU; stride is " + std::to_string(t.stride[0]));
  // On the caller's stream: the prefix sums may have been written there a moment ago.
  return cuda_copy_to_host(t.data, out->data(), bytes, stream);
}

Status check_cu_seqlens(const char* arg, const TensorView& t, void* stream, int batch, int64_t total_rows,
                        int* max_len, std::vector<int32_t>* host_copy) {
  std::vector<int32_t>& cu = *host_copy;
  Status s = read_int32_vector(arg, t, stream, &cu);
  if (!s.ok()) return s;
  if (cu[0] < 0) return invalid(arg, "entry 0 is " + std::to_string(cu[0]) + "; expected >= 0");
  int longest = 0;
  for (int b = 0; b < batch; ++b) {
    if (cu[b + 1] < cu[b]) {
      return invalid(arg, "is not non-decreasing: entry " + std::to_string(b + 1) + " is " +
                              std::to_string(cu[b + 1]) + " after " + std::to_string(cu[b]));
    }
    longest = std::max(longest, cu[b + 1] - cu[b]);
  }
  if (cu[batch] > total_rows) {
    return invalid(arg, "last entry " + std::to_string(cu[batch]) + " is past the tensor, which has " +
                            std::to_string(total_rows) + " rows");
  }
  *max_len = longest;
  return Status::Ok();
}

// seqused (optional): int32 (batch), unit stride (check_tensor), each entry in [0, that sequence's span]: the
// cu_seqlens difference (`cu`, the host copy; empty when it could not be read) or the fixed seqlen.
// Not read back where `trusted` (device_entries_trusted).
Status check_seqused(const char* arg, const TensorView& t, void* stream, bool trusted, const AttentionProblem& p,
                     const std::vector<int32_t>& cu, int fixed_span, const int32_t** out,
                     std::vector<int32_t>* host_used = nullptr) {
  *out = nullptr;
  if (!t.defined()) return Status::Ok();
  Status s = check_tensor(arg, t, 1);
  if (!s.ok()) return s;
  if (!(s = check_dtype(arg, t, DType::kInt32, "one used length per sequence")).ok()) return s;
  if (t.shape[0] != p.batch) {
    return invalid(arg, "has " + std::to_string(t.shape[0]) + " entries; expected one per sequence (" +
                            std::to_string(p.batch) + ")");
  }
  *out = static_cast<const int32_t*>(t.data);
  if (p.batch == 0 || trusted) return Status::Ok();
  std::vector<int32_t> local;
  std::vector<int32_t>& used = host_used != nullptr ? *host_used : local;
  if (!(s = read_int32_vector(arg, t, stream, &used)).ok()) return s;
  for (int b = 0; b < p.batch; ++b) {
    const int32_t u = used[static_cast<size_t>(b)];
    if (u < 0) return invalid(arg, "entry " + std::to_string(b) + " is " + std::to_string(u) + "; expected >= 0");
    if (p.varlen() && cu.empty()) continue;
    const int64_t span = p.varlen() ? int64_t{cu[static_cast<size_t>(b) + 1]} - cu[static_cast<size_t>(b)] : fixed_span;
    if (u > span) {
      return invalid(arg, "entry " + std::to_string(b) + " is " + std::to_string(u) + " but sequence " +
                              std::to_string(b) + " has " + std::to_string(span) + " rows");
    }
  }
  return Status::Ok();
}

// block_table (AttentionParams): int32 (batch, max_pages), rows of unit stride; the entries each
// sequence's keys reach (its seqused_k, from `used`, else its cu_seqlens_k length, from `cu`, else
// every page) name pages of k. Read back from the GPU unless `trusted` (device_entries_trusted).
Status check_block_table(const TensorView& t, void* stream, bool trusted, const AttentionProblem& p,
                         const std::vector<int32_t>& cu, const std::vector<int32_t>& used) {
  if (trusted) return Status::Ok();
  if (p.batch == 0 || t.shape[1] == 0) return Status::Ok();
  // Rows are contiguous (check_tensor), so entry j of row b is at b * row_stride + j: of the
  // caller's memory on the host, read in place, or of a copy of the GPU's.
  const int32_t* table = static_cast<const int32_t*>(t.data);
  int64_t row_stride = t.stride[0];
  std::vector<int32_t> copy;
  Status s;
  // A table tagged as host memory is read in place: where it is not, refused instead of faulting
  // (a GPU table's reads check their own tags).
  if (t.device == Device::kCPU && cuda_backend_compiled() &&
      !(s = check_device_tags({NamedTensor{"block_table", &t}})).ok()) {
    return s;
  }
  if (t.device == Device::kCUDA) {
    // The span from the first entry to the last in one transfer: a table sliced from a wider one
    // (rows further apart than their length) lies inside its parent's memory, gaps included.
    // Where the gaps would outweigh the entries (a huge row stride), row by row instead: the
    // span is then no size to copy.
    const int64_t entries = t.shape[0] * t.shape[1];  // fits: check_tensor counted them
    const int64_t span = (t.shape[0] - 1) * row_stride + t.shape[1];  // fits: check_tensor bounded it
    TensorView piece = t;
    piece.ndim = 1;
    piece.stride[0] = 1;
    if (span - entries <= std::max<int64_t>(entries, int64_t{1} << 20)) {
      piece.shape[0] = span;
      if (!(s = read_int32_vector("block_table", piece, stream, &copy)).ok()) return s;
    } else {
      std::vector<int32_t> row;
      piece.shape[0] = t.shape[1];
      for (int64_t b = 0; b < t.shape[0]; ++b) {
        piece.data = static_cast<int32_t*>(t.data) + b * row_stride;
        if (!(s = read_int32_vector("block_table", piece, stream, &row)).ok()) return s;
        copy.insert(copy.end(), row.begin(), row.end());
      }
      row_stride = t.shape[1];
    }
    table = copy.data();
  }
  for (int b = 0; b < p.batch; ++b) {
    const size_t i = static_cast<size_t>(b);
    const int64_t keys = !used.empty() ? used[i] : !cu.empty() ? int64_t{cu[i + 1]} - cu[i] : p.seqlen_k;
    const int64_t pages = (keys + p.page_size - 1) / p.page_size;
    for (int64_t j = 0; j < pages; ++j) {
      const int32_t page = table[b * row_stride + j];
      if (page < 0 || page >= p.num_pages) {
        return invalid("block_table", "row " + std::to_string(b) + " names page " + std::to_string(page) +
                                          " at entry " + std::to_string(j) + "; k has " + std::to_string(p.num_pages) +
                                          " pages (entries up to the sequence's last key must name one)");
      }
    }
  }
  return Status::Ok();
}

// Whether seqused or block_table entries t go unread (no synchronisation): on the GPU under CUDA
// graph capture, where device memory cannot be read back, or where the caller has checked them
// (AttentionParams::indices_checked). Entries on the CPU are always checked: reading them is free.
bool device_entries_trusted(const TensorView& t, const AttentionParams& params) {
  return t.device == Device::kCUDA && (params.indices_checked || cuda_stream_capturing(params.stream));
}

void set_operand(Operand* op, const TensorView& t, bool varlen) {
  op->data = t.data;
  if (varlen) {
    op->batch_stride = 0;
    op->row_stride = t.stride[0];
    op->head_stride = t.stride[1];
  } else {
    op->batch_stride = t.stride[0];
    op->row_stride = t.stride[1];
    op->head_stride = t.stride[2];
  }
}

// block_table's shape and dtype (one row per sequence of p, batch set), and p's paging from it and
// the pages k; a varlen sequence (p's seqlen_k its longest: from cu_seqlens_k, or under graph
// capture the caller's max_seqlen_k, `longest_given`) must fit in the table's reach.
Status set_block_table(const TensorView& table, const TensorView& k, AttentionProblem* p, bool longest_given = false) {
  Status s;
  if (!(s = check_tensor("block_table", table, 2)).ok()) return s;
  if (!(s = check_dtype("block_table", table, DType::kInt32, "page indices")).ok()) return s;
  if (table.shape[0] != p->batch) {
    return invalid("block_table", "has " + std::to_string(table.shape[0]) + " rows; expected one per sequence of q (" +
                                      std::to_string(p->batch) + ")");
  }
  const int64_t page_size = k.shape[1];
  if (page_size < 1) return invalid("k", "pages of 0 rows (shape " + shape_str(k) + "); expected page_size >= 1");
  int64_t keys = 0;
  if (__builtin_mul_overflow(table.shape[1], page_size, &keys) || keys > INT32_MAX) {
    return invalid("block_table", "reaches more than 2^31 - 1 keys a sequence (" + std::to_string(table.shape[1]) +
                                      " pages of " + std::to_string(page_size) + ")");
  }
  p->page_size = static_cast<int>(page_size);
  p->num_pages = static_cast<int>(k.shape[0]);
  p->pages_per_sequence = static_cast<int>(table.shape[1]);
  p->block_table = static_cast<const int32_t*>(table.data);
  p->block_table_batch_stride = table.stride[0];
  if (p->varlen() && p->seqlen_k > p->table_keys()) {
    const std::string reach = "block_table reaches " + std::to_string(p->table_keys()) + " (" +
                              std::to_string(table.shape[1]) + " pages of " + std::to_string(page_size) + ")";
    if (longest_given) return invalid("max_seqlen_k", "is " + std::to_string(p->seqlen_k) + "; " + reach);
    return invalid("cu_seqlens_k", "holds a sequence of " + std::to_string(p->seqlen_k) + " keys; " + reach);
  }
  return Status::Ok();
}

// Checks shared by forward and backward; fills the problem's shape, options and q/k/v/out.
Status build_problem(const TensorView& q, const TensorView& k, const TensorView& v, const TensorView& out,
                     const TensorView& lse, bool lse_required, const AttentionParams& params,
                     AttentionProblem* p) {
  const bool varlen = params.cu_seqlens_q.defined() || params.cu_seqlens_k.defined();
  if (varlen && !(params.cu_seqlens_q.defined() && params.cu_seqlens_k.defined())) {
    return invalid(params.cu_seqlens_q.defined() ? "cu_seqlens_k" : "cu_seqlens_q",
                   "is missing; variable length needs both cu_seqlens_q and cu_seqlens_k");
  }
  const bool paged = params.block_table.defined();
  // q and out: (batch, seqlen, heads, dim), or rows (total, heads, dim) with cu_seqlens; k and v
  // as q, or pages (num_pages, page_size, heads, dim) with a block_table either way.
  const int nd = varlen ? 3 : 4, kv_nd = paged ? 4 : nd;
  std::vector<int32_t> host_cu_q, host_cu_k;  // read back for the checks; empty under graph capture
  Status s;
  if (!(s = check_tensor("q", q, nd)).ok()) return s;
  if (!(s = check_tensor("k", k, kv_nd)).ok()) return s;
  if (!(s = check_tensor("v", v, kv_nd)).ok()) return s;
  if (!(s = check_tensor("out", out, nd)).ok()) return s;

  if (!is_float_dtype(q.dtype)) {
    return invalid("q", std::string("dtype is ") + dtype_name(q.dtype) + "; expected float32, float16 or bfloat16");
  }
  if (!(s = check_dtype("k", k, q.dtype, "must match q")).ok()) return s;
  if (!(s = check_dtype("v", v, q.dtype, "must match q")).ok()) return s;
  if (!(s = check_dtype("out", out, q.dtype, "must match q")).ok()) return s;

  const int hd = nd - 1, hq = nd - 2;
  const int64_t headdim = q.shape[hd];
  const int64_t kv_headdim = k.shape[kv_nd - 1];
  if (headdim % 8 != 0 || headdim < 8 || headdim > 256) {
    return invalid("q", "head dimension " + std::to_string(headdim) + " is not allowed; expected a multiple of 8 in [8, 256]");
  }
  if (kv_headdim != headdim) return invalid("k", "head dimension " + std::to_string(kv_headdim) + " does not match q's " + std::to_string(headdim));
  if (!(s = check_same_shape("v", v, "k", k)).ok()) return s;
  if (!(s = check_same_shape("out", out, "q", q)).ok()) return s;
  const int64_t nheads_q = q.shape[hq], nheads_kv = k.shape[kv_nd - 2];
  // Batch, heads and sequence lengths are int inside the backends (only row totals are 64-bit:
  // dimension 0 of varlen q, and of varlen k unless it is pages, whose count is an int).
  for (const NamedTensor& nt : {NamedTensor{"q", &q}, NamedTensor{"k", &k}}) {
    const bool is_q = nt.t == &q;
    const bool rows_first = varlen && (is_q || !paged);
    for (int d = 0; d < (is_q ? nd : kv_nd) - 1; ++d) {
      if (nt.t->shape[d] > INT32_MAX && !(rows_first && d == 0)) {
        return invalid(nt.name, "dimension " + std::to_string(d) + " is " + std::to_string(nt.t->shape[d]) +
                                    "; expected at most 2^31 - 1");
      }
    }
  }
  if (nheads_q < 1) return invalid("q", "number of heads is " + std::to_string(nheads_q) + "; expected >= 1");
  if (nheads_kv < 1) return invalid("k", "number of heads is " + std::to_string(nheads_kv) + "; expected >= 1");
  if (nheads_q % nheads_kv != 0) {
    return invalid("k", "number of heads " + std::to_string(nheads_kv) + " does not divide q's " +
                            std::to_string(nheads_q) + " (GQA/MQA needs nheads_q to be a multiple of nheads_kv)");
  }
  if (!varlen && !paged && k.shape[0] != q.shape[0]) {
    return invalid("k", "batch " + std::to_string(k.shape[0]) + " does not match q's batch " + std::to_string(q.shape[0]));
  }

  if (params.window_left < -1) return invalid("window_left", "is " + std::to_string(params.window_left) + "; expected -1 (unbounded) or >= 0");
  if (params.window_right < -1) return invalid("window_right", "is " + std::to_string(params.window_right) + "; expected -1 (unbounded) or >= 0");
  // The kernels divide by softcap: below the smallest normal float its reciprocal overflows, and
  // the backward's gradients came out NaN.
  if (!(params.softcap == 0.0f || params.softcap >= FLT_MIN) || std::isinf(params.softcap)) {
    return invalid("softcap", "is " + float_str(params.softcap) + "; expected 0 (off) or a finite value >= " +
                                  float_str(FLT_MIN) + " (the smallest normal float)");
  }
  if (!std::isfinite(params.softmax_scale)) {
    return invalid("softmax_scale", "is " + std::to_string(params.softmax_scale) + "; expected a finite value (0 means 1/sqrt(headdim))");
  }
  if (params.num_threads < 0) return invalid("num_threads", "is " + std::to_string(params.num_threads) + "; expected >= 0 (0 means all)");
  if (params.num_splits < 0 || params.num_splits > kMaxNumSplits) {
    return invalid("num_splits", "is " + std::to_string(params.num_splits) + "; expected 0 (the library chooses) to " +
                                     std::to_string(kMaxNumSplits));
  }

  std::vector<NamedTensor> tensors = {{"q", &q}, {"k", &k}, {"v", &v}, {"out", &out}};
  if (lse.defined()) tensors.push_back({"lse", &lse});
  if (params.alibi_slopes.defined()) tensors.push_back({"alibi_slopes", &params.alibi_slopes});
  if (varlen) {
    tensors.push_back({"cu_seqlens_q", &params.cu_seqlens_q});
    tensors.push_back({"cu_seqlens_k", &params.cu_seqlens_k});
  }
  if (params.seqused_q.defined()) tensors.push_back({"seqused_q", &params.seqused_q});
  if (params.seqused_k.defined()) tensors.push_back({"seqused_k", &params.seqused_k});
  if (paged) tensors.push_back({"block_table", &params.block_table});
  if (!(s = check_devices(tensors)).ok()) return s;

  p->dtype = q.dtype;
  p->device = q.device;
  p->device_index = q.device_index;
  p->nheads_q = static_cast<int>(nheads_q);
  p->nheads_kv = static_cast<int>(nheads_kv);
  p->headdim = static_cast<int>(headdim);

  if (varlen) {
    const TensorView& cq = params.cu_seqlens_q;
    const TensorView& ck = params.cu_seqlens_k;
    if (!(s = check_tensor("cu_seqlens_q", cq, 1)).ok()) return s;
    if (!(s = check_tensor("cu_seqlens_k", ck, 1)).ok()) return s;
    if (!(s = check_dtype("cu_seqlens_q", cq, DType::kInt32, "prefix sums of sequence lengths")).ok()) return s;
    if (!(s = check_dtype("cu_seqlens_k", ck, DType::kInt32, "prefix sums of sequence lengths")).ok()) return s;
    if (cq.shape[0] < 1) return invalid("cu_seqlens_q", "has 0 entries; expected batch + 1 >= 1");
    if (cq.shape[0] - 1 > INT32_MAX) {
      return invalid("cu_seqlens_q", "has " + std::to_string(cq.shape[0]) + " entries; expected at most 2^31");
    }
    if (ck.shape[0] != cq.shape[0]) {
      return invalid("cu_seqlens_k", "has " + std::to_string(ck.shape[0]) + " entries but cu_seqlens_q has " +
                                         std::to_string(cq.shape[0]) + "; both hold batch + 1");
    }
    if (params.max_seqlen_q < 0) return invalid("max_seqlen_q", "is " + std::to_string(params.max_seqlen_q) + "; expected >= 0");
    if (params.max_seqlen_k < 0) return invalid("max_seqlen_k", "is " + std::to_string(params.max_seqlen_k) + "; expected >= 0");
    p->batch = static_cast<int>(cq.shape[0] - 1);
    p->total_q = q.shape[0];
    // Paged: cu_seqlens_k only gives each sequence's length (its keys are rows 0.. of its pages),
    // so no row total bounds its last entry.
    p->total_k = paged ? k.shape[0] * k.shape[1] : k.shape[0];
    const int64_t cu_k_bound = paged ? INT64_MAX : p->total_k;
    int longest_q = 0, longest_k = 0;
    if (cq.device == Device::kCUDA && cuda_stream_capturing(params.stream)) {
      // A graph being captured cannot read device memory back, so the caller's bounds are
      // trusted there (as flash_attn does everywhere); they must then be given.
      if (params.max_seqlen_q <= 0 || params.max_seqlen_k <= 0) {
        return invalid(params.max_seqlen_q <= 0 ? "max_seqlen_q" : "max_seqlen_k",
                       "is 0; it must be given (> 0) while a CUDA graph is being captured");
      }
      longest_q = params.max_seqlen_q;
      longest_k = params.max_seqlen_k;
    } else {
      if (!(s = check_cu_seqlens("cu_seqlens_q", cq, params.stream, p->batch, p->total_q, &longest_q, &host_cu_q)).ok()) return s;
      if (!(s = check_cu_seqlens("cu_seqlens_k", ck, params.stream, p->batch, cu_k_bound, &longest_k, &host_cu_k)).ok()) return s;
    }
    if (params.max_seqlen_q > 0 && params.max_seqlen_q < longest_q) {
      return invalid("max_seqlen_q", "is " + std::to_string(params.max_seqlen_q) + " but cu_seqlens_q holds a sequence of " +
                                         std::to_string(longest_q) + "; expected >= the longest (or 0 to derive it)");
    }
    if (params.max_seqlen_k > 0 && params.max_seqlen_k < longest_k) {
      return invalid("max_seqlen_k", "is " + std::to_string(params.max_seqlen_k) + " but cu_seqlens_k holds a sequence of " +
                                         std::to_string(longest_k) + "; expected >= the longest (or 0 to derive it)");
    }
    p->seqlen_q = longest_q;
    p->seqlen_k = longest_k;
    p->cu_seqlens_q = static_cast<const int32_t*>(cq.data);
    p->cu_seqlens_k = static_cast<const int32_t*>(ck.data);
    // Unknown under graph capture (cu_seqlens not read): assume such rows, as padded serving
    // buffers have them.
    p->kv_rows_past_last_sequence = !paged && (host_cu_k.empty() || p->total_k > host_cu_k[static_cast<size_t>(p->batch)]);
    p->q_rows_past_last_sequence = host_cu_q.empty() || p->total_q > host_cu_q[static_cast<size_t>(p->batch)];
    if (paged && !(s = set_block_table(params.block_table, k, p, host_cu_k.empty())).ok()) return s;
  } else if (paged) {
    p->batch = static_cast<int>(q.shape[0]);
    p->seqlen_q = static_cast<int>(q.shape[1]);
    p->total_q = q.shape[0] * q.shape[1];
    p->total_k = k.shape[0] * k.shape[1];
    if (!(s = set_block_table(params.block_table, k, p)).ok()) return s;
    p->seqlen_k = p->table_keys();
  } else {
    p->batch = static_cast<int>(q.shape[0]);
    p->seqlen_q = static_cast<int>(q.shape[1]);
    p->seqlen_k = static_cast<int>(k.shape[1]);
    p->total_q = q.shape[0] * q.shape[1];
    p->total_k = k.shape[0] * k.shape[1];
  }
  std::vector<int32_t> host_used_k;
  if (!(s = check_seqused("seqused_q", params.seqused_q, params.stream, device_entries_trusted(params.seqused_q, params),
                          *p, host_cu_q, p->seqlen_q, &p->seqused_q)).ok()) return s;
  if (!(s = check_seqused("seqused_k", params.seqused_k, params.stream, device_entries_trusted(params.seqused_k, params),
                          *p, host_cu_k, p->seqlen_k, &p->seqused_k,
                          &host_used_k)).ok()) return s;
  if (paged && !(s = check_block_table(params.block_table, params.stream,
                                       device_entries_trusted(params.block_table, params), *p, host_cu_k,
                                       host_used_k)).ok()) {
    return s;
  }
  set_operand(&p->q, q, varlen);
  set_operand(&p->k, k, varlen && !paged);
  set_operand(&p->v, v, varlen && !paged);
  set_operand(&p->out, out, varlen);

  if (lse.defined() || lse_required) {
    const auto lse_shape = varlen ? dims_str({nheads_q, p->total_q}) : dims_str({p->batch, nheads_q, p->seqlen_q});
    if (!lse.defined()) return invalid("lse", "is missing; expected float32 " + lse_shape);
    if (!(s = check_tensor("lse", lse, varlen ? 2 : 3)).ok()) return s;
    if (!(s = check_dtype("lse", lse, DType::kFloat32, "the row logsumexp is float32")).ok()) return s;
    const bool shape_ok = varlen ? (lse.shape[0] == nheads_q && lse.shape[1] == p->total_q)
                                 : (lse.shape[0] == p->batch && lse.shape[1] == nheads_q && lse.shape[2] == p->seqlen_q);
    if (!shape_ok) return invalid("lse", "shape " + shape_str(lse) + " does not match; expected " + lse_shape);
    p->lse = static_cast<float*>(lse.data);
    if (varlen) {
      p->lse_batch_stride = 0;
      p->lse_head_stride = lse.stride[0];
      p->lse_row_stride = lse.stride[1];
    } else {
      p->lse_batch_stride = lse.stride[0];
      p->lse_head_stride = lse.stride[1];
      p->lse_row_stride = lse.stride[2];
    }
  }

  if (params.alibi_slopes.defined()) {
    const TensorView& a = params.alibi_slopes;
    if (!(s = check_dtype("alibi_slopes", a, DType::kFloat32, "one slope per head")).ok()) return s;
    const bool per_head = a.ndim == 1 && a.shape[0] == nheads_q;
    const bool per_batch_head = a.ndim == 2 && a.shape[0] == p->batch && a.shape[1] == nheads_q;
    if (!per_head && !per_batch_head) {
      return invalid("alibi_slopes", "shape " + shape_str(a) + " does not match; expected " + dims_str({nheads_q}) +
                                         " or " + dims_str({p->batch, nheads_q}));
    }
    if (!(s = check_tensor("alibi_slopes", a, a.ndim)).ok()) return s;
    p->alibi_slopes = static_cast<const float*>(a.data);
    p->alibi_batch_stride = per_batch_head ? a.stride[0] : 0;
    // A NaN or infinite slope turns every score of its head into NaN or -inf (a row of zeros, or
    // of NaN). Slopes on the GPU would cost a read-back and a wait; only the host's are checked.
    if (a.device == Device::kCPU) {
      if (cuda_backend_compiled() && !(s = check_device_tags({NamedTensor{"alibi_slopes", &a}})).ok()) return s;
      const int64_t rows = per_batch_head ? a.shape[0] : 1;
      for (int64_t b = 0; b < rows; ++b) {
        for (int64_t h = 0; h < nheads_q; ++h) {
          const float slope = p->alibi_slopes[b * p->alibi_batch_stride + h * a.stride[a.ndim - 1]];
          if (!std::isfinite(slope)) {
            return invalid("alibi_slopes", "slope " + float_str(slope) + " of head " + std::to_string(h) +
                                               (per_batch_head ? " of sequence " + std::to_string(b) : std::string()) +
                                               " is not finite");
          }
        }
      }
    }
  }

  const float scale = params.softmax_scale != 0.0f ? params.softmax_scale : 1.0f / std::sqrt(static_cast<float>(headdim));
  p->score.scale = scale;
  p->score.softcap = params.softcap;
  p->mask.window_left = params.window_left;
  p->mask.window_right = params.causal ? 0 : params.window_right;
  if (params.causal && params.window_right > 0) p->mask.window_right = 0;
  // A window side that reaches every key is no window: query i (0 .. seqlen_q - 1) sees keys
  // i + offset - window_left .. i + offset + window_right, offset = seqlen_k - seqlen_q, so the
  // right side reaches the last key from every row once window_right >= seqlen_q - 1 (row 0 does
  // then), and the left side the first key once window_left >= seqlen_k - 1 (the last row does).
  // The longest sequences (varlen, seqused) bound every shorter one's. So a causal decode (one
  // query) is an unmasked problem, and -1 keeps the kernels' int32 bounds, such as
  // i + offset + window_right, from overflowing at windows near INT_MAX.
  if (p->mask.window_left >= p->seqlen_k - 1) p->mask.window_left = -1;
  if (p->mask.window_right >= p->seqlen_q - 1) p->mask.window_right = -1;
  p->deterministic = params.deterministic;
  p->num_threads = params.num_threads;
  p->num_splits = params.num_splits;
  p->stream = params.stream;
  return Status::Ok();
}

Status choose_backend(const AttentionProblem& p, Backend requested, Backend* chosen) {
  switch (requested) {
    case Backend::kAuto:
      *chosen = p.device == Device::kCUDA ? Backend::kCUDA : Backend::kCPU;
      return Status::Ok();
    case Backend::kCPU:
    case Backend::kCPUReference:
    case Backend::kCUDA:
      *chosen = requested;
      return Status::Ok();
  }
  return invalid("backend", "is " + std::to_string(static_cast<int>(requested)) +
                                "; expected auto (0), cpu (1), cpu-reference (2) or cuda (3)");
}

Status check_backend_device(Backend backend, const AttentionProblem& p, const std::vector<NamedTensor>& tensors,
                            bool forward) {
  if (backend == Backend::kCUDA) {
    if (!cuda_backend_compiled()) {
      return invalid("backend", "is cuda but this build of flashattn has no CUDA backend (FLASHATTN_CUDA=OFF or no nvcc)");
    }
    if (p.device != Device::kCUDA) {
      return invalid("backend", "is cuda but the tensors are on the cpu; move them to a GPU or choose backend cpu");
    }
    Status s = check_device_tags(tensors);
    if (!s.ok()) return s;
    for (const NamedTensor& nt : tensors) {
      if (nt.t->defined() && nt.t->dtype != DType::kInt32 && nt.t->dtype != DType::kFloat32) {
        if (!(s = check_vector_alignment(nt.name, *nt.t)).ok()) return s;
      }
    }
    return forward ? cuda_supports_forward(p) : cuda_supports_backward(p);
  }
  if (p.device != Device::kCPU) {
    return invalid("backend", std::string("is ") + backend_name(backend) + " but the tensors are on cuda; choose backend cuda or auto");
  }
  // GPU memory tagged as host memory would fault inside the CPU kernels.
  if (cuda_backend_compiled()) return check_device_tags(tensors);
  return Status::Ok();
}

bool problem_is_empty(const AttentionProblem& p) { return p.batch == 0 || p.total_q == 0; }

Status check_fields_of_all(const std::vector<NamedTensor>& tensors) {
  for (const NamedTensor& nt : tensors) {
    Status s = check_view_fields(nt.name, *nt.t);
    if (!s.ok()) return s;
  }
  return Status::Ok();
}

Status unguarded_forward(const ForwardArgs& args, const AttentionParams& params) {
  const std::vector<NamedTensor> inputs = read_tensors(args.q, args.k, args.v, params);
  const std::vector<NamedTensor> outputs = {{"out", &args.out}, {"lse", &args.lse}};
  Status s = check_fields_of_all(inputs);
  if (!s.ok() || !(s = check_fields_of_all(outputs)).ok()) return s;
  AttentionProblem p;
  s = build_problem(args.q, args.k, args.v, args.out, args.lse, false, params, &p);
  if (!s.ok()) return s;
  if (!(s = check_distinct_elements("out", args.out)).ok()) return s;
  if (args.lse.defined() && !(s = check_distinct_elements("lse", args.lse)).ok()) return s;
  if (!(s = check_outputs_apart(outputs, inputs)).ok()) return s;
  Backend backend;
  if (!(s = choose_backend(p, params.backend, &backend)).ok()) return s;
  std::vector<NamedTensor> tensors = {{"q", &args.q}, {"k", &args.k}, {"v", &args.v}, {"out", &args.out}, {"lse", &args.lse}};
  if (!(s = check_backend_device(backend, p, tensors, true)).ok()) return s;
  if (problem_is_empty(p)) return Status::Ok();
  // The reference backend (the oracle) reads contiguous keys: the pages each sequence reaches,
  // copied in order. The CPU flash backend reads pages in place (or copies them itself).
  PagedRows gathered;
  if (p.paged() && backend == Backend::kCPUReference) gather_pages(&p, &gathered);
  switch (backend) {
    case Backend::kCPUReference: return cpu_reference_forward(p);
    case Backend::kCPU: return cpu_flash_forward(p);
    case Backend::kCUDA: return cuda_forward(p);
    case Backend::kAuto: break;
  }
  return Status::Runtime("no backend chosen");
}

Status unguarded_backward(const BackwardArgs& args, const AttentionParams& params) {
  std::vector<NamedTensor> inputs = read_tensors(args.q, args.k, args.v, params);
  for (const NamedTensor& t : {NamedTensor{"out", &args.out}, {"lse", &args.lse}, {"dout", &args.dout}}) inputs.push_back(t);
  const std::vector<NamedTensor> gradients = {{"dq", &args.dq}, {"dk", &args.dk}, {"dv", &args.dv}};
  Status s = check_fields_of_all(inputs);
  if (!s.ok() || !(s = check_fields_of_all(gradients)).ok()) return s;
  if (params.block_table.defined()) {
    return invalid("block_table", "is for the forward only (decoding from a paged cache); the backward takes "
                                  "contiguous k and v");
  }
  AttentionProblem p;
  s = build_problem(args.q, args.k, args.v, args.out, args.lse, true, params, &p);
  if (!s.ok()) return s;
  const bool varlen = p.varlen();
  const int nd = varlen ? 3 : 4;
  if (!(s = check_tensor("dout", args.dout, nd)).ok()) return s;
  if (!(s = check_tensor("dq", args.dq, nd)).ok()) return s;
  if (!(s = check_tensor("dk", args.dk, nd)).ok()) return s;
  if (!(s = check_tensor("dv", args.dv, nd)).ok()) return s;
  if (!(s = check_dtype("dout", args.dout, p.dtype, "must match q")).ok()) return s;
  if (!(s = check_dtype("dq", args.dq, p.dtype, "must match q")).ok()) return s;
  if (!(s = check_dtype("dk", args.dk, p.dtype, "must match q")).ok()) return s;
  if (!(s = check_dtype("dv", args.dv, p.dtype, "must match q")).ok()) return s;
  if (!(s = check_same_shape("dout", args.dout, "q", args.q)).ok()) return s;
  if (!(s = check_same_shape("dq", args.dq, "q", args.q)).ok()) return s;
  if (!(s = check_same_shape("dk", args.dk, "k", args.k)).ok()) return s;
  if (!(s = check_same_shape("dv", args.dv, "v", args.v)).ok()) return s;
  if (!(s = check_distinct_elements("dq", args.dq)).ok()) return s;
  if (!(s = check_distinct_elements("dk", args.dk)).ok()) return s;
  if (!(s = check_distinct_elements("dv", args.dv)).ok()) return s;
  if (!(s = check_outputs_apart(gradients, inputs)).ok()) return s;
  std::vector<NamedTensor> tensors = {{"q", &args.q},       {"k", &args.k},   {"v", &args.v},
                                      {"out", &args.out},   {"lse", &args.lse}, {"dout", &args.dout},
                                      {"dq", &args.dq},     {"dk", &args.dk}, {"dv", &args.dv}};
  if (!(s = check_devices(tensors)).ok()) return s;
  set_operand(&p.dout, args.dout, varlen);
  set_operand(&p.dq, args.dq, varlen);
  set_operand(&p.dk, args.dk, varlen);
  set_operand(&p.dv, args.dv, varlen);
  Backend backend;
  if (!(s = choose_backend(p, params.backend, &backend)).ok()) return s;
  if (!(s = check_backend_device(backend, p, tensors, false)).ok()) return s;
  if (p.batch == 0 || (p.total_q == 0 && p.total_k == 0)) return Status::Ok();
  switch (backend) {
    case Backend::kCPUReference: return cpu_reference_backward(p);
    case Backend::kCPU: return cpu_flash_backward(p);
    case Backend::kCUDA: return cuda_backward(p);
    case Backend::kAuto: break;
  }
  return Status::Runtime("no backend chosen");
}

// Nothing throws out of the API: a host allocation that fails (the host copies the checks read,
// the gathered pages, the backends' workspaces) becomes a status.
template <class Call>
Status without_throwing(const Call& call) {
  try {
    return call();
  } catch (const std::bad_alloc&) {
    return Status::Runtime("out of host memory");
  } catch (const std::length_error&) {
    return Status::Runtime("out of host memory");
  }
}

}  // namespace

Status forward(const ForwardArgs& args, const AttentionParams& params) {
  return without_throwing([&] { return unguarded_forward(args, params); });
}

Status backward(const BackwardArgs& args, const AttentionParams& params) {
  return without_throwing([&] { return unguarded_backward(args, params); });
}

bool cuda_available() { return cuda_backend_compiled() && cuda_device_present(); }

}  // namespace flashattn
