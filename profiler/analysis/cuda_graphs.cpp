// cuda_graphs.cpp: GPU work from CUDA graphs, grouped in SQL.
#include "profiler/analysis/cuda_graphs.h"

#include "profiler/store/table_sql.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <tuple>

namespace ember::analysis {

namespace {

double share(std::int64_t part, std::int64_t whole) {
    return whole > 0 ? 100.0 * static_cast<double>(part) / static_cast<double>(whole) : 0.0;
}

}  // namespace

CudaGraphSummary cuda_graph_summary(const store::TraceReader& reader) {
    CudaGraphSummary summary;
    {
        store::Statement totals =
            store::query(reader, "SELECT COUNT(*), COALESCE(SUM(end_ns - start_ns), 0) FROM kernels");
        if (totals.next_row()) {
            summary.kernels = totals.column_int64(0);
            summary.kernel_ns = totals.column_int64(1);
        }
    }
    // kind 0 kernel, 1 memcpy, 2 memset. A file from before schema 3 has no graph
    // columns: they read as 0 there (store::query), and no row comes back.
    std::map<trace::GraphId, CudaGraphRow> by_graph;
    std::map<trace::GraphId, std::set<std::int64_t>> nodes;
    store::Statement query = store::query(
        reader,
        "SELECT 0, graph_id, graph_node_id, end_ns - start_ns FROM kernels WHERE graph_id != 0 OR graph_node_id != 0 "
        "UNION ALL SELECT 1, graph_id, graph_node_id, end_ns - start_ns FROM memcpys WHERE graph_id != 0 OR "
        "graph_node_id != 0 UNION ALL SELECT 2, graph_id, graph_node_id, end_ns - start_ns FROM memsets WHERE "
        "graph_id != 0 OR graph_node_id != 0");
    while (query.next_row()) {
        const auto graph = static_cast<trace::GraphId>(query.column_int64(1));
        const std::int64_t node = query.column_int64(2), duration = query.column_int64(3);
        CudaGraphRow& row = by_graph[graph];
        row.graph_id = graph;
        row.gpu_ns += duration;
        if (node != 0) nodes[graph].insert(node);
        switch (query.column_int64(0)) {
            case 0:
                ++row.kernels;
                row.kernel_ns += duration;
                ++summary.graph_kernels;
                summary.graph_kernel_ns += duration;
                break;
            case 1:
                ++row.memcpys;
                break;
            default:
                ++row.memsets;
                break;
        }
        ++summary.graph_operations;
    }
    for (auto& [graph, row] : by_graph) {
        row.nodes = static_cast<std::int64_t>(nodes[graph].size());
        summary.graphs.push_back(row);
    }
    std::sort(summary.graphs.begin(), summary.graphs.end(), [](const CudaGraphRow& a, const CudaGraphRow& b) {
        return std::tie(b.gpu_ns, a.graph_id) < std::tie(a.gpu_ns, b.graph_id);
    });
    return summary;
}

Table cuda_graphs_table(const CudaGraphSummary& summary) {
    Table table;
    table.key = "graphs";
    if (summary.any()) {
        std::int64_t graphs = 0;
        for (const CudaGraphRow& row : summary.graphs) graphs += row.graph_id != 0 ? 1 : 0;
        table.title =
            fmt::format("CUDA graphs: {} of {} kernels ({:.1f}% of kernel time) ran from {}", summary.graph_kernels,
                        summary.kernels, share(summary.graph_kernel_ns, summary.kernel_ns),
                        graphs > 0 ? fmt::format("{} graph{}", graphs, graphs == 1 ? "" : "s")
                                   : std::string("graphs (their ids not recorded)"));
    } else {
        table.title = "CUDA graphs";
        table.empty_note = "no kernel, copy or memset ran from a CUDA graph";
    }
    table.columns = {
        {"graph", "Graph", ColumnKind::text},
        {"kernels", "Kernels", ColumnKind::integer},
        {"memcpys", "Memcpys", ColumnKind::integer},
        {"memsets", "Memsets", ColumnKind::integer},
        {"nodes", "Nodes", ColumnKind::integer},
        {"gpu_time", "GPU Time", ColumnKind::time},
        {"kernel_time_percent", "Kernel Time (%)", ColumnKind::percent},
    };
    for (const CudaGraphRow& row : summary.graphs) {
        table.rows.push_back({row.graph_id != 0 ? std::to_string(row.graph_id) : std::string("(graph id not recorded)"),
                              row.kernels, row.memcpys, row.memsets, row.nodes, row.gpu_ns,
                              share(row.kernel_ns, summary.kernel_ns)});
    }
    return table;
}

}  // namespace ember::analysis
