// communication.h: what communication is, decided one way for every report, `ember
// diff`, the viewer and the job analysis (collectives.h).
//
// A communication kernel is a kernel of a collective library: NCCL's and RCCL's
// (`ncclKernel_*`, `ncclDevKernel_*`, their mangled forms `_Z..ncclKernel_..`, and the
// older `ncclAllReduceRingLLKernel_*`), or any kernel HTA counts as COMMUNICATION
// (names starting with nccl, hip or hccl), so `--like hta` still reproduces HTA.
//
// A collective operation on the host is a range that issues one:
//   PyTorch's profiler   `nccl:all_reduce`, `gloo:all_gather`, `c10d::allreduce_`, ...;
//   NCCL's NVTX ranges   `ncclAllReduce`, `ncclSend`, ... (in nsys and nvprof files);
//   MPI's, traced by nsys `MPI_Allreduce`, `MPI_Iallgather`, `MPI_Bcast`, `MPI_Send`, ...;
//   ember's trainer      `allreduce/bucket` (common/nvtx_contract.h).
// Its kind comes from its name; Kineto's `Collective name` argument ("allreduce",
// "_allgather_base", ...) reads the same way.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace ember::analysis {

enum class CollectiveKind : std::uint8_t {
    unknown = 0,  // a communication kernel whose name does not say (ncclDevKernel_Generic)
    all_reduce,
    all_gather,
    reduce_scatter,
    broadcast,
    reduce,
    all_to_all,
    send_recv,
    send,
    recv,
    barrier,
};
inline constexpr int kCollectiveKindCount = 11;

// "all_reduce", "all_gather", ...; "unknown".
const char* collective_kind_name(CollectiveKind kind);
std::optional<CollectiveKind> parse_collective_kind(std::string_view name);

// Is this GPU kernel communication (see above)?
bool is_communication_kernel(std::string_view name);
// The collective a communication kernel runs; unknown when its name does not say.
CollectiveKind collective_kind_of_kernel(std::string_view name);

// The collective a host range issues, or nullopt when the range issues none.
std::optional<CollectiveKind> collective_kind_of_operation(std::string_view name);
// The collective Kineto's `Collective name` argument names ("allreduce",
// "_reduce_scatter_base", "all_to_allv", ...); nullopt for "wait" and other non-collectives.
std::optional<CollectiveKind> collective_kind_of_collective_name(std::string_view name);

}  // namespace ember::analysis
