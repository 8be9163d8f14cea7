// Host side: TMA tensor maps for the attention operands, encoded by the driver's
// cuTensorMapEncodeTiled, which is reached through cudaGetDriverEntryPointByVersion so that the
// library links only the CUDA runtime.
#pragma once

#include <cuda.h>

#include "problem.h"

namespace flashattn {
namespace sm90 {

// A map over one operand whose boxes are 64 columns by `box_rows` rows, written to / read from
// shared memory with the 128-byte swizzle. Dims (headdim, rows, heads, batch); variable length
// packs the sequences' rows, so there rows is the total and batch is 1.
Status encode_operand_map(CUtensorMap* map, const Operand& op, DType dtype, int headdim, int64_t rows, int heads,
                          int batch, bool varlen, int box_rows);

// GQA head packing (pack_gqa.h): a 5-D map (headdim, head in group, rows, kv head, batch) over the
// query-side operand (q or out) whose heads are nheads_kv groups of `group` consecutive heads,
// with boxes (64, group, box_rows, 1, 1): a box fills group * box_rows shared-memory lines, the
// group index fastest (`group` 1..64, 1 for MHA decode's key splits; box_rows * group at most 256).
Status encode_packed_operand_map(CUtensorMap* map, const Operand& op, DType dtype, int headdim, int64_t rows,
                                 int nheads_kv, int group, int batch, bool varlen, int box_rows);

// A map over the LSE (float32, rows contiguous): dims (rows, heads, batch), boxes of `box_rows`
// rows of one head, no swizzle. Fails where the strides are not multiples of 16 bytes.
Status encode_lse_map(CUtensorMap* map, float* lse, int64_t rows, int heads, int batch, int64_t head_stride,
                      int64_t batch_stride, int box_rows);
}  // namespace sm90
}  // namespace flashattn
