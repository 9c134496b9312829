#include <cuda_bf16.h>

#include <algorithm>
#include <climits>
#include <string>
#include <type_traits>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/device.h"
#include "backends/cuda/elementwise_kernels.h"
#include "core/error.h"

namespace servecast::cuda {

namespace {

using bf16 = __nv_bfloat16;

// Calls f(std::integral_constant<int, V>{}) for the V of `Vs` equal to `v`; false
// when `v` is none of them. Runtime sizes become compile-time instantiations here,
// and the set of instantiations stays the explicit list at each call site.
template <int... Vs, class F>
bool DispatchInt(int v, F&& f) {
  return ((v == Vs && (f(std::integral_constant<int, Vs>{}), true)) || ...);
}

[[noreturn]] void NoInstantiation(const char* what, int v) {
  throw Error(std::string("elementwise kernels: no instantiation for ") + what + " = " + std::to_string(v));
}

// N bf16 values loaded or stored as one access of 2·N bytes (16 for N = 8).
template <int N>
struct alignas(2 * N) Pack {
  bf16 e[N];
};

template <int N>
__device__ __forceinline__ Pack<N> LoadPack(const bf16* p) {
  return *reinterpret_cast<const Pack<N>*>(p);
}

template <int N>
__device__ __forceinline__ void StorePack(bf16* p, const Pack<N>& v) {
  *reinterpret_cast<Pack<N>*>(p) = v;
}

constexpr int kFlatThreads = 256;

// Sum over the block, returned to every thread; blockDim.x is a multiple of 32.
__device__ __forceinline__ float BlockSum(float v) {
  __shared__ float warp_sums[32];
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  if (lane == 0) warp_sums[warp] = v;
  __syncthreads();
  const int warps = blockDim.x >> 5;
  v = lane < warps ? warp_sums[lane] : 0.0f;
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// One block per row; thread i holds accesses i, i + blockDim, ... (ITERS of them)
// in registers, so x (and residual) are read once. All loads of a thread are
// issued before the first use.
// Up to 4 accesses per thread: blocks of at most 512 threads, two per SM at 64
// registers; 8 or 16: blocks of up to 1024.
template <int VEC, int ITERS, bool RESIDUAL>
__global__ void __launch_bounds__(ITERS <= 4 ? 512 : 1024, ITERS <= 4 ? 2 : 1)
    rmsnorm_bf16(const bf16* __restrict__ x, bf16* __restrict__ residual, const bf16* __restrict__ w,
                 bf16* __restrict__ y, int hidden, float eps) {
  const int accesses = hidden / VEC;
  const std::size_t base = static_cast<std::size_t>(blockIdx.x) * static_cast<std::size_t>(hidden);
  Pack<VEC> v[ITERS];
  Pack<VEC> r[RESIDUAL ? ITERS : 1];
#pragma unroll
  for (int k = 0; k < ITERS; ++k) {
    const int i = threadIdx.x + k * blockDim.x;
    if (i < accesses) {
      v[k] = LoadPack<VEC>(x + base + static_cast<std::size_t>(i) * VEC);
      if constexpr (RESIDUAL) r[k] = LoadPack<VEC>(residual + base + static_cast<std::size_t>(i) * VEC);
    }
  }
  float sum_sq = 0.0f;
#pragma unroll
  for (int k = 0; k < ITERS; ++k) {
    const int i = threadIdx.x + k * blockDim.x;
    if (i < accesses) {
      if constexpr (RESIDUAL) {
#pragma unroll
        for (int e = 0; e < VEC; ++e)
          v[k].e[e] = __float2bfloat16_rn(__bfloat162float(v[k].e[e]) + __bfloat162float(r[k].e[e]));
        StorePack<VEC>(residual + base + static_cast<std::size_t>(i) * VEC, v[k]);
      }
#pragma unroll
      for (int e = 0; e < VEC; ++e) {
        const float a = __bfloat162float(v[k].e[e]);
        sum_sq += a * a;
      }
    }
  }
  sum_sq = BlockSum(sum_sq);
  const float inv_rms = rsqrtf(sum_sq / static_cast<float>(hidden) + eps);
#pragma unroll
  for (int k = 0; k < ITERS; ++k) {
    const int i = threadIdx.x + k * blockDim.x;
    if (i < accesses) {
      const Pack<VEC> wk = LoadPack<VEC>(w + static_cast<std::size_t>(i) * VEC);
      Pack<VEC> out;
#pragma unroll
      for (int e = 0; e < VEC; ++e)
        out.e[e] = __float2bfloat16_rn(__bfloat162float(v[k].e[e]) * inv_rms * __bfloat162float(wk.e[e]));
      StorePack<VEC>(y + base + static_cast<std::size_t>(i) * VEC, out);
    }
  }
}

// One block of 256 threads per row, the row staged in shared memory (as bf16,
// after the residual add): registers no longer grow with the row, so several
// blocks share an SM and one block's reduction overlaps another's loads. Each
// thread issues four 16-byte loads before using them (4 accesses of x, or 2 of x
// and 2 of residual); at most 64 registers, so four or more blocks fit an SM.
constexpr int kSharedThreads = 256;

template <int VEC, bool RESIDUAL>
__global__ void __launch_bounds__(kSharedThreads, 4)
    rmsnorm_smem_bf16(const bf16* __restrict__ x, bf16* __restrict__ residual, const bf16* __restrict__ w,
                      bf16* __restrict__ y, int hidden, float eps) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  Pack<VEC>* row = reinterpret_cast<Pack<VEC>*>(smem_raw);
  const int accesses = hidden / VEC;
  const std::size_t base = static_cast<std::size_t>(blockIdx.x) * static_cast<std::size_t>(hidden);
  constexpr int kSharedUnroll = RESIDUAL ? 2 : 4;
  float sum_sq = 0.0f;
  for (int i0 = threadIdx.x; i0 < accesses; i0 += kSharedUnroll * kSharedThreads) {
    Pack<VEC> v[kSharedUnroll];
    Pack<VEC> r[RESIDUAL ? kSharedUnroll : 1];
#pragma unroll
    for (int u = 0; u < kSharedUnroll; ++u) {
      const int i = i0 + u * kSharedThreads;
      if (i < accesses) {
        v[u] = LoadPack<VEC>(x + base + static_cast<std::size_t>(i) * VEC);
        if constexpr (RESIDUAL) r[u] = LoadPack<VEC>(residual + base + static_cast<std::size_t>(i) * VEC);
      }
    }
#pragma unroll
    for (int u = 0; u < kSharedUnroll; ++u) {
      const int i = i0 + u * kSharedThreads;
      if (i < accesses) {
        if constexpr (RESIDUAL) {
#pragma unroll
          for (int e = 0; e < VEC; ++e)
            v[u].e[e] = __float2bfloat16_rn(__bfloat162float(v[u].e[e]) + __bfloat162float(r[u].e[e]));
          StorePack<VEC>(residual + base + static_cast<std::size_t>(i) * VEC, v[u]);
        }
#pragma unroll
        for (int e = 0; e < VEC; ++e) {
          const float a = __bfloat162float(v[u].e[e]);
          sum_sq += a * a;
        }
        row[i] = v[u];
      }
    }
  }
  sum_sq = BlockSum(sum_sq);  // its barrier also publishes row[]
  const float inv_rms = rsqrtf(sum_sq / static_cast<float>(hidden) + eps);
  for (int i = threadIdx.x; i < accesses; i += kSharedThreads) {
    const Pack<VEC> v = row[i];
    const Pack<VEC> wk = LoadPack<VEC>(w + static_cast<std::size_t>(i) * VEC);
    Pack<VEC> out;
#pragma unroll
    for (int e = 0; e < VEC; ++e)
      out.e[e] = __float2bfloat16_rn(__bfloat162float(v.e[e]) * inv_rms * __bfloat162float(wk.e[e]));
    StorePack<VEC>(y + base + static_cast<std::size_t>(i) * VEC, out);
  }
}

// Flat kernels: one access (VEC elements) per thread, 256 threads per block.
template <int VEC>
__global__ void __launch_bounds__(kFlatThreads) silu_and_mul_bf16(const bf16* __restrict__ in, bf16* __restrict__ out,
                                                                  std::int64_t total, int row_accesses, int hidden) {
  const std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= total) return;
  const std::int64_t t = i / row_accesses;
  const std::int64_t j = (i - t * row_accesses) * VEC;
  const bf16* gate = in + t * 2 * hidden + j;
  const Pack<VEC> g = LoadPack<VEC>(gate);
  const Pack<VEC> u = LoadPack<VEC>(gate + hidden);
  Pack<VEC> o;
#pragma unroll
  for (int e = 0; e < VEC; ++e) {
    const float a = __bfloat162float(g.e[e]);
    o.e[e] = __float2bfloat16_rn(a / (1.0f + __expf(-a)) * __bfloat162float(u.e[e]));
  }
  StorePack<VEC>(out + t * hidden + j, o);
}

template <int VEC>
__global__ void __launch_bounds__(kFlatThreads) relu2_bf16(const bf16* __restrict__ in, bf16* __restrict__ out,
                                                           std::int64_t total) {
  const std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= total) return;
  const Pack<VEC> x = LoadPack<VEC>(in + i * VEC);
  Pack<VEC> o;
#pragma unroll
  for (int e = 0; e < VEC; ++e) {
    const float a = fmaxf(__bfloat162float(x.e[e]), 0.0f);
    o.e[e] = __float2bfloat16_rn(a * a);
  }
  StorePack<VEC>(out + i * VEC, o);
}

