#include "args.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>

namespace flashattn {
namespace cli {

bool ArgList::help_requested() const {
  return std::any_of(args_.begin(), args_.end(), [](const std::string& a) { return a == "--help" || a == "-h"; });
}

bool ArgList::flag(const std::string& name) {
  const std::string option = "--" + name;
  for (auto it = args_.begin(); it != args_.end(); ++it) {
    if (*it == option) {
      args_.erase(it);
      return true;
    }
    if (it->rfind(option + "=", 0) == 0) throw UsageError("option " + option + " takes no value; got '" + *it + "'");
  }
  return false;
}

std::optional<std::string> ArgList::value(const std::string& name) {
  const std::string option = "--" + name;
  for (auto it = args_.begin(); it != args_.end(); ++it) {
    if (it->rfind(option + "=", 0) == 0) {
      std::string v = it->substr(option.size() + 1);
      args_.erase(it);
      return v;
    }
    if (*it == option) {
      if (it + 1 == args_.end() || (it + 1)->rfind("--", 0) == 0) throw UsageError("option " + option + " needs a value");
      std::string v = *(it + 1);
      args_.erase(it, it + 2);
      return v;
    }
  }
  return std::nullopt;
}

std::string ArgList::text(const std::string& name, const std::string& fallback) {
  auto v = value(name);
  return v ? *v : fallback;
}

int64_t ArgList::integer(const std::string& name, int64_t fallback, int64_t min, int64_t max) {
  auto v = value(name);
  return v ? parse_integer("--" + name, *v, min, max) : fallback;
}

std::string ArgList::choice(const std::string& name, const std::string& fallback,
                            std::initializer_list<const char*> allowed) {
  const std::string v = text(name, fallback);
  std::string list;
  for (const char* a : allowed) {
    if (v == a) return v;
    list += (list.empty() ? "" : ", ") + std::string(a);
  }
  throw UsageError("--" + name + " is '" + v + "'; expected one of " + list);
}

void ArgList::finish() const {
  if (args_.empty()) return;
  const std::string& a = args_.front();
  if (a.rfind("-", 0) == 0) throw UsageError("unknown option '" + a + "'");
  throw UsageError("unexpected argument '" + a + "'");
}

int64_t parse_integer(const std::string& what, const std::string& text, int64_t min, int64_t max) {
  errno = 0;
  char* end = nullptr;
  const long long v = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || errno == ERANGE) {
    throw UsageError(what + " is '" + text + "'; expected an integer");
  }
  if (v < min || v > max) {
    throw UsageError(what + " is " + text + "; expected " + std::to_string(min) + ".." + std::to_string(max));
  }
  return v;
}

DType parse_dtype(const std::string& text) {
  if (text == "fp32" || text == "float32") return DType::kFloat32;
  if (text == "fp16" || text == "float16") return DType::kFloat16;
  if (text == "bf16" || text == "bfloat16") return DType::kBFloat16;
  throw UsageError("dtype '" + text + "' is not known; expected fp32, fp16 or bf16");
}

const char* short_dtype_name(DType dtype) {
  switch (dtype) {
    case DType::kFloat32: return "fp32";
    case DType::kFloat16: return "fp16";
    case DType::kBFloat16: return "bf16";
    case DType::kInt32: return "int32";
  }
  return "?";
}

Backend resolve_backend(const std::string& text) {
  if (text == "cpu") return Backend::kCPU;
  if (text == "auto") return cuda_available() ? Backend::kCUDA : Backend::kCPU;
  if (text == "cuda") {
#if !defined(FLASHATTN_WITH_CUDA)
    throw UsageError("--backend cuda: this build of flashattn has no CUDA backend (configured with FLASHATTN_CUDA=OFF "
                     "or without nvcc); use --backend cpu, or rebuild with -DFLASHATTN_CUDA=ON");
#else
    if (!cuda_available()) throw UsageError("--backend cuda: no usable CUDA device was found; use --backend cpu");
    return Backend::kCUDA;
#endif
  }
  throw UsageError("--backend is '" + text + "'; expected auto, cpu or cuda");
}

}  // namespace cli
}  // namespace flashattn
