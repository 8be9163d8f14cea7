// Command-line arguments of one subcommand: `--name value`, `--name=value` and bare `--flag`.
// Every accessor consumes what it reads, so finish() can name any argument nobody asked for.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "flashattn/flashattn.h"

namespace flashattn {
namespace cli {

// A mistake in the command line: reported with the command's usage and exit code 2.
struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

class ArgList {
 public:
  explicit ArgList(std::vector<std::string> args) : args_(std::move(args)) {}

  bool help_requested() const;
  bool flag(const std::string& name);
  std::optional<std::string> value(const std::string& name);
  std::string text(const std::string& name, const std::string& fallback);
  int64_t integer(const std::string& name, int64_t fallback, int64_t min, int64_t max);
  std::string choice(const std::string& name, const std::string& fallback, std::initializer_list<const char*> allowed);
  // Throws UsageError naming the first argument that no accessor consumed.
  void finish() const;

 private:
  std::vector<std::string> args_;
};

int64_t parse_integer(const std::string& what, const std::string& text, int64_t min, int64_t max);

// "fp32" | "fp16" | "bf16" (and the long names dtype_name prints).
DType parse_dtype(const std::string& text);
const char* short_dtype_name(DType dtype);
// "auto" | "cpu" | "cuda" -> the backend that will run: auto picks CUDA where a device is usable.
// Throws UsageError when CUDA is asked for in a build without it.
Backend resolve_backend(const std::string& text);

}  // namespace cli
}  // namespace flashattn