template <int VEC>
__global__ void __launch_bounds__(kFlatThreads)
    residual_add_bf16(const bf16* __restrict__ a, const bf16* __restrict__ b, bf16* __restrict__ y,
                      std::int64_t total) {
  const std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= total) return;
  const Pack<VEC> pa = LoadPack<VEC>(a + i * VEC);
  const Pack<VEC> pb = LoadPack<VEC>(b + i * VEC);
  Pack<VEC> o;
#pragma unroll
  for (int e = 0; e < VEC; ++e) o.e[e] = __float2bfloat16_rn(__bfloat162float(pa.e[e]) + __bfloat162float(pb.e[e]));
  StorePack<VEC>(y + i * VEC, o);
}

// 8 threads per head, each rotating 8 pairs (16-byte accesses to both halves).
constexpr int kRotaryHalf = kRotaryHeadDim / 2;
constexpr int kRotaryVec = 8;
constexpr int kRotaryThreadsPerHead = kRotaryHalf / kRotaryVec;

__global__ void __launch_bounds__(kFlatThreads)
    rotary_neox_bf16(bf16* __restrict__ q, const std::int64_t* __restrict__ positions, const bf16* __restrict__ cos_sin,
                     std::int64_t total, int per_token, int hidden) {
  const std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= total) return;
  const std::int64_t t = i / per_token;
  const int r = static_cast<int>(i - t * per_token);
  const int head = r / kRotaryThreadsPerHead, j = (r % kRotaryThreadsPerHead) * kRotaryVec;
  bf16* p = q + t * hidden + head * kRotaryHeadDim + j;
  const bf16* cs = cos_sin + positions[t] * kRotaryHeadDim + j;
  const Pack<kRotaryVec> x1 = LoadPack<kRotaryVec>(p);
  const Pack<kRotaryVec> x2 = LoadPack<kRotaryVec>(p + kRotaryHalf);
  const Pack<kRotaryVec> c = LoadPack<kRotaryVec>(cs);
  const Pack<kRotaryVec> s = LoadPack<kRotaryVec>(cs + kRotaryHalf);
  Pack<kRotaryVec> o1, o2;
