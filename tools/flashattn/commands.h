// The subcommands of `flashattn`. Each returns the process exit code: 0 success, 1 a failed run
// (a check that did not pass, a backend error), and throws UsageError for a bad command line.
#pragma once

#include "args.h"

namespace flashattn {
namespace cli {

int run_iomodel(ArgList& args);
int run_bench(ArgList& args);
int run_check(ArgList& args);

extern const char* const kIomodelHelp;
extern const char* const kBenchHelp;
extern const char* const kCheckHelp;

}  // namespace cli
}  // namespace flashattn
