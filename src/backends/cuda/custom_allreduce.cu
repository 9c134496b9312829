#include <cuda_bf16.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/dispatch.h"
#include "backends/cuda/custom_allreduce.h"
#include "core/error.h"

// Barrier protocol. Every rank's allocation starts with a Signal area that its peers write into through their IPC
// mappings. Block b of every rank's grid meets block b of every other rank (blocks never wait on other blocks of
// their own grid). A barrier of kind K in call number e (e = the per-block epoch, kept in device memory and
// advanced by the kernel itself, so graph replays need nothing from the host):
//   1. __syncthreads: the block's earlier loads and stores come before step 2 (bar.sync orders at CTA scope and
//      causality order is transitive, so the release below covers the other threads' accesses too);
//   2. thread t < world stores e into rank t's flag[K][from = this rank] with st.release.sys;
//   3. thread t < world spins on this rank's flag[K][from = t] with ld.acquire.sys until it reads e;
//   4. __syncthreads: what the acquiring threads saw is seen by the whole block.
// A flag of kind K from a given peer only ever moves from e - 1 to e while this block waits for e: the peer cannot
// reach barrier K of call e + 1 before this block has passed barrier K of call e (the calls' other barriers lie in
// between), so testing for equality is exact and survives the 32-bit wrap.
//
// One-shot:  start | every rank reads all inputs, writes the sum to out | end.
//   start: each peer's input is written (stream order on the peer puts the fill before its Run).
//   end:   no peer reads this rank's input any more, so returning (and the next fill) is safe.
// Two-shot:  start | rank r reduces slice r of all inputs into its scratch (and out) | mid | rank r copies slice p
//            from peer p's scratch into out | end.
//   mid:   every slice is reduced and released, and no peer reads this rank's input any more.
//   end:   no peer reads this rank's scratch any more. (Strictly, the next call's start barrier already guarantees
//          this, since a peer reaches it only after its all-gather; the end barrier is kept for a uniform contract.)
//
// Work split: block b, thread t handles 16-byte vectors i = b * kThreads + t, i += grid * kThreads, and that split
// is the same on every rank (same grid for the same count), so the data a block reads from a peer after a barrier
// was written by the same block index of that peer before it.

