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

// Three shards clipped one by one, each told the other shards' sums of squares through
// sum_over_ranks (as an all-reduce would), end up exactly as the whole vector clipped.
TEST(ClipGradNorm, ShardedEqualsWhole) {
    std::vector<float> whole = {3.0f, 4.0f, 0.0f, -12.0f, 1.5f, 2.5f, -0.5f};
    const std::size_t cuts[] = {0, 3, 5, 7};
    std::vector<float> shard_squares(3, 0.0f);
    for (int s = 0; s < 3; ++s)
        for (std::size_t i = cuts[s]; i < cuts[s + 1]; ++i) shard_squares[s] += whole[i] * whole[i];
    std::vector<float> sharded = whole;
    const double expected_norm = clip_grad_norm_cpu(whole.data(), whole.size(), 2.0);
    for (int s = 0; s < 3; ++s) {
        int calls = 0;
        double norm = clip_grad_norm_sharded_cpu(sharded.data() + cuts[s], cuts[s + 1] - cuts[s], 2.0,
                                                 [&](float* values, std::size_t count) {
                                                     ASSERT_EQ(count, 1u);
                                                     EXPECT_FLOAT_EQ(*values, shard_squares[s]);
                                                     float total = 0.0f;
                                                     for (float part : shard_squares) total += part;
                                                     *values = total;
                                                     ++calls;
                                                 });
        EXPECT_EQ(calls, 1);
        EXPECT_NEAR(norm, expected_norm, 1e-5);
    }
    for (std::size_t i = 0; i < whole.size(); ++i) EXPECT_FLOAT_EQ(sharded[i], whole[i]) << i;
}

}  // namespace
}  // namespace ember::optim