#pragma unroll
  for (int e = 0; e < kRotaryVec; ++e) {
    const float a = __bfloat162float(x1.e[e]), b = __bfloat162float(x2.e[e]);
    const float ce = __bfloat162float(c.e[e]), se = __bfloat162float(s.e[e]);
    o1.e[e] = __float2bfloat16_rn(a * ce - b * se);
    o2.e[e] = __float2bfloat16_rn(b * ce + a * se);
  }
  StorePack<kRotaryVec>(p, o1);
  StorePack<kRotaryVec>(p + kRotaryHalf, o2);
}

// Block (token, chunk): the token's id is read once, then each thread copies
// kEmbeddingUnroll accesses of the row, all loads issued before the stores.
constexpr int kEmbeddingThreads = 128;
constexpr int kEmbeddingUnroll = 4;

template <int VEC>
__global__ void __launch_bounds__(kEmbeddingThreads)
    embedding_bf16(const std::int64_t* __restrict__ ids, const bf16* __restrict__ table, bf16* __restrict__ out,
                   int row_accesses, int chunks_per_row, int hidden) {
  const std::int64_t t = blockIdx.x / chunks_per_row;
  const int chunk = static_cast<int>(blockIdx.x - t * chunks_per_row);
  const int i0 = chunk * kEmbeddingThreads * kEmbeddingUnroll + threadIdx.x;
  const bf16* src = table + ids[t] * hidden;
  bf16* dst = out + t * hidden;
  Pack<VEC> v[kEmbeddingUnroll];
#pragma unroll
  for (int u = 0; u < kEmbeddingUnroll; ++u) {
    const int i = i0 + u * kEmbeddingThreads;
    if (i < row_accesses) v[u] = LoadPack<VEC>(src + static_cast<std::size_t>(i) * VEC);
  }
#pragma unroll
  for (int u = 0; u < kEmbeddingUnroll; ++u) {
    const int i = i0 + u * kEmbeddingThreads;
    if (i < row_accesses) StorePack<VEC>(dst + static_cast<std::size_t>(i) * VEC, v[u]);
  }
}

