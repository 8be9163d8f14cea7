// `flashattn iomodel`: the HBM traffic of naive and tiled attention for one shape.
#include <cstdio>
#include <iostream>
#include <string>

#include "commands.h"
#include "flashattn/iomodel.h"
#include "report.h"

namespace flashattn {
namespace cli {

const char* const kIomodelHelp =
    "usage: flashattn iomodel [options]\n"
    "\n"
    "Bytes that naive attention (S = QK^T written, P = softmax(S) written, O = PV) and tiled\n"
    "FlashAttention-2 (Q tiles outer, K/V tiles inner, O and the fp32 logsumexp written once) read\n"
    "and write in the large arrays, counted tile by tile beside the closed-form formula.\n"
    "\n"
    "options:\n"
    "  --batch B        batch size (1)\n"
    "  --heads H        number of heads (16)\n"
    "  --seqlen N       query length (4096)\n"
    "  --seqlen-k M     key length (N)\n"
    "  --headdim D      head dimension (128)\n"
    "  --block-q Br     query rows per tile (256, the CPU forward's tile)\n"
    "  --block-k Bc     keys per tile (128)\n"
    "  --dtype T        bf16 | fp16 | fp32 (bf16): bytes of Q, K, V, O, S and P\n"
    "  --causal         bottom-right aligned causal mask; tiled skips fully masked tiles\n"
    "  --json           one JSON object instead of the table\n";

namespace {

constexpr int64_t kMaxDim = int64_t{1} << 30;

IoShape parse_shape(ArgList& args) {
  IoShape s;
  s.batch = args.integer("batch", 1, 1, kMaxDim);
  s.nheads = args.integer("heads", 16, 1, kMaxDim);
  s.seqlen_q = args.integer("seqlen", 4096, 1, kMaxDim);
  s.seqlen_k = args.integer("seqlen-k", s.seqlen_q, 1, kMaxDim);
  s.headdim = args.integer("headdim", 128, 1, 65536);
  s.block_q = args.integer("block-q", 256, 1, kMaxDim);
  s.block_k = args.integer("block-k", 128, 1, kMaxDim);
  s.element_bytes = dtype_size(parse_dtype(args.text("dtype", "bf16")));
  s.causal = args.flag("causal");
  return s;
}

void add_rows(Table& t, const char* algo, const IoTraffic& counted, const IoTraffic& formula) {
  auto row = [&](const char* what, int64_t c, int64_t f) {
    t.add_row({algo, what, std::to_string(c), format_bytes(static_cast<double>(c)), std::to_string(f),
               format_bytes(static_cast<double>(f)), c == f ? "exact" : format_fixed(100.0 * (f - c) / c, 2) + "%"});
  };
  row("read", counted.read_bytes, formula.read_bytes);
  row("write", counted.write_bytes, formula.write_bytes);
  row("total", counted.total_bytes(), formula.total_bytes());
}

void print_json(const IoReport& r) {
  const IoShape& s = r.shape;
  JsonObject o;
  o.add("batch", s.batch).add("heads", s.nheads).add("seqlen_q", s.seqlen_q).add("seqlen_k", s.seqlen_k);
  o.add("headdim", s.headdim).add("element_bytes", s.element_bytes).add("causal", s.causal);
  o.add("block_q", s.block_q).add("block_k", s.block_k);
  o.add("naive_read_counted", r.naive_counted.read_bytes).add("naive_write_counted", r.naive_counted.write_bytes);
  o.add("naive_read_formula", r.naive_formula.read_bytes).add("naive_write_formula", r.naive_formula.write_bytes);
  o.add("tiled_read_counted", r.tiled_counted.read_bytes).add("tiled_write_counted", r.tiled_counted.write_bytes);
  o.add("tiled_read_formula", r.tiled_formula.read_bytes).add("tiled_write_formula", r.tiled_formula.write_bytes);
  o.add("formula_exact", r.formula_exact);
  o.add("reduction_counted", r.reduction_counted()).add("reduction_formula", r.reduction_formula());
  o.add("reduction_limit", r.reduction_limit());
  std::cout << o.str() << "\n";
}

void print_table(const IoReport& r) {
  const IoShape& s = r.shape;
  std::printf("IO model: batch %lld, heads %lld, seqlen_q %lld, seqlen_k %lld, headdim %lld, %lld-byte elements, %s\n",
              (long long)s.batch, (long long)s.nheads, (long long)s.seqlen_q, (long long)s.seqlen_k,
              (long long)s.headdim, (long long)s.element_bytes, s.causal ? "causal" : "non-causal");
  std::printf("tiles: Br = %lld query rows, Bc = %lld keys; logsumexp in fp32\n\n", (long long)s.block_q,
              (long long)s.block_k);
  Table t({"algorithm", "traffic", "counted bytes", "", "formula bytes", "", "formula vs counted"});
  add_rows(t, "naive", r.naive_counted, r.naive_formula);
  add_rows(t, "tiled", r.tiled_counted, r.tiled_formula);
  t.print(std::cout);
  std::printf("\nreduction naive / tiled: %.3fx counted, %.3fx formula; for long sequences it tends to %s = %.2fx\n",
              r.reduction_counted(), r.reduction_formula(), s.causal ? "4 Br / d" : "2 Br / d", r.reduction_limit());
  std::printf("\nformulas per (batch, head), e = element bytes, Tq = ceil(Nq / Br):\n"
              "  naive read  (Nq d + 2 Nk d + 2 Nq Nk) e    write (2 Nq Nk + Nq d) e\n"
              "  tiled read  (Nq d + 2 Nk d Tq) e           write Nq d e + 4 Nq\n");
  if (s.causal) {
    std::printf(
        "causal: naive still stores the whole Nq x Nk score and probability matrices, so its formula is\n"
        "exact. The tiled formula is approximate: K/V rows read are taken as Tq (Nk - Nq) + Nq (Tq + 1) / 2,\n"
        "the non-causal Nk Tq halved plus the diagonal tiles, ignoring Bc rounding and ragged tiles;\n"
        "the counted figure is the exact one.\n");
  }
}

}  // namespace

int run_iomodel(ArgList& args) {
  const IoShape shape = parse_shape(args);
  const bool json = args.flag("json");
  args.finish();
  const Status st = validate_io_shape(shape);
  if (!st.ok()) throw UsageError(st.message);
  const IoReport report = io_report(shape);
  if (json) {
    print_json(report);
  } else {
    print_table(report);
  }
  return 0;
}

}  // namespace cli
}  // namespace flashattn
