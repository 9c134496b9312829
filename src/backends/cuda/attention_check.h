#pragma once

// The reference-check helpers the CUDA attention ops share (attention.cpp, mla.cpp):
// the element-wise tolerance check, bf16 / e4m3 decoding, per-case seeds, device
// downloads, the shuffled page table, the double-precision softmax row, and the
// device's multiprocessor count.

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <numeric>
#include <string>
#include <vector>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/device.h"
#include "backends/cuda/fill.h"
#include "core/hash.h"
#include "core/value.h"

namespace servecast::cuda {

// Compares outputs with the reference element by element, each with its own
// absolute tolerance; keeps the worst element. Non-finite output never passes.
class RefCheck {
 public:
  explicit RefCheck(double reference_scale) : scale_(reference_scale) {}
  void Add(const std::string& where, double got, double ref, double tol) {
    AddLazy([&] { return where; }, got, ref, tol);
  }
  // As Add, with the location `where()` built only for a new worst element.
  template <class Where>
  void AddLazy(const Where& where, double got, double ref, double tol) {
    ref *= scale_;
    ++checked_;
    const double err = std::fabs(got - ref);
    const double ratio = std::isfinite(got) ? err / tol : std::numeric_limits<double>::infinity();
    if (!(ratio <= 1)) ++bad_;
    if (checked_ == 1 || ratio > worst_ratio_) {
      worst_ratio_ = ratio;
      worst_ = where() + ": got " + FormatG6(got) + ", expected " + FormatG6(ref) + ", abs error " + FormatG6(err) +
               ", tolerance " + FormatG6(tol);
    }
  }
  void AddNonFinite(std::uint64_t count, std::size_t of) {
    if (count == 0) return;
    ++bad_;
    unwritten_ = std::to_string(count) + " of " + std::to_string(of) +
                 " output elements are NaN/Inf after the run (unwritten poison?)";
  }
  bool ok() const { return bad_ == 0 && checked_ > 0; }
  std::string Describe(const std::string& rule) const {
    std::string s = std::to_string(bad_) + " of " + std::to_string(checked_) + " checked elements out of tolerance";
    if (checked_ > 0) s += "; worst at " + worst_ + " (" + rule + ")";
    if (!unwritten_.empty()) s += "; " + unwritten_;
    return s;
  }

 private:
  double scale_;
  std::int64_t checked_ = 0, bad_ = 0;
  double worst_ratio_ = 0;
  std::string worst_, unwritten_;
};

inline double Bf16(std::uint16_t bits) {
  return static_cast<double>(Bf16ToF32(bits));
}

// fp8 e4m3 (bias 7, no infinities, 0x7F/0xFF NaN) to double.
inline double Fp8E4m3(std::uint8_t bits) {
  const int sign = bits >> 7, exp = (bits >> 3) & 0xF, mant = bits & 0x7;
  double v;
  if (exp == 0xF && mant == 0x7) return std::numeric_limits<double>::quiet_NaN();
  if (exp == 0)
    v = std::ldexp(mant / 8.0, -6);
  else
    v = std::ldexp(1.0 + mant / 8.0, exp - 7);
  return sign ? -v : v;
}

inline std::uint64_t SeedFor(std::uint64_t base, std::uint64_t stream) {
  SplitMix64 mix(base ^ (stream * 0x9E3779B97F4A7C15ULL));
  return mix.Next();
}

template <class T>
std::vector<T> Download(const void* dev, std::size_t count, std::size_t offset_elems, cudaStream_t stream) {
  std::vector<T> host(count);
  SC_CUDA_CHECK(cudaMemcpyAsync(host.data(), static_cast<const T*>(dev) + offset_elems, count * sizeof(T),
                                cudaMemcpyDeviceToHost, stream));
  SC_CUDA_CHECK(cudaStreamSynchronize(stream));
  return host;
}

// A page table of `n` entries mapping the sequences' pages to pool pages in a
// shuffled order (a kernel that ignored the table would read or write the wrong
// tokens), copied to `device` (n int32); returns the host copy.
inline std::vector<std::int32_t> UploadShuffledPageTable(std::size_t n, std::uint64_t seed, const DeviceBuffer& device,
                                                  cudaStream_t stream) {
  std::vector<std::int32_t> table(n);
  std::iota(table.begin(), table.end(), 0);
  SplitMix64 rng(seed);
  for (std::size_t i = n; i > 1; --i) std::swap(table[i - 1], table[rng.Below(i)]);
  SC_CUDA_CHECK(cudaMemcpyAsync(device.get(), table.data(), n * 4, cudaMemcpyHostToDevice, stream));
  SC_CUDA_CHECK(cudaStreamSynchronize(stream));  // the host vector may move or go before an async copy reads it
  return table;
}

// One output row of attention in double precision: softmax over `scores`, and
// per column the output and Σ_j p_j |v_jd| (the tolerance's scale); value(j, d)
// is column d of the j-th scored key's value.
template <class Value>
void ReferenceRow(const std::vector<double>& scores, Value value, std::int64_t D, std::vector<double>& out,
                  std::vector<double>& mag) {
  double m = -INFINITY;
  for (double s : scores) m = std::max(m, s);
  double denom = 0;
  std::vector<double> p(scores.size());
  for (std::size_t j = 0; j < scores.size(); ++j) denom += (p[j] = std::exp(scores[j] - m));
  out.assign(static_cast<std::size_t>(D), 0.0);
  mag.assign(static_cast<std::size_t>(D), 0.0);
  for (std::size_t j = 0; j < scores.size(); ++j) {
    const double w = p[j] / denom;
    for (std::int64_t d = 0; d < D; ++d) {
      const double v = value(j, d);
      out[static_cast<std::size_t>(d)] += w * v;
      mag[static_cast<std::size_t>(d)] += w * std::fabs(v);
    }
  }
}

// The current device's multiprocessor count (the split rule's input); 132 (an
// H100/H200) where no device answers, e.g. when a plan is sized without a GPU.
inline int Multiprocessors() {
  int device = 0, count = 0;
  if (cudaGetDevice(&device) != cudaSuccess ||
      cudaDeviceGetAttribute(&count, cudaDevAttrMultiProcessorCount, device) != cudaSuccess || count <= 0) {
    cudaGetLastError();
    return 132;
  }
  return count;
}

}  // namespace servecast::cuda
