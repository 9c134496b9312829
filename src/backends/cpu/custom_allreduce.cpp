#include "backends/cpu/custom_allreduce.h"

#include <fcntl.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "backends/cpu/cpu_timer.h"
#include "backends/cpu/op_support.h"
#include "collect/case.h"
#include "core/error.h"
#include "core/hash.h"

namespace servecast::cpu {

using collect::CaseResult;
using collect::Disposition;
using collect::FailureClass;

std::string ShmAllReduceSegmentName(const std::string& group_id, const std::string& case_id) {
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(Fnv1a64(case_id)));
  return "/" + group_id + "-" + hex;
}

namespace {

using Clock = std::chrono::steady_clock;

constexpr std::uint64_t kReadyMagic = 0x5345525645434152ULL;  // "SERVECAR"
// How long a rank waits for its peers (to create the segment, or at a barrier)
// before it gives up; the parent's per-case limit normally ends a stuck gang first.
constexpr double kPeerWaitS = 30;
constexpr std::uint64_t kOk = 1, kBad = 2;

// One word per cache line, so the ranks' spinning does not share lines.
struct alignas(64) Word {
  std::uint64_t v;
};

struct Header {
  Word ready;  // kReadyMagic once rank 0 has written world and n
  Word world;
  Word n;
  Word count;       // barrier arrivals in the current generation
  Word generation;  // barrier generation
  Word agreed;      // the broadcast word
  Word ok[kShmAllReduceMaxRanks];
};

constexpr std::size_t kDataOffset = (sizeof(Header) + 4095) / 4096 * 4096;

std::atomic_ref<std::uint64_t> At(Word& w) {
  return std::atomic_ref<std::uint64_t>(w.v);
}

double Since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

bool ValidGroupId(const std::string& id) {
  if (id.empty() || id.size() > 200) return false;
  for (char ch : id)
    if (!std::isalnum(static_cast<unsigned char>(ch)) && ch != '-' && ch != '_' && ch != '.') return false;
  return true;
}

// The ranks' shared segment for one case.
class ShmGroup {
 public:
  ShmGroup(int rank, int world, std::int64_t n) : rank_(rank), world_(world), n_(n) {
    bytes_ = kDataOffset + static_cast<std::size_t>(world) * static_cast<std::size_t>(n) * sizeof(float);
  }
  ~ShmGroup() {
    if (base_) ::munmap(base_, bytes_);
    if (fd_ >= 0) ::close(fd_);
    Unlink();
  }
  ShmGroup(const ShmGroup&) = delete;
  ShmGroup& operator=(const ShmGroup&) = delete;

  // Creates (rank 0) or opens the segment and meets every rank at a barrier;
  // rank 0 then unlinks the name. Empty on success, else why not.
  std::string Open(const std::string& name) {
    name_ = name;
    const auto start = Clock::now();
    if (rank_ == 0) {
      fd_ = ::shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
      if (fd_ < 0) return "shm_open(" + name + ", O_CREAT|O_EXCL): " + std::strerror(errno);
      created_ = true;
      if (::ftruncate(fd_, static_cast<off_t>(bytes_)) != 0)
        return "ftruncate(" + name + ", " + std::to_string(bytes_) + "): " + std::strerror(errno);
    } else {
      while ((fd_ = ::shm_open(name.c_str(), O_RDWR, 0600)) < 0) {
        if (errno != ENOENT) return "shm_open(" + name + "): " + std::strerror(errno);
        if (Since(start) > kPeerWaitS) return "rank 0 created no segment " + name + " within the peer wait";
        ::usleep(1000);
      }
      for (struct stat st{};;) {
        if (::fstat(fd_, &st) != 0) return "fstat(" + name + "): " + std::strerror(errno);
        if (static_cast<std::size_t>(st.st_size) >= bytes_) break;
        if (Since(start) > kPeerWaitS) return "rank 0 did not size segment " + name + " within the peer wait";
        ::usleep(1000);
      }
    }
    void* p = ::mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_SHARED, fd_, 0);
    if (p == MAP_FAILED) return "mmap(" + name + ", " + std::to_string(bytes_) + "): " + std::strerror(errno);
    base_ = p;
    hdr_ = static_cast<Header*>(p);
    if (rank_ == 0) {
      At(hdr_->world).store(static_cast<std::uint64_t>(world_), std::memory_order_relaxed);
      At(hdr_->n).store(static_cast<std::uint64_t>(n_), std::memory_order_relaxed);
      At(hdr_->ready).store(kReadyMagic, std::memory_order_release);
    } else {
      while (At(hdr_->ready).load(std::memory_order_acquire) != kReadyMagic) {
        if (Since(start) > kPeerWaitS) return "rank 0 did not initialize segment " + name + " within the peer wait";
        ::usleep(100);
      }
      if (At(hdr_->world).load(std::memory_order_relaxed) != static_cast<std::uint64_t>(world_) ||
          At(hdr_->n).load(std::memory_order_relaxed) != static_cast<std::uint64_t>(n_))
        return "segment " + name + " was made for another shape (world, message_size)";
    }
    if (!Barrier()) return "not every rank mapped segment " + name + " within the peer wait";
    Unlink();  // every rank has it mapped: the name is no longer needed
    return "";
  }

