#pragma once

// The CUDA backend's collectives, one process per GPU (a gang, or the ranks of a
// launcher's job), docs/kernels.md says what each row times:
//   nccl_perf (key nccl_dtype, num_gpus, message_size in elements), op_name
//     all_reduce, all_gather, reduce_scatter, alltoall, send_recv: NCCL,
//     out-of-place, sum; message_size is the whole buffer as in nccl-tests
//     (all_gather: the gathered output; reduce_scatter: the input; alltoall: each
//     rank's send buffer; send_recv: what each rank sends to rank + 1 while it
//     receives from rank - 1). nccl_dtype "half" runs bfloat16, "int8" int8.
//   custom_allreduce_perf (key allreduce_dtype, num_gpus, message_size), op_name
//     custom_allreduce: servecast's one-shot / two-shot all-reduce over CUDA IPC
//     peer memory (custom_allreduce.h), the faster of the two per size.

#include "collect/registry.h"

namespace servecast::cuda {

void RegisterCommOps(collect::Registry& r);

}  // namespace servecast::cuda
