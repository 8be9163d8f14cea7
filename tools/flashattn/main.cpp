// flashattn: benchmark, check and explain the library from the command line.
#include <cstdio>
#include <cstring>
#include <exception>
#include <string>
#include <vector>

#include "commands.h"

namespace {

const char* const kMainHelp =
    "usage: flashattn <command> [options]\n"
    "\n"
    "commands:\n"
    "  bench     time forward and backward over the benchmark protocol's shapes and check\n"
    "            each result against the fp64 reference on a sample\n"
    "  check     quick correctness sweep over dtypes and options; exits 1 on any failure\n"
    "  iomodel   bytes moved by naive vs tiled attention, counted and by formula\n"
    "\n"
    "Run 'flashattn <command> --help' for the options of a command.\n";

struct Command {
  const char* name;
  int (*run)(flashattn::cli::ArgList&);
  const char* const* help;
};

const Command kCommands[] = {
    {"bench", flashattn::cli::run_bench, &flashattn::cli::kBenchHelp},
    {"check", flashattn::cli::run_check, &flashattn::cli::kCheckHelp},
    {"iomodel", flashattn::cli::run_iomodel, &flashattn::cli::kIomodelHelp},
};

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || !std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h") || !std::strcmp(argv[1], "help")) {
    std::fputs(kMainHelp, argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  const std::string name = argv[1];
  for (const Command& cmd : kCommands) {
    if (name != cmd.name) continue;
    flashattn::cli::ArgList args(std::vector<std::string>(argv + 2, argv + argc));
    if (args.help_requested()) {
      std::fputs(*cmd.help, stdout);
      return 0;
    }
    try {
      return cmd.run(args);
    } catch (const flashattn::cli::UsageError& e) {
      std::fprintf(stderr, "flashattn %s: %s\nRun 'flashattn %s --help' for usage.\n", cmd.name, e.what(), cmd.name);
      return 2;
    } catch (const std::exception& e) {
      std::fprintf(stderr, "flashattn %s: error: %s\n", cmd.name, e.what());
      return 1;
    }
  }
  std::fprintf(stderr, "flashattn: unknown command '%s'\n\n%s", name.c_str(), kMainHelp);
  return 2;
}
