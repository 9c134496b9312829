#pragma once

// OpenBLAS, opened at run time on first use (dlopen) rather than linked: a linked
// OpenBLAS starts its thread pool when the binary loads, and those threads spin for
// a while even in commands that never run a GEMM (every estimator command). Only the
// cpu backend's workers load it.

#include <cblas.h>

#include <cstdint>

namespace servecast::cpu {

struct OpenBlas {
  using SgemmFn = void (*)(CBLAS_ORDER, CBLAS_TRANSPOSE, CBLAS_TRANSPOSE, blasint, blasint, blasint, float,
                           const float*, blasint, const float*, blasint, float, float*, blasint);
  // cblas_sbgemm of OpenBLAS >= 0.3.10 (bfloat16 as uint16_t; LP64 blasint).
  using SbgemmFn = void (*)(CBLAS_ORDER, CBLAS_TRANSPOSE, CBLAS_TRANSPOSE, blasint, blasint, blasint, float,
                            const std::uint16_t*, blasint, const std::uint16_t*, blasint, float, float*, blasint);
  SgemmFn sgemm = nullptr;
  SbgemmFn sbgemm = nullptr;  // null when this OpenBLAS does not export it
  const char* (*get_config)() = nullptr;
  char* (*get_corename)() = nullptr;  // optional
  void (*set_num_threads)(int) = nullptr;
  int (*get_num_threads)() = nullptr;
};

// Opens libopenblas.so.0 (else libopenblas.so) once; thread-safe. Throws
// StartupError naming the library and dlerror() when it or a required symbol is
// missing.
const OpenBlas& LoadOpenBlas();

}  // namespace servecast::cpu
