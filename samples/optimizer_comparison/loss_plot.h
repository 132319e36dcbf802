// loss_plot.h: a hand-written SVG of loss curves: one panel per network side by side,
// one colored polyline per optimizer, axes with "nice" 1-2-5 ticks and labels, and one
// legend shared by the panels. No dependency beyond the standard library.
#pragma once

#include <string>
#include <vector>

namespace optimizer_comparison {

struct LossCurve {
    std::string label;           // the optimizer as the legend shows it
    std::string color;           // an SVG color, "#1f77b4"
    std::vector<double> values;  // one value per step, step 1 first
};

struct LossPanel {
    std::string title;
    std::vector<LossCurve> curves;
};

// The whole SVG document. Every panel must hold the same curve labels in the same order
// (the legend is taken from the first panel).
std::string render_loss_plot_svg(const std::vector<LossPanel>& panels, const std::string& title,
                                 const std::string& subtitle, const std::string& y_label);

// Exponential moving average with bias correction (as TensorBoard smooths): early values
// are not pulled toward zero. weight 0 returns the values unchanged.
std::vector<double> smooth_curve(const std::vector<double>& values, double weight);

}  // namespace optimizer_comparison