  // Every rank arrives before any leaves. False when the peers did not all arrive
  // within the peer wait.
  bool Barrier() {
    auto gen = At(hdr_->generation).load(std::memory_order_acquire);
    if (At(hdr_->count).fetch_add(1, std::memory_order_acq_rel) == static_cast<std::uint64_t>(world_ - 1)) {
      At(hdr_->count).store(0, std::memory_order_relaxed);
      At(hdr_->generation).fetch_add(1, std::memory_order_release);
      return true;
    }
    Clock::time_point start{};
    for (std::uint64_t spin = 0; At(hdr_->generation).load(std::memory_order_acquire) == gen; ++spin) {
      if (spin < 1024) continue;
      ::sched_yield();  // ranks may share a core
      if ((spin & 1023) == 0) {
        if (spin == 1024)
          start = Clock::now();
        else if (Since(start) > kPeerWaitS)
          return false;
      }
    }
    return true;
  }

  // Barrier for code that cannot return a failure (the timed calls).
  void BarrierOrThrow() {
    if (!Barrier())
      throw Error("custom_allreduce: rank " + std::to_string(rank_) + " waited more than " +
                  std::to_string(static_cast<int>(kPeerWaitS)) + " s for its peers at a barrier");
  }

  // Rank 0's `value`, on every rank.
  std::int64_t Agree(std::int64_t value) {
    if (rank_ == 0) At(hdr_->agreed).store(static_cast<std::uint64_t>(value), std::memory_order_relaxed);
    BarrierOrThrow();
    auto v = static_cast<std::int64_t>(At(hdr_->agreed).load(std::memory_order_relaxed));
    BarrierOrThrow();  // nobody overwrites it before all have read it
    return v;
  }

  void SetOk(bool ok) { At(hdr_->ok[rank_]).store(ok ? kOk : kBad, std::memory_order_relaxed); }
  bool RankOk(int r) { return At(hdr_->ok[r]).load(std::memory_order_relaxed) == kOk; }

  void AllReduce(const float* in, float* __restrict out) {
    const std::size_t n = static_cast<std::size_t>(n_);
    std::memcpy(Slot(rank_), in, n * sizeof(float));
    BarrierOrThrow();
    std::memcpy(out, Slot(0), n * sizeof(float));
    for (int r = 1; r < world_; ++r) {
      const float* __restrict s = Slot(r);
      for (std::size_t i = 0; i < n; ++i) out[i] += s[i];
    }
    BarrierOrThrow();  // no rank rewrites its slot while another still reads it
  }

 private:
  float* Slot(int r) {
    return reinterpret_cast<float*>(static_cast<char*>(base_) + kDataOffset) +
           static_cast<std::size_t>(r) * static_cast<std::size_t>(n_);
  }
  void Unlink() {
    if (created_ && !name_.empty()) ::shm_unlink(name_.c_str());
    created_ = false;
  }

  int rank_, world_;
  std::int64_t n_;
  std::size_t bytes_ = 0;
  std::string name_;
  int fd_ = -1;
  bool created_ = false;
  void* base_ = nullptr;
  Header* hdr_ = nullptr;
};

class CustomAllReduceOp : public collect::TableOp {
 public:
  CustomAllReduceOp() : TableOp("custom_allreduce", TableOrThrow("custom_allreduce_perf")) {}
  double default_timeout_s() const override { return 60; }
  std::vector<collect::Requirement> requirements() const override {
    collect::Requirement gpus;
    gpus.gpus_param = "num_gpus";
    return {gpus};
  }
  int Ranks(const collect::Params& p) const override {
    return p.Has("num_gpus") ? static_cast<int>(p.Num("num_gpus")) : 1;
  }
  double MemoryBytes(const collect::Params& p) const override {
    if (!p.Has("num_gpus") || !p.Has("message_size")) return 0;  // Run reports it
    double n = p.Num("message_size"), world = p.Num("num_gpus");
    return static_cast<double>(kDataOffset) + 4 * n * (world + 2);
  }

