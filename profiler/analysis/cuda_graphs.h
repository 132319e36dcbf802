// cuda_graphs.h: how much GPU work ran from CUDA graphs (cudaGraphLaunch, PyTorch's
// CUDA graphs, torch.compile's "reduce-overhead") rather than from one launch per
// kernel: per graph, its kernels, copies and memsets, their GPU time and distinct
// nodes, and the share of all kernels that ran from graphs. Reads the schema 3
// columns graph_id / graph_node_id (docs/trace-schema.md); a file written before them
// has no graph work.
#pragma once

#include "profiler/analysis/report_table.h"
#include "profiler/store/reader.h"

#include <cstdint>
#include <vector>

namespace ember::analysis {

struct CudaGraphRow {
    // 0: operations that name a graph node but not the graph (Nsight Systems exports
    // before 2025 record graphNodeId only).
    trace::GraphId graph_id = 0;
    std::int64_t kernels = 0;
    std::int64_t memcpys = 0;
    std::int64_t memsets = 0;
    std::int64_t nodes = 0;      // distinct graph_node_id values among them
    std::int64_t gpu_ns = 0;     // their summed GPU time (kernels, copies, memsets)
    std::int64_t kernel_ns = 0;  // the kernels' part of it
};

struct CudaGraphSummary {
    std::int64_t kernels = 0;        // every kernel of the trace
    std::int64_t kernel_ns = 0;      // and their summed time
    std::int64_t graph_kernels = 0;  // those that ran from a graph
    std::int64_t graph_kernel_ns = 0;
    std::int64_t graph_operations = 0;  // kernels, copies and memsets from graphs
    std::vector<CudaGraphRow> graphs;   // most GPU time first, then by graph id
    bool any() const { return graph_operations > 0; }
};

// One pass of SQL over kernels, memcpys and memsets.
CudaGraphSummary cuda_graph_summary(const store::TraceReader& reader);

// The `graphs` report of `ember stats`: one row per graph; the title says how many
// kernels (and what share of kernel time) ran from graphs; no graph work gives an
// empty table with a note saying so.
Table cuda_graphs_table(const CudaGraphSummary& summary);

}  // namespace ember::analysis
