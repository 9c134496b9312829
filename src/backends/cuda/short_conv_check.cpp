// The short convolution's host reference (short_conv_check.h).

#include "backends/cuda/short_conv_check.h"

#include <algorithm>
#include <cmath>
#include <set>
#include <string>

#include "core/hash.h"

namespace servecast::cuda {
namespace {

double Silu(double x) { return x / (1.0 + std::exp(-x)); }

std::string At(const char* what, std::int64_t b, std::int64_t t, std::int64_t c) {
  std::string s = std::string(what) + "[b=" + std::to_string(b);
  if (t >= 0) s += ",t=" + std::to_string(t);
  return s + ",c=" + std::to_string(c) + "]";
}

}  // namespace

std::vector<std::vector<std::uint16_t>> DownloadWindows(const ShortConvShape& s, const void* window,
                                                        const std::vector<std::int64_t>& seqs, cudaStream_t st) {
  const std::int64_t WC = (s.conv - 1) * s.channels;
  std::vector<std::vector<std::uint16_t>> out;
  for (std::int64_t b : seqs)
    out.push_back(WC > 0 ? Download<std::uint16_t>(window, static_cast<std::size_t>(WC),
                                                   static_cast<std::size_t>(b * WC), st)
                         : std::vector<std::uint16_t>{});
  return out;
}

void CheckShortConv(const ShortConvShape& s, bool prefill, const void* x_dev, const void* w_dev, const void* bias_dev,
                    const void* y_dev, const void* window_dev, const std::vector<std::int64_t>& seqs,
                    const std::vector<std::vector<std::uint16_t>>& window0, std::uint64_t seed, RefCheck& out,
                    RefCheck& window, cudaStream_t st) {
  const std::int64_t C = s.channels, K = s.conv, W = K - 1, S = s.seq;
  const auto w = Download<std::uint16_t>(w_dev, static_cast<std::size_t>(C * K), 0, st);
  std::vector<double> bias(static_cast<std::size_t>(C), 0.0);
  if (bias_dev != nullptr) {
    const auto b16 = Download<std::uint16_t>(bias_dev, static_cast<std::size_t>(C), 0, st);
    for (std::int64_t c = 0; c < C; ++c) bias[static_cast<std::size_t>(c)] = Bf16(b16[static_cast<std::size_t>(c)]);
  }
  auto tap = [&](std::int64_t c, std::int64_t j) { return Bf16(w[static_cast<std::size_t>(c * K + j)]); };
  // acc, mag of channel c over (input value of tap j) for j in [j0, K).
  auto expect = [&](std::int64_t c, double acc, double mag, double got, const auto& where) {
    acc += bias[static_cast<std::size_t>(c)];
    mag += std::fabs(bias[static_cast<std::size_t>(c)]);
    const double ref = Silu(acc);
    out.AddLazy(where, got, ref, 0x1p-8 * std::fabs(ref) + 0x1p-16 * mag + 1e-6);
  };
  SplitMix64 rng(seed);
  for (std::size_t si = 0; si < seqs.size(); ++si) {
    const std::int64_t b = seqs[si];
    std::vector<std::uint16_t> newest;  // the inputs of the window after the call, oldest first
    if (prefill) {
      std::set<std::int64_t> positions = {0, S - 1, std::min<std::int64_t>(W, S - 1),
                                          static_cast<std::int64_t>(rng.Below(static_cast<std::uint64_t>(S)))};
      for (std::int64_t p : positions) {
        const std::int64_t first = std::max<std::int64_t>(0, p - W);
        const auto x = DownloadBlock<std::uint16_t>(x_dev, b * S + first, p - first + 1, C, 0, C, st);
        const auto y = DownloadBlock<std::uint16_t>(y_dev, b * S + p, 1, C, 0, C, st);
        for (std::int64_t c = 0; c < C; ++c) {
          double acc = 0, mag = 0;
          for (std::int64_t j = 0; j < K; ++j) {
            const std::int64_t src = p - (K - 1) + j;
            if (src < first) continue;
            const double t = tap(c, j) * Bf16(x[static_cast<std::size_t>((src - first) * C + c)]);
            acc += t;
            mag += std::fabs(t);
          }
          expect(c, acc, mag, Bf16(y[static_cast<std::size_t>(c)]), [&] { return At("y", b, p, c); });
        }
      }
      // The window: positions S - W .. S - 1, zeros before the sequence.
      const std::int64_t first = std::max<std::int64_t>(0, S - W);
      const auto x = DownloadBlock<std::uint16_t>(x_dev, b * S + first, S - first, C, 0, C, st);
      newest.assign(static_cast<std::size_t>(W * C), 0);
      const std::int64_t pad = W - (S - first);
      std::copy(x.begin(), x.end(), newest.begin() + static_cast<std::ptrdiff_t>(pad * C));
    } else {
      const std::vector<std::uint16_t>& win = window0[si];
      const auto x = DownloadBlock<std::uint16_t>(x_dev, b, 1, C, 0, C, st);
      const auto y = DownloadBlock<std::uint16_t>(y_dev, b, 1, C, 0, C, st);
      for (std::int64_t c = 0; c < C; ++c) {
        double acc = tap(c, K - 1) * Bf16(x[static_cast<std::size_t>(c)]), mag = std::fabs(acc);
        for (std::int64_t j = 0; j < W; ++j) {
          const double t = tap(c, j) * Bf16(win[static_cast<std::size_t>(j * C + c)]);
          acc += t;
          mag += std::fabs(t);
        }
        expect(c, acc, mag, Bf16(y[static_cast<std::size_t>(c)]), [&] { return At("y", b, -1, c); });
      }
      newest.assign(static_cast<std::size_t>(W * C), 0);
      if (W > 0) {
        std::copy(win.begin() + static_cast<std::ptrdiff_t>(C), win.end(), newest.begin());
        std::copy(x.begin(), x.end(), newest.begin() + static_cast<std::ptrdiff_t>((W - 1) * C));
      }
    }
    if (W == 0) continue;
    const auto got = Download<std::uint16_t>(window_dev, static_cast<std::size_t>(W * C),
                                             static_cast<std::size_t>(b * W * C), st);
    for (std::int64_t i = 0; i < W * C; ++i)
      window.AddLazy([&] { return At("conv_state", b, i / C, i % C); }, Bf16(got[static_cast<std::size_t>(i)]),
                     Bf16(newest[static_cast<std::size_t>(i)]), 1e-30);
  }
}

}  // namespace servecast::cuda
