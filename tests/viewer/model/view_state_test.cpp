// view_state_test.cpp: zoom keeps the anchor, history walks back and forth, and the
// ruler picks 1-2-5 steps in sensible units.
#include "viewer/model/view_state.h"

#include <gtest/gtest.h>

namespace ember::viewer {
namespace {

TEST(ViewStateTest, ZoomKeepsTheTimeUnderTheCursor) {
    ViewState view;
    view.reset({0, 1'000'000}, 1000.0);
    const trace::TimeNs anchor = view.x_to_time(250.0);
    view.zoom(0.5, 250.0);
    EXPECT_NEAR(static_cast<double>(view.x_to_time(250.0)), static_cast<double>(anchor), 1.0);
    EXPECT_EQ(view.visible().duration_ns(), 500'000);
}

TEST(ViewStateTest, GrowingLimitsKeepTheViewOrFollowTheWholeTrace) {
    ViewState view;
    view.reset({0, 1'000'000}, 1000.0);
    view.set_limits({0, 2'000'000});  // showed everything: keeps showing everything
    EXPECT_EQ(view.visible(), (TimeRange{0, 2'000'000}));
    view.show({100'000, 200'000});
    view.set_limits({0, 3'000'000});  // zoomed in: stays where it is
    EXPECT_EQ(view.visible(), (TimeRange{100'000, 200'000}));
    EXPECT_EQ(view.limits(), (TimeRange{0, 3'000'000}));
    EXPECT_EQ(view.history_size(), 2u);
}

TEST(ViewStateTest, HistoryGoesBackAndForward) {
    ViewState view;
    view.reset({0, 1'000'000}, 1000.0);
    view.show({100'000, 200'000});
    view.show({150'000, 160'000});
    EXPECT_TRUE(view.back());
    EXPECT_EQ(view.visible(), (TimeRange{100'000, 200'000}));
    EXPECT_TRUE(view.back());
    EXPECT_EQ(view.visible(), (TimeRange{0, 1'000'000}));
    EXPECT_FALSE(view.back());
    EXPECT_TRUE(view.forward());
    EXPECT_EQ(view.visible(), (TimeRange{100'000, 200'000}));
    // A new zoom drops the forward part.
    view.show({120'000, 130'000});
    EXPECT_FALSE(view.forward());
}

TEST(ViewStateTest, PanStaysNearTheTrace) {
    ViewState view;
    view.reset({0, 1'000'000}, 1000.0);
    view.pan_pixels(-1e9);
    EXPECT_GE(view.visible().end_ns, 0);
    view.pan_pixels(1e9);
    EXPECT_LE(view.visible().begin_ns, 1'000'000);
}

TEST(ViewStateTest, RulerUsesUnitsOfItsStep) {
    ViewState view;
    view.reset({0, 10'000'000}, 1000.0);  // 10 ms over 1000 px
    auto ticks = ruler_ticks(view, 0, 90.0);
    std::vector<std::string> labels;
    for (const RulerTick& tick : ticks)
        if (tick.major) labels.push_back(tick.label);
    ASSERT_GE(labels.size(), 3u);
    EXPECT_EQ(labels[0], "0 ms");
    EXPECT_EQ(labels[1], "1 ms");
    view.reset({0, 2'000}, 1000.0);
    ticks = ruler_ticks(view, 0, 90.0);
    EXPECT_EQ(ticks[5].label, "200 ns");
    EXPECT_EQ(format_duration(1.5e6), "1.5 ms");
    EXPECT_EQ(format_bytes(3.0 * 1024 * 1024), "3 MiB");
}

}  // namespace
}  // namespace ember::viewer
