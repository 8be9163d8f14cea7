#include "common/checks.h"

#include <cmath>
#include <sstream>

namespace fa_test {
namespace {

using Role = AttnCase::Role;

int64_t count_nan(const HostTensor& t) {
  int64_t n = 0;
  for (int64_t i = 0; i < t.numel(); ++i) n += std::isnan(t.get(i)) ? 1 : 0;
  return n;
}

// Appends a complaint about `t` to `os` when some element is not finite or a stray write hit padding.
bool tensor_written(const char* name, const HostTensor& used, const HostTensor& whole, bool allow_neg_inf,
                    std::ostream& os) {
  bool ok = true;
  const int64_t bad = allow_neg_inf ? count_nan(used) : used.count_nonfinite();
  if (bad != 0) {
    os << name << ": " << bad << " of " << used.numel() << " elements not written or not finite; ";
    ok = false;
  }
  if (allow_neg_inf) {
    for (int64_t i = 0; i < used.numel(); ++i) {
      if (std::isinf(used.get(i)) && used.get(i) > 0) {
        os << name << ": +inf at " << i << "; ";
        ok = false;
        break;
      }
    }
  }
  if (!whole.padding_intact()) {
    os << name << ": a write landed outside the view (padding changed); ";
    ok = false;
  }
  return ok;
}

// With seqused, rows past a sequence's used length must still hold the poison.
bool unused_untouched(const char* name, const AttnCase& c, const HostTensor& whole, Role role, std::ostream& os) {
  if (!c.spec.has_seqused()) return true;
  const int64_t written = c.written_unused(whole, role);
  if (written == 0) return true;
  os << name << ": " << written << " elements of rows past seqused were written; ";
  return false;
}

double l2_norm(const HostTensor& t) {
  double sq = 0.0;
  for (int64_t i = 0; i < t.numel(); ++i) sq += static_cast<double>(t.get(i)) * t.get(i);
  return std::sqrt(sq);
}

// ||a - ref|| / ||ref||, or / ||magnitude|| where the reference has cancelled below 1/1000 of it.
// Sums of n terms of random sign keep about 1/sqrt(n) of their magnitude, so below 1e-3 (n of a
// million) ordinary cases never take the second branch.
double rel_l2_against_impl(const HostTensor& a, const HostTensor& ref, const HostTensor& magnitude) {
  const double rel = rel_l2(a, ref);
  const double ref_norm = l2_norm(ref), mag_norm = l2_norm(magnitude);
  if (!std::isfinite(rel) || ref_norm >= 1e-3 * mag_norm) return rel;
  return (ref_norm > 0.0 ? rel * ref_norm : rel) / mag_norm;
}

}  // namespace

::testing::AssertionResult forward_written(const AttnCase& c, const ForwardResult& r) {
  if (!r.status.ok()) return ::testing::AssertionFailure() << "forward failed: " << r.status.message;
  std::ostringstream os;
  bool ok = tensor_written("out", c.used_part(r.out, Role::kQ), r.out, false, os);
  if (r.lse.defined()) ok &= tensor_written("lse", c.used_part(r.lse, Role::kLse), r.lse, true, os);
  ok &= unused_untouched("out", c, r.out, Role::kQ, os);
  if (r.lse.defined()) ok &= unused_untouched("lse", c, r.lse, Role::kLse, os);
  return ok ? ::testing::AssertionSuccess() : ::testing::AssertionFailure() << os.str();
}

::testing::AssertionResult backward_written(const AttnCase& c, const BackwardResult& r) {
  if (!r.status.ok()) return ::testing::AssertionFailure() << "backward failed: " << r.status.message;
  std::ostringstream os;
  bool ok = tensor_written("dq", c.used_part(r.dq, Role::kQ), r.dq, false, os);
  ok &= tensor_written("dk", c.used_part(r.dk, Role::kK), r.dk, false, os);
  ok &= tensor_written("dv", c.used_part(r.dv, Role::kK), r.dv, false, os);
  ok &= unused_untouched("dq", c, r.dq, Role::kQ, os);
  ok &= unused_untouched("dk", c, r.dk, Role::kK, os);
  ok &= unused_untouched("dv", c, r.dv, Role::kK, os);
  return ok ? ::testing::AssertionSuccess() : ::testing::AssertionFailure() << os.str();
}

::testing::AssertionResult forward_close(const AttnCase& c, const ForwardResult& got, const ForwardResult& ref,
                                         Tolerance tol) {
  ::testing::AssertionResult written = forward_written(c, got);
  if (!written) return written;
  if (!ref.status.ok()) return ::testing::AssertionFailure() << "oracle failed: " << ref.status.message;
  const double e_out = rel_l2(c.used_part(got.out, Role::kQ), c.used_part(ref.out, Role::kQ));
  double e_lse = 0.0;
  if (got.lse.defined() && ref.lse.defined()) {
    e_lse = lse_error(c.used_part(got.lse, Role::kLse), c.used_part(ref.lse, Role::kLse));
  }
  if (e_out <= tol.out && e_lse <= tol.lse) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "out rel_l2 " << e_out << " (tol " << tol.out << "), lse error " << e_lse
                                       << " (tol " << tol.lse << ")";
}

::testing::AssertionResult cpu_forward_matches_reference(const AttnCase& c, ForwardResult* got) {
  const ForwardResult ref = run_forward(c, flashattn::Backend::kCPUReference);
  ::testing::AssertionResult ref_written = forward_written(c, ref);
  if (!ref_written) return ::testing::AssertionFailure() << "reference: " << ref_written.message();
  ForwardResult flash = run_forward(c, flashattn::Backend::kCPU);
  ::testing::AssertionResult close = forward_close(c, flash, ref);
  if (got) *got = flash;
  return close;
}

::testing::AssertionResult backward_close(const AttnCase& c, const BackwardResult& got, const BackwardResult& ref,
                                          double tol) {
  ::testing::AssertionResult written = backward_written(c, got);
  if (!written) return written;
  if (!ref.status.ok()) return ::testing::AssertionFailure() << "oracle failed: " << ref.status.message;
  double e_dq = rel_l2(c.used_part(got.dq, Role::kQ), c.used_part(ref.dq, Role::kQ));
  double e_dk = rel_l2(c.used_part(got.dk, Role::kK), c.used_part(ref.dk, Role::kK));
  double e_dv = rel_l2(c.used_part(got.dv, Role::kK), c.used_part(ref.dv, Role::kK));
  if (e_dq <= tol && e_dk <= tol && e_dv <= tol) return ::testing::AssertionSuccess();
  const NaiveResult mag = naive_attention(c, DType::kFloat32, false, true);
  e_dq = rel_l2_against_impl(c.used_part(got.dq, Role::kQ), c.used_part(ref.dq, Role::kQ), c.used_part(mag.dq_mag, Role::kQ));
  e_dk = rel_l2_against_impl(c.used_part(got.dk, Role::kK), c.used_part(ref.dk, Role::kK), c.used_part(mag.dk_mag, Role::kK));
  e_dv = rel_l2_against_impl(c.used_part(got.dv, Role::kK), c.used_part(ref.dv, Role::kK), c.used_part(mag.dv_mag, Role::kK));
  if (e_dq <= tol && e_dk <= tol && e_dv <= tol) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "rel_l2 dq " << e_dq << " dk " << e_dk << " dv " << e_dv << " (tol " << tol
                                       << ")";
}

double rel_l2_or_magnitude(const HostTensor& a, const HostTensor& ref, const HostTensor& magnitude) {
  return rel_l2_against_impl(a, ref, magnitude);
}

::testing::AssertionResult within_twice_naive(const AttnCase& c, bool with_backward) {
  const AttnCase c32 = convert_case(c, DType::kFloat32);  // the same rounded values in float32
  const ForwardResult ref = run_forward(c32, Backend::kCPUReference);
  const NaiveResult naive = naive_attention(c, c.spec.dtype, with_backward);
  const ForwardResult f = run_forward(c, Backend::kCPU);
  ::testing::AssertionResult written = forward_written(c, f);
  if (!written) return written;
  // An error floor at float32 level, for cases where the naive error happens to be exactly 0 (a
  // single visible key makes O = v with no rounding at all).
  const double floor = 1e-5;
  std::ostringstream fails;
  auto used = [&](const HostTensor& t, Role r) { return c.used_part(t, r); };
  const double flash_out = rel_l2(used(f.out, Role::kQ), used(ref.out, Role::kQ));
  const double naive_out = rel_l2(used(naive.out, Role::kQ), used(ref.out, Role::kQ));
  if (!(flash_out <= 2 * naive_out + floor)) fails << "out: flash " << flash_out << " naive " << naive_out << "; ";
  const double flash_lse = lse_error(used(f.lse, Role::kLse), used(ref.lse, Role::kLse));
  const double naive_lse = lse_error(used(naive.lse, Role::kLse), used(ref.lse, Role::kLse));
  if (!(flash_lse <= 2 * naive_lse + floor)) fails << "lse: flash " << flash_lse << " naive " << naive_lse << "; ";
  if (with_backward) {
    const BackwardResult ref_g = run_backward(c32, Backend::kCPUReference, ref);
    const NaiveResult mag = naive_attention(c32, DType::kFloat32, false, true);
    const BackwardResult g = run_backward(c, Backend::kCPU, f);
    written = backward_written(c, g);
    if (!written) return written;
    const struct {
      const char* name;
      const HostTensor &got, &want, &base, &scale;
      Role role;
    } grads[] = {{"dq", g.dq, ref_g.dq, naive.dq, mag.dq_mag, Role::kQ},
                 {"dk", g.dk, ref_g.dk, naive.dk, mag.dk_mag, Role::kK},
                 {"dv", g.dv, ref_g.dv, naive.dv, mag.dv_mag, Role::kK}};
    for (const auto& t : grads) {
      const double e_flash = rel_l2_or_magnitude(used(t.got, t.role), used(t.want, t.role), used(t.scale, t.role));
      const double e_naive = rel_l2_or_magnitude(used(t.base, t.role), used(t.want, t.role), used(t.scale, t.role));
      if (!(e_flash <= 2 * e_naive + floor)) fails << t.name << ": flash " << e_flash << " naive " << e_naive << "; ";
    }
  }
  if (fails.str().empty()) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << fails.str();
}

}  // namespace fa_test
