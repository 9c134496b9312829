#pragma once

// The names every CUDA op file uses: the collector's case-result vocabulary, and
// the unit roundoff of bf16 in which the checks state their tolerances.

#include "collect/disposition.h"
#include "collect/op.h"
#include "collect/params.h"

namespace servecast::cuda {

using collect::CaseResult;
using collect::Disposition;
using collect::FailureClass;
using collect::Params;

inline constexpr double kBf16Roundoff = 0x1p-8;  // bf16: 8-bit significand

}  // namespace servecast::cuda
