#pragma once

// What the two CPU attention ops share: their parameters, the head-dim dispatch,
// the vectorizable inner loops, and the double-precision reference row.
//
// Semantics (both ops): causal attention with grouped KV heads (query head hq
// reads KV head hq / (num_heads / num_key_value_heads)), scale 1/sqrt(head_dim).
// A query at position p sees the keys at positions j <= p, and with window_size
// w > 0 only the last w of them (p − w < j <= p); window_size 0 means no window.

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "collect/op.h"

namespace servecast::cpu {

enum class AttentionPhase { kContext, kGeneration };

struct AttentionShape {
  std::int64_t batch = 1;
  std::int64_t isl = 1;  // query tokens per sequence
  std::int64_t num_heads = 1;
  std::int64_t num_kv_heads = 1;
  std::int64_t head_dim = 64;
  std::int64_t window = 0;  // 0: full causal
  std::int64_t step = 0;    // cached tokens before the queries (generation)

  std::int64_t group() const { return num_heads / num_kv_heads; }
};

// The parsed case, or the outcome to return when the case is invalid or not
// supported on the CPU (beam_width != 1, dtypes other than float32, isl != 1 for
// generation, step != 0 for context, a head_dim without a kernel instantiation).
struct AttentionParams {
  AttentionShape shape;
  std::optional<collect::CaseResult> failure;
};
AttentionParams ParseAttentionParams(const collect::Params& p, AttentionPhase phase);

// Head dims with a compiled kernel instantiation (all multiples of 8).
inline constexpr std::array<int, 8> kAttentionHeadDims = {32, 64, 80, 96, 128, 160, 192, 256};

// Calls fn(std::integral_constant<int, H>{}) for H == head_dim; false when there is
// no instantiation for head_dim.
template <class Fn>
bool DispatchHeadDim(std::int64_t head_dim, Fn&& fn) {
  switch (head_dim) {
    case 32:
      fn(std::integral_constant<int, 32>{});
      return true;
    case 64:
      fn(std::integral_constant<int, 64>{});
      return true;
    case 80:
      fn(std::integral_constant<int, 80>{});
      return true;
    case 96:
      fn(std::integral_constant<int, 96>{});
      return true;
    case 128:
      fn(std::integral_constant<int, 128>{});
      return true;
    case 160:
      fn(std::integral_constant<int, 160>{});
      return true;
    case 192:
      fn(std::integral_constant<int, 192>{});
      return true;
    case 256:
      fn(std::integral_constant<int, 256>{});
      return true;
    default:
      return false;
  }
}

// First key position a query at `pos` sees (the last is `pos`).
inline std::int64_t FirstVisibleKey(std::int64_t pos, std::int64_t window) {
  return window > 0 && pos - window + 1 > 0 ? pos - window + 1 : 0;
}

// Horizontal sum of 8 lanes in a fixed order.
inline float SumLanes(const float* lanes) {
  return ((lanes[0] + lanes[4]) + (lanes[1] + lanes[5])) + ((lanes[2] + lanes[6]) + (lanes[3] + lanes[7]));
}

// Dot product of two H-vectors with 8 independent partial sums: the compiler
// vectorizes the lanes without reassociating a single sum.
template <int H>
inline float DotLanes(const float* __restrict a, const float* __restrict b) {
  static_assert(H % 8 == 0);
  float acc[8] = {};
  for (int d = 0; d < H; d += 8)
    for (int u = 0; u < 8; ++u) acc[u] += a[d + u] * b[d + u];
  return SumLanes(acc);
}

// scores[j] = scale · q·key(j) for j in [0, count).
template <int H, class KeyRow>
inline void ScoreKeys(const float* __restrict q, KeyRow key, std::int64_t count, float scale,
                      float* __restrict scores) {
  for (std::int64_t j = 0; j < count; ++j) scores[j] = scale * DotLanes<H>(q, key(j));
}

// acc += Σ_j weights[j] · value(j) for j in [0, count), four value rows per pass
// over acc (a quarter of the loads and stores of acc; measured 20% faster than
// one row per pass with SSE2).
template <int H, class ValueRow>
inline void AccumulateValues(const float* __restrict weights, ValueRow value, std::int64_t count,
                             float* __restrict acc) {
  std::int64_t j = 0;
  for (; j + 4 <= count; j += 4) {
    const float* __restrict v0 = value(j);
    const float* __restrict v1 = value(j + 1);
    const float* __restrict v2 = value(j + 2);
    const float* __restrict v3 = value(j + 3);
    const float p0 = weights[j], p1 = weights[j + 1], p2 = weights[j + 2], p3 = weights[j + 3];
    for (int d = 0; d < H; ++d) acc[d] += (p0 * v0[d] + p1 * v1[d]) + (p2 * v2[d] + p3 * v3[d]);
  }
  for (; j < count; ++j) {
    const float* __restrict v = value(j);
    const float p = weights[j];
    for (int d = 0; d < H; ++d) acc[d] += p * v[d];
  }
}

// Online-softmax state of one query row: running max, running sum, and the
// unnormalized output in `acc`. Folds in `count` scores (already scaled) of keys
// whose values are the rows value(j); scores[] is overwritten with the weights.
template <int H, class ValueRow>
inline void OnlineSoftmaxUpdate(float* __restrict scores, std::int64_t count, ValueRow value, float& row_max,
                                float& row_sum, float* __restrict acc) {
  float new_max = row_max;
  for (std::int64_t j = 0; j < count; ++j) new_max = scores[j] > new_max ? scores[j] : new_max;
  const float correction = std::exp(row_max - new_max);  // exp(-inf) = 0 on the first block
  float sum = 0;
  for (std::int64_t j = 0; j < count; ++j) {
    scores[j] = std::exp(scores[j] - new_max);
    sum += scores[j];
  }
  row_sum = row_sum * correction + sum;
  row_max = new_max;
  if (correction != 1.0f)
    for (int d = 0; d < H; ++d) acc[d] *= correction;
  AccumulateValues<H>(scores, value, count, acc);
}

// Reference output of one query row in double precision (two-pass softmax), and
// per output element the scale Σ_j p_j |v_jd| that its tolerance is relative to.
// `key(j)` / `value(j)` return the head vectors of key position j; positions
// 0..pos are candidates, masked by the window (written independently of
// FirstVisibleKey on purpose).
struct ReferenceRow {
  std::vector<double> out;
  std::vector<double> scale;
};

template <class KeyRow, class ValueRow>
ReferenceRow ReferenceAttentionRow(const float* q, std::int64_t head_dim, std::int64_t pos, std::int64_t window,
                                   KeyRow key, ValueRow value) {
  const double scale = 1.0 / std::sqrt(static_cast<double>(head_dim));
  std::vector<double> scores;
  std::vector<std::int64_t> keys;
  double max_score = -INFINITY;
  for (std::int64_t j = 0; j <= pos; ++j) {
    if (window > 0 && pos - j >= window) continue;
    const float* k = key(j);
    double s = 0;
    for (std::int64_t d = 0; d < head_dim; ++d) s += static_cast<double>(q[d]) * static_cast<double>(k[d]);
    s *= scale;
    scores.push_back(s);
    keys.push_back(j);
    max_score = std::max(max_score, s);
  }
  double denom = 0;
  for (double& s : scores) {
    s = std::exp(s - max_score);
    denom += s;
  }
  ReferenceRow row{std::vector<double>(head_dim, 0.0), std::vector<double>(head_dim, 0.0)};
  for (std::size_t t = 0; t < keys.size(); ++t) {
    const float* v = value(keys[t]);
    double p = scores[t] / denom;
    for (std::int64_t d = 0; d < head_dim; ++d) {
      row.out[d] += p * v[d];
      row.scale[d] += p * std::fabs(static_cast<double>(v[d]));
    }
  }
  return row;
}

// Tolerance of an attention output element: kAttentionRtol · Σ_j p_j |v_jd| +
// kAttentionAtol. The output is a convex combination of values, so its error
// scales with that sum; fp32 accumulation over up to ~100k keys stays well under it.
inline constexpr double kAttentionRtol = 1e-4;
inline constexpr double kAttentionAtol = 1e-6;
inline constexpr const char* kAttentionToleranceRule = "1e-4 * sum_j p_j*|v_j| + 1e-6";

// Ranges of the deterministic inputs: queries are wider than keys so that the
// softmax is not flat (a flat softmax would hide masking errors).
inline constexpr float kQueryRange = 3.0f;
inline constexpr float kKeyValueRange = 1.0f;

}  // namespace servecast::cpu
