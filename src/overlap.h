// Whether two tensor views provably share memory: an output that lands on an input (or on another
// output) is a wrong answer whose form depends on the backend's order of reads and writes.
#pragma once

#include "flashattn/types.h"

namespace flashattn {

// The dimensions of t with more than one element, by stride from the smallest up, into order
// (room for TensorView::kMaxDims); returns how many.
int dims_by_stride(const TensorView& t, int* order);

// True when some byte of a is provably a byte of b: both are non-empty, on the same device, and
// they start at the same address, or one of them fills its span with no gaps (a dense layout, in
// any order of dimensions) and the other's first or last element lies inside that span. Views
// that interleave without touching, as the three gradients of a packed qkv do, are not flagged;
// nor are interleaved views that do touch (proving that needs more than the two spans, and no
// layout a framework allocates for an output gets there by accident).
bool provably_overlap(const TensorView& a, const TensorView& b);

}  // namespace flashattn
