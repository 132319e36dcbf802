// communication.cpp: see communication.h.
#include "profiler/analysis/communication.h"

#include "common/nvtx_contract.h"
#include "profiler/analysis/enum_names.h"

#include <cctype>
#include <string>

namespace ember::analysis {

namespace {

constexpr EnumName<CollectiveKind> kCollectiveKindNames[] = {
    {CollectiveKind::unknown, "unknown"},
    {CollectiveKind::all_reduce, "all_reduce"},
    {CollectiveKind::all_gather, "all_gather"},
    {CollectiveKind::reduce_scatter, "reduce_scatter"},
    {CollectiveKind::broadcast, "broadcast"},
    {CollectiveKind::reduce, "reduce"},
    {CollectiveKind::all_to_all, "all_to_all"},
    {CollectiveKind::send_recv, "send_recv"},
    {CollectiveKind::send, "send"},
    {CollectiveKind::recv, "recv"},
    {CollectiveKind::barrier, "barrier"},
};

// The kinds by the letters their names start with once lower-cased and stripped of
// everything but letters and digits, longest first where one is a prefix of another
// ("reducescatter" before "reduce", "sendrecv" before "send").
struct KindPrefix {
    std::string_view letters;
    CollectiveKind kind;
};
constexpr KindPrefix kKindPrefixes[] = {
    {"allreduce", CollectiveKind::all_reduce},
    {"allgather", CollectiveKind::all_gather},
    {"reducescatter", CollectiveKind::reduce_scatter},
    {"broadcast", CollectiveKind::broadcast},
    {"alltoall", CollectiveKind::all_to_all},
    {"sendrecv", CollectiveKind::send_recv},
    {"reduce", CollectiveKind::reduce},
    {"send", CollectiveKind::send},
    {"recv", CollectiveKind::recv},
    {"barrier", CollectiveKind::barrier},
};

// Lower-case letters and digits of `text`, leading digits dropped ("_allgather_base" ->
// "allgatherbase").
std::string letters_of(std::string_view text) {
    std::string letters;
    letters.reserve(text.size());
    for (char c : text) {
        const auto u = static_cast<unsigned char>(c);
        if (std::isalnum(u) && !(letters.empty() && std::isdigit(u)))
            letters.push_back(static_cast<char>(std::tolower(u)));
    }
    return letters;
}

std::optional<CollectiveKind> kind_by_prefix(std::string_view text) {
    const std::string letters = letters_of(text);
    for (const KindPrefix& prefix : kKindPrefixes)
        if (letters.starts_with(prefix.letters)) return prefix.kind;
    return std::nullopt;
}

}  // namespace

const char* collective_kind_name(CollectiveKind kind) {
    return name_in(kCollectiveKindNames, kind, "unknown");
}

std::optional<CollectiveKind> parse_collective_kind(std::string_view name) {
    return value_in(kCollectiveKindNames, name);
}

bool is_communication_kernel(std::string_view name) {
    return name.starts_with("nccl") || name.starts_with("rccl") || name.starts_with("hip") ||
           name.starts_with("hccl") || name.find("ncclKernel") != std::string_view::npos ||
           name.find("ncclDevKernel") != std::string_view::npos;
}

CollectiveKind collective_kind_of_kernel(std::string_view name) {
    if (!is_communication_kernel(name)) return CollectiveKind::unknown;
    // The part after the library's prefix: "ncclDevKernel_AllGather_RING_LL(...)" ->
    // "AllGather_RING_LL(...)", "_Z29ncclKernel_AllReduce_..." -> "AllReduce_...",
    // "ncclAllReduceRingLLKernel_sum_f32" -> "AllReduceRingLLKernel_sum_f32".
    for (std::string_view marker : {"ncclDevKernel_", "ncclKernel_", "nccl", "rccl"}) {
        const std::size_t at = name.find(marker);
        if (at == std::string_view::npos) continue;
        std::string_view rest = name.substr(at + marker.size());
        rest = rest.substr(0, rest.find('('));
        return kind_by_prefix(rest).value_or(CollectiveKind::unknown);
    }
    return CollectiveKind::unknown;
}

std::optional<CollectiveKind> collective_kind_of_operation(std::string_view name) {
    if (name == nvtx::range::kAllreduceBucket) return CollectiveKind::all_reduce;
    // PyTorch's profiler: the backend's op ("nccl:all_reduce") and c10d's ("c10d::allreduce_").
    for (std::string_view prefix : {"nccl:", "gloo:", "mpi:", "ucc:", "c10d::"}) {
        if (name.starts_with(prefix)) return kind_by_prefix(name.substr(prefix.size()));
    }
    // MPI's, as Nsight Systems traces them (--trace=mpi): "MPI_Allreduce", "MPI_Iallgather",
    // "MPI_Bcast", "MPI_Send" (not MPI_Init, MPI_Wait...).
    if (name.starts_with("MPI_")) {
        std::string_view call = name.substr(4);
        if (call == "Bcast" || call == "Ibcast") return CollectiveKind::broadcast;
        if (call.size() > 1 && call[0] == 'I' && std::islower(static_cast<unsigned char>(call[1])))
            call.remove_prefix(1);
        return kind_by_prefix(call);
    }
    // NCCL's own NVTX ranges: "ncclAllReduce", "ncclSend" (not ncclGroupStart, ncclCommInit...).
    if (name.starts_with("nccl") && name.size() > 4 && std::isupper(static_cast<unsigned char>(name[4])))
        return kind_by_prefix(name.substr(4));
    return std::nullopt;
}

std::optional<CollectiveKind> collective_kind_of_collective_name(std::string_view name) {
    return kind_by_prefix(name);
}

}  // namespace ember::analysis
