// flamegraph_svg.h: a self-contained SVG flamegraph of a stack tree: the root
// ("all") at the bottom, each frame as wide as its inclusive weight, a <title>
// tooltip on every frame (name, weight, share) and a small inline script for
// click-to-zoom (click a frame to fill the width with it; "Reset zoom" undoes).
// Every frame group carries data-node/data-parent/data-weight attributes so
// tools and tests can rebuild the tree from the file.
#pragma once

#include "profiler/analysis/stack_tree.h"
#include "profiler/export/output_file.h"

#include <string>

namespace ember::exporting {

struct FlamegraphOptions {
    std::string title = "Flame graph";
    std::string unit = "ns";
    double width = 1200.0;  // pixels of the root frame
    double frame_height = 17.0;
};

void write_flamegraph_svg(const analysis::StackTree& stacks, const FlamegraphOptions& options, OutputFile& out);

// `text` with &, <, >, " and ' escaped for XML text and attributes.
std::string xml_escape(std::string_view text);

}  // namespace ember::exporting
