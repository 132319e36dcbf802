// loss_plot.cpp: renders the loss panels of loss_plot.h as SVG text.
#include "samples/optimizer_comparison/loss_plot.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

namespace optimizer_comparison {
namespace {

// Geometry of the figure, in SVG user units (pixels).
constexpr double kPanelWidth = 400.0;
constexpr double kPanelGap = 24.0;
constexpr double kMarginLeft = 20.0;
constexpr double kPlotInsetLeft = 58.0;  // room for the y tick labels and y label
constexpr double kPlotInsetRight = 10.0;
constexpr double kPlotTop = 96.0;
constexpr double kPlotHeight = 280.0;
constexpr double kLegendTop = kPlotTop + kPlotHeight + 62.0;
constexpr double kFigureHeight = kLegendTop + 34.0;

std::string escape_xml(const std::string& text) {
    std::string escaped;
    for (char c : text) {
        if (c == '&')
            escaped += "&amp;";
        else if (c == '<')
            escaped += "&lt;";
        else if (c == '>')
            escaped += "&gt;";
        else if (c == '"')
            escaped += "&quot;";
        else
            escaped += c;
    }
    return escaped;
}

std::string format(const char* pattern, double a, double b = 0.0, double c = 0.0, double d = 0.0) {
    char buffer[256];
    std::snprintf(buffer, sizeof buffer, pattern, a, b, c, d);
    return buffer;
}

// A tick spacing of 1, 2 or 5 times a power of ten giving about `target` ticks.
double nice_tick_step(double range, int target) {
    if (!(range > 0.0)) return 1.0;
    double raw = range / target;
    double power = std::pow(10.0, std::floor(std::log10(raw)));
    double fraction = raw / power;
    double nice = fraction < 1.5 ? 1.0 : fraction < 3.5 ? 2.0 : fraction < 7.5 ? 5.0 : 10.0;
    return nice * power;
}

// The label of a tick value with as many decimals as the step needs.
std::string tick_label(double value, double step) {
    int decimals = step >= 1.0 ? 0 : int(std::ceil(-std::log10(step) - 1e-9));
    char buffer[64];
    std::snprintf(buffer, sizeof buffer, "%.*f", decimals, std::abs(value) < step * 1e-6 ? 0.0 : value);
    return buffer;
}

void render_panel(std::string& svg, const LossPanel& panel, double left) {
    const double plot_left = left + kPlotInsetLeft;
    const double plot_width = kPanelWidth - kPlotInsetLeft - kPlotInsetRight;
    const double plot_bottom = kPlotTop + kPlotHeight;

    std::size_t steps = 0;
    double low = std::numeric_limits<double>::infinity();
    double high = -std::numeric_limits<double>::infinity();
    for (const LossCurve& curve : panel.curves) {
        steps = std::max(steps, curve.values.size());
        for (double value : curve.values) {
            if (!std::isfinite(value)) continue;
            low = std::min(low, value);
            high = std::max(high, value);
        }
    }
    if (!std::isfinite(low)) low = 0.0, high = 1.0;
    if (high - low < 1e-9) high = low + 1.0;

    // Axis ranges snapped outward to whole ticks.
    double y_step = nice_tick_step(high - low, 6);
    double y_min = std::min(0.0, std::floor(low / y_step) * y_step);  // losses read best from zero
    double y_max = std::ceil(high / y_step) * y_step;
    double x_max = double(std::max<std::size_t>(steps, 1));
    double x_step = nice_tick_step(x_max, 5);

    auto x_of = [&](double step) { return plot_left + plot_width * step / x_max; };
    auto y_of = [&](double value) { return plot_bottom - kPlotHeight * (value - y_min) / (y_max - y_min); };

    svg += "<g class=\"panel\">\n";
    svg += format("<text x=\"%.1f\" y=\"%.1f\" class=\"panel-title\">", plot_left + plot_width / 2, kPlotTop - 12) +
           escape_xml(panel.title) + "</text>\n";
    svg += format("<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" class=\"plot-area\"/>\n", plot_left,
                  kPlotTop, plot_width, kPlotHeight);

    // Grid lines and tick labels.
    for (double value = y_min; value <= y_max + y_step * 1e-6; value += y_step) {
        double y = y_of(value);
        svg += format("<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" class=\"grid\"/>\n", plot_left, y,
                      plot_left + plot_width, y);
        svg += format("<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" class=\"tick\"/>\n", plot_left - 5, y,
                      plot_left, y);
        svg += format("<text x=\"%.1f\" y=\"%.1f\" class=\"y-tick-label\">", plot_left - 8, y + 4) +
               tick_label(value, y_step) + "</text>\n";
    }
    for (double value = 0.0; value <= x_max + x_step * 1e-6; value += x_step) {
        double x = x_of(value);
        svg += format("<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" class=\"grid\"/>\n", x, kPlotTop, x,
                      plot_bottom);
        svg += format("<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" class=\"tick\"/>\n", x, plot_bottom, x,
                      plot_bottom + 5);
        svg += format("<text x=\"%.1f\" y=\"%.1f\" class=\"x-tick-label\">", x, plot_bottom + 19) +
               tick_label(value, x_step) + "</text>\n";
    }

    // Curves, clipped to the plot area. Step s (1-based) sits at x = s.
    svg += format("<clipPath id=\"clip-%.0f\"><rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"", left, plot_left,
                  kPlotTop, plot_width) +
           format("%.1f\"/></clipPath>\n", kPlotHeight);
    svg += format("<g clip-path=\"url(#clip-%.0f)\">\n", left);
    for (const LossCurve& curve : panel.curves) {
        svg += "<polyline class=\"curve\" stroke=\"" + escape_xml(curve.color) + "\" points=\"";
        for (std::size_t i = 0; i < curve.values.size(); ++i) {
            if (!std::isfinite(curve.values[i])) continue;
            svg += format("%.1f,%.1f ", x_of(double(i + 1)), y_of(curve.values[i]));
        }
        svg += "\"><title>" + escape_xml(curve.label) + "</title></polyline>\n";
    }
    svg += "</g>\n";

    // Axes and their labels.
    svg += format("<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" class=\"axis\"/>\n", plot_left, plot_bottom,
                  plot_left + plot_width, plot_bottom);
    svg += format("<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" class=\"axis\"/>\n", plot_left, kPlotTop,
                  plot_left, plot_bottom);
    svg += format("<text x=\"%.1f\" y=\"%.1f\" class=\"axis-label\">step</text>\n", plot_left + plot_width / 2,
                  plot_bottom + 40);
    svg += "</g>\n";
}

}  // namespace

std::vector<double> smooth_curve(const std::vector<double>& values, double weight) {
    std::vector<double> smoothed(values.size());
    double average = 0.0;
    double debias = 1.0;
    for (std::size_t i = 0; i < values.size(); ++i) {
        average = weight * average + (1.0 - weight) * values[i];
        debias *= weight;
        smoothed[i] = weight > 0.0 ? average / (1.0 - debias) : values[i];
    }
    return smoothed;
}

std::string render_loss_plot_svg(const std::vector<LossPanel>& panels, const std::string& title,
                                 const std::string& subtitle, const std::string& y_label) {
    const double width = kMarginLeft * 2 + panels.size() * kPanelWidth + (panels.size() - 1) * kPanelGap;
    std::string svg;
    svg += "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
    svg +=
        format("<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" viewBox=\"0 0 %.0f %.0f\">\n",
               width, kFigureHeight, width, kFigureHeight);
    svg +=
        "<style>\n"
        "text { font-family: 'DejaVu Sans', Helvetica, Arial, sans-serif; fill: #222; }\n"
        ".title { font-size: 18px; font-weight: bold; text-anchor: middle; }\n"
        ".subtitle { font-size: 12px; fill: #555; text-anchor: middle; }\n"
        ".panel-title { font-size: 14px; font-weight: bold; text-anchor: middle; }\n"
        ".plot-area { fill: #fbfbfb; stroke: none; }\n"
        ".grid { stroke: #e4e4e4; stroke-width: 1; }\n"
        ".tick, .axis { stroke: #333; stroke-width: 1; }\n"
        ".x-tick-label { font-size: 11px; text-anchor: middle; }\n"
        ".y-tick-label { font-size: 11px; text-anchor: end; }\n"
        ".axis-label { font-size: 12px; text-anchor: middle; }\n"
        ".curve { fill: none; stroke-width: 1.8; stroke-linejoin: round; stroke-linecap: round; }\n"
        ".legend-swatch { stroke-width: 3; stroke-linecap: round; }\n"
        ".legend-label { font-size: 12px; }\n"
        "</style>\n";
    svg += format("<rect x=\"0\" y=\"0\" width=\"%.0f\" height=\"%.0f\" fill=\"white\"/>\n", width, kFigureHeight);
    svg += format("<text x=\"%.1f\" y=\"30\" class=\"title\">", width / 2) + escape_xml(title) + "</text>\n";
    svg += format("<text x=\"%.1f\" y=\"52\" class=\"subtitle\">", width / 2) + escape_xml(subtitle) + "</text>\n";

    for (std::size_t i = 0; i < panels.size(); ++i) {
        double left = kMarginLeft + i * (kPanelWidth + kPanelGap);
        render_panel(svg, panels[i], left);
        // The y label, rotated, left of the tick labels.
        double x = left + 14;
        double y = kPlotTop + kPlotHeight / 2;
        svg += format("<text x=\"%.1f\" y=\"%.1f\" class=\"axis-label\" transform=\"rotate(-90 %.1f %.1f)\">", x, y, x,
                      y) +
               escape_xml(y_label) + "</text>\n";
    }

    // One legend row, centered under the panels.
    if (!panels.empty()) {
        const std::vector<LossCurve>& curves = panels.front().curves;
        // Entry width from the label length (about 7 px a character at 12 px).
        constexpr double kSwatchAndGap = 30.0 + 28.0;
        std::vector<double> entry_widths;
        double total_width = 0.0;
        for (const LossCurve& curve : curves) {
            entry_widths.push_back(kSwatchAndGap + 7.0 * double(curve.label.size()));
            total_width += entry_widths.back();
        }
        double x = width / 2 - total_width / 2;
        svg += "<g class=\"legend\">\n";
        for (std::size_t i = 0; i < curves.size(); ++i) {
            svg += format("<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" class=\"legend-swatch\" ", x,
                          kLegendTop, x + 24, kLegendTop) +
                   "stroke=\"" + escape_xml(curves[i].color) + "\"/>\n";
            svg += format("<text x=\"%.1f\" y=\"%.1f\" class=\"legend-label\">", x + 30, kLegendTop + 4) +
                   escape_xml(curves[i].label) + "</text>\n";
            x += entry_widths[i];
        }
        svg += "</g>\n";
    }
    svg += "</svg>\n";
    return svg;
}

}  // namespace optimizer_comparison
