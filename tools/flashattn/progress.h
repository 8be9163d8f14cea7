// Progress on stderr while a sweep runs, so stdout stays clean for the table or --json. On a
// terminal one bar is redrawn in place; elsewhere (CI logs, pipes) one plain line per step.
#pragma once

#include <string>

namespace flashattn {
namespace cli {

class ProgressBar {
 public:
  ProgressBar(int total, bool enabled);
  ~ProgressBar();
  void begin(const std::string& label);  // step about to start
  void end();                            // step finished
  void clear_line();                     // before writing to a stdout that shares the terminal
  void finish();                         // clears the bar

 private:
  void draw(const std::string& label);
  int total_, done_ = 0;
  bool enabled_, tty_;
  bool finished_ = false;
  double start_s_;
};

}  // namespace cli
}  // namespace flashattn
