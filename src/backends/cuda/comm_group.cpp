#include "backends/cuda/comm_group.h"

#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <memory>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/device.h"
#include "core/log.h"

namespace servecast::cuda {
namespace {

std::string ToHex(const void* data, std::size_t n) {
  static const char* digits = "0123456789abcdef";
  const auto* p = static_cast<const unsigned char*>(data);
  std::string out;
  for (std::size_t i = 0; i < n; ++i) {
    out += digits[p[i] >> 4];
    out += digits[p[i] & 15];
  }
  return out;
}

ncclUniqueId FromHex(const std::string& hex) {
  ncclUniqueId id{};
  if (hex.size() != 2 * sizeof(id.internal))
    throw Error("group id: expected " + std::to_string(2 * sizeof(id.internal)) + " hex digits (an ncclUniqueId), got " +
                std::to_string(hex.size()));
  auto nibble = [&](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    throw Error("group id: '" + std::string(1, c) + "' is not a hex digit");
  };
  for (std::size_t i = 0; i < sizeof(id.internal); ++i)
    id.internal[i] = static_cast<char>(nibble(hex[2 * i]) * 16 + nibble(hex[2 * i + 1]));
  return id;
}

std::unique_ptr<CommGroup>& Current() {
  static std::unique_ptr<CommGroup> g;
  return g;
}

}  // namespace

void ThrowNccl(ncclResult_t r, const char* stmt, const char* file, int line) {
  std::string msg = std::string(stmt) + " failed at " + file + ":" + std::to_string(line) + ": " +
                    ncclGetErrorString(r);
  const char* last = ncclGetLastError(nullptr);
  if (last && *last) msg += " (" + std::string(last) + ")";
  // Errors of the transport or of a peer leave the communicator unusable.
  throw CudaError(msg, r != ncclInvalidArgument && r != ncclInvalidUsage, false);
}

std::string NewNcclGroupId() {
  ::setenv("NCCL_NVLS_ENABLE", "0", 1);
  ncclUniqueId id{};
  SC_NCCL_CHECK(ncclGetUniqueId(&id));
  return ToHex(id.internal, sizeof(id.internal));
}

CommGroup& JoinGroup(const collect::RunContext& ctx) {
  auto& cur = Current();
  if (cur && cur->id_ == ctx.group_id && cur->rank_ == ctx.rank && cur->world_ == ctx.world) return *cur;
  if (ctx.world < 2) throw Error("a collective case needs a world of at least 2 ranks; this worker has " +
                                 std::to_string(ctx.world) + " (was it started as a gang member?)");
  if (ctx.group_id.empty()) throw Error("a collective case needs a group id; this worker has none");
  cur.reset();
  ::setenv("NCCL_NVLS_ENABLE", "0", 1);
  ncclUniqueId id = FromHex(ctx.group_id);
  auto g = std::make_unique<CommGroup>();
  g->rank_ = ctx.rank;
  g->world_ = ctx.world;
  g->id_ = ctx.group_id;
  SC_CUDA_CHECK(cudaSetDevice(Context().device));
  SC_NCCL_CHECK(ncclCommInitRank(&g->comm_, ctx.world, id, ctx.rank));
  log::Debug("rank " + std::to_string(ctx.rank) + " of " + std::to_string(ctx.world) + " joined its NCCL group");
  cur = std::move(g);
  return *cur;
}

CommGroup::~CommGroup() {
  if (comm_) ncclCommDestroy(comm_);
  if (scratch_) cudaFree(scratch_);
}

void CommGroup::EnsureScratch(std::size_t bytes) {
  if (bytes <= scratch_bytes_) return;
  if (scratch_) SC_CUDA_CHECK(cudaFree(scratch_));
  scratch_ = nullptr;
  SC_CUDA_CHECK(cudaMalloc(&scratch_, bytes));
  scratch_bytes_ = bytes;
}

long long CommGroup::AllMin(long long v) {
  cudaStream_t st = Context().stream;
  EnsureScratch(sizeof(long long));
  SC_CUDA_CHECK(cudaMemcpyAsync(scratch_, &v, sizeof(v), cudaMemcpyHostToDevice, st));
  SC_NCCL_CHECK(ncclAllReduce(scratch_, scratch_, 1, ncclInt64, ncclMin, comm_, st));
  long long out = 0;
  SC_CUDA_CHECK(cudaMemcpyAsync(&out, scratch_, sizeof(out), cudaMemcpyDeviceToHost, st));
  SC_CUDA_CHECK(cudaStreamSynchronize(st));
  return out;
}

std::vector<std::string> CommGroup::AllGather(const std::string& mine) {
  cudaStream_t st = Context().stream;
  const auto n = static_cast<std::size_t>(world_);
  // Lengths first, then the padded bytes.
  long long len = static_cast<long long>(mine.size());
  long long longest = -AllMin(-len);
  const std::size_t slot = static_cast<std::size_t>(longest) + sizeof(long long);
  EnsureScratch(slot * (n + 1));
  std::vector<char> send(slot, 0);
  std::memcpy(send.data(), &len, sizeof(len));
  std::memcpy(send.data() + sizeof(len), mine.data(), mine.size());
  char* base = static_cast<char*>(scratch_);
  SC_CUDA_CHECK(cudaMemcpyAsync(base + slot * n, send.data(), slot, cudaMemcpyHostToDevice, st));
  SC_NCCL_CHECK(ncclAllGather(base + slot * n, base, slot, ncclChar, comm_, st));
  std::vector<char> all(slot * n);
  SC_CUDA_CHECK(cudaMemcpyAsync(all.data(), base, all.size(), cudaMemcpyDeviceToHost, st));
  SC_CUDA_CHECK(cudaStreamSynchronize(st));
  std::vector<std::string> out(n);
  for (std::size_t r = 0; r < n; ++r) {
    long long l = 0;
    std::memcpy(&l, all.data() + r * slot, sizeof(l));
    out[r].assign(all.data() + r * slot + sizeof(l), static_cast<std::size_t>(l));
  }
  return out;
}

bool CommGroup::SpansNodes() {
  char host[256] = {0};
  ::gethostname(host, sizeof(host) - 1);
  auto names = AllGather(host);
  for (const auto& h : names)
    if (h != names[0]) return true;
  return false;
}

}  // namespace servecast::cuda
