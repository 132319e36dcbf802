// flamegraph_svg.cpp: layout and SVG text of a flamegraph.
#include "profiler/export/flamegraph_svg.h"

#include <fmt/format.h>

#include <algorithm>
#include <iterator>
#include <vector>

namespace ember::exporting {

std::string xml_escape(std::string_view text) {
    std::string escaped;
    escaped.reserve(text.size());
    for (char c : text) {
        switch (c) {
            case '&':
                escaped += "&amp;";
                break;
            case '<':
                escaped += "&lt;";
                break;
            case '>':
                escaped += "&gt;";
                break;
            case '"':
                escaped += "&quot;";
                break;
            case '\'':
                escaped += "&apos;";
                break;
            default:
                // XML 1.0 forbids most control characters, even escaped.
                if (static_cast<unsigned char>(c) < 0x20 && c != '\t' && c != '\n' && c != '\r')
                    escaped += ' ';
                else
                    escaped += c;
        }
    }
    return escaped;
}

namespace {

// Warm colors from the name, stable across runs (the classic flamegraph palette).
std::string frame_color(const std::string& name) {
    std::uint32_t hash = 2166136261u;
    for (char c : name) hash = (hash ^ static_cast<unsigned char>(c)) * 16777619u;
    int red = 205 + static_cast<int>(hash % 50);
    int green = static_cast<int>((hash >> 8) % 230);
    int blue = static_cast<int>((hash >> 16) % 55);
    return fmt::format("rgb({},{},{})", red, green, blue);
}

constexpr double kMargin = 10.0;
constexpr double kHeaderHeight = 40.0;
constexpr double kCharWidth = 7.0;  // approximate width of a 12 px monospace glyph

constexpr const char* kZoomScript = R"js(
var frames = document.querySelectorAll('g.frame');
function label(g, width) {
  var text = g.querySelector('text'), name = g.getAttribute('data-name');
  var fit = Math.floor((width - 6) / 7);
  text.textContent = fit < 3 ? '' : (name.length <= fit ? name : name.substring(0, fit - 2) + '..');
}
function zoom(target) {
  var x0 = parseFloat(target.getAttribute('data-x')), w0 = parseFloat(target.getAttribute('data-w'));
  var depth = parseInt(target.getAttribute('data-depth'));
  var full = parseFloat(document.documentElement.getAttribute('data-width'));
  var margin = parseFloat(document.documentElement.getAttribute('data-margin'));
  frames.forEach(function (g) {
    var x = parseFloat(g.getAttribute('data-x')), w = parseFloat(g.getAttribute('data-w'));
    var d = parseInt(g.getAttribute('data-depth')), rect = g.querySelector('rect'), text = g.querySelector('text');
    var inside = x >= x0 - 1e-9 && x + w <= x0 + w0 + 1e-9;
    var below = d < depth && x <= x0 + 1e-9 && x + w >= x0 + w0 - 1e-9;
    if (!(inside && d >= depth) && !below) { g.style.display = 'none'; return; }
    g.style.display = '';
    var nx = below ? 0 : (x - x0) * full / w0, nw = below ? full : w * full / w0;
    rect.setAttribute('x', margin + nx); rect.setAttribute('width', nw);
    text.setAttribute('x', margin + nx + 3); label(g, nw);
  });
}
function reset() {
  var margin = parseFloat(document.documentElement.getAttribute('data-margin'));
  frames.forEach(function (g) {
    var x = parseFloat(g.getAttribute('data-x')), w = parseFloat(g.getAttribute('data-w'));
    var rect = g.querySelector('rect'), text = g.querySelector('text');
    g.style.display = ''; rect.setAttribute('x', margin + x); rect.setAttribute('width', w);
    text.setAttribute('x', margin + x + 3); label(g, w);
  });
}
frames.forEach(function (g) { g.addEventListener('click', function () { zoom(g); }); });
document.getElementById('reset').addEventListener('click', reset);
)js";

}  // namespace

