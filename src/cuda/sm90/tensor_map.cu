#include "cuda/sm90/tensor_map.h"

#include <cuda_runtime.h>

#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>

#include "cuda/sm90/config.h"

namespace flashattn {
namespace sm90 {
namespace {

using EncodeTiled = CUresult (*)(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*, const cuuint64_t*,
                                 const cuuint64_t*, const cuuint32_t*, const cuuint32_t*, CUtensorMapInterleave,
                                 CUtensorMapSwizzle, CUtensorMapL2promotion, CUtensorMapFloatOOBfill);

Status encoder(EncodeTiled* fn) {
  static EncodeTiled cached = nullptr;
  static Status status;
  static std::once_flag once;
  std::call_once(once, [] {
    void* ptr = nullptr;
    cudaDriverEntryPointQueryResult found{};
    // 12000: the ABI of cuTensorMapEncodeTiled has not changed since CUDA 12.0.
    cudaError_t err = cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &ptr, 12000, cudaEnableDefault, &found);
    if (err != cudaSuccess || found != cudaDriverEntryPointSuccess || ptr == nullptr) {
      status = Status::Runtime(std::string("cuTensorMapEncodeTiled is unavailable from the driver: ") +
                               cudaGetErrorString(err));
      return;
    }
    cached = reinterpret_cast<EncodeTiled>(ptr);
  });
  *fn = cached;
  return status;
}

// TMA wants byte strides that are multiples of 16; a dimension of extent 1 is never stepped, so
// its stride (which the API leaves unchecked) is replaced by a harmless one.
cuuint64_t byte_stride(int64_t elements, int64_t extent, int elem_bytes) {
  const int64_t bytes = elements * elem_bytes;
  return extent <= 1 ? cuuint64_t(16) : cuuint64_t(bytes);
}

// How much the L2 fetches from the HBM on a TMA load's miss: 256 bytes, a d128 row's two 128-byte
// columns in one fetch. FLASHATTN_SM90_L2_PROMOTION (none, 64, 128 or 256; read at every call, other
// values ignored) sets it for every map, for an A/B of the decode stream (docs/perf.md, session 71:
// our packed kernel held the HBM at 84% of its peak on the GQA decode row where cuDNN's kernel
// held 92%).
CUtensorMapL2promotion l2_promotion() {
  const char* forced = std::getenv("FLASHATTN_SM90_L2_PROMOTION");
  if (forced == nullptr) return CU_TENSOR_MAP_L2_PROMOTION_L2_256B;
  if (std::strcmp(forced, "none") == 0) return CU_TENSOR_MAP_L2_PROMOTION_NONE;
  if (std::strcmp(forced, "64") == 0) return CU_TENSOR_MAP_L2_PROMOTION_L2_64B;
  if (std::strcmp(forced, "128") == 0) return CU_TENSOR_MAP_L2_PROMOTION_L2_128B;
  return CU_TENSOR_MAP_L2_PROMOTION_L2_256B;
}

// The encode call every map shares: unit element strides, no OOB fill (rows past the extent read
// as zero and are not written). `what` names the map in the error.
Status encode_map_of(CUtensorMap* map, CUtensorMapDataType type, CUtensorMapSwizzle swizzle, void* data,
                     cuuint32_t rank, const cuuint64_t* dims, const cuuint64_t* strides, const cuuint32_t* box,
                     const std::string& what) {
  EncodeTiled encode = nullptr;
  Status s = encoder(&encode);
  if (!s.ok()) return s;
  const cuuint32_t element_strides[5] = {1, 1, 1, 1, 1};
  const CUresult r = encode(map, type, rank, data, dims, strides, box, element_strides, CU_TENSOR_MAP_INTERLEAVE_NONE,
                            swizzle, l2_promotion(), CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS) {
    return Status::Runtime("cuTensorMapEncodeTiled failed with CUresult " + std::to_string(int(r)) + " " + what);
  }
  return Status::Ok();
}

// The operands' maps: bf16/fp16 elements, 128-byte swizzle.
Status encode_map(CUtensorMap* map, DType dtype, void* data, cuuint32_t rank, const cuuint64_t* dims,
                  const cuuint64_t* strides, const cuuint32_t* box, const std::string& what) {
  const CUtensorMapDataType type =
      dtype == DType::kBFloat16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 : CU_TENSOR_MAP_DATA_TYPE_FLOAT16;
  return encode_map_of(map, type, CU_TENSOR_MAP_SWIZZLE_128B, data, rank, dims, strides, box, what);
}

}  // namespace

Status encode_operand_map(CUtensorMap* map, const Operand& op, DType dtype, int headdim, int64_t rows, int heads,
                          int batch, bool varlen, int box_rows) {
  const int eb = dtype_size(dtype);
  const int batches = varlen ? 1 : batch;
  const cuuint64_t dims[4] = {cuuint64_t(headdim), cuuint64_t(rows), cuuint64_t(heads), cuuint64_t(batches)};
  const cuuint64_t strides[3] = {byte_stride(op.row_stride, rows, eb), byte_stride(op.head_stride, heads, eb),
                                 byte_stride(op.batch_stride, batches, eb)};
  const cuuint32_t box[4] = {cuuint32_t(kColumnElems), cuuint32_t(box_rows), 1, 1};
  return encode_map(map, dtype, op.data, 4, dims, strides, box,
                    "(headdim " + std::to_string(headdim) + ", rows " + std::to_string(rows) + ")");
}

Status encode_packed_operand_map(CUtensorMap* map, const Operand& op, DType dtype, int headdim, int64_t rows,
                                 int nheads_kv, int group, int batch, bool varlen, int box_rows) {
  const int eb = dtype_size(dtype);
  const int batches = varlen ? 1 : batch;
  const cuuint64_t dims[5] = {cuuint64_t(headdim), cuuint64_t(group), cuuint64_t(rows), cuuint64_t(nheads_kv),
                              cuuint64_t(batches)};
  const cuuint64_t strides[4] = {byte_stride(op.head_stride, group, eb), byte_stride(op.row_stride, rows, eb),
                                 byte_stride(op.head_stride * group, nheads_kv, eb),
                                 byte_stride(op.batch_stride, batches, eb)};
  const cuuint32_t box[5] = {cuuint32_t(kColumnElems), cuuint32_t(group), cuuint32_t(box_rows), 1, 1};
  return encode_map(map, dtype, op.data, 5, dims, strides, box,
                    "(GQA-packed map, headdim " + std::to_string(headdim) + ", group " + std::to_string(group) +
                        ", rows " + std::to_string(rows) + ")");
}

Status encode_lse_map(CUtensorMap* map, float* lse, int64_t rows, int heads, int batch, int64_t head_stride,
                      int64_t batch_stride, int box_rows) {
  const cuuint64_t dims[3] = {cuuint64_t(rows), cuuint64_t(heads), cuuint64_t(batch)};
  const cuuint64_t strides[2] = {byte_stride(head_stride, heads, 4), byte_stride(batch_stride, batch, 4)};
  const cuuint32_t box[3] = {cuuint32_t(box_rows), 1, 1};
  return encode_map_of(map, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, CU_TENSOR_MAP_SWIZZLE_NONE, lse, 3, dims, strides, box,
                       "(LSE, rows " + std::to_string(rows) + ")");
}

}  // namespace sm90
}  // namespace flashattn
