// `flashattn check`: the quick correctness sweep; a summary line, and exit code 1 on any failure.
#include <chrono>
#include <cstdio>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "check_cases.h"
#include "commands.h"
#include "progress.h"
#include "report.h"

namespace flashattn {
namespace cli {

const char* const kCheckHelp =
    "usage: flashattn check [options]\n"
    "\n"
    "Runs small random problems across dtypes and options (causal with seqlen_q <, = and > seqlen_k,\n"
    "sliding window, GQA, MQA, variable length, softcap, ALiBi, all together) forward and backward\n"
    "on the chosen backend and compares out, lse, dq, dk and dv with the fp64 reference.\n"
    "Tolerance: relative L2 <= 1e-5, or 4x the error of storing the exact answer in fp16/bf16.\n"
    "Exits 1 when any comparison fails; a case the backend does not support is reported as skipped.\n"
    "\n"
    "options:\n"
    "  --backend B      auto | cpu | cuda (auto: cuda where a GPU is usable, else cpu)\n"
    "  --dtype T        all | fp32 | fp16 | bf16 (all)\n"
    "  --threads N      CPU threads (0 = all hardware threads)\n"
    "  --verbose        a table of every comparison, not only the failures\n"
    "  --no-progress    no progress on stderr\n";

namespace {

std::string joined_notes(const std::vector<CheckOutcome>& outcomes) {
  std::ostringstream os;
  for (const CheckOutcome& o : outcomes) {
    if (!o.passed) os << o.tensor << ": " << o.note << "  ";
  }
  return os.str();
}

}  // namespace

int run_check(ArgList& args) {
  const Backend backend = resolve_backend(args.choice("backend", "auto", {"auto", "cpu", "cuda"}));
  const std::string dtype = args.choice("dtype", "all", {"all", "fp32", "fp16", "bf16"});
  const int threads = static_cast<int>(args.integer("threads", 0, 0, 4096));
  const bool verbose = args.flag("verbose");
  const bool progress_on = !args.flag("no-progress");
  args.finish();

  const std::vector<DType> dtypes = dtype == "all" ? std::vector<DType>{DType::kFloat32, DType::kFloat16, DType::kBFloat16}
                                                   : std::vector<DType>{parse_dtype(dtype)};
  const std::vector<CheckCase> cases = check_cases(dtypes);
  const auto start = std::chrono::steady_clock::now();
  Table table({"case", "tensor", "error", "tolerance", "result"});
  int passed = 0, failed = 0, skipped = 0;
  std::vector<std::string> failures;
  ProgressBar progress(static_cast<int>(cases.size()), progress_on);
  for (const CheckCase& c : cases) {
    progress.begin(c.label());
    const std::vector<CheckOutcome> outcomes = run_check_case(c, backend, threads);
    bool case_failed = false;
    for (const CheckOutcome& o : outcomes) {
      const char* result = o.skipped ? "skipped" : o.passed ? "ok" : "FAILED";
      if (o.skipped) {
        ++skipped;
      } else if (o.passed) {
        ++passed;
      } else {
        ++failed;
        case_failed = true;
      }
      table.add_row({c.label(), o.tensor, format_sci(o.error), format_sci(o.tolerance), o.note.empty() ? result : std::string(result) + ": " + o.note});
    }
    if (case_failed) failures.push_back(c.label() + ": " + joined_notes(outcomes));
    progress.end();
  }
  progress.finish();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (verbose) {
    table.print(std::cout);
    std::cout << "\n";
  }
  for (const std::string& f : failures) std::cout << "FAILED " << f << "\n";
  std::printf("flashattn check (%s): %d cases, %d comparisons passed, %d failed, %d skipped in %.1f s\n",
              backend_name(backend), static_cast<int>(cases.size()), passed, failed, skipped, seconds);
  return failed > 0 || passed == 0 ? 1 : 0;
}

}  // namespace cli
}  // namespace flashattn
