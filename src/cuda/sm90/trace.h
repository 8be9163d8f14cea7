// An event trace of the forward kernel for the harness (KernelConfig::kTrace, false in the
// library): one thread per role writes {clock64, event, two arguments} records at the points
// where a wait returns or a GEMM was issued, for the first kTraceCtas CTAs, so that
// benchmarks/cpp/sm90_trace_report.py can say where a tile's time goes (session 18). Every call
// is `if constexpr`'d away without kTrace, so the library's code does not change.
//
// clock64 rather than %globaltimer: it counts SM cycles (globaltimer ticks far more coarsely than
// the tens of cycles between events), and every role of a CTA runs on the same SM, so the roles'
// clocks compare.
#pragma once

#include <cstdint>

#include "cuda/sm90/config.h"

namespace flashattn {
namespace sm90 {

// Who writes: the loading thread, the dynamic schedule's scheduler thread, and thread 0 of each
// consumer warpgroup (kTraceConsumer0 + wg).
constexpr int kTraceLoad = 0, kTraceScheduler = 1, kTraceConsumer0 = 2;
constexpr int kTraceRoles = kTraceConsumer0 + 3;
constexpr int kTraceCtas = 4;
// Records per role and CTA (a power of two); later ones are dropped. Enough for every tile of a
// CTA up to a few thousand keys (d64 causal 512: ~30 tiles x ~35 records a consumer).
constexpr int kTraceCapacity = 4096;

// Event numbers are read by sm90_trace_report.py: append, do not renumber.
enum TraceEvent : uint16_t {
  kTraceNone = 0,  // a record never written (the harness zeroes the buffer before the traced launch)
  // Loading thread. K / V: arg0 the stage, arg1 the key block. Q and the tile: arg0 the m_block,
  // arg1 the tile index.
  kEvLoadTile = 1,  // the tile's loads begin
  kEvQEmptyWait,    // starts waiting for Q to be free (the previous tile's last S retired)
  kEvQLoad,         // Q's TMA issued
  kEvKEmptyWait,    // starts waiting for the stage's K to be free
  kEvKLoad,
  kEvVEmptyWait,
  kEvVLoad,
  // Scheduler thread (dynamic schedule): arg1 the tile index.
  kEvPublish,  // index written to the mailbox (after waiting for a free slot)
  kEvClaim,    // the counter's atomic returned the next index
  // Consumer warpgroup (its thread 0). K / V: arg0 the stage, arg1 the key block where the code
  // knows it (-1 in issue_first_scores and last_pv: the tile's last / first block).
  kEvTileStart,      // arg0 m_block, arg1 tile index
  kEvQFull,          // Q has landed
  kEvKFull,
  kEvVFull,
  kEvGemmTurn,       // this warpgroup's turn to issue its GEMMs (turns around the GEMMs)
  kEvSIssued,        // the tile's first S = Q K^T committed (and the turn passed on)
  kEvSPvIssued,      // a block step's S and the previous block's P V committed
  kEvPvIssued,       // the tile's last P V committed
  kEvSReady,         // S has retired (serial steps: S and the previous P V)
  kEvMaxReady,       // mask and row max done, before the exp2 turn (split softmax only)
  kEvExpTurn,        // this warpgroup's exp2 turn
  kEvProbsReady,     // softmax done: P in registers
  kEvPvDone,         // the previous block's P V has retired (overlapped steps)
  kEvLastPvDone,     // the tile's last P V has retired: O is final
  kEvEpilogueStart,  // arg0 m_block of the tile whose output is stored
  kEvEpilogueEnd,    // the store issued (TMA) or done (direct)
  // Consumer warpgroup, session 18's second call: where its waits for K / V begin, so that the
  // time blocked on a load (to kEvKFull / kEvVFull) is told from the code before the wait.
  kEvKWait,
  kEvVWait,
  // Session 18's probes for the next call: where the GEMM turn's wait begins; O normalised and
  // the row LSE known (plain_tiles only). Not recorded, because each made ptxas serialise every
  // wgmma: an event between S's and P V's wgmma issue (even a clock read by every thread), and
  // kEvFinalized in overlapped_tiles.
  kEvTurnWait,
  kEvFinalized,
  // Session 35: inside the staged epilogue (epilogue.h store_staged), to split its time: after
  // the wait for the previous store's read and the first barrier, after O's stmatrix, after the
  // fence and the second barrier.
  kEvEpilogueSynced,
  kEvEpilogueStaged,
  kEvEpilogueFenced,
};

struct TraceRecord {
  uint64_t clock;
  uint16_t event, arg0;
  uint32_t arg1;
};
static_assert(sizeof(TraceRecord) == 16, "one 16-byte store a record");

namespace {
// [cta][role][kTraceCapacity]. A variable template instantiated only by a traced kernel (the
// argument is Cfg::kTrace), so the library's objects carry no buffer; an array rather than a
// pointer set by the host, so a record's address needs no load (a pointer is re-read after every
// barrier's "memory" clobber). All traced kernels of a translation unit share it.
template <bool kOn>
__device__ TraceRecord g_trace[kTraceCtas * kTraceRoles * kTraceCapacity];
}  // namespace

// A role's next record in g_trace, or kTraceOff (CTAs past kTraceCtas, or once full). In shared
// memory rather than threaded through the code in a register: an event costs a shared-memory
// load, no global round trip. Each word is read and written only by its role's thread. (Even so
// the 24-register loading thread spills 32-44 bytes with its events; the consumers none.)
constexpr uint32_t kTraceOff = 0xffffffffu;
template <class Cfg>
__device__ __forceinline__ uint32_t* trace_cursors() {
  __shared__ uint32_t cursors[kTraceRoles];
  return cursors;
}

// Before the kernel's first __syncthreads.
template <class Cfg>
__device__ __forceinline__ void trace_start() {
  if constexpr (Cfg::kTrace) {
    // The cursors are static shared memory, which ptxas rounds up to 1 KB (the dynamic part's
    // 1024-byte alignment): that comes off the 227 KB beside the kernel's own.
    static_assert(Cfg::kSmemBytes + 1024 <= Cfg::kSmemLimit, "no room for the trace cursors");
    if (threadIdx.x < kTraceRoles) {
      trace_cursors<Cfg>()[threadIdx.x] =
          blockIdx.x < kTraceCtas ? (blockIdx.x * kTraceRoles + threadIdx.x) * kTraceCapacity : kTraceOff;
    }
  }
}

// By the role's one thread only.
template <class Cfg>
__device__ __forceinline__ void trace_event(int role, TraceEvent event, int arg0 = 0, int arg1 = 0) {
  if constexpr (Cfg::kTrace) {
    uint64_t clock;
    asm volatile("mov.u64 %0, %%clock64;" : "=l"(clock));
    uint32_t* cursor = trace_cursors<Cfg>() + role;
    const uint32_t n = *cursor;
    if (n == kTraceOff) return;
    *reinterpret_cast<uint4*>(&g_trace<Cfg::kTrace>[n]) =
        make_uint4(uint32_t(clock), uint32_t(clock >> 32), uint32_t(event) | (uint32_t(arg0) << 16), uint32_t(arg1));
    *cursor = (n + 1) % kTraceCapacity == 0 ? kTraceOff : n + 1;
  }
}

// An event of consumer warpgroup wg's trace, recorded by its thread 0 (`thread`: the index within
// the warpgroup); MainloopMma and Epilogue trace through it.
template <class Cfg>
__device__ __forceinline__ void consumer_trace_event(int wg, int thread, TraceEvent event, int arg0 = 0, int arg1 = 0) {
  if constexpr (Cfg::kTrace) {
    if (thread == 0) trace_event<Cfg>(kTraceConsumer0 + wg, event, arg0, arg1);
  }
}

// The split tail's timeline (KernelConfig::kTailTimeline, harness only; split_tail.h): per CTA of
// the whole-wave kernel (row 0) and of the tail kernel (row 1), %globaltimer in ns (one clock for
// every SM, unlike clock64) where its first consumer warpgroup starts and ends, and in the tail
// kernel (head dims run by plain_tiles) where each piece's Q has landed, its O is final, and it
// is stored or handed to another CTA's merge; slot 0 holds the SM.
constexpr int kTimelineCtas = 256, kTimelineSlots = 16;
constexpr int kTimelineSm = 0, kTimelineStart = 1, kTimelineEnd = 2, kTimelinePiece0 = 3, kTimelinePieceSlots = 3;
namespace {
template <bool kOn>
__device__ uint64_t g_tail_timeline[2 * kTimelineCtas * kTimelineSlots];
}  // namespace

// By the first thread of the first consumer warpgroup (others return); in the tail kernel only
// where `tail_only`.
template <class Cfg>
__device__ __forceinline__ void timeline_mark(int slot, bool tail_only = false) {
  if constexpr (Cfg::kTailTimeline) {
    if (threadIdx.x != 128 || (tail_only && !Cfg::kSplitTail)) return;
    uint64_t now;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
    if (blockIdx.x < kTimelineCtas && slot < kTimelineSlots) {
      uint64_t* row = g_tail_timeline<true> + ((Cfg::kSplitTail ? kTimelineCtas : 0) + blockIdx.x) * kTimelineSlots;
      if (slot == kTimelineStart) {
        uint32_t sm;
        asm volatile("mov.u32 %0, %%smid;" : "=r"(sm));
        row[kTimelineSm] = sm;
      }
      row[slot] = now;
    }
  }
}

}  // namespace sm90
}  // namespace flashattn