__global__ void __launch_bounds__(kFlatThreads)
    count_nonfinite_bf16(const unsigned short* __restrict__ data, std::size_t n, unsigned long long* count) {
  unsigned int local = 0;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x)
    local += (data[i] & 0x7F80u) == 0x7F80u;  // exponent all ones: Inf or NaN
  const float total = BlockSum(static_cast<float>(local));
  if (threadIdx.x == 0 && total > 0) atomicAdd(count, static_cast<unsigned long long>(total));
}

int FlatBlocks(std::int64_t total) {
  const std::int64_t blocks = (total + kFlatThreads - 1) / kFlatThreads;
  if (blocks > INT_MAX) throw Error("elementwise kernels: " + std::to_string(total) + " accesses exceed one grid");
  return static_cast<int>(blocks);
}

int CheckedInt(std::int64_t v, const char* what) {
  if (v <= 0 || v > INT_MAX)
    throw Error(std::string("elementwise kernels: ") + what + " = " + std::to_string(v) + " is outside 1..2^31-1");
  return static_cast<int>(v);
}

// Accesses per thread for a row of `accesses`: at least two loads in flight per
// thread once a row needs more than one warp; 2 up to 256 threads (hidden <= 4096
// at 8 elements per access), 4 up to 512 (hidden <= 16384), then 8 and 16 with up
// to 1024 threads.
int RmsNormIters(std::int64_t accesses) {
  if (accesses <= 32) return 1;
  if (accesses <= 2 * 256) return 2;
  if (accesses <= 4 * 512) return 4;
  if (accesses <= 8 * 1024) return 8;
  return 16;
}

}  // namespace

int Bf16VectorWidth(std::int64_t n) {
  for (int v : {8, 4, 2})
    if (n % v == 0) return v;
  return 1;
}

RmsNormKernel RmsNormKernelFor(std::int64_t hidden_size, bool residual) {
  if (hidden_size <= 0) return RmsNormKernel::kNone;
  const std::int64_t accesses = hidden_size / Bf16VectorWidth(hidden_size);
  const bool fits_shared = hidden_size * 2 <= kRmsNormMaxSharedBytes;
  const std::int64_t registers_up_to = residual ? kRmsNormFusedRegistersUpTo : kRmsNormRegistersUpTo;
  if (accesses <= registers_up_to) return RmsNormKernel::kRegisters;
  if (fits_shared) return RmsNormKernel::kShared;
  if (accesses <= kRmsNormMaxAccessesPerRow) return RmsNormKernel::kRegisters;
  return RmsNormKernel::kNone;
}

bool RmsNormSupportsHidden(std::int64_t hidden_size) {
  return RmsNormKernelFor(hidden_size, false) != RmsNormKernel::kNone;
}

