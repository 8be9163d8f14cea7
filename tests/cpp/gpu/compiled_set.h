// What this build compiled, as tests/cpp/gpu/CMakeLists.txt passes it: FLASHATTN_TEST_HDIMS and
// FLASHATTN_TEST_DTYPES, comma-separated ("64,128", "bf16").
#pragma once

#include <sstream>
#include <string>

namespace fa_test {

inline bool listed(const std::string& csv, const std::string& item) {
  std::stringstream ss(csv);
  for (std::string tok; std::getline(ss, tok, ',');) {
    if (tok == item) return true;
  }
  return false;
}

// Whether FLASHATTN_DTYPES x FLASHATTN_HDIMS holds (dtype, head dim); dtype as "bf16" / "fp16".
inline bool compiled(const std::string& dtype, int headdim) {
  return listed(FLASHATTN_TEST_DTYPES, dtype) && listed(FLASHATTN_TEST_HDIMS, std::to_string(headdim));
}

}  // namespace fa_test
