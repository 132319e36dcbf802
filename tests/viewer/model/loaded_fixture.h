// loaded_fixture.h: a test base that writes the viewer's fixture trace (fixture_trace.h)
// to a temporary file and loads it into a TraceModel before each test, for the tests
// that only read the loaded model (flamegraphs, search).
#pragma once

#include "tests/viewer/fixture_trace.h"
#include "viewer/model/trace_model.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

namespace ember::viewer::testing {

class LoadedFixtureTest : public ::testing::Test {
  protected:
    // `name` tells the temporary files of different tests apart.
    explicit LoadedFixtureTest(std::string name) : name_(std::move(name)) {}
    void SetUp() override {
        path_ = temporary_trace_path(name_);
        totals_ = write_fixture_trace(path_);
        model_ = std::make_unique<TraceModel>(std::vector<std::string>{path_});
        model_->load_all();
    }
    void TearDown() override {
        model_.reset();
        std::filesystem::remove(path_);
    }
    std::string name_;
    std::string path_;
    FixtureTotals totals_;
    std::unique_ptr<TraceModel> model_;
};

}  // namespace ember::viewer::testing
