#pragma once

#include "core/bf16.h"

// Op `gemm` -> gemm_perf: C[m×n] = A[m×k] · B[k×n], all row-major (B is k×n, not
// transposed), alpha 1, beta 0.
//   float32:  cblas_sgemm, kernel_source "openblas:sgemm".
//   bfloat16: cblas_sbgemm (bf16 A and B, fp32 C), resolved with dlsym at run time,
//             kernel_source "openblas:sbgemm"; requires the runtime feature
//             "cblas_sbgemm" (not exported by every OpenBLAS build).
// Check: a sample of C (all of it when m·n <= 4096, else the four corners and 256
// random elements) against a double-precision dot product. Tolerance per element:
// gamma_{k+2} · Σ_l |a_il · b_lj| — Higham's rigorous bound for an fp32 dot product
// of k terms in any order, so a correct kernel can never fail it (bf16 products are
// exact in fp32; bf16 gets twice the bound as margin for pairwise bf16 dot units).

#include <cstdint>
#include <memory>

#include "collect/op.h"

namespace servecast::cpu {

std::unique_ptr<collect::Op> MakeGemmOp();

// bfloat16 bits of a float, rounded to nearest even (NaN stays NaN).
inline std::uint16_t FloatToBf16(float f) { return F32ToBf16(f); }
inline float Bf16ToFloat(std::uint16_t b) { return Bf16ToF32(b); }

}  // namespace servecast::cpu