void LaunchRmsNormBf16(const void* x, void* residual, const void* w, void* y, std::int64_t tokens, std::int64_t hidden,
                       float eps, cudaStream_t stream, RmsNormKernel kernel) {
  if (kernel == RmsNormKernel::kAuto) kernel = RmsNormKernelFor(hidden, residual != nullptr);
  const int vec = Bf16VectorWidth(hidden);
  const std::int64_t accesses = hidden / vec;
  if (kernel == RmsNormKernel::kNone || (kernel == RmsNormKernel::kShared && hidden * 2 > kRmsNormMaxSharedBytes) ||
      (kernel == RmsNormKernel::kRegisters && accesses > kRmsNormMaxAccessesPerRow))
    throw Error("rmsnorm: no kernel for hidden_size " + std::to_string(hidden));
  const int rows = CheckedInt(tokens, "num_tokens");
  const int h = CheckedInt(hidden, "hidden_size");
  const bf16* xp = static_cast<const bf16*>(x);
  const bf16* wp = static_cast<const bf16*>(w);
  bf16* yp = static_cast<bf16*>(y);
  bf16* rp = static_cast<bf16*>(residual);
  bool ok;
  if (kernel == RmsNormKernel::kShared) {
    const std::size_t smem = static_cast<std::size_t>(hidden) * 2;
    ok = DispatchInt<8, 4, 2, 1>(vec, [&](auto vec_c) {
      constexpr int kVec = decltype(vec_c)::value;
      if (rp)
        rmsnorm_smem_bf16<kVec, true><<<rows, kSharedThreads, smem, stream>>>(xp, rp, wp, yp, h, eps);
      else
        rmsnorm_smem_bf16<kVec, false><<<rows, kSharedThreads, smem, stream>>>(xp, nullptr, wp, yp, h, eps);
    });
  } else {
    const int iters = RmsNormIters(accesses);
    const int threads = static_cast<int>(((accesses + iters - 1) / iters + 31) / 32 * 32);
    ok = DispatchInt<8, 4, 2, 1>(vec, [&](auto vec_c) {
      const bool found = DispatchInt<1, 2, 4, 8, 16>(iters, [&](auto iters_c) {
        constexpr int kVec = decltype(vec_c)::value, kIters = decltype(iters_c)::value;
        if (rp)
          rmsnorm_bf16<kVec, kIters, true><<<rows, threads, 0, stream>>>(xp, rp, wp, yp, h, eps);
        else
          rmsnorm_bf16<kVec, kIters, false><<<rows, threads, 0, stream>>>(xp, nullptr, wp, yp, h, eps);
      });
      if (!found) NoInstantiation("rmsnorm accesses per thread", iters);
    });
  }
  if (!ok) NoInstantiation("vector width", vec);
  SC_CUDA_CHECK_LAUNCH();
}

void LaunchSiluAndMulBf16(const void* in, void* out, std::int64_t tokens, std::int64_t hidden, cudaStream_t stream) {
  const int h = CheckedInt(hidden, "hidden_size");
  CheckedInt(tokens, "num_tokens");
  const int vec = Bf16VectorWidth(hidden);
  const std::int64_t total = tokens * (hidden / vec);
  const bool ok = DispatchInt<8, 4, 2, 1>(vec, [&](auto vec_c) {
    constexpr int kVec = decltype(vec_c)::value;
    silu_and_mul_bf16<kVec><<<FlatBlocks(total), kFlatThreads, 0, stream>>>(
        static_cast<const bf16*>(in), static_cast<bf16*>(out), total, h / kVec, h);
  });
  if (!ok) NoInstantiation("vector width", vec);
  SC_CUDA_CHECK_LAUNCH();
}

void LaunchRelu2Bf16(const void* in, void* out, std::int64_t tokens, std::int64_t hidden, cudaStream_t stream) {
  CheckedInt(tokens, "num_tokens");
  CheckedInt(hidden, "hidden_size");
  const std::int64_t n = tokens * hidden;  // contiguous: the access width follows the element count
  const int vec = Bf16VectorWidth(n);
  const bool ok = DispatchInt<8, 4, 2, 1>(vec, [&](auto vec_c) {
    constexpr int kVec = decltype(vec_c)::value;
    relu2_bf16<kVec><<<FlatBlocks(n / kVec), kFlatThreads, 0, stream>>>(static_cast<const bf16*>(in),
                                                                        static_cast<bf16*>(out), n / kVec);
  });
  if (!ok) NoInstantiation("vector width", vec);
  SC_CUDA_CHECK_LAUNCH();
}

