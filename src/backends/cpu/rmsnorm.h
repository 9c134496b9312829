#pragma once

// Op `rmsnorm` -> elementwise_perf (op_name "rmsnorm"), float32:
// y[t][d] = x[t][d] / sqrt(mean_d(x[t]²) + 1e-6) · w[d], x and y [num_tokens][hidden_size].
// kernel_source "servecast_cpu_rmsnorm".
// Check: every element when num_tokens·hidden_size <= 2^18, else 64 rows (first and
// last included) against double precision, tolerance (gamma_hidden/2 + 8u)·|y|: the
// sum of squares has relative error <= gamma_hidden, halved by the square root, plus
// a few roundings.

#include <cstdint>
#include <memory>

#include "collect/op.h"

namespace servecast::cpu {

inline constexpr float kRmsNormEpsilon = 1e-6f;

void RmsNorm(const float* x, const float* w, float* y, std::int64_t num_tokens, std::int64_t hidden_size);

std::unique_ptr<collect::Op> MakeRmsNormOp();

}  // namespace servecast::cpu
