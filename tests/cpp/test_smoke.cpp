#include <gtest/gtest.h>
#include <cmath>
#include <random>
#include <vector>
#include "flashattn/flashattn.h"
using namespace flashattn;
TEST(Smoke, FlashMatchesReference) {
  for (int causal = 0; causal < 2; ++causal)
  for (int D : {8, 64, 80, 128, 256}) {
  const int B = 2, Sq = 300, Sk = 333, H = 4, Hk = 2;
  std::mt19937 rng(1);
  std::normal_distribution<float> nd;
  std::vector<float> q(B*Sq*H*D), k(B*Sk*Hk*D), v(B*Sk*Hk*D), o1(q.size(), NAN), o2(q.size(), NAN), l1(B*H*Sq), l2(B*H*Sq);
  for (auto* x : {&q, &k, &v}) for (auto& e : *x) e = nd(rng);
  AttentionParams prm; prm.causal = causal; prm.softcap = 3.0f;
  ForwardArgs a{make_tensor(q.data(), DType::kFloat32, {B,Sq,H,D}), make_tensor(k.data(), DType::kFloat32, {B,Sk,Hk,D}),
                make_tensor(v.data(), DType::kFloat32, {B,Sk,Hk,D}), make_tensor(o1.data(), DType::kFloat32, {B,Sq,H,D}),
                make_tensor(l1.data(), DType::kFloat32, {B,H,Sq})};
  prm.backend = Backend::kCPUReference;
  ASSERT_TRUE(forward(a, prm).ok());
  a.out.data = o2.data(); a.lse.data = l2.data();
  prm.backend = Backend::kCPU;
  Status s = forward(a, prm);
  ASSERT_TRUE(s.ok()) << s.message;
  double num = 0, den = 0;
  for (size_t i = 0; i < q.size(); ++i) { num += (o1[i]-o2[i])*(o1[i]-o2[i]); den += o1[i]*o1[i]; }
  EXPECT_LT(std::sqrt(num/den), 1e-5) << D;
  double ln = 0;
  for (size_t i = 0; i < l1.size(); ++i) ln = std::max(ln, (double)std::fabs(l1[i]-l2[i]));
  EXPECT_LT(ln, 1e-4);
  }
}
