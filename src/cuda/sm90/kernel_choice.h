// Which sm90 instantiation the API path (sm90_forward) runs: GQA head packing (pack_gqa.h), picked
// by sm90_picks_pack_gqa (sm90_forward_pack_gqa forces it), cluster pairs at head dim 128, tall
// tiles at head dims 64 and 128, 128-row tiles for short local-window rows at head dim 64, the
// static schedule, or the default. Head dim 96 (d128's tiles over 96 columns, config.h
// TileShape<96>) takes head dim 128's rules (65..128 below), not timed at 96 itself, but none of
// the kernels built at 128 alone (cluster pairs, tall tiles, the short-rows twin). Head dims
// between the instantiations (sm90_forward.cu, runs_narrow) run the default kernel's narrow twin
// whatever these rules say.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "problem.h"

namespace flashattn {

// sm90_forward packs when the group G = nheads_q / nheads_kv is in 2..64 (powers of two until
// session 61; other groups leave kBlockM mod G rows of a tile without a query row),
// seqlen_q (varlen: the longest) is at most kSm90PackGqaMaxQuery and seqlen_q * G at most
// kSm90PackGqaMaxRows. Measured on the H200 (docs/perf.md, "GQA head packing"), hdim 128, 1k keys:
// packed 1.5-3.0x faster up to 256 packed rows with seqlen_q <= 64 (G = 2, 4, 8), 0.99x at
// seqlen_q 128 (G = 2 and 4: the default tile has no idle rows left there); 4k keys: 1.0x.
constexpr int kSm90PackGqaMaxQuery = 64;
constexpr int64_t kSm90PackGqaMaxRows = 256;

// Ok when sm90_supports_forward(p) is and nheads_q / nheads_kv is in 2..64.
Status sm90_supports_forward_pack_gqa(const AttentionProblem& p);
// The sm90 forward with the query heads of each KV head packed into shared 128-row tiles.
Status sm90_forward_pack_gqa(const AttentionProblem& p);
// Whether sm90_forward runs a problem it supports with the packed kernel (the rule above).
bool sm90_picks_pack_gqa(const AttentionProblem& p);
// Packed launches so far in this process, of any packed kernel (the two wgmma ones, the sliced
// decode one below; tests check that the API path took a packed kernel).
int64_t sm90_pack_gqa_launches();
// The packed kernel of one consumer warpgroup (sm90::PackGqaOneWgConfig: 64-row tiles, up to two
// CTAs an SM) at the head dims it is built for (sm90_has_pack_gqa_one_wg). It can run every
// problem the packed kernel runs (the rule above, MHA decode's key splits, pages, the direct entry)
// with at most kSm90PackGqaOneWgMaxRows packed rows, seqlen_q * G (varlen: the longest): one tile a
// KV head and sequence, as in the two-warpgroup kernel, whose second warpgroup has no row there.
// By default it takes those with G >= 2 and at most kSm90PackGqaOneWgMaxTiles tiles (sequences x
// KV heads). Session 93 (H100, d64 bf16 decode, GQA 32 / 8, two calls, TB/s against the two-
// warpgroup kernel): (1, 32k) 8 tiles 1.50 / 1.43-1.44 (+4-5%), (2, 32k) 16 tiles 1.94 / 1.90-1.91
// (+2%), at equal key pieces +2-3.5%; but (5, 8k) 40 tiles and (8, 8k) 64 tiles -2.5%, and MHA
// decode (4, 32 / 32, 8k), 128 tiles whose key splits double in its 264 CTA slots, -12%. Its
// premise (two CTAs an SM hide a long consumer step) did not hold: at 256 CTAs it lost 8% to 128
// (docs/perf.md, session 93). Timed only at 8 and 16 tiles of one-row decode (and level at 24,
// not picked); fewer tiles, where its 264 CTA slots give the key splits up to twice the pieces
// (a grid still near 128 CTAs), and short GQA queries are the rule's extension, untimed.
// FLASHATTN_SM90_PACK_GQA_ONE_WG=0 keeps every problem on the two-
// warpgroup kernel, =1 gives this one every problem it can run, unset or empty the rule decides
// (read at every call: a benchmark's A/B in one process, tests of both kernels).
constexpr int64_t kSm90PackGqaOneWgMaxRows = 64;
constexpr int64_t kSm90PackGqaOneWgMaxTiles = 16;
constexpr bool sm90_has_pack_gqa_one_wg(int head_dim) { return head_dim == 64; }
bool sm90_picks_pack_gqa_one_wg(const AttentionProblem& p);
// Launches of the one-warpgroup packed kernel so far in this process (sm90_pack_gqa_launches
// counts them too).
int64_t sm90_pack_gqa_one_wg_launches();
// The sliced decode kernel (sliced_decode.h: 16-row tiles of mma.sync, four warps across each
// 128-key block; two CTAs an SM at d64, one at d128) at the head dims it is built for
// (sm90_has_sliced_decode). It runs what the packed kernels run with at most
// kSm90SlicedDecodeMaxRows packed rows, seqlen_q * G (varlen: the longest), G in 1..16.
// FLASHATTN_SM90_SLICED_DECODE unset: its rule (sm90_sliced_decode_by_rule); 0: never; any other
// value: every problem it can run (read at every call, as the one-warpgroup switch above), MHA
// decode included (sm90_forward sends it there before the MHA key-split rule).
// sm90_pack_gqa_launches counts it too (it packs the heads as they do).
constexpr int64_t kSm90SlicedDecodeMaxRows = 16;
constexpr bool sm90_has_sliced_decode(int head_dim) { return head_dim == 64 || head_dim == 128; }
bool sm90_picks_sliced_decode(const AttentionProblem& p);
// The rule, for a problem the kernel can run on `sms` SMs: d64 decode steps (one query row, fixed
// length, keys in one tensor) whose tiles (one a sequence and KV head) outnumber the SMs (0 SMs: a
// count that could not be read, so never). There it runs unsplit and took 1.02-1.29x the packed
// kernels' bandwidth at 136-512 tiles on an H100, and 1.05-1.16x at short caches (512-2k keys,
// 256-2048 tiles; docs/perf.md, sessions 95-97); where it splits the keys it lost up to 16% (7% at
// 128 tiles in session 97), and at d128 it was level, so those stay with the packed kernels.
inline bool sm90_sliced_decode_by_rule(const AttentionProblem& p, int sms) {
  return p.headdim == 64 && p.seqlen_q == 1 && !p.varlen() && !p.paged() && p.seqused_q == nullptr &&
         sms > 0 && int64_t(p.batch) * p.nheads_kv > sms;
}
int64_t sm90_sliced_decode_launches();
// Its key pieces a tile: enough for `slots` CTAs (those the SMs hold) over `tiles` tiles, at least two key
// blocks a piece, 1 where the tiles fill the slots already.
constexpr int sm90_sliced_decode_splits(int tiles, int slots, int key_blocks) {
  if (tiles <= 0) return 1;
  const int by_slots = slots / tiles, by_keys = key_blocks / 2;
  const int splits = by_slots < by_keys ? by_slots : by_keys;
  return splits < 2 ? 1 : splits;
}
// Paged k / v (AttentionParams::block_table): the packed kernel reads them (paged_blocks.h) at
// every head dim it is built for, so sm90_forward runs every paged problem it supports there, the
// group 1..64 (G = 1: MHA) and seqlen_q at most kSm90PackGqaMaxQuery (decode steps and short
// chunks; longer paged queries and varlen over pages stay with the sm80 kernel). Why the kernel
// whose key blocks are `block_keys` wide cannot read p's pages (null: it can; `reads_pages`: the
// instantiation has the code): a key block must lie inside one page, and a sequence's table row
// is addressed in 32 bits.
inline const char* sm90_paged_refusal(const AttentionProblem& p, int block_keys, bool reads_pages) {
  if (!reads_pages) {
    return "the sm90 kernels read paged k / v in the GQA-packed (decode) instantiations only";
  }
  if (p.varlen() || p.cu_seqlens_k != nullptr) {
    return "the sm90 kernel reads paged k / v for fixed-length q only (the sm80 kernel takes cu_seqlens over pages)";
  }
  if (p.seqlen_q > kSm90PackGqaMaxQuery) {
    return "the sm90 kernel reads paged k / v for at most 64 query rows a sequence (the sm80 kernel takes more)";
  }
  if (block_keys <= 0 || p.page_size <= 0 || p.page_size % block_keys != 0) {
    return "the sm90 kernel needs page_size to be a multiple of its key block";
  }
  if (int64_t(p.batch - 1) * p.block_table_batch_stride + p.pages_per_sequence > INT32_MAX) {
    return "the sm90 kernel indexes block_table in 32 bits; its rows are too far apart";
  }
  return nullptr;
}

// The persistent tile schedule: the dynamic one (atomic tile counter) is the default; sm90_forward
// runs the static one, whose tiles start without the mailbox hand-over, for
//  - causal problems at head dim 128 (97..128) at any length (past kSm90OneHeadGroupMaxKeys
//    keys sm90_forward runs tall tiles, below, also a static schedule), at head dim 96 (65..96)
//    with at most kSm90StaticCausalMaxKeysHdim96 keys, and at head dim 64 with at most
//    kSm90StaticCausalMaxKeysHdim64 keys (varlen: the longest) on cards with the H200's bandwidth;
//  - causal problems above head dim 128 at any length (since session 22; before it the dynamic
//    schedule took them up to kSm90L2GroupMaxKeys keys, in L2-sized head groups, below);
//  - other masks (local windows) with at most kSm90StaticScheduleMaxKeys keys, except head dims
//    above 128 with at most kSm90L2GroupMaxKeys;
//  - unmasked problems at head dim 128 (97..128) with at most kSm90StaticUnmaskedMaxKeys keys, at
//    head dim 96 (65..96) with at most kSm90StaticUnmaskedMaxKeysHdim96, and at head dim 256 at
//    every length (session 13, same process, 6 rounds: static against dynamic +4.1% at 512, +3.1%
//    at 1k, +2.0% at 2k, +1.1% at 4k; session 21 with 64-key blocks, 4 rounds: +4.3% at 512,
//    +2.8% at 1k, +1.1% at 2k, +1.9% at 4k, +1.3% at 8k, +0.4% at 16k; from 4k the static kernel
//    replaced cluster pairs there, below).
// Measured with sustained windows (docs/perf.md, v8): with the causal orders below, static +2-17%
// at hdim 128 causal 512-16k, +2% at hdim 64 causal 2k-4k (dynamic +2% at 8k); unmasked hdim 128
// 512 +4% (two calls), hdim 64 1k +2% (2k +3% at hdim 64 but a tie at hdim 128, so the bound
// stayed at 1k until session 22). v5's choice (static only for masked rows up to 2k) came from short timing
// windows, which read high (v8). Session 9 (package and harness, same process each): hdim 256 causal
// static +4.8% at 4k, +5.5% at 8k, +4.8% at 16k (package; harness +1.2 / +4.7 / +3.2%), so causal
// rows above head dim 128 keep it past 2k too (head dim 192 by the same kernel shape, not timed).
// Session 22 moved the unmasked bound from 1k to 2k at d128, where the static exp2-turn kernel
// led the dynamic one by +0.4% (session 21 call 6) and +0.8 / +0.8 / +0.8% (session 22, calls 1,
// 4, 5) at 2k, and gave d64's unmasked rows to the dynamic schedule at every length: there it
// led by +4.2 / +5.1% at 1k, +0.6 / +0.8% at 2k and was level at 512 (calls 4-5; v8 had read
// static +2% at 1k).
// Head dim 96 (d128's tile shape on three quarters of the columns) took d128's rules when it was
// instantiated (session 58) until session 59's harness (4 rounds, 200 ms windows) timed its
// static kernel against the dynamic one: unmasked the dynamic kernel led at every length (+7.3 /
// +11.3 / +12.1 / +11.8 / +12.5 / +14.9% at 512-16k), causal the static one up to 2k (+7.5 /
// +2.3 / +1.6% at 512 / 1k / 2k) and the dynamic one from 4k (+2.3 / +7.7 / +25.4% at 4k / 8k /
// 16k; d96 has no tall tiles, which take d128's causal rows past 8k). The package, same process,
// 3 rounds (FLASHATTN_SM90_VARIANT=static / default), dynamic against static: unmasked -0.4 /
// -0.8 / +0.3 / +2.5 / +5.5 / +3.3% at 512-16k, causal -6.2 / -5.4 / -3.4 / -1.4 / +4.9 / +18.7%.
// So at head dims 65-96 unmasked rows ran the dynamic schedule and causal ones the static one up
// to 2048 keys (4k level in both). Session 60 gave the static d96 kernel the GEMM turns (config.h
// kStaticD96Class; harness +9..+13% unmasked over its exp2 turns) and timed it again through the
// package (same process, 3 rounds, both in `--ours-env` slots), static against dynamic, medians
// (best rounds): unmasked +1.1 / +6.0 / +3.0 / +2.7 / -5.6 / -3.8% at 512-16k (+1.8 / +1.3 /
// +1.7 / +1.4 / -0.6 / -0.4%), causal +6.0 / +4.6 / +8.6 / +2.3 / -1.5 / -1.8% (+7.2 / +3.6 /
// +3.6 / +4.6 / -1.7 / -1.3%). So the static schedule takes both up to 4096 keys; windows keep
// d128's rule (untimed).
constexpr int kSm90StaticCausalMaxKeysHdim96 = 4096;
constexpr int kSm90StaticUnmaskedMaxKeysHdim96 = 4096;
constexpr int kSm90StaticScheduleMaxKeys = 2048;
constexpr int kSm90StaticCausalMaxKeysHdim64 = 4096;
constexpr int kSm90StaticUnmaskedMaxKeys = 2048;
// ...but d64's causal rows keep that bound only on cards with at least kSm90StaticCausalHdim64MinTBps
// of HBM bandwidth; below it they run the dynamic schedule past the tall tiles' 1024 keys. Two
// cards, same code, opposite answers: the H200 (4.8 TB/s; session 49's harness, 4 rounds) ran the
// static kernel +2.9% / +2.7% ahead of the dynamic one at causal 2k / 4k; the H100 SXM (3.35 TB/s;
// session 65, the package, three calls of 3-5 rounds, rounds within 2%) ran the dynamic one ahead
// by +10.2 / +8.6 / +9.5% at 2k and +12.4% at 4k (+18% at 8k, where both cards already run it). Why
// the cards differ is not measured; bandwidth is what tells these two apart (the bound between
// them is a guess for cards neither, e.g. GH200's 4.0 TB/s). 0 (a failed query): the H200's rule.
constexpr double kSm90StaticCausalHdim64MinTBps = 4.0;
// Causal tiles go longest first within groups of (batch, head) pairs (tile_scheduler.h); the
// launch picks the group size (launch.h, causal_group_heads): at head dim 128 one head per group
// up to kSm90OneHeadGroupMaxKeys keys (the CTAs running together share few heads' K and V: at
// causal 2k ncu read 1.06 GB from DRAM for v7's order over all heads against cuDNN's 0.20 GB;
// +4-17% at 512-8k, v8), beyond it all heads (one head a group and the static schedule leave the
// CTAs' work uneven once a head has about as many tiles as there are SMs: 16k -21%); at head dim
// 64 as many heads as have their K and V in half the L2, at any length (+9-12% at 2k / 4k; session
// 22: one head a group lost 1.5-12% at 1k-16k and was level at 512), but one head per group in
// d64's tall tiles (four warpgroups, 256-row tiles; session 24's harness, 4 rounds, against
// L2-sized groups: causal 512 +4.6%, 1k +2.1%, 2k +3.8%, 4k +3.4%, 8k +1.5%, 16k +5.1%; all heads
// at once -4.9..+3.7%); with GQA packing such groups up
// to kSm90L2GroupMaxKeys keys; above head dim 128 one head per group up to
// kSm90WideOneHeadGroupMaxKeys keys. History of the last: session 6 took one head at 1k-2k
// (package, same process: hdim 256 causal 2k 451 -> 537 TFLOP/s, 0.85x -> 1.01x cuDNN; at 4k one
// head lost 6%), with L2-sized groups and the dynamic schedule below 1k (v6: +2-11% at 512 / 1k
// against all heads). Session 22 (harness, two calls, 6 rounds, 64-key blocks, the slack): the
// static kernel with one head a group against L2-sized groups +18% / +22% at 512 / 1k and against
// all heads +4.9 / +4.7% at 4k; against the dynamic kernel with L2-sized groups (the API's up to
// 1k then) +10% / +8.6% at 512 / 1k; all heads led at 8k / 16k by 25-44%.
constexpr int kSm90OneHeadGroupMaxKeys = 8192;
constexpr int kSm90L2GroupMaxKeys = 1024;
constexpr int kSm90WideOneHeadGroupMaxKeys = 4096;
// hbm_tbps: the device's peak memory bandwidth in TB/s (sm90_hbm_tbps), 0 if unknown.
bool sm90_picks_static_schedule(const AttentionProblem& p, double hbm_tbps);
// Peak HBM bandwidth of a device in TB/s (memory clock x bus width, both edges), 0 if the
// queries fail; asked once per device and process.
double sm90_hbm_tbps(int device_index);
// Launches so far in this process whose last partial wave was split by keys and run by the tail
// kernel (sm90/split_tail.h; the static d128 / d256 kernels and the d128 cluster pairs, by the
// rule in launch.h, splits_tail: unmasked, one length, from KernelConfig::kSplitTailMinKeys = 8192
// keys).
int64_t sm90_split_tail_launches();

// Key splits of the packed kernel (sm90/split_keys.h): where a packed launch has fewer tiles than
// half the SMs (a decode step: one tile per KV head and batch; before session 89 fewer than a
// quarter, see sm90_key_splits), each tile's key blocks are cut into S pieces that run as work
// of their own and merge at the end, S = half the SMs over the tiles, at most the cap below (each
// piece's O, 32 KB a warpgroup at head dim 128, goes through the L2 to the piece that merges) and
// at most the tile's key blocks over kSm90KeySplitMinBlocks (a piece pays its own Q load, first S
// and merge). Half a wave, not a
// wave: on the H100 (session 64, bench_decode, (1, 32 / 8, 128k), 8 tiles) S = 4 / 6 / 8 / 10 /
// 12 / 16 / 24 / 32 gave 1.78 / 2.50 / 2.70 / 2.65 / 2.60 / 2.50 / 1.90 / 1.78 TB/s: 64-80 CTAs
// already draw what HBM gives, and each further piece adds its merge and Q load. The 4-block
// minimum is still an untimed guess. The cap: 16 while one warpgroup merged every piece alone
// (its L2 round trips grew with S: MQA (1, 8 / 1, 128k) read 0.67 / 0.54 / 0.32 TB/s at S = 16 /
// 64 / 128, session 66); with the merge in two levels (head dims up to 192, below) 64: the same
// row read 0.72 / 1.04 / 1.18 / 1.06 at S = 16 / 32 / 64 / 128 (session 67, H100), and the
// rows the cap does not reach (8 tiles and more) are unchanged. Head dim 256 takes the largest
// power of two of pieces that fits a wave, from 2 (sm90_key_splits_fill_wave); the others a
// power of two up to 8 within sm90_key_split_reach where it is more than the half wave's (session
// 89, below). FLASHATTN_SM90_KEY_SPLITS=N
// forces N pieces (1: none; read at every launch, for tests and A/B).
constexpr int kSm90KeySplitsMax = 64;
constexpr int kSm90KeySplitsMaxOneLevel = 16;
constexpr int kSm90KeySplitMinBlocks = 4;
// A tile's pieces merge in two levels past kSm90MergeGroupPieces of them (split_keys.h): each
// group of that many consecutive pieces is merged by its last arrival, then the groups' results
// by the last group, so that no warpgroup waits on more than a group's (or the groups') L2 round
// trips. Counters a tile and consumer warpgroup: one for the groups' meeting, one a group. Head
// dims up to 192: the d256 kernels spilled with the second inlined merge (session 66).
constexpr int kSm90MergeGroupPieces = 8;
// The combine kernel is compiled with FLASHATTN_SM90_COMBINE_KERNEL=ON (CMake; on by default since
// session 70, when it first ran on a GPU): with it off the packed kernels are the same machine
// code as before it existed, and nothing asks for it.
#ifndef FLASHATTN_SM90_COMBINE_KERNEL
#define FLASHATTN_SM90_COMBINE_KERNEL 0
#endif
constexpr bool kSm90CombineKernelBuilt = FLASHATTN_SM90_COMBINE_KERNEL != 0;
constexpr bool sm90_merges_in_two_levels(int head_dim) { return head_dim <= 192; }
// The fewest pieces a tile that the combine kernel merges by default (sm90_combines_pieces_after;
// fewer are merged in the packed kernel by the last piece to arrive). Up to head dim 192 past
// kSm90MergeGroupPieces, where the in-kernel merge would take two levels (session 70: level or
// behind at 8). At head dim 256 (one-level merge) from 4: session 86 (H100, bench_decode, GQA 32 / 8,
// d256), (2, 16k) 16 tiles at S = 4 read 2.33 TB/s with the combine kernel against 2.23 merged in
// the kernel (the last arrival's serial reads of the others' 64 x 256 floats end the longest
// CTA); at S = 2, (4, 8k), 2.26 against 2.32.
constexpr int kSm90CombineKernelMinSplits = kSm90MergeGroupPieces + 1;
constexpr int kSm90CombineKernelMinSplitsOneLevel = 4;
constexpr int sm90_combine_kernel_min_splits(int head_dim) {
  return sm90_merges_in_two_levels(head_dim) ? kSm90CombineKernelMinSplits : kSm90CombineKernelMinSplitsOneLevel;
}
// Whether the pieces may fill a wave of CTAs rather than half of one (sm90_key_splits): at head
// dim 256 a CTA (64-key blocks, two stages, one a SM) streams K / V at only ~35 GB/s, so half a
// wave does not draw what HBM gives. The wave is taken where the combine kernel is built (it
// merges 4 pieces or more at d256; 2 merge in the packed kernel): the rows that gained had about
// 128 CTAs and the combine kernel.
// bench_decode, H100, GQA 32 / 8, TB/s: session 85, (1, 32k) 8 tiles, S = 8 / 12 / 16: 2.06 /
// 2.37 / 2.40; (1, 128k): 2.64 / 2.88 / 2.89; S = 16 is the rule's since (2.40 / 2.89 in session
// 86). Session 86, the combine kernel: (2, 16k) 16 tiles, S = 4 / 8: 2.35 / 2.40 (the half wave
// merged in the kernel: 2.23); (4, 8k) 32 tiles, S = 4: 2.41 (S = 2 merged in the kernel: 2.32);
// (8, 4k) 64 tiles (a wave of 2 pieces, so the half wave's 1): S = 1 2.42, S = 2 2.39. More than
// a wave lost (session 85, (2, 16k), S = 12 / 16: 1.41 / 1.24). The wave leaves one SM free, as the
// combine kernel asks (work < SMs); session 86's rule took all of it (11 and 12 tiles 11 and 10
// pieces, 17-32 tiles 7 down to 4), session 88's a power of two of it (below). At head
// dim 128 the half wave read best (8 tiles: S = 8 1.98 / 2.73 TB/s, S = 16 1.86 / 2.67).
// Session 88 (H100, the same rows): the wave's count where that is not a power of two read worse
// than the power of two under it, and 33-65 tiles (a wave of 2-3 pieces, half a wave of 1) lost
// most unsplit. (3, 8k) 24 tiles, S = 4 / 5: 2.29 / 2.17 (fa2 2.24); (5, 8k) 40 tiles, S = 1 / 2
// / 3: 1.76 / 2.57 / 2.48 (fa2 2.57); (6, 8k) 48 tiles, S = 1 / 2: 2.10 / 2.66 (fa2 2.66); (7,
// 8k) 56 tiles: 2.41 / 2.69 (fa2 2.74); (8, 8k) 64 tiles: 2.68 / 2.77 (fa2 2.79); (8, 4k) 64
// tiles: 2.45 / 2.44. So the pieces are the largest power of two at most the wave, from 2: on
// 132 SMs 8 tiles 16, 9-16 tiles 8, 17-32 tiles 4, 33-65 tiles 2. Not timed: 9-15, 17-23 and
// 25-31 tiles, and key counts whose blocks the power of two does not divide.
constexpr bool sm90_key_splits_fill_wave(int head_dim) { return kSm90CombineKernelBuilt && head_dim > 192; }
constexpr int sm90_power_of_two_at_most(int n) {
  int p = 1;
  while (p <= n / 2) p *= 2;
  return p;
}
// Below head dim 256 the largest power of two of pieces within sm90_key_split_reach's CTAs, at
// most kSm90MergeGroupPieces (merged in the packed kernel in one group), where that is more than
// half a wave's pieces: a packed decode tile has G live rows of a warpgroup's 64, and every key
// block still costs the full m64 GEMMs, so a CTA draws few bytes a cycle (d64: 64 x 128 x 64
// twice, ~1024 tensor cycles, for 32 KB of K / V; d128 ~2048 for 64 KB) and half a wave does not
// reach HBM's rate. Session 89 (H100, bench_decode,
// GQA 32 / 8, TB/s, half wave / this rule): d64 (2, 32k) 16 tiles 1.84 / 1.94, (3, 8k) 24 tiles
// 1.18 / 1.34, (5, 8k) 40 tiles 1.25 / 1.62, (6, 8k) 48 tiles 1.49 / 1.69, (8, 8k) 64 tiles 1.93
// / 1.98; d128 (5, 8k) 1.99 / 2.23, (3, 8k) 1.78 / 1.86. Past 8 pieces the second launch's merge
// lost where half a wave already gave 8 (8 tiles, S = 8 / 16: d64 (1, 32k) 1.44 / 1.36, d128 (1,
// 32k / 128k) 1.98 / 1.86 and 2.73 / 2.67 in session 85, above), so from there the half wave stays.
// The CTAs those pieces may fill: at d64 the wave less an SM; from d96 three quarters of the SMs,
// since a d128 CTA draws ~50 GB/s (a d64 one ~31) and 50-65 of them already ask for what HBM gives
// at decode sizes, so a second piece there only adds its merge. Session 89 (H100, bench_decode,
// d128, TB/s, S = 1 / 2): GQA 32 / 8 (5, 8k) 40 tiles 1.98 / 2.21, (6, 8k) 48 2.31 / 2.32, (7, 8k)
// 56 2.50 / 2.43, (8, 8k) 64 2.59 / 2.52, MHA (2, 32 / 32, 8k) 64 2.58 / 2.52; at d64 (8, 8k) 64
// tiles 1.93 / 1.98. d96 and d192 take d128's, untimed.
constexpr int sm90_key_split_reach(int sms, int head_dim) { return head_dim <= 64 ? sms - 1 : 3 * sms / 4; }
constexpr int sm90_key_splits(int tiles, int sms, int key_blocks, int head_dim = 128) {
  if (tiles <= 0) return 1;  // past that, a wave (or half one) of fewer than 2 pieces is 1 below
  const int most_for_keys = key_blocks / kSm90KeySplitMinBlocks;
  const int cap = sm90_merges_in_two_levels(head_dim) ? kSm90KeySplitsMax : kSm90KeySplitsMaxOneLevel;
  if (sm90_key_splits_fill_wave(head_dim)) {
    const int wave = std::min({(sms - 1) / tiles, most_for_keys, cap});
    return wave < 2 ? 1 : sm90_power_of_two_at_most(wave);
  }
  const int half_wave = std::min({sms / 2 / tiles, most_for_keys, cap});
  // d256 without the combine kernel: the half wave (its in-kernel merge is one level, session 86).
  if (!sm90_merges_in_two_levels(head_dim)) return std::max(half_wave, 1);
  const int reach = std::min({sm90_key_split_reach(sms, head_dim) / tiles, most_for_keys, cap});
  const int reach_pieces = reach < 2 ? 1 : sm90_power_of_two_at_most(reach);
  return std::max({half_wave, std::min(reach_pieces, kSm90MergeGroupPieces), 1});
}
constexpr int sm90_merge_groups(int pieces) {
  return (pieces + kSm90MergeGroupPieces - 1) / kSm90MergeGroupPieces;
}
constexpr int sm90_merge_counters(int splits) { return splits > kSm90MergeGroupPieces ? 1 + sm90_merge_groups(splits) : 1; }
// The most key blocks of `block_n` keys a tile of p can see, the key splits' key_blocks. A left
// window bounds it below seqlen_k: rows 0 .. seqlen_q - 1 of a sequence together see keys
// [offset - window_left, offset + seqlen_q + window_right), offset = seqlen_k - seqlen_q, which
// is seqlen_q + window_left + window_right keys (seqlen_q + window_left with no right bound: the
// span then ends at seqlen_k), plus a block for a span that starts mid-block. Variable lengths
// and seqused only shorten a sequence's rows; a packed tile's rows are some of these rows of G
// heads. Causal alone (window_right 0, no left bound) bounds nothing.
inline int sm90_visible_key_blocks(const AttentionProblem& p, int block_n) {
  const int64_t all = (std::max(p.seqlen_k, 1) + int64_t(block_n) - 1) / block_n;
  if (p.mask.window_left < 0) return int(all);
  const int64_t span = int64_t(p.seqlen_q) + p.mask.window_left + std::max(p.mask.window_right, 0);
  return int(std::min(all, (span + block_n - 1) / block_n + 1));
}
// Packed launches so far in this process whose tiles were split by keys.
int64_t sm90_key_split_launches();
// Whether a packed launch of `splits` pieces a tile (`work` work indices, on a device of `sms`
// SMs) merges them in the combine kernel (sm90/split_combine.h: every piece writes its slot, a
// second kernel merges each float4 of O over all pieces at once, its CTAs waiting on the SMs the
// packed grid leaves idle) rather than in the packed kernel (the last piece to arrive walks the
// others' slots, sm90/split_keys.h). By default where the packed grid leaves an SM idle (work <
// sms: every split the rule makes) and a tile has sm90_combine_kernel_min_splits pieces or more.
// Session 70 (H100, bench_decode with the setting for the whole process, ours / ours): MQA (1, 8 / 1, 32k / 128k), S = 64, +41% / +20%; (1, 16 / 2, 128k),
// S = 32, +9%; (1, 16 / 4, 128k), S = 16, +4%; but at S = 8, -1.8% at the protocol's (1, 32 / 8,
// 128k) and -2.5% at (2, 16 / 4, 64k): there the one-level merge costs about what the second
// launch's release, one round of loads and the store do, and the packed kernel's end is what the
// call waits for either way. A caller's num_splits over a full grid keeps the in-kernel merge,
// which there overlaps other CTAs' tiles, where the combine kernel would start only after the last
// of them. FLASHATTN_SM90_SPLIT_COMBINE=kernel|merge (`forced`, read at every launch) picks either.
constexpr bool kSm90CombineKernelByDefault = true;
inline bool sm90_combines_pieces_after(int splits, int work, int sms, int head_dim, const char* forced) {
  if (!kSm90CombineKernelBuilt || splits < 2) return false;
  if (forced != nullptr && std::strcmp(forced, "kernel") == 0) return true;
  if (forced != nullptr && std::strcmp(forced, "merge") == 0) return false;
  return kSm90CombineKernelByDefault && work < sms && splits >= sm90_combine_kernel_min_splits(head_dim);
}
// How the combine kernel's threads map onto the pieces' slots (sm90/split_combine.h; host-computed, launch.h).
struct CombineShape {
  int fragment_warps;  // of a tile's 16-row fragment warps, how many may hold a query row (the first ones)
  int group_lanes;     // W: lanes a float4, each reading every W-th piece
  int64_t groups;      // tiles x fragment_warps x 32 lanes x float4s a fragment thread
};

// W for S pieces: the next power of two, 4..32.
inline int combine_group_lanes(int splits) {
  int w = 4;
  while (w < splits && w < 32) w *= 2;
  return w;
}

// Query rows a tile may hold (the first ones of its kBlockM): pack_rows query rows of G heads
// each, fewer where the problem has fewer query rows.
inline CombineShape combine_shape(int tiles, int pack_rows, int group, int seqlen_q, int block_m, int head_dim_accum,
                                  int splits) {
  const int rows = std::min(block_m, std::min(pack_rows, std::max(seqlen_q, 1)) * group);
  CombineShape c;
  c.fragment_warps = (rows + 15) / 16;
  c.group_lanes = combine_group_lanes(splits);
  c.groups = int64_t(tiles) * c.fragment_warps * 32 * (head_dim_accum / 4);
  return c;
}

// Packed launches so far in this process whose pieces the combine kernel merged.
int64_t sm90_split_combine_launches();
// MHA decode (one query head a KV head, seqlen_q at most kSm90PackGqaMaxQuery) runs the packed
// kernel at G = 1, whose tiles are the unpacked kernel's (one per head and batch, 128 query rows)
// but split by keys, where sm90_key_splits would cut them (sms: the device's SM count, estimated
// with kSm90MhaSplitBlockKeys-key blocks; the launch recounts with the kernel's own) or the caller
// asked for num_splits > 1 (where a tile has two blocks to cut); never with num_splits 1, nor where
// FLASHATTN_SM90_VARIANT names a kernel. Without it (1, 32 / 32, 32k) ran 32 CTAs on 132 SMs:
// the packed decode row at S = 4 (32 CTAs) streamed 1.78 TB/s on the H100 against 2.70 at S = 8
// (session 64), so MHA steps of few sequences stood where GQA's did before key splits. Not yet
// timed at G = 1 itself.
constexpr int kSm90MhaSplitBlockKeys = 128;
bool sm90_picks_mha_key_splits(const AttentionProblem& p, int sms);
// The device's SM count, asked once per device (0 if the query fails).
int sm90_sm_count(int device_index);
// Launches of the static-schedule instantiation through sm90_forward so far in this process.
int64_t sm90_static_schedule_launches();
// Launches of the default instantiation (sm90::KernelConfig<D, T>: the dynamic tile scheduler,
// or the static one in builds with FLASHATTN_SM90_DEFAULT_DYNAMIC=0) through sm90_forward so far
// in this process: the problems no rule gave another kernel.
int64_t sm90_default_launches();
// Whether sm90_forward runs p (its dtype and head dim) on the default kernel's narrow twin: a head
// dim between this build's instantiations, or one the build leaves out (FLASHATTN_HDIMS), runs on
// the next larger one there, whatever the rules above say; such launches count as the default's.
bool sm90_runs_narrow_twin(const AttentionProblem& p);
// No rule picks 176-key blocks (FlashAttention-3's width for long unmasked rows at head dim 128):
// from v8 to session 16 they ran from 8192 keys (+1-3% then), but once the 128-key kernel took
// turns around both the GEMMs and the exp2s (session 17) they no longer won: -1.0 / -0.4% at 8k
// and -0.6 / -1.2% at 16k in two harness calls, -4.3 / +0.7% through the package (docs/perf.md,
// session 18). The harness still times them (n176_s2_dyn).
// The short-rows kernel (sm90::ShortRowsConfig, static schedule) at head dims 64 and 128. At
// head dim 64, for masked problems other than causal ones (local windows; causal rows there run
// tall tiles since session 23, below) with at most kSm90ShortRowsMaxKeys keys (varlen: the
// longest): 128-row tiles (two consumer warpgroups), where the default's 192-row tiles computed
// up to 1.35x the key blocks
// (causal 512; about 1.15x with rowless warpgroups passed over). Measured (docs/perf.md, v8):
// causal 512 +1%, 1k +5%, 2k -10%; unmasked -2..-16%. Since session 21 a warpgroup of the
// 192-row tiles that has no row of the sequence passes over the tile (config.h
// kSkipRowlessWarpgroups), which at causal 1k (1024 = 5 x 192 + 64: two of the longest tile's
// three warpgroups) made the static three-warpgroup kernel +3.1% over this one (harness, same
// process, 4 rounds; level at 512), so the bound went from 1024 to 512 keys.
// From session 17 to 21 it also took unmasked rows at head dim 128 up to
// kSm90StaticUnmaskedMaxKeys keys, with the turns around the GEMMs where the static kernel has
// them around the exp2s (those had lost 4-6% there). With the slack, the vote and the unit
// rescale the static kernel led it at 512 / 1k in two harness calls (session 21 call 6: +3.5 /
// +3.6%; session 22 call 1: +2.3 / +0.8%), so those rows ran the static kernel from then.
// In session 29 it took every row at head dim 128 with at most kSm90ShortRowsMaxKeys keys,
// causal, unmasked or windowed: there it is the static kernel without the checked max and with Q
// in shared memory (config.h UncheckedStaticConfig), the static kernel's form until session 29.
// Session 28's harness, checked against unchecked: -3.5% at causal 512 (S, two calls), -0.6 /
// -0.1% at unmasked 512; Q in registers (session 29) -2.3 / -3.7% at unmasked 512. Since
// session 30 the static kernel releases Q's tile at load, so its tiles' last blocks keep their
// max too (config.h kQReleasedAtLoad), and leads it at 512: +1.5% unmasked, +1.5% causal (S;
// session 30's harness, 3 rounds), so head dim 128 runs the static kernel at every length again
// and the short-rows kernel is left to d64's windows (FLASHATTN_SM90_VARIANT=short_rows still
// reaches it at head dim 128).
constexpr int kSm90ShortRowsMaxKeys = 512;
bool sm90_picks_short_rows(const AttentionProblem& p);
// Launches of the short-rows instantiation through sm90_forward so far in this process.
int64_t sm90_short_rows_launches();
// Cluster pairs (sm90::ClusterPairsConfig: the two CTAs of a cluster take query tiles 2i and
// 2i + 1 of one head and each loads half of every K/V block with a multicast TMA into both; static
// schedule, 128-key blocks) at head dim 128, the one it is built for (sm90_has_cluster_pairs),
// without a mask and with at least kSm90ClusterPairsMinKeys keys, where the kernel takes the
// problem (sm90_cluster_pairs_refusal below: fixed length, no seqused, an even number of query
// tiles).
// Head dim 256 had them from 4k keys from session 7 (then +2.5-4.6% over the static schedule from
// 2k) to session 20. With the running max's slack and 64-key blocks the static kernel led them in
// three harness calls (sessions 20-21; session 21, same process, 4 rounds: +2.2% at 4k, +3.6% at
// 8k, +4.4% at 16k), so the rule dropped them there and they are no longer built (the harness
// still times ClusterPairsConfig<256>).
// Head dim 128 from session 20, when both kernels had the running max's slack and the GEMM turns
// (harness, same process, 4 rounds, against the dynamic 128-key kernel that runs there
// otherwise): +0.0% at 512, +1.0% at 1k, +0.9% at 2k, +0.8% at 4k, +1.9% at 8k, +2.0% at 16k
// (session 18, without the slack, level; without it the pairs lose 4-7% from 2k).
// The head dims with a cluster-pair instantiation (tools/generate_sm90_kernels.py,
// CLUSTER_HEAD_DIMS), which are also the ones the rule picks them at.
constexpr bool sm90_has_cluster_pairs(int head_dim) { return head_dim == 128; }
// The bound came from head dim 256 (session 13, when the pairs ran there) and stayed at 4096 keys
// until session 54: with the checked max tested once a tile (session 53; 2.7% less time a clock
// in the pairs, 1.7% in the static kernel) the pairs led the static kernel at unmasked 2k in five
// readings (harness, two calls: best +1.8 / +0.9%, medians +1.6 / +1.9%; package +0.9%), so it
// is 2048 keys since. At 1k the harness split (best -0.5%, median +1.9%; package +0.3%), so
// shorter rows keep the static kernel.
constexpr int kSm90ClusterPairsMinKeys = 2048;
bool sm90_picks_cluster_pairs(const AttentionProblem& p);
// Why the cluster-pair kernel cannot run p with query tiles of tile_rows rows (launch.h refuses it
// with this reason; the rule picks the kernel only where it is null): both CTAs of a pair must
// read the same key blocks, so no mask, one length for every sequence (no varlen, no seqused, no
// k/v rows past the last sequence), and whole pairs of query tiles in every head.
inline const char* sm90_cluster_pairs_refusal(const AttentionProblem& p, int tile_rows) {
  if (p.varlen() || p.seqused_q != nullptr || p.seqused_k != nullptr || p.kv_rows_past_last_sequence ||
      p.mask.has_mask()) {
    return "the sm90 cluster-pair kernel takes unmasked fixed-length problems without seqused only";
  }
  if ((p.seqlen_q + tile_rows - 1) / tile_rows % 2 != 0) {
    return "the sm90 cluster-pair kernel needs an even number of query tiles";
  }
  return nullptr;
}
// Launches of the cluster-pair instantiation through sm90_forward so far in this process (by the
// rule or by FLASHATTN_SM90_VARIANT=cluster).
int64_t sm90_cluster_pairs_launches();
// Tall tiles (sm90::TallTilesConfig: one consumer warpgroup more than the head dim's default,
// 64-key blocks, static schedule) at the head dims they are built for (sm90_has_tall_tiles), for
// causal rows and, at head dim 64, short unmasked ones (varlen: the longest):
//  - head dim 128 (three warpgroups, 192-row tiles) with more than kSm90OneHeadGroupMaxKeys keys,
//    where causal tiles go in one group of all heads. Session 22's harness (4 and 6 rounds, two
//    calls) against the static d128 kernel: causal 16k +2.2 / +3.2% (session 23: +1.6%); causal
//    512-8k -6..-16% (one head a group there, where 192-row tiles leave the CTAs' work uneven);
//    unmasked from 2k +0.3..+1.0% (session 23 against the API's kernels: -4 / -6% at 512 / 1k,
//    -0.1..+0.2% from 2k), not taken;
//  - head dim 64 (four warpgroups, 256-row tiles, the diagonal's trailing blocks passed over) with
//    at most kSm90TallTilesMaxKeysHdim64 keys. Session 23's harness (4 rounds) against the API's
//    kernels then (two warpgroups at 512, three from 513): causal 512 +4.4 / +5.5%, 1k +6.4 /
//    +6.6%, 2k -3.7 / -4.2% (calls 1-2; call 3 against the static three-warpgroup kernel: +6.3 /
//    +7.4 / -3.7%);
//  - and unmasked rows at head dim 64 with at most kSm90TallTilesMaxUnmaskedKeysHdim64 keys:
//    against the dynamic three-warpgroup kernel (the API's) +6.4% at 512, +0.8% at 1k, -4..-7%
//    from 2k (call 3: twice the steps a row and no diagonal to save); against the static one
//    +5.1 / +3.6% at 512 / 1k in call 1.
constexpr int kSm90TallTilesMaxKeysHdim64 = 1024;
constexpr int kSm90TallTilesMaxUnmaskedKeysHdim64 = 512;
constexpr bool sm90_has_tall_tiles(int head_dim) { return head_dim == 64 || head_dim == 128; }
bool sm90_picks_tall_tiles(const AttentionProblem& p);
// Launches of the tall-tile instantiation through sm90_forward so far in this process.
int64_t sm90_tall_tiles_launches();
// FLASHATTN_SM90_VARIANT=default|static|short_rows|cluster|tall in the environment overrides the
// rules above (not GQA packing) for benchmarks; read at every call. "cluster" and "tall" run
// their kernel wherever it is built (head dim 128; tall tiles also 64) and where it takes the
// problem (Unsupported otherwise); "default" keeps it from the problems its rule covers.
// False in builds whose default is the static schedule (FLASHATTN_SM90_DEFAULT_DYNAMIC=0), which
// then run it everywhere.
bool sm90_dynamic_schedule_by_default();

}  // namespace flashattn
