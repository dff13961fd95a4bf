// core/src/util/all_finite.h against libtorch's at::isfinite(t).all(), the
// check it replaces: every float dtype, empty and one-element tensors, a NaN,
// +Inf or -Inf at the first, a middle and the last position, strided views,
// tensors the reduction splits into chunks, and integer and bool tensors.
#include <gtest/gtest.h>

#include <limits>
#include <optional>
#include <string>
#include <vector>

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

// first_non_finite_index against isfinite(t).all() over lists of tensors:
// every tensor finite, one bad tensor among good ones (first, middle, last),
// finite terms whose fp32 sum overflows (the exact fallback must still say
// finite), and integer and empty tensors in the list.
TEST(AllFinite, FirstNonFiniteIndexAgreesWithIsfiniteAll) {
  at::manual_seed(5);
  const auto reference = [](const std::vector<at::Tensor>& ts) -> std::optional<size_t> {
    for (size_t i = 0; i < ts.size(); ++i)
      if (!at::isfinite(ts[i]).all().item<bool>()) return i;
    return std::nullopt;
  };
  const float huge = 3e38f;
  for (const at::ScalarType dtype : {at::kFloat, at::kBFloat16, at::kDouble}) {
    const std::string name = c10::toString(dtype);
    std::vector<at::Tensor> good = {at::randn({300, 7}).to(dtype), at::empty({0}, dtype), at::ones({4}, at::kLong),
                                    at::randn({70000}).to(dtype), at::randn({5}).to(dtype).t()};
    EXPECT_EQ(ftcore::first_non_finite_index(good), reference(good)) << name << " all finite";
    EXPECT_EQ(ftcore::first_non_finite_index({}), std::nullopt);
    // Finite, but the fp32 sum is +Inf: the exact check must clear it.
    const std::vector<at::Tensor> overflowing = {at::full({4}, huge, at::kFloat).to(dtype), good[0]};
    EXPECT_FALSE(at::isfinite(at::sum(overflowing[0], at::kFloat)).item<bool>()) << name;
    EXPECT_EQ(ftcore::first_non_finite_index(overflowing), std::nullopt) << name << " overflowing sum";
    for (const double special : {std::numeric_limits<double>::quiet_NaN(), std::numeric_limits<double>::infinity(),
                                 -std::numeric_limits<double>::infinity()})
      for (const size_t bad_tensor : {size_t{0}, size_t{3}, size_t{4}}) {
        std::vector<at::Tensor> ts;
        for (const at::Tensor& t : good) ts.push_back(t.clone());
        ts[bad_tensor].view({-1})[ts[bad_tensor].numel() / 2] = special;
        // A later bad tensor too: the first must be named.
        if (bad_tensor == 0) ts[3].view({-1})[0] = special;
        const std::string where = name + " " + std::to_string(special) + " in tensor " + std::to_string(bad_tensor);
        EXPECT_EQ(ftcore::first_non_finite_index(ts), reference(ts)) << where;
        EXPECT_EQ(ftcore::first_non_finite_index(ts), std::optional<size_t>(bad_tensor)) << where;
      }
  }
  // +Inf and -Inf in one tensor sum to NaN; still not finite.
  const std::vector<at::Tensor> both = {at::tensor({1.0f, std::numeric_limits<float>::infinity(),
                                                    -std::numeric_limits<float>::infinity()})};
  EXPECT_EQ(ftcore::first_non_finite_index(both), std::optional<size_t>(0));
}
