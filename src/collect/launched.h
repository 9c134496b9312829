#pragma once

// Ranks started by an existing launcher (mpirun, SLURM's srun): each process of
// the job runs `servecast collect --launched ...`, reads its rank and world from
// the launcher's environment, and all of them run every case of the plan
// together, in plan order, in-process (no worker processes).

#include <functional>
#include <string>
#include <vector>

#include "collect/case.h"
#include "collect/journal.h"
#include "collect/registry.h"

namespace servecast::collect {

struct LaunchInfo {
  int rank = 0;
  int world = 1;
  int local_rank = 0;
  std::string launcher;  // "slurm", "openmpi", "pmi", "servecast"
  std::string job_key;   // tells this launch apart from earlier ones (rendezvous file name)
};

// Reads the launcher's environment: SLURM (SLURM_PROCID, SLURM_NTASKS,
// SLURM_LOCALID, SLURM_JOB_ID.SLURM_STEP_ID), Open MPI (OMPI_COMM_WORLD_RANK,
// _SIZE, _LOCAL_RANK, with PMIX_NAMESPACE or OMPI_MCA_ess_base_jobid), PMI
// (PMI_RANK, PMI_SIZE, MPI_LOCALRANKID) or SERVECAST_RANK / SERVECAST_WORLD /
// SERVECAST_LOCAL_RANK / SERVECAST_LAUNCH_ID. Throws UsageError naming what it
// looked for when none is set.
LaunchInfo DetectLaunch();

// Rendezvous through a shared folder (the run dir, on a shared file system
// across nodes): rank 0 makes the content with `make_content` (the group token
// and the cases to run) and writes it to <dir>/rendezvous-<job_key>.id
// atomically; the others wait for that file (up to `wait_s`) and read it.
// Returns the content.
std::string Rendezvous(const LaunchInfo& li, const std::string& dir, const std::function<std::string()>& make_content,
                       double wait_s = 300);

struct LaunchedRunOptions {
  std::string backend;
  int device = 0;  // this rank's GPU
  double timeout_s = 0;
  double timing_budget_s = 0.5;
  bool measure_power = false;
  std::string group_id;
};

// Runs `cases` on this rank, in order. Rank 0 records every case in `journal`
// (the others pass nullptr). A case past its timeout ends the process (exit 4)
// after rank 0 has recorded it; --resume continues after it. Returns the number
// of cases run.
std::size_t RunLaunchedCases(const Registry& registry, const LaunchInfo& li, const LaunchedRunOptions& opt,
                             const RuntimeInfo& rt, const std::vector<Case>& cases, JournalWriter* journal,
                             const std::function<void(std::size_t done, std::size_t failed)>& on_progress,
                             const std::function<bool()>& stop);

}  // namespace servecast::collect