void LaunchResidualAddBf16(const void* a, const void* b, void* y, std::int64_t tokens, std::int64_t hidden,
                           cudaStream_t stream) {
  CheckedInt(tokens, "num_tokens");
  CheckedInt(hidden, "hidden_size");
  // The tensors are contiguous: the access width follows the whole element count.
  const std::int64_t n = tokens * hidden;
  const int vec = Bf16VectorWidth(n);
  const bool ok = DispatchInt<8, 4, 2, 1>(vec, [&](auto vec_c) {
    constexpr int kVec = decltype(vec_c)::value;
    residual_add_bf16<kVec><<<FlatBlocks(n / kVec), kFlatThreads, 0, stream>>>(
        static_cast<const bf16*>(a), static_cast<const bf16*>(b), static_cast<bf16*>(y), n / kVec);
  });
  if (!ok) NoInstantiation("vector width", vec);
  SC_CUDA_CHECK_LAUNCH();
}

void LaunchRotaryNeoxBf16(void* q, const std::int64_t* positions, const void* cos_sin, std::int64_t tokens,
                          std::int64_t hidden, cudaStream_t stream) {
  const int h = CheckedInt(hidden, "hidden_size");
  CheckedInt(tokens, "num_tokens");
  if (h % kRotaryHeadDim != 0)
    throw Error("rotary_embedding: hidden_size " + std::to_string(h) + " is not a multiple of head_dim 128");
  const int per_token = h / kRotaryHeadDim * kRotaryThreadsPerHead;
  const std::int64_t total = tokens * per_token;
  rotary_neox_bf16<<<FlatBlocks(total), kFlatThreads, 0, stream>>>(
      static_cast<bf16*>(q), positions, static_cast<const bf16*>(cos_sin), total, per_token, h);
  SC_CUDA_CHECK_LAUNCH();
}

void LaunchEmbeddingBf16(const std::int64_t* ids, const void* table, void* out, std::int64_t tokens,
                         std::int64_t hidden, cudaStream_t stream) {
  const int h = CheckedInt(hidden, "hidden_size");
  CheckedInt(tokens, "num_tokens");
  const int vec = Bf16VectorWidth(hidden);
  const int row_accesses = h / vec;
  const int chunks = (row_accesses + kEmbeddingThreads * kEmbeddingUnroll - 1) / (kEmbeddingThreads * kEmbeddingUnroll);
  if (tokens * chunks > INT_MAX) throw Error("embedding: " + std::to_string(tokens) + " tokens exceed one grid");
  const bool ok = DispatchInt<8, 4, 2, 1>(vec, [&](auto vec_c) {
    constexpr int kVec = decltype(vec_c)::value;
    embedding_bf16<kVec><<<static_cast<int>(tokens * chunks), kEmbeddingThreads, 0, stream>>>(
        ids, static_cast<const bf16*>(table), static_cast<bf16*>(out), row_accesses, chunks, h);
  });
  if (!ok) NoInstantiation("vector width", vec);
  SC_CUDA_CHECK_LAUNCH();
}

std::uint64_t CountNonFiniteBf16(const void* data, std::size_t n, cudaStream_t stream) {
  if (n == 0) return 0;
  DeviceBuffer counter(sizeof(unsigned long long));
  SC_CUDA_CHECK(cudaMemsetAsync(counter.get(), 0, sizeof(unsigned long long), stream));
  const std::int64_t blocks = std::min<std::int64_t>(FlatBlocks(static_cast<std::int64_t>(n)), 4096);
  count_nonfinite_bf16<<<static_cast<int>(blocks), kFlatThreads, 0, stream>>>(static_cast<const unsigned short*>(data),
                                                                              n, counter.as<unsigned long long>());
  SC_CUDA_CHECK_LAUNCH();
  unsigned long long host = 0;
  SC_CUDA_CHECK(cudaMemcpyAsync(&host, counter.get(), sizeof host, cudaMemcpyDeviceToHost, stream));
  SC_CUDA_CHECK(cudaStreamSynchronize(stream));
  return host;
}

}  // namespace servecast::cuda
