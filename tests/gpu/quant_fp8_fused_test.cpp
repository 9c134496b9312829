// The benchmark-only fused fp8 quantization (benchmarks/quant_fp8_fused.h), which no
// op runs, against the two kernels the ops run.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <vector>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/device.h"
#include "backends/cuda/fill.h"
#include "backends/cuda/quantize.h"
#include "gpu_test_util.h"
#include "quant_fp8_fused.h"

namespace servecast::cuda {
namespace {

// The fused one-kernel dynamic quantization gives the same scale and the same bytes as
// the two-kernel path (amax, then apply), on tensors with a tail (n % 8), smaller
// than one CTA's threads, one vector per thread, and beyond what the grid keeps on
// chip (so the re-read runs); the second call on the same state words must agree too.
TEST(QuantFp8Fused, SameScaleAndBytesAsTwoKernels) {
  SC_REQUIRE_GPU();
  auto& dc = Context();
  std::printf("[fused quant] grid %d CTAs\n", QuantFp8TensorFusedGrid());
  // On 132 SMs (264 CTAs of 512 threads): 1 vector per thread up to 1 << 20, 8 and 20
  // (registers and shared memory only, nothing re-read) for the next two, 47 and 63 beyond.
  for (std::size_t n : {std::size_t{1}, std::size_t{7}, std::size_t{8}, std::size_t{4099}, std::size_t{1} << 20,
                        (std::size_t{1} << 23) + 3, (std::size_t{5} << 22) + 1, (std::size_t{3} << 24) + 5,
                        std::size_t{8192} * 8192}) {
    DeviceBuffer x(n * 2), q2(n), qf(n), st2(8), stf(12), s2(4), sf(4);
    SC_CUDA_CHECK(cudaMemsetAsync(st2.get(), 0, 8, dc.stream));
    SC_CUDA_CHECK(cudaMemsetAsync(stf.get(), 0, 12, dc.stream));
    FillUniformBf16(x.get(), n, 1234 + n, 3.0f, dc.stream);
    if (n >= 4096) ScaleBf16ByBlockPattern(x.get(), static_cast<std::int64_t>(n / 4096), 4096, 3, 1, dc.stream);
    QuantFp8TensorAmax(x.get(), n, st2.as<unsigned>(), s2.as<float>(), dc.stream);
    QuantFp8TensorApply(x.get(), n, s2.as<float>(), q2.get(), dc.stream);
    for (int call = 0; call < 2; ++call) {
      FillPoison(qf.get(), n, dc.stream);
      FillPoison(sf.get(), 4, dc.stream);
      QuantFp8TensorFused(x.get(), n, stf.as<unsigned>(), sf.as<float>(), qf.get(), dc.stream);
      std::vector<std::uint8_t> a(n), b(n);
      float sa = 0, sb = 0;
      unsigned words[3] = {1, 1, 0};
      SC_CUDA_CHECK(cudaMemcpyAsync(a.data(), q2.get(), n, cudaMemcpyDeviceToHost, dc.stream));
      SC_CUDA_CHECK(cudaMemcpyAsync(b.data(), qf.get(), n, cudaMemcpyDeviceToHost, dc.stream));
      SC_CUDA_CHECK(cudaMemcpyAsync(&sa, s2.get(), 4, cudaMemcpyDeviceToHost, dc.stream));
      SC_CUDA_CHECK(cudaMemcpyAsync(&sb, sf.get(), 4, cudaMemcpyDeviceToHost, dc.stream));
      SC_CUDA_CHECK(cudaMemcpyAsync(words, stf.get(), 12, cudaMemcpyDeviceToHost, dc.stream));
      SC_CUDA_CHECK(cudaStreamSynchronize(dc.stream));
      EXPECT_EQ(sa, sb) << "n=" << n << " call " << call;
      std::size_t diff = 0, first = n;
      for (std::size_t i = 0; i < n; ++i)
        if (a[i] != b[i]) {
          ++diff;
          first = std::min(first, i);
        }
      EXPECT_EQ(diff, 0u) << "n=" << n << " call " << call << ": " << diff << " bytes differ, first at " << first;
      EXPECT_EQ(words[0], 0u) << "n=" << n;
      EXPECT_EQ(words[1], 0u) << "n=" << n;
      EXPECT_EQ(words[2], static_cast<unsigned>(call + 1)) << "n=" << n;
    }
  }
}

}  // namespace
}  // namespace servecast::cuda
