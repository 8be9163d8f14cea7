// Output formats: an aligned text table for people and one JSON object per line for machines.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

namespace flashattn {
namespace cli {

class Table {
 public:
  explicit Table(std::vector<std::string> header) : header_(std::move(header)) {}
  void add_row(std::vector<std::string> cells) { rows_.push_back(std::move(cells)); }
  // Columns padded to their widest cell; text left-aligned, numbers right-aligned.
  void print(std::ostream& os) const;

 private:
  std::vector<std::string> header_;
  std::vector<std::vector<std::string>> rows_;
};

// Builds one flat JSON object; keys keep the order they were added in.
class JsonObject {
 public:
  JsonObject& add(const std::string& key, const std::string& value);
  JsonObject& add(const std::string& key, const char* value) { return add(key, std::string(value)); }
  JsonObject& add(const std::string& key, double value);  // NaN and infinities become null
  JsonObject& add(const std::string& key, int64_t value);
  JsonObject& add(const std::string& key, int value) { return add(key, static_cast<int64_t>(value)); }
  JsonObject& add(const std::string& key, bool value);
  std::string str() const { return "{" + body_ + "}"; }

 private:
  void key(const std::string& k);
  std::string body_;
};

std::string json_quote(const std::string& s);
// Fixed-point with `digits` after the point; "nan" for NaN.
std::string format_fixed(double v, int digits);
// Scientific with 2 significant decimals, for errors: 3.1e-06.
std::string format_sci(double v);
// 1.23 GB / 456.7 MB / 12.0 KB / 512 B.
std::string format_bytes(double bytes);

}  // namespace cli
}  // namespace flashattn
