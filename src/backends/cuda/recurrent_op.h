#pragma once

// What the ops of the recurrent layers (gdn, mamba2) share around their kernels: the
// sequences and (sequence, head) pairs their reference checks, and the timing of the
// layer core's two kernels (the short convolution, then the scan or state update) as
// the two rows of one case.

#include <cstdint>
#include <functional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "backends/cuda/harness.h"
#include "collect/op.h"
#include "core/hash.h"

namespace servecast::cuda {

struct RecurrentSamples {
  std::vector<std::int64_t> seqs;                            // for the convolution
  std::vector<std::pair<std::int64_t, std::int64_t>> pairs;  // (sequence, head), the last runs in full
};

// Sequences 0, the last and one drawn from `seed`; (sequence, head) pairs (0, 0), one
// drawn, and (last, last) last.
inline RecurrentSamples SampleRecurrent(std::int64_t batch, std::int64_t heads, std::uint64_t seed) {
  SplitMix64 rng(seed);
  auto any = [&](std::int64_t n) { return static_cast<std::int64_t>(rng.Below(static_cast<std::uint64_t>(n))); };
  RecurrentSamples smp;
  const std::set<std::int64_t> seqs = {0, batch - 1, any(batch)};
  smp.seqs.assign(seqs.begin(), seqs.end());
  std::set<std::pair<std::int64_t, std::int64_t>> pairs = {{0, 0}};
  if (batch * heads > 2) pairs.insert({any(batch), any(heads)});
  pairs.erase({batch - 1, heads - 1});
  smp.pairs.assign(pairs.begin(), pairs.end());
  smp.pairs.emplace_back(batch - 1, heads - 1);
  return smp;
}

// The two kernels of a case, each timed with TimeOnDevice over `copies` input sets
// (launch(copy, stream)), and their rows: the convolution's, then the scan's.
struct TwoKernelTiming {
  using Launch = std::function<void(std::size_t copy, cudaStream_t st)>;
  collect::TimingStats conv, scan;

  void Time(const Launch& conv_launch, const Launch& scan_launch, int copies, double conv_bytes, double scan_bytes,
            const collect::RunContext& ctx) {
    TimeOptions opt;
    opt.copies = copies;
    opt.rotated_bytes = conv_bytes * copies;
    conv = TimeOnDevice(
        [&](cudaStream_t st, int iteration) { conv_launch(static_cast<std::size_t>(iteration % copies), st); },
        ctx.timing, opt, ctx.measure_power);
    opt.rotated_bytes = scan_bytes * copies;
    scan = TimeOnDevice(
        [&](cudaStream_t st, int iteration) { scan_launch(static_cast<std::size_t>(iteration % copies), st); },
        ctx.timing, opt, ctx.measure_power);
  }
  std::vector<collect::Params> Rows(const collect::Op& op, const collect::RunContext& ctx,
                                    const collect::Params& params, const std::string& conv_source,
                                    const std::string& scan_source) const {
    return {collect::MakeRow(op.table(), *ctx.runtime, op.name(), conv_source, params, conv, ctx.measure_power),
            collect::MakeRow(op.table(), *ctx.runtime, op.name(), scan_source, params, scan, ctx.measure_power)};
  }
};

}  // namespace servecast::cuda
