// search_test.cpp: substring and regex search over every event, stepping in time order.
#include "tests/viewer/model/loaded_fixture.h"
#include "viewer/model/search.h"

#include <gtest/gtest.h>

namespace ember::viewer {
namespace {

class SearchTest : public testing::LoadedFixtureTest {
  protected:
    SearchTest() : LoadedFixtureTest("search") {}
};

TEST_F(SearchTest, SubstringIgnoresCase) {
    EventSearch search;
    ASSERT_TRUE(search.set_query(*model_, {"SGEMM"}));
    EXPECT_EQ(search.count(*model_), totals_.kernels / 3 * 2);  // gemm, relu, gemm per phase
    ASSERT_TRUE(search.set_query(*model_, {"SGEMM", false, true}));
    EXPECT_EQ(search.count(*model_), 0);
}

TEST_F(SearchTest, RegexAndInvalidRegex) {
    EventSearch search;
    ASSERT_TRUE(search.set_query(*model_, {"^(forward|backward)$", true}));
    EXPECT_EQ(search.count(*model_), 8);
    std::string error;
    EXPECT_FALSE(search.set_query(*model_, {"(unclosed", true}, &error));
    EXPECT_NE(error.find("regular expression"), std::string::npos);
}

TEST_F(SearchTest, NextAndPreviousWalkInTimeOrder) {
    EventSearch search;
    ASSERT_TRUE(search.set_query(*model_, {"Memcpy HtoD", false, true}));  // not cudaMemcpyAsync
    ASSERT_EQ(search.count(*model_), totals_.copies);
    std::vector<EventRef> found;
    EventRef current;
    while (auto next = search.next(*model_, current, model_->begin_ns())) {
        found.push_back(*next);
        current = *next;
    }
    ASSERT_EQ(found.size(), static_cast<std::size_t>(totals_.copies));
    for (std::size_t i = 1; i < found.size(); ++i)
        EXPECT_LT(model_->event(found[i - 1])->start_ns, model_->event(found[i])->start_ns);
    // Walking back from the last visits them in reverse.
    current = found.back();
    for (std::size_t i = found.size() - 1; i-- > 0;) {
        auto previous = search.previous(*model_, current, 0);
        ASSERT_TRUE(previous.has_value());
        EXPECT_EQ(*previous, found[i]);
        current = *previous;
    }
    EXPECT_FALSE(search.previous(*model_, current, 0).has_value());
}

TEST_F(SearchTest, ExactNameJumpsToNextInstance) {
    EventSearch search;
    const auto step = model_->find_name("step");
    ASSERT_GE(step, 0);
    search.set_name(*model_, static_cast<std::uint32_t>(step));
    auto first = search.next(*model_, {}, model_->begin_ns());
    ASSERT_TRUE(first.has_value());
    auto second = search.next(*model_, *first, 0);
    ASSERT_TRUE(second.has_value());
    EXPECT_EQ(second->index, first->index + 1);
}

}  // namespace
}  // namespace ember::viewer