  CaseResult Run(const collect::Case& c, const collect::RunContext& ctx) override {
    std::int64_t n = 0, world = 0;
    std::string dtype;
    try {
      dtype = c.params.Str("allreduce_dtype");
      n = PositiveInt(c.params, "message_size");
      world = PositiveInt(c.params, "num_gpus");
    } catch (const Error& e) {
      return InvalidParams(name(), e.what());
    }
    if (auto bad = CheckDtype("allreduce_dtype", dtype, {"float32"})) return *bad;
    if (world < 2)
      return NotSupported("SingleRank", "custom_allreduce: num_gpus " + std::to_string(world) +
                                            "; an all-reduce needs at least 2 ranks");
    if (world > kShmAllReduceMaxRanks)
      return NotSupported("TooManyRanks", "custom_allreduce: num_gpus " + std::to_string(world) + " > " +
                                              std::to_string(kShmAllReduceMaxRanks) + " ranks in one segment");
    if (ctx.world != world || ctx.rank < 0 || ctx.rank >= ctx.world)
      return CaseResult::Failure(Disposition::kFailed, FailureClass::kCollectorBug, "GroupMismatch",
                                 "custom_allreduce: case needs " + std::to_string(world) +
                                     " ranks; this process is rank " + std::to_string(ctx.rank) + " of " +
                                     std::to_string(ctx.world));
    if (!ValidGroupId(ctx.group_id))
      return CaseResult::Failure(Disposition::kFailed, FailureClass::kCollectorBug, "NoGroup",
                                 "custom_allreduce: group id '" + ctx.group_id +
                                     "' is empty or not a valid shared-memory name (letters, digits, '-', '_', '.')");

    const int rank = ctx.rank;
    ShmGroup group(rank, static_cast<int>(world), n);
    if (std::string why = group.Open(ShmAllReduceSegmentName(ctx.group_id, c.id)); !why.empty())
      return CaseResult::Failure(Disposition::kFailed, FailureClass::kResource, "GroupSetup",
                                 "custom_allreduce rank " + std::to_string(rank) + ": " + why);

    const auto count = static_cast<std::size_t>(n);
    std::vector<float> in(count), out(count, std::numeric_limits<float>::quiet_NaN());
    for (std::size_t i = 0; i < count; ++i) in[i] = ShmAllReduceInput(rank, static_cast<std::int64_t>(i));

    // Check: the whole output, exactly, on every rank; then every rank's verdict.
    group.AllReduce(in.data(), out.data());
    std::int64_t bad = 0, first_bad = -1;
    for (std::size_t i = 0; i < count; ++i) {
      double expected = 0;
      for (int r = 0; r < world; ++r) expected += ShmAllReduceInput(r, static_cast<std::int64_t>(i));
      if (static_cast<double>(out[i]) != expected) {
        if (bad++ == 0) first_bad = static_cast<std::int64_t>(i);
      }
    }
    group.SetOk(bad == 0);
    group.BarrierOrThrow();
    std::string wrong;
    for (int r = 0; r < world; ++r)
      if (!group.RankOk(r)) wrong += (wrong.empty() ? "" : ", ") + std::to_string(r);
    if (!wrong.empty()) {
      std::string mine;
      if (bad > 0) {
        double expected = 0;
        for (int r = 0; r < world; ++r) expected += ShmAllReduceInput(r, first_bad);
        mine = "; here " + std::to_string(bad) + " of " + std::to_string(n) + " elements wrong, first out[" +
               std::to_string(first_bad) + "] = " + std::to_string(out[static_cast<std::size_t>(first_bad)]) +
               ", expected " + std::to_string(expected);
      }
      return CaseResult::Failure(Disposition::kIncorrect, FailureClass::kCollectorBug, "IncorrectOutput",
                                 "custom_allreduce: the sum differs from the exact one on rank(s) " + wrong +
                                     " (checked all elements of every rank's output)" + mine);
    }

    collect::TimingStats stats = TimeCpuAgreed([&] { group.AllReduce(in.data(), out.data()); }, ctx.timing,
                                               [&](std::int64_t v) { return group.Agree(v); });
    if (!ctx.runtime) throw Error("cpu backend: RunContext without runtime info for case " + c.id);
    const double bytes = 4.0 * static_cast<double>(n);
    const double algbw_gbps = stats.median_ms > 0 ? bytes / (stats.median_ms * 1e-3) / 1e9 : 0;
    const double w = static_cast<double>(world);
    collect::Params extra;
    extra.Set("algbw_gbps", algbw_gbps);
    extra.Set("busbw_gbps", algbw_gbps * 2 * (w - 1) / w);
    extra.Set("implementation", std::string("shm"));
    return CaseResult::Passed({collect::MakeRow(table_, *ctx.runtime, name(), "servecast_shm_allreduce", c.params,
                                                stats, ctx.measure_power, extra)});
  }

};

}  // namespace

std::unique_ptr<collect::Op> MakeCustomAllReduceOp() {
  return std::make_unique<CustomAllReduceOp>();
}

}  // namespace servecast::cpu
