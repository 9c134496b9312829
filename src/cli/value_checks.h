#pragma once

// Range checks for numeric and named command-line values, shared by every
// command. CLI11 reports a failed check as "--flag: <message>" and exits 2;
// the messages state the valid range in words (not CLI11's 1.79e308 bounds),
// and NaN and infinities are refused everywhere.

#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>
#include <vector>

namespace servecast::cli {

// Tokens of one request (input, output, prefix, prefill budget): 2^24 is far
// past any model's context and keeps every product of sizes exact.
inline constexpr std::int64_t kMaxTokens = std::int64_t{1} << 24;
// Output tokens of one request in the searching commands (default, generate,
// recommend, support): every candidate sums its decode at stride 32, so the
// search's time grows with --osl; 2^17 keeps one search of 8 GPUs under ~30 s.
inline constexpr std::int64_t kMaxSearchOsl = std::int64_t{1} << 17;
// Decode steps `estimate` evaluates, ceil((osl - 1) / stride), in the static and
// disagg modes (each step is one pass over the op list; agg is in closed form).
inline constexpr std::int64_t kMaxDecodeSteps = std::int64_t{1} << 16;
// Requests batched on one worker.
inline constexpr std::int64_t kMaxBatch = std::int64_t{1} << 20;
// GPUs of one deployment or one parallel dimension.
inline constexpr std::int64_t kMaxGpus = 4096;

// An integer in [lo, hi].
CLI::Validator IntIn(std::int64_t lo, std::int64_t hi);
// A finite number in [lo, hi] (`open_low`: in (lo, hi]).
CLI::Validator NumberIn(double lo, double hi, bool open_low = false);
// UsageError when --osl at --stride needs more than kMaxDecodeSteps evaluated
// decode steps, naming both flags and the values that fit.
void RequireDecodeSteps(std::int64_t osl, std::int64_t stride);
// An expert-load distribution: balanced (uniform), or power_law_<alpha> with a finite alpha > 0.
CLI::Validator ExpertLoad();

// A text value that may not be empty (an empty --gpus '' fell back to the
// default devices, an empty --image wrote a manifest without an image).
CLI::Validator NonEmpty(const std::string& expected);

// Adds NonEmpty to every option of `app` and its subcommands that names a file
// or folder (--out, --run-dir, --cases, --systems, --save-dir, a positional
// table or data dir, ...): an empty value ("$UNSET") silently meant the default
// folder, or "cannot create directory ''" at exit 3.
void RefuseEmptyPaths(CLI::App& app);

// The name IntIn and NumberIn give their validators.
inline constexpr const char* kRangeCheck = "servecast-range";
// "<command> --flag" of every option of `app` and its subcommands (the hidden
// ones, group "", aside) that takes a number (CLI11 type INT, UINT or FLOAT) and
// has no IntIn / NumberIn check: a value CLI11 alone would take unchecked (NaN,
// a negative count, 1e308) or refuse with its 1.79e308 bounds. Main refuses to
// run while the list is not empty, so every test of the binary guards it.
std::vector<std::string> UncheckedNumericOptions(CLI::App& app);

}  // namespace servecast::cli
