#pragma once

// Op `silu_and_mul` -> elementwise_perf (op_name "silu_and_mul"), float32: the
// gated activation of a SwiGLU MLP. Input [num_tokens][2·hidden_size] (first half
// gate, second half up), output [num_tokens][hidden_size]:
// out = silu(gate) · up, silu(g) = g / (1 + exp(−g)).
// kernel_source "servecast_cpu_silu_and_mul".
// Check: every element when num_tokens·hidden_size <= 2^18, else 64 rows (first and
// last included) against double precision, tolerance 16u·|out| (a handful of
// roundings and one expf, each well under 2u, and exp's error is damped by
// e/(1+e) <= 1).

#include <cstdint>
#include <memory>

#include "collect/op.h"

namespace servecast::cpu {

void SiluAndMul(const float* in, float* out, std::int64_t num_tokens, std::int64_t hidden_size);

std::unique_ptr<collect::Op> MakeSiluAndMulOp();

}  // namespace servecast::cpu
