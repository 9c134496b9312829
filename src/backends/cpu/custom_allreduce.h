#pragma once

// Op `custom_allreduce` -> custom_allreduce_perf (key allreduce_dtype, num_gpus,
// message_size in elements; extra columns algbw_gbps, busbw_gbps, implementation):
// a float32 sum all-reduce across the `num_gpus` worker processes of a gang (on the
// cpu backend one "GPU" is one worker slot, i.e. one entry of --gpus, a core index),
// over POSIX shared memory. kernel_source "servecast_shm_allreduce", implementation
// "shm".
//
// The group: one segment per case, named "/<group id>-<hash of the case ID>" (the
// group id comes from CpuBackend::NewGroupId). Rank 0 creates and sizes it; the
// others open it, retrying until it exists and is initialized. It holds a control
// header (a sense-reversing barrier built from atomics, a broadcast word, one ok
// flag per rank) and one input slot of message_size floats per rank. Once every
// rank has mapped it, rank 0 unlinks it, so nothing is left in /dev/shm even when
// a rank is killed later; CpuBackend also unlinks what a killed gang left behind.
//
// One call: copy this rank's input into its slot, barrier, sum every slot (in rank
// order, so all ranks get the same bits) into this rank's private output, barrier.
//
// Check before timing: rank r's input is input[i] = ((7i + 13r) mod 61) + 64r,
// small integers whose sums are exact in float32; each rank compares its whole
// output with the exact sum, publishes its verdict, and every rank reads all of
// them: a case where any rank was wrong is `incorrect` on every rank and has no row.
//
// Timing: TimeCpuAgreed, rank 0's decisions broadcast through the segment, so every
// rank takes the same number of calls and samples. Each rank times its own calls;
// the gang keeps rank 0's row. algbw = bytes / latency, busbw = algbw · 2(n−1)/n
// (nccl-tests' convention).

#include <cstdint>
#include <memory>
#include <string>

#include "collect/op.h"

namespace servecast::cpu {

// Most ranks one segment describes.
inline constexpr int kShmAllReduceMaxRanks = 256;

// The input rank `rank` contributes at element `index` in the check.
inline float ShmAllReduceInput(int rank, std::int64_t index) {
  return static_cast<float>((7 * index + 13 * rank) % 61 + 64 * rank);
}

// The shared-memory segment name of one case of one group: "/<group_id>-<16 hex>".
std::string ShmAllReduceSegmentName(const std::string& group_id, const std::string& case_id);

std::unique_ptr<collect::Op> MakeCustomAllReduceOp();

}  // namespace servecast::cpu
