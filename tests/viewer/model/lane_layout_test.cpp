// lane_layout_test.cpp: drag-and-drop reordering of lane titles (lane_layout.h):
// where a drop lands, the insertion marker, and that a short press stays a click.
#include "tests/viewer/model/loaded_fixture.h"
#include "viewer/model/lane_layout.h"

#include <gtest/gtest.h>

namespace ember::viewer {
namespace {

class LaneDragTest : public testing::LoadedFixtureTest {
  protected:
    LaneDragTest() : LoadedFixtureTest("lane_drag") {}
    void SetUp() override {
        LoadedFixtureTest::SetUp();
        order_ = default_lane_order(*model_);
        placements_ = layout_lanes(*model_, order_, metrics_);
        ASSERT_EQ(order_.size(), 6u);  // main, loader, compute, copy, loss, utilization
    }
    const LanePlacement& placement(int order_index) const {
        for (const LanePlacement& p : placements_)
            if (p.lane == order_[static_cast<std::size_t>(order_index)].lane) return p;
        throw std::runtime_error("lane not placed");
    }
    float middle(int order_index) const { return placement(order_index).y + placement(order_index).height * 0.5f; }
    std::vector<int> lanes() const {
        std::vector<int> result;
        for (const LaneDisplay& display : order_) result.push_back(display.lane);
        return result;
    }

    LayoutMetrics metrics_;
    std::vector<LaneDisplay> order_;
    std::vector<LanePlacement> placements_;
};

TEST_F(LaneDragTest, DropIndexCountsTheOtherLanesAboveThePointer) {
    // Dragging the first lane just below the third lane's middle: it goes after it.
    EXPECT_EQ(lane_drop_index(order_, placements_, 0, middle(2) + 1.0f), 2);
    // Just above the third lane's middle: between the second and the third.
    EXPECT_EQ(lane_drop_index(order_, placements_, 0, middle(2) - 1.0f), 1);
    // Above everything / below everything.
    EXPECT_EQ(lane_drop_index(order_, placements_, 3, -100.0f), 0);
    EXPECT_EQ(lane_drop_index(order_, placements_, 0, 1e6f), 5);
    // Over its own place: no move.
    EXPECT_EQ(lane_drop_index(order_, placements_, 2, middle(2)), 2);
    // Out of range: unchanged.
    EXPECT_EQ(lane_drop_index(order_, placements_, 9, 0.0f), 9);
}

TEST_F(LaneDragTest, DragMovesTheLaneWhereItIsDropped) {
    const std::vector<int> before = lanes();
    LaneDrag drag;
    lane_drag_begin(drag, 0, middle(0));
    lane_drag_update(drag, middle(2) + 1.0f);
    EXPECT_TRUE(drag.active());
    EXPECT_TRUE(lane_drag_end(drag, order_, placements_));
    EXPECT_EQ(lanes(), (std::vector<int>{before[1], before[2], before[0], before[3], before[4], before[5]}));
    EXPECT_EQ(drag.from, -1);

    // And back up: the last lane dropped between the first two.
    placements_ = layout_lanes(*model_, order_, metrics_);
    const std::vector<int> middle_order = lanes();
    lane_drag_begin(drag, 5, middle(5));
    lane_drag_update(drag, middle(0) + 1.0f);
    EXPECT_TRUE(lane_drag_end(drag, order_, placements_));
    EXPECT_EQ(lanes(), (std::vector<int>{middle_order[0], middle_order[5], middle_order[1], middle_order[2],
                                         middle_order[3], middle_order[4]}));
    // The moved lane is laid out where it was dropped.
    placements_ = layout_lanes(*model_, order_, metrics_);
    EXPECT_GT(placement(1).y, placement(0).y);
    EXPECT_EQ(order_[1].lane, before[5]);
}

TEST_F(LaneDragTest, ShortPressIsAClick) {
    const std::vector<int> before = lanes();
    LaneDrag drag;
    lane_drag_begin(drag, 1, middle(1));
    lane_drag_update(drag, middle(1) + 3.0f);  // under the 4-pixel threshold
    EXPECT_FALSE(drag.active());
    EXPECT_FALSE(lane_drag_end(drag, order_, placements_));
    EXPECT_EQ(lanes(), before);
    // Past the threshold but back over its own place: no move either.
    lane_drag_begin(drag, 1, middle(1));
    lane_drag_update(drag, middle(1) + 30.0f);
    lane_drag_update(drag, middle(1));
    EXPECT_TRUE(drag.active());
    EXPECT_FALSE(lane_drag_end(drag, order_, placements_));
    EXPECT_EQ(lanes(), before);
}

TEST_F(LaneDragTest, MarkerSitsAtTheTopOfTheFollowingLane) {
    // Dropping lane 0 at position 2 puts it before (today's) lane 3.
    EXPECT_FLOAT_EQ(lane_drop_marker_y(order_, placements_, 0, 2), placement(3).y);
    EXPECT_FLOAT_EQ(lane_drop_marker_y(order_, placements_, 5, 0), placement(0).y);
    // At the end: below the last lane other than the dragged one.
    EXPECT_FLOAT_EQ(lane_drop_marker_y(order_, placements_, 0, 5), placement(5).y + placement(5).height);
}

}  // namespace
}  // namespace ember::viewer
