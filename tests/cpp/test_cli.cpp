// The `flashattn` command-line tool, run as a user would: exit codes, help, JSON on stdout.
// The binary is FLASHATTN_CLI_PATH when the build defines it, else found next to this test in the
// build tree (tools/flashattn/flashattn); the tests skip when it is not there.
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <sstream>
#include <string>
#include <vector>

#include "flashattn/flashattn.h"

namespace {

std::string cli_path() {
#if defined(FLASHATTN_CLI_PATH)
  return FLASHATTN_CLI_PATH;
#else
  char buf[4096];
  const ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return "";
  std::string self(buf, static_cast<size_t>(n));
  for (int up = 0; up < 3; ++up) self = self.substr(0, self.rfind('/'));  // build/tests/cpp/x -> build
  return self + "/tools/flashattn/flashattn";
#endif
}

struct CliResult {
  int exit_code = -1;
  std::string out;  // stdout only; stderr goes to a separate pipe that is discarded
};

CliResult run_cli(const std::string& args) {
  CliResult r;
  const std::string cmd = "'" + cli_path() + "' " + args + " 2>/dev/null";
  FILE* pipe = popen(cmd.c_str(), "r");
  if (!pipe) return r;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, pipe)) > 0) r.out.append(buf, n);
  const int status = pclose(pipe);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

std::vector<std::string> lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream is(text);
  std::string line;
  while (std::getline(is, line)) out.push_back(line);
  return out;
}

// The number after "key": in a flat JSON object.
double json_number(const std::string& obj, const std::string& key) {
  const size_t at = obj.find("\"" + key + "\": ");
  if (at == std::string::npos) return -1.0;
  return std::stod(obj.substr(at + key.size() + 4));
}

class Cli : public ::testing::Test {
 protected:
  void SetUp() override {
    if (access(cli_path().c_str(), X_OK) != 0) GTEST_SKIP() << "flashattn binary not found at " << cli_path();
  }
};

TEST_F(Cli, HelpListsTheCommands) {
  const CliResult r = run_cli("--help");
  EXPECT_EQ(r.exit_code, 0);
  for (const char* cmd : {"bench", "check", "iomodel"}) EXPECT_NE(r.out.find(cmd), std::string::npos) << cmd;
  for (const char* cmd : {"bench", "check", "iomodel"}) {
    const CliResult h = run_cli(std::string(cmd) + " --help");
    EXPECT_EQ(h.exit_code, 0) << cmd;
    EXPECT_NE(h.out.find("usage: flashattn " + std::string(cmd)), std::string::npos) << cmd;
  }
}

TEST_F(Cli, BadArgumentsExitWithTwo) {
  for (const char* args : {"", "frobnicate", "bench --dtype int8", "bench --backend tpu", "bench --threads -1",
                           "bench --shapes 1x2x3", "iomodel --seqlen 0", "iomodel --seqlen abc", "iomodel --headdim",
                           "check --bogus", "iomodel --causal=yes"}) {
    EXPECT_EQ(run_cli(args).exit_code, 2) << args;
  }
  if (!flashattn::cuda_available()) EXPECT_EQ(run_cli("bench --backend cuda").exit_code, 2);
}

TEST_F(Cli, IomodelJsonCountsMatchTheFormula) {
  const CliResult r = run_cli("iomodel --json --seqlen 1000 --seqlen-k 1500 --headdim 64 --block-q 128 --block-k 64");
  ASSERT_EQ(r.exit_code, 0);
  for (const char* algo : {"naive", "tiled"}) {
    for (const char* dir : {"read", "write"}) {
      const std::string key = std::string(algo) + "_" + dir;
      EXPECT_EQ(json_number(r.out, key + "_counted"), json_number(r.out, key + "_formula")) << key;
    }
  }
  EXPECT_GT(json_number(r.out, "reduction_counted"), 1.0);
}

TEST_F(Cli, BenchJsonIsOneObjectPerLineWithSmallErrors) {
  const CliResult r = run_cli("bench --backend cpu --shapes 1x2x160x64 --reps 2 --json --no-progress");
  ASSERT_EQ(r.exit_code, 0);
  const std::vector<std::string> ls = lines(r.out);
  ASSERT_EQ(ls.size(), 5u);  // header, then fwd and bwd for non-causal and causal
  EXPECT_NE(ls[0].find("\"type\": \"header\""), std::string::npos);
  EXPECT_NE(ls[0].find("\"simd\""), std::string::npos);
  for (size_t i = 1; i < ls.size(); ++i) {
    EXPECT_EQ(ls[i].front(), '{');
    EXPECT_EQ(ls[i].back(), '}');
    EXPECT_GT(json_number(ls[i], "time_ms"), 0.0) << ls[i];
    const double err = json_number(ls[i], "rel_error");
    EXPECT_GE(err, 0.0) << ls[i];
    EXPECT_LT(err, 1e-5) << ls[i];
  }
}

TEST_F(Cli, CheckPassesOnTheCpuBackend) {
  const CliResult r = run_cli("check --backend cpu --dtype fp32 --no-progress");
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("0 failed"), std::string::npos) << r.out;
}

}  // namespace
