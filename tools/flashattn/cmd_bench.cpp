// `flashattn bench`: the shape sweep, its progress bar, and the final table or JSON lines.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include "bench_runner.h"
#include "bench_shapes.h"
#include "commands.h"
#include "machine_info.h"
#include "progress.h"
#include "report.h"

namespace flashattn {
namespace cli {

const char* const kBenchHelp =
    "usage: flashattn bench [options]\n"
    "\n"
    "Times forward and backward over the benchmark protocol's shapes (tokens batch * seqlen and\n"
    "width heads * headdim fixed; headdim 64/128/256; causal and non-causal; GQA) on N(0, 1)\n"
    "inputs, outputs poisoned with NaN before every timed call: warm-up, then the median of the\n"
    "repetitions. Each result is checked against the fp64 reference on a sample (batch 0, first\n"
    "and last head, first and last query rows): O for forward, dQ for backward.\n"
    "GPU: tokens 16384, width 2048, seqlen 512..16k, CUDA events. CPU: tokens 2048, seqlen 512..2k.\n"
    "\n"
    "options:\n"
    "  --backend B      auto | cpu | cuda (auto: cuda where a GPU is usable, else cpu)\n"
    "  --dtype T        fp32 | bf16 | fp16 (cpu: fp32, cuda: bf16)\n"
    "  --threads N      CPU threads (0 = all hardware threads)\n"
    "  --quick          a small sweep for smoke runs (tokens 1024, width 512)\n"
    "  --shapes LIST    BxHxNxD or BxHqxHkvxNxD entries, comma separated, instead of the sweep\n"
    "  --causal C       both | yes | no (both)\n"
    "  --no-backward    forward only\n"
    "  --reps N         at most N timed repetitions (cpu 10, cuda 100; at least 3 / 20 run)\n"
    "  --sample-rows R  query rows per sampled block checked against the reference (64)\n"
    "  --json           one JSON object per line on stdout: a header, then one per row\n"
    "  --no-progress    no progress on stderr\n"
    "\n"
    "Exits 1 when a call fails or a sampled error is above 1e-5 (fp32), 1e-3 (fp16) or 8e-3 (bf16);\n"
    "a shape the backend does not support is reported and skipped.\n";

namespace {

struct BenchCommand {
  BenchOptions options;
  std::vector<BenchShape> shapes;
  std::string sweep_name;
  bool json = false;
  bool progress = true;
};

BenchCommand parse(ArgList& args) {
  BenchCommand c;
  BenchOptions& o = c.options;
  o.backend = resolve_backend(args.choice("backend", "auto", {"auto", "cpu", "cuda"}));
  const bool gpu = o.backend == Backend::kCUDA;
  o.dtype = parse_dtype(args.text("dtype", gpu ? "bf16" : "fp32"));
  o.threads = static_cast<int>(args.integer("threads", 0, 0, 4096));
  o.backward = !args.flag("no-backward");
  o.sample_rows = static_cast<int>(args.integer("sample-rows", 64, 1, 4096));
  o.timing = gpu ? TimingPolicy{5, 20, 100, 300.0} : TimingPolicy{1, 3, 10, 600.0};
  o.timing.max_reps = static_cast<int>(args.integer("reps", o.timing.max_reps, 1, 100000));
  o.timing.min_reps = std::min(o.timing.min_reps, o.timing.max_reps);
  const bool quick = args.flag("quick");
  const auto shapes = args.value("shapes");
  const std::string causal = args.choice("causal", "both", {"both", "yes", "no"});
  c.json = args.flag("json");
  c.progress = !args.flag("no-progress");
  args.finish();

  if (shapes) {
    c.shapes = parse_shapes(*shapes);
    c.sweep_name = "custom";
  } else {
    const SweepSize size = quick ? SweepSize::kQuick : gpu ? SweepSize::kGPU : SweepSize::kCPU;
    c.shapes = protocol_sweep(size);
    c.sweep_name = quick ? "quick" : gpu ? "protocol" : "protocol-cpu-scaled";
  }
  c.shapes = filter_causal(c.shapes, causal);
  if (c.shapes.empty()) throw UsageError("no shape left to run after --causal " + causal);
  return c;
}

// Largest relative L2 a row may show: 1e-5 for fp32 (the project's tolerance); for fp16 and bf16
// about 4x the error of merely storing the exact output in that dtype (2.1e-4 and 1.7e-3).
double error_limit(DType dtype) {
  switch (dtype) {
    case DType::kFloat16: return 1e-3;
    case DType::kBFloat16: return 8e-3;
    default: return 1e-5;
  }
}

bool too_inaccurate(const BenchRow& r) { return r.error.empty() && !(r.rel_error <= error_limit(r.dtype)); }

// GFLOP/s on the CPU, TFLOP/s on the GPU: the units the project's peers are quoted in.
double rate_scale(Backend b) { return b == Backend::kCUDA ? 1e12 : 1e9; }
const char* rate_unit(Backend b) { return b == Backend::kCUDA ? "TFLOP/s" : "GFLOP/s"; }

std::string header_json(const BenchCommand& c, const MachineInfo& m) {
  JsonObject o;
  o.add("type", "header").add("tool", "flashattn bench").add("version", m.version);
  o.add("backend", backend_name(c.options.backend)).add("dtype", short_dtype_name(c.options.dtype));
  o.add("sweep", c.sweep_name).add("cpu_model", m.cpu_model).add("threads", m.threads).add("simd", m.simd);
  o.add("gpu", m.gpu).add("shapes", static_cast<int>(c.shapes.size()));
  o.add("warmup", c.options.timing.warmup).add("max_reps", c.options.timing.max_reps);
  o.add("flops_convention", "fwd 4*b*h*sq*sk*d (halved causal); bwd 2.5x fwd");
  return o.str();
}

std::string row_json(const BenchRow& r) {
  const BenchShape& s = r.shape;
  JsonObject o;
  o.add("type", "row").add("kernel", std::string("flashattn-") + backend_name(r.backend));
  o.add("backend", backend_name(r.backend)).add("direction", r.direction).add("dtype", short_dtype_name(r.dtype));
  o.add("batch", s.batch).add("heads", s.heads_q).add("heads_kv", s.heads_kv).add("headdim", s.headdim);
  o.add("seqlen", s.seqlen).add("causal", s.causal).add("time_ms", r.time_ms).add("reps", r.reps);
  o.add("tflops", r.flops_per_s() / 1e12).add("gflops", r.flops_per_s() / 1e9);
  o.add("rel_error", r.error.empty() ? r.rel_error : std::nan(""));
  if (!r.error.empty()) o.add(r.unsupported ? "unsupported" : "error", r.error);
  return o.str();
}

void print_table(const BenchCommand& c, const MachineInfo& m, const std::vector<BenchRow>& rows, double seconds) {
  const Backend b = c.options.backend;
  std::printf("flashattn %s bench: %s, %s, %d threads, SIMD %s%s%s\n", backend_name(b), c.sweep_name.c_str(),
              short_dtype_name(c.options.dtype), m.threads, m.simd.c_str(), m.gpu.empty() ? "" : ", GPU ",
              m.gpu.c_str());
  std::printf("CPU: %s\n\n", m.cpu_model.c_str());
  Table t({"dir", "batch", "heads", "hdim", "seqlen", "causal", "time ms", rate_unit(b), "rel err", "note"});
  for (const BenchRow& r : rows) {
    const BenchShape& s = r.shape;
    const std::string heads = s.heads_kv == s.heads_q ? std::to_string(s.heads_q)
                                                      : std::to_string(s.heads_q) + "/" + std::to_string(s.heads_kv);
    t.add_row({r.direction, std::to_string(s.batch), heads, std::to_string(s.headdim), std::to_string(s.seqlen),
               s.causal ? "yes" : "no", r.error.empty() ? format_fixed(r.time_ms, 2) : "-",
               r.error.empty() ? format_fixed(r.flops_per_s() / rate_scale(b), 1) : "-",
               r.error.empty() ? format_sci(r.rel_error) : "-",
               too_inaccurate(r) ? "FAILED: error above " + format_sci(error_limit(r.dtype))
               : r.error.empty() ? "" : (r.unsupported ? "unsupported: " : "FAILED: ") + r.error});
  }
  t.print(std::cout);
  std::printf("\nrel err: relative L2 vs the fp64 reference on the sample (O for fwd, dQ for bwd). %.1f s in all.\n",
              seconds);
}

}  // namespace

int run_bench(ArgList& args) {
  const BenchCommand c = parse(args);
  const MachineInfo machine = machine_info(c.options.threads);
  if (c.json) std::cout << header_json(c, machine) << std::endl;

  const auto start = std::chrono::steady_clock::now();
  std::vector<BenchRow> rows;
  ProgressBar progress(static_cast<int>(c.shapes.size()), c.progress);
  bool failed = false;
  for (const BenchShape& shape : c.shapes) {
    progress.begin(shape.label());
    for (BenchRow& r : bench_shape(shape, c.options)) {
      failed |= (!r.error.empty() && !r.unsupported) || too_inaccurate(r);
      if (c.json) {
        progress.clear_line();
        std::cout << row_json(r) << std::endl;
      }
      rows.push_back(std::move(r));
    }
    progress.end();
  }
  progress.finish();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (!c.json) print_table(c, machine, rows, seconds);
  return failed ? 1 : 0;
}

}  // namespace cli
}  // namespace flashattn
