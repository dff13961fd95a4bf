// core/src/util/all_finite.h against libtorch's at::isfinite(t).all(), the
// check it replaces: every float dtype, empty and one-element tensors, a NaN,
// +Inf or -Inf at the first, a middle and the last position, strided views,
// tensors the reduction splits into chunks, and integer and bool tensors.
#include <gtest/gtest.h>

#include <limits>
#include <string>

#include <ATen/ATen.h>

#include "../../core/src/util/all_finite.h"

namespace {

void expect_same_verdict(const at::Tensor& t, const std::string& where) {
  EXPECT_EQ(ftcore::all_finite(t).item<bool>(), at::isfinite(t).all().item<bool>()) << where;
}

}  // namespace

TEST(AllFinite, AgreesWithIsfiniteAll) {
  at::manual_seed(3);
  const double specials[] = {std::numeric_limits<double>::quiet_NaN(), std::numeric_limits<double>::infinity(),
                             -std::numeric_limits<double>::infinity()};
  for (const at::ScalarType dtype : {at::kFloat, at::kBFloat16, at::kHalf, at::kDouble}) {
    const std::string name = c10::toString(dtype);
    expect_same_verdict(at::empty({0}, dtype), name + " empty");
    expect_same_verdict(at::empty({3, 0}, dtype), name + " empty 3 x 0");
    expect_same_verdict(at::randn({1}).to(dtype), name + " one element");
    const at::Tensor clean = (at::randn({37, 41}) * 1e3).to(dtype);
    expect_same_verdict(clean, name + " finite");
    expect_same_verdict(clean.t(), name + " finite, transposed");
    for (const double special : specials)
      for (const int64_t at_index : {int64_t{0}, int64_t{700}, clean.numel() - 1}) {
        at::Tensor bad = clean.clone();
        bad.view({-1})[at_index] = special;
        const std::string where = name + " " + std::to_string(special) + " at " + std::to_string(at_index);
        expect_same_verdict(bad, where);
        expect_same_verdict(bad.t(), where + ", transposed");
        expect_same_verdict(bad.view({-1}).slice(0, at_index, at_index + 1), where + ", alone");
      }
  }
  at::Tensor single_nan = at::full({}, std::numeric_limits<float>::quiet_NaN());
  EXPECT_FALSE(ftcore::all_finite(single_nan).item<bool>());
  EXPECT_TRUE(ftcore::all_finite(at::zeros({5})).item<bool>());
}

// Past at::internal::GRAIN_SIZE (32768 elements) the reduction splits into
// chunks combined afterwards: a special value in the last and a middle chunk.
TEST(AllFinite, AgreesWithIsfiniteAllAcrossChunks) {
  at::manual_seed(4);
  for (const at::ScalarType dtype : {at::kFloat, at::kBFloat16}) {
    const at::Tensor clean = at::randn({200003}).to(dtype);
    expect_same_verdict(clean, "large finite");
    for (const int64_t at_index : {int64_t{99000}, clean.numel() - 1})
      for (const double special : {std::numeric_limits<double>::quiet_NaN(), -std::numeric_limits<double>::infinity()}) {
        at::Tensor bad = clean.clone();
        bad[at_index] = special;
        expect_same_verdict(bad, "large, " + std::to_string(special) + " at " + std::to_string(at_index));
      }
  }
}

// Integer and bool tensors are finite, as at::isfinite says; aminmax alone would refuse some.
TEST(AllFinite, IntegerAndBoolTensorsAreFinite) {
  for (const at::ScalarType dtype : {at::kBool, at::kByte, at::kInt, at::kLong})
    expect_same_verdict(at::ones({5, 3}, dtype), c10::toString(dtype));
}
