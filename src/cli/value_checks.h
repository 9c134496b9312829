#pragma once

// Range checks for numeric and named command-line values, shared by every
// command. CLI11 reports a failed check as "--flag: <message>" and exits 2;
// the messages state the valid range in words (not CLI11's 1.79e308 bounds),
// and NaN and infinities are refused everywhere.

#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>

namespace servecast::cli {

// Tokens of one request (input, output, prefix, prefill budget): 2^24 is far
// past any model's context and keeps every product of sizes exact.
inline constexpr std::int64_t kMaxTokens = std::int64_t{1} << 24;
// Requests batched on one worker.
inline constexpr std::int64_t kMaxBatch = std::int64_t{1} << 20;
// GPUs of one deployment or one parallel dimension.
inline constexpr std::int64_t kMaxGpus = 4096;

// An integer in [lo, hi].
CLI::Validator IntIn(std::int64_t lo, std::int64_t hi);
// A finite number in [lo, hi] (`open_low`: in (lo, hi]).
CLI::Validator NumberIn(double lo, double hi, bool open_low = false);
// An expert-load distribution: balanced (uniform), or power_law_<alpha> with a finite alpha > 0.
CLI::Validator ExpertLoad();

}  // namespace servecast::cli
