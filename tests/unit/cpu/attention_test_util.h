#pragma once

// A plain, unblocked attention written only for the tests: every output element
// in double precision, from contiguous [batch][token][head][dim] tensors.

#include <cmath>
#include <cstdint>
#include <vector>

namespace servecast::cpu::testing {

struct NaiveAttentionShape {
  std::int64_t batch, queries, keys, heads, kv_heads, dim, window;
  // The first query's position; query i is at position first_pos + i and sees the
  // keys at positions <= its own (and > its own − window when window > 0).
  std::int64_t first_pos;
};

// q and the result: [batch][queries][heads][dim]; k, v: [batch][keys][kv_heads][dim].
inline std::vector<double> NaiveAttention(const NaiveAttentionShape& s, const std::vector<float>& q,
                                          const std::vector<float>& k, const std::vector<float>& v) {
  std::vector<double> out(static_cast<std::size_t>(s.batch * s.queries * s.heads * s.dim), 0.0);
  const std::int64_t group = s.heads / s.kv_heads;
  for (std::int64_t b = 0; b < s.batch; ++b) {
    for (std::int64_t i = 0; i < s.queries; ++i) {
      const std::int64_t pos = s.first_pos + i;
      for (std::int64_t h = 0; h < s.heads; ++h) {
        const std::int64_t g = h / group;
        std::vector<double> weight(static_cast<std::size_t>(s.keys), 0.0);
        double top = -1e300;
        for (std::int64_t j = 0; j < s.keys; ++j) {
          bool visible = j <= pos && (s.window == 0 || j > pos - s.window);
          if (!visible) continue;
          double dot = 0;
          for (std::int64_t d = 0; d < s.dim; ++d)
            dot += double(q[((b * s.queries + i) * s.heads + h) * s.dim + d]) *
                   double(k[((b * s.keys + j) * s.kv_heads + g) * s.dim + d]);
          weight[j] = dot / std::sqrt(double(s.dim));
          top = std::max(top, weight[j]);
        }
        double total = 0;
        for (std::int64_t j = 0; j < s.keys; ++j) {
          bool visible = j <= pos && (s.window == 0 || j > pos - s.window);
          weight[j] = visible ? std::exp(weight[j] - top) : 0.0;
          total += weight[j];
        }
        for (std::int64_t j = 0; j < s.keys; ++j) {
          if (weight[j] == 0) continue;
          for (std::int64_t d = 0; d < s.dim; ++d)
            out[((b * s.queries + i) * s.heads + h) * s.dim + d] +=
                weight[j] / total * double(v[((b * s.keys + j) * s.kv_heads + g) * s.dim + d]);
        }
      }
    }
  }
  return out;
}

}  // namespace servecast::cpu::testing
