#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

namespace servecast::cuda {

enum class CustomArAlgo { kOneShot, kTwoShot };
const char* ToString(CustomArAlgo a);  // "oneshot", "twoshot"

// All-gathers one byte string from every rank (result index = rank). Provided by the caller (it goes over NCCL);
// must be called collectively by all ranks in the same order.
using HostAllGather = std::function<std::vector<std::string>(const std::string& mine)>;

// bf16 sum all-reduce over CUDA IPC peer memory, for `world` processes (one GPU each, same node, 2..8 ranks): the
// small-message all-reduce that serving engines use in place of NCCL under tensor parallelism. Each rank's kernel
// reads its peers' buffers directly over NVLink; ranks meet at per-block barriers made of flags in peer-visible
// device memory (see custom_allreduce.cu for the protocol).
class CustomAllReduce {
 public:
  // Collective: every rank constructs it with the same world and max_bytes, on its current device. Allocates and
  // shares this rank's input buffer (max_bytes), a scratch buffer for two-shot (max_bytes), and a small signal area;
  // opens the peers'. Throws CudaError or Error on failure (on every rank alike when the failure is on one rank
  // only, e.g. when peer access is impossible), so no rank is left waiting in a collective.
  CustomAllReduce(int rank, int world, std::size_t max_bytes, const HostAllGather& all_gather);
  ~CustomAllReduce();  // waits for the device, closes peer handles, frees
  CustomAllReduce(const CustomAllReduce&) = delete;
  CustomAllReduce& operator=(const CustomAllReduce&) = delete;

  // This rank's peer-visible input buffer (max_bytes bytes): the caller fills it, then calls Run.
  void* input() const;
  std::size_t max_bytes() const;
  // True when `algo` can reduce `count` bf16 elements: count > 0, 2 * count <= max_bytes, and count % 8 == 0
  // (one-shot) or count % (8 * world) == 0 (two-shot).
  bool Supports(CustomArAlgo algo, std::size_t count) const;
  // out[i] = sum over ranks r of input_r[i], i < count (bf16 elements, fp32 accumulation in rank order, bf16
  // result), bitwise identical on every rank. Enqueued on `stream` with no host synchronization and no allocation:
  // capturable in a CUDA graph and replayable (each replay a new all-reduce). Every rank must call Run the same
  // number of times with the same algo and count. `out` is a local device buffer, not input(). Throws Error when
  // !Supports(algo, count) or when `out` overlaps input().
  void Run(CustomArAlgo algo, std::size_t count, void* out, cudaStream_t stream);

 private:
  static constexpr int kMaxRanks = 8;

  void Release() noexcept;  // closes what is open, frees what is allocated (constructor failure and destructor)

  int rank_ = 0;
  int world_ = 0;
  std::size_t max_bytes_ = 0;
  std::size_t buffer_bytes_ = 0;  // max_bytes rounded up to 16 bytes
  int max_blocks_ = 1;            // grid cap, the same on every rank
  void* local_ = nullptr;         // this rank's allocation: signal area, input, scratch
  void* peer_base_[kMaxRanks] = {};  // every rank's allocation as mapped here (local_ for this rank)
  bool peer_opened_[kMaxRanks] = {};
};

}  // namespace servecast::cuda
