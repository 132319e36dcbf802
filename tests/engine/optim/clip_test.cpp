// Global-norm clipping on cpu: the returned norm and the scale, exactly as
// torch.nn.utils.clip_grad_norm_ defines them.
#include "engine/optim/clip.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace ember::optim {
namespace {

TEST(ClipGradNorm, ScalesToMaxNorm) {
    std::vector<float> g = {3.0f, 4.0f, 0.0f, -12.0f};  // norm 13
    double total = clip_grad_norm_cpu(g.data(), g.size(), 1.3);
    EXPECT_DOUBLE_EQ(total, 13.0);
    const float coefficient = (float)(1.3 / (13.0 + 1e-6));
    EXPECT_FLOAT_EQ(g[0], 3.0f * coefficient);
    EXPECT_FLOAT_EQ(g[3], -12.0f * coefficient);
    double after = std::sqrt((double)g[0] * g[0] + (double)g[1] * g[1] + (double)g[3] * g[3]);
    EXPECT_NEAR(after, 1.3, 1e-6);
}

TEST(ClipGradNorm, LeavesSmallGradientsAlone) {
    std::vector<float> g = {0.3f, -0.4f};
    EXPECT_NEAR(clip_grad_norm_cpu(g.data(), g.size(), 1.0), 0.5, 1e-7);
    EXPECT_EQ(g[0], 0.3f);
    EXPECT_EQ(g[1], -0.4f);
}

}  // namespace
}  // namespace ember::optim