void write_flamegraph_svg(const analysis::StackTree& stacks, const FlamegraphOptions& options, OutputFile& out) {
    std::vector<std::int64_t> inclusive = stacks.inclusive_weights();
    std::int64_t total = inclusive[analysis::StackTree::kRoot];
    std::uint32_t max_depth = 0;
    for (std::uint32_t node = 0; node < stacks.size(); ++node) {
        if (inclusive[node] > 0) max_depth = std::max(max_depth, stacks.node(node).depth);
    }
    double height = kHeaderHeight + (max_depth + 1) * options.frame_height + 2 * kMargin;
    double image_width = options.width + 2 * kMargin;
    std::string& b = out.buffer();
    fmt::format_to(
        std::back_inserter(b),
        "<?xml version=\"1.0\" encoding=\"UTF-8\" standalone=\"no\"?>\n"
        "<svg xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\" width=\"{:.4f}\" height=\"{:.4f}\" "
        "viewBox=\"0 0 {:.4f} {:.4f}\" data-width=\"{:.4f}\" data-margin=\"{:.4f}\" data-total=\"{}\" "
        "font-family=\"monospace\" font-size=\"12\">\n"
        "<style>g.frame:hover rect {{ stroke: black; stroke-width: 0.5; }} g.frame {{ cursor: pointer; }}</style>\n"
        "<rect x=\"0\" y=\"0\" width=\"100%\" height=\"100%\" fill=\"rgb(250,250,240)\"/>\n"
        "<text x=\"{:.4f}\" y=\"24\" font-size=\"16\">{}</text>\n"
        "<text id=\"reset\" x=\"{:.4f}\" y=\"24\" text-anchor=\"end\" style=\"cursor: pointer\">Reset zoom</text>\n",
        image_width, height, image_width, height, options.width, kMargin, total, kMargin, xml_escape(options.title),
        image_width - kMargin);

    // Lay out children left to right inside their parent, depth-first.
    std::vector<double> x(stacks.size(), 0.0);
    std::vector<std::uint32_t> pending{analysis::StackTree::kRoot};
    while (!pending.empty()) {
        std::uint32_t node = pending.back();
        pending.pop_back();
        if (inclusive[node] <= 0 || total <= 0) continue;
        const auto& info = stacks.node(node);
        double width = options.width * static_cast<double>(inclusive[node]) / static_cast<double>(total);
        double y = height - kMargin - (info.depth + 1) * options.frame_height;
        std::string name = node == analysis::StackTree::kRoot ? "all" : info.name;
        std::string escaped = xml_escape(name);
        double share = 100.0 * static_cast<double>(inclusive[node]) / static_cast<double>(total);
        std::size_t fit = width > 6 ? static_cast<std::size_t>((width - 6) / kCharWidth) : 0;
        std::string label = fit < 3 ? "" : (name.size() <= fit ? name : name.substr(0, fit - 2) + "..");
        fmt::format_to(std::back_inserter(b),
                       "<g class=\"frame\" data-node=\"{}\" data-parent=\"{}\" data-depth=\"{}\" data-weight=\"{}\" "
                       "data-x=\"{:.4f}\" data-w=\"{:.4f}\" data-name=\"{}\">"
                       "<title>{} ({} {}, {:.2f}%)</title>"
                       "<rect x=\"{:.4f}\" y=\"{:.4f}\" width=\"{:.4f}\" height=\"{:.4f}\" fill=\"{}\" rx=\"2\"/>"
                       "<text x=\"{:.4f}\" y=\"{:.4f}\">{}</text></g>\n",
                       node, node == analysis::StackTree::kRoot ? -1 : static_cast<std::int64_t>(info.parent),
                       info.depth, inclusive[node], x[node], width, escaped, escaped, inclusive[node],
                       xml_escape(options.unit), share, kMargin + x[node], y, width, options.frame_height - 1,
                       frame_color(name), kMargin + x[node] + 3, y + options.frame_height - 5, xml_escape(label));
        out.maybe_flush();
        double child_x = x[node];
        for (std::uint32_t child : info.children) {
            x[child] = child_x;
            child_x += options.width * static_cast<double>(inclusive[child]) / static_cast<double>(total);
        }
        for (auto it = info.children.rbegin(); it != info.children.rend(); ++it) pending.push_back(*it);
    }
    b += "<script type=\"text/ecmascript\"><![CDATA[";
    b += kZoomScript;
    b += "]]></script>\n</svg>\n";
    out.flush();
}

}  // namespace ember::exporting
