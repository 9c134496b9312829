#pragma once

// The NCCL communicator of a multi-process case: one per worker process, made
// on the first collective case from the group token the parent (or rank 0 of a
// launch) created with NewNcclGroupId, and kept for the gang's later cases.

#include <nccl.h>

#include <string>
#include <vector>

#include "collect/op.h"
#include "core/error.h"

namespace servecast::cuda {

// A failed NCCL call: the statement, where, NCCL's error string and last error.
[[noreturn]] void ThrowNccl(ncclResult_t r, const char* stmt, const char* file, int line);

// A fresh ncclUniqueId as hex (runs NCCL's bootstrap root in this process).
std::string NewNcclGroupId();

class CommGroup {
 public:
  int rank() const { return rank_; }
  int world() const { return world_; }
  ncclComm_t comm() const { return comm_; }

  // Minimum of `v` over all ranks (a blocking NCCL all-reduce on the context stream).
  long long AllMin(long long v);
  // Every rank's byte string, index = rank (blocking).
  std::vector<std::string> AllGather(const std::string& mine);
  // Host names of all ranks differ: the group spans several nodes.
  bool SpansNodes();

  ~CommGroup();

 private:
  friend CommGroup& JoinGroup(const collect::RunContext& ctx);
  int rank_ = 0, world_ = 1;
  std::string id_;
  ncclComm_t comm_ = nullptr;
  void* scratch_ = nullptr;  // small device buffer for the host helpers
  std::size_t scratch_bytes_ = 0;
  void EnsureScratch(std::size_t bytes);
};

// This process's group for ctx (rank, world, group_id): made on first use,
// replaced when the token changes. Sets NCCL_NVLS_ENABLE=0 first (NVLink
// multicast stays off on these machines). Throws Error on a bad token or world.
CommGroup& JoinGroup(const collect::RunContext& ctx);

}  // namespace servecast::cuda

#define SC_NCCL_CHECK(stmt)                                                                 \
  do {                                                                                      \
    ncclResult_t sc_nr_ = (stmt);                                                           \
    if (sc_nr_ != ncclSuccess) ::servecast::cuda::ThrowNccl(sc_nr_, #stmt, __FILE__, __LINE__); \
  } while (0)