namespace servecast::cuda {
namespace {

constexpr int kMaxRanks = 8;
constexpr int kThreads = 512;
constexpr int kMaxBlocks = 128;  // Signal area layout
constexpr int kGridCap = 64;     // grid cap; also never above the smallest SM count of the ranks (co-residency)

enum BarrierKind : int { kStart = 0, kMid = 1, kEnd = 2, kKinds = 3 };

struct alignas(128) BlockSignal {
  unsigned flag[kKinds][kMaxRanks];  // flag[K][from]: the last epoch at which rank `from` arrived at barrier K
};

struct Signal {
  BlockSignal block[kMaxBlocks];
  unsigned epoch[kMaxBlocks];  // per block: the number of completed calls (only this rank reads or writes it)
};

constexpr std::size_t kSignalBytes = (sizeof(Signal) + 4095) / 4096 * 4096;

// Every rank's buffers as mapped in this process (index = rank; this rank's are local pointers). Passed to the
// kernels by value: fixed for the object's life, so baking them into a CUDA graph is fine.
struct PeerPtrs {
  const uint4* in[kMaxRanks];
  uint4* scratch[kMaxRanks];
  Signal* signal[kMaxRanks];
};

__device__ __forceinline__ void StoreReleaseSys(unsigned* p, unsigned v) {
  asm volatile("st.release.sys.global.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}

__device__ __forceinline__ unsigned LoadAcquireSys(const unsigned* p) {
  unsigned v;
  asm volatile("ld.acquire.sys.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}

template <int W, int K>
__device__ __forceinline__ void BlockBarrier(const PeerPtrs& p, int rank, unsigned epoch) {
  __syncthreads();
  if (threadIdx.x < W) {
    StoreReleaseSys(&p.signal[threadIdx.x]->block[blockIdx.x].flag[K][rank], epoch);
    const unsigned* mine = &p.signal[rank]->block[blockIdx.x].flag[K][threadIdx.x];
    while (LoadAcquireSys(mine) != epoch) {
    }
  }
  __syncthreads();
}

// Eight bf16 (element 0 in the low half of word 0) added into fp32 accumulators.
__device__ __forceinline__ void AddBf16x8(const uint4& v, float (&acc)[8]) {
  const unsigned w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    acc[2 * i] += __uint_as_float(w[i] << 16);
    acc[2 * i + 1] += __uint_as_float(w[i] & 0xffff0000u);
  }
}

__device__ __forceinline__ uint4 PackBf16x8(const float (&f)[8]) {
  unsigned w[4];
#pragma unroll
  for (int i = 0; i < 4; ++i)
    w[i] = static_cast<unsigned>(__bfloat16_as_ushort(__float2bfloat16_rn(f[2 * i]))) |
           (static_cast<unsigned>(__bfloat16_as_ushort(__float2bfloat16_rn(f[2 * i + 1]))) << 16);
  return make_uint4(w[0], w[1], w[2], w[3]);
}

// Sum of vector i over all ranks, in rank order (so every rank computes the same bits).
template <int W>
__device__ __forceinline__ uint4 SumRanks(const PeerPtrs& p, std::size_t i) {
  uint4 v[W];
#pragma unroll
  for (int r = 0; r < W; ++r) v[r] = p.in[r][i];  // all loads in flight before the adds
  float acc[8] = {};
#pragma unroll
  for (int r = 0; r < W; ++r) AddBf16x8(v[r], acc);
  return PackBf16x8(acc);
}

template <int W>
__global__ void __launch_bounds__(kThreads, 1)
    custom_ar_oneshot(PeerPtrs p, int rank, uint4* __restrict__ out, std::size_t n8) {
  Signal* self = p.signal[rank];
  const unsigned epoch = self->epoch[blockIdx.x] + 1;
  BlockBarrier<W, kStart>(p, rank, epoch);
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * kThreads;
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(kThreads) + threadIdx.x; i < n8; i += stride)
    out[i] = SumRanks<W>(p, i);
  BlockBarrier<W, kEnd>(p, rank, epoch);
  if (threadIdx.x == 0) self->epoch[blockIdx.x] = epoch;
}

template <int W>
__global__ void __launch_bounds__(kThreads, 1)
    custom_ar_twoshot(PeerPtrs p, int rank, uint4* __restrict__ out, std::size_t n8) {
  Signal* self = p.signal[rank];
  const unsigned epoch = self->epoch[blockIdx.x] + 1;
  const std::size_t slice = n8 / W;  // vectors per rank's slice
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * kThreads;
  const std::size_t first = blockIdx.x * static_cast<std::size_t>(kThreads) + threadIdx.x;
  BlockBarrier<W, kStart>(p, rank, epoch);
  // Reduce-scatter: slice `rank` of every input into this rank's scratch (same offsets as in the inputs).
  uint4* mine = p.scratch[rank] + rank * slice;
  uint4* out_mine = out + rank * slice;
  for (std::size_t i = first; i < slice; i += stride) {
    const uint4 s = SumRanks<W>(p, rank * slice + i);
    mine[i] = s;
    out_mine[i] = s;
  }
  BlockBarrier<W, kMid>(p, rank, epoch);
  // All-gather: slice q from rank q's scratch, for every other rank q.
  for (std::size_t i = first; i < slice; i += stride) {
    uint4 v[W];
#pragma unroll
    for (int q = 0; q < W; ++q)
      if (q != rank) v[q] = p.scratch[q][q * slice + i];
#pragma unroll
    for (int q = 0; q < W; ++q)
      if (q != rank) out[q * slice + i] = v[q];
  }
  BlockBarrier<W, kEnd>(p, rank, epoch);
  if (threadIdx.x == 0) self->epoch[blockIdx.x] = epoch;
}

// Runtime world size -> the kernel instantiation for it.
template <class F>
void DispatchWorld(int world, F&& f) {
  if (!DispatchConstant<2, 8>(world, f))
    throw Error("CustomAllReduce: world " + std::to_string(world) + " not supported; expected 2..8");
}

// What a rank tells its peers during construction: 'K' + Hello, or 'E' + an error message.
struct Hello {
  std::int32_t world;
  std::int32_t sms;
  std::uint64_t max_bytes;
  std::int64_t pid;
  cudaIpcMemHandle_t handle;
};

std::string Ok(const void* payload, std::size_t bytes) {
  std::string s(1, 'K');
  s.append(static_cast<const char*>(payload), bytes);
  return s;
}

std::string Failed(const std::string& message) { return "E" + message; }

// Throws one Error naming every rank that reported a failure (or a malformed reply), the same on all ranks.
void ThrowOnFailures(const std::vector<std::string>& replies, int world, std::size_t ok_bytes, const char* phase) {
  std::string problems;
  if (static_cast<int>(replies.size()) != world)
    problems = "all_gather returned " + std::to_string(replies.size()) + " replies for world " + std::to_string(world);
  for (std::size_t r = 0; r < replies.size(); ++r) {
    const std::string& s = replies[r];
    if (!s.empty() && s[0] == 'K' && s.size() == 1 + ok_bytes) continue;
    if (!problems.empty()) problems += "; ";
    problems += "rank " + std::to_string(r) + ": " +
                (!s.empty() && s[0] == 'E' ? s.substr(1) : std::string("malformed reply of ") +
                                                               std::to_string(s.size()) + " bytes");
  }
  if (!problems.empty()) throw Error(std::string("CustomAllReduce: ") + phase + " failed: " + problems);
}

}  // namespace

const char* ToString(CustomArAlgo a) {
  switch (a) {
    case CustomArAlgo::kOneShot: return "oneshot";
    case CustomArAlgo::kTwoShot: return "twoshot";
  }
  return "unknown";
}

CustomAllReduce::CustomAllReduce(int rank, int world, std::size_t max_bytes, const HostAllGather& all_gather)
    : rank_(rank), world_(world), max_bytes_(max_bytes), buffer_bytes_((max_bytes + 15) / 16 * 16) {
  static_assert(kMaxRanks == CustomAllReduce::kMaxRanks);
  if (world < 2 || world > kMaxRanks || rank < 0 || rank >= world || max_bytes == 0)
    throw Error("CustomAllReduce: bad arguments rank=" + std::to_string(rank) + " world=" + std::to_string(world) +
                " max_bytes=" + std::to_string(max_bytes) + "; expected 2 <= world <= 8, 0 <= rank < world, " +
                "max_bytes > 0");
  try {
    // Phase 1: allocate signal area + input + scratch in one allocation, zero the signal area, export it.
    std::string mine;
    Hello hello{};
    try {
      int device = 0;
      SC_CUDA_CHECK(cudaGetDevice(&device));
      SC_CUDA_CHECK(cudaDeviceGetAttribute(&hello.sms, cudaDevAttrMultiProcessorCount, device));
      SC_CUDA_CHECK(cudaMalloc(&local_, kSignalBytes + 2 * buffer_bytes_));
      SC_CUDA_CHECK(cudaMemset(local_, 0, kSignalBytes));
      SC_CUDA_CHECK(cudaDeviceSynchronize());
      SC_CUDA_CHECK(cudaIpcGetMemHandle(&hello.handle, local_));
      hello.world = world;
      hello.max_bytes = max_bytes;
      hello.pid = static_cast<std::int64_t>(getpid());
      mine = Ok(&hello, sizeof(hello));
    } catch (const Error& e) {
      mine = Failed(std::string("allocating and exporting the buffers: ") + e.what());
    }
    const std::vector<std::string> hellos = all_gather(mine);
    ThrowOnFailures(hellos, world, sizeof(Hello), "buffer setup");
    std::vector<Hello> peers(world);
    for (int r = 0; r < world; ++r) std::memcpy(&peers[r], hellos[r].data() + 1, sizeof(Hello));
    int min_sms = peers[0].sms;
    for (int r = 0; r < world; ++r) {
      if (peers[r].world != world || peers[r].max_bytes != max_bytes)
        throw Error("CustomAllReduce: rank " + std::to_string(r) + " has world=" + std::to_string(peers[r].world) +
                    " max_bytes=" + std::to_string(peers[r].max_bytes) + "; expected the same as rank " +
                    std::to_string(rank) + " (world=" + std::to_string(world) +
                    " max_bytes=" + std::to_string(max_bytes) + ")");
      if (r != rank && peers[r].pid == hello.pid)
        throw Error("CustomAllReduce: ranks " + std::to_string(r) + " and " + std::to_string(rank) +
                    " are one process; CUDA IPC needs one process per rank");
      min_sms = std::min(min_sms, peers[r].sms);
    }
    max_blocks_ = std::max(1, std::min({min_sms, kGridCap, kMaxBlocks}));

    // Phase 2: map the peers' allocations (peer access enabled on first use). This phase's all-gather is also the
    // barrier after which every rank's signal area is known to be zero.
    peer_base_[rank] = local_;
    std::string opened = Ok("", 0);
    for (int r = 0; r < world; ++r) {
      if (r == rank) continue;
      try {
        SC_CUDA_CHECK(cudaIpcOpenMemHandle(&peer_base_[r], peers[r].handle, cudaIpcMemLazyEnablePeerAccess));
        peer_opened_[r] = true;
      } catch (const Error& e) {
        opened = Failed("mapping rank " + std::to_string(r) + "'s buffers (no peer access between the GPUs?): " +
                        e.what());
        break;
      }
    }
    ThrowOnFailures(all_gather(opened), world, 0, "peer mapping");
  } catch (...) {
    Release();
    throw;
  }
}

CustomAllReduce::~CustomAllReduce() {
  // Our last kernel's end barrier means no peer reads our buffers once it has finished. Errors are ignored here:
  // a destructor must not throw, and a sticky error has already been reported by whoever hit it.
  (void)cudaDeviceSynchronize();
  Release();
}

void CustomAllReduce::Release() noexcept {
  for (int r = 0; r < kMaxRanks; ++r) {
    if (peer_opened_[r]) (void)cudaIpcCloseMemHandle(peer_base_[r]);
    peer_opened_[r] = false;
    peer_base_[r] = nullptr;
  }
  if (local_ != nullptr) (void)cudaFree(local_);
  local_ = nullptr;
}

void* CustomAllReduce::input() const { return static_cast<char*>(local_) + kSignalBytes; }

std::size_t CustomAllReduce::max_bytes() const { return max_bytes_; }

bool CustomAllReduce::Supports(CustomArAlgo algo, std::size_t count) const {
  if (count == 0 || count > max_bytes_ / 2) return false;
  switch (algo) {
    case CustomArAlgo::kOneShot: return count % 8 == 0;
    case CustomArAlgo::kTwoShot: return count % (8 * static_cast<std::size_t>(world_)) == 0;
  }
  return false;
}

void CustomAllReduce::Run(CustomArAlgo algo, std::size_t count, void* out, cudaStream_t stream) {
  if (!Supports(algo, count))
    throw Error(std::string("CustomAllReduce::Run: ") + ToString(algo) + " does not support count=" +
                std::to_string(count) + " (world=" + std::to_string(world_) +
                ", max_bytes=" + std::to_string(max_bytes_) + "); see Supports()");
  const auto out_begin = reinterpret_cast<std::uintptr_t>(out);
  const auto in_begin = reinterpret_cast<std::uintptr_t>(local_);
  if (out_begin + 2 * count > in_begin && out_begin < in_begin + kSignalBytes + 2 * buffer_bytes_)
    throw Error("CustomAllReduce::Run: out overlaps this rank's shared buffers; expected a separate local buffer");
  if (out_begin % 16 != 0) throw Error("CustomAllReduce::Run: out must be 16-byte aligned");

  PeerPtrs p{};
  for (int r = 0; r < world_; ++r) {
    char* base = static_cast<char*>(peer_base_[r]);
    p.signal[r] = reinterpret_cast<Signal*>(base);
    p.in[r] = reinterpret_cast<const uint4*>(base + kSignalBytes);
    p.scratch[r] = reinterpret_cast<uint4*>(base + kSignalBytes + buffer_bytes_);
  }
  const std::size_t n8 = count / 8;
  const std::size_t per_pass = algo == CustomArAlgo::kOneShot ? n8 : n8 / static_cast<std::size_t>(world_);
  const unsigned blocks = static_cast<unsigned>(
      std::clamp<std::size_t>((per_pass + kThreads - 1) / kThreads, 1, static_cast<std::size_t>(max_blocks_)));
  uint4* out8 = static_cast<uint4*>(out);
  DispatchWorld(world_, [&](auto w) {
    constexpr int W = decltype(w)::value;
    if (algo == CustomArAlgo::kOneShot)
      custom_ar_oneshot<W><<<blocks, kThreads, 0, stream>>>(p, rank_, out8, n8);
    else
      custom_ar_twoshot<W><<<blocks, kThreads, 0, stream>>>(p, rank_, out8, n8);
  });
  SC_CUDA_CHECK_LAUNCH();
}

}  // namespace servecast::cuda
