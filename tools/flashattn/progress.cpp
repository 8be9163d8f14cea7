#include "progress.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>

namespace flashattn {
namespace cli {
namespace {

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

constexpr int kBarWidth = 30;

}  // namespace

ProgressBar::ProgressBar(int total, bool enabled)
    : total_(total), enabled_(enabled), tty_(isatty(fileno(stderr)) != 0), start_s_(now_s()) {}

ProgressBar::~ProgressBar() { finish(); }

void ProgressBar::begin(const std::string& label) {
  if (!enabled_) return;
  if (tty_) {
    draw(label);
  } else {
    std::fprintf(stderr, "[%d/%d] %s\n", done_ + 1, total_, label.c_str());
  }
}

void ProgressBar::end() { ++done_; }

void ProgressBar::clear_line() {
  if (!enabled_ || !tty_) return;
  std::fprintf(stderr, "\r\x1b[K");
  std::fflush(stderr);
}

void ProgressBar::draw(const std::string& label) {
  const int filled = total_ > 0 ? kBarWidth * done_ / total_ : kBarWidth;
  std::string bar(static_cast<size_t>(filled), '#');
  bar.resize(kBarWidth, '.');
  // \x1b[K erases what a longer previous label left on the line.
  std::fprintf(stderr, "\r[%s] %d/%d %5.0fs  %s\x1b[K", bar.c_str(), done_, total_, now_s() - start_s_,
               label.c_str());
  std::fflush(stderr);
}

void ProgressBar::finish() {
  if (finished_) return;
  finished_ = true;
  clear_line();
}

}  // namespace cli
}  // namespace flashattn
