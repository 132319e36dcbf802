#include "cli/environment.h"
#include "tests/support/temp_path.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <zlib.h>

#include <cstdio>
#include <filesystem>
#include <string>

namespace {

namespace fs = std::filesystem;
const char* kRoot = "/usr/share/datasets/fashion-mnist";

std::string write_gz(const std::string& name, const std::string& bytes) {
    std::string path = ember::test_support::unique_temp_path(name, ".gz").string();
    gzFile f = gzopen(path.c_str(), "wb");
    gzwrite(f, bytes.data(), (unsigned)bytes.size());
    gzclose(f);
    return path;
}

TEST(Environment, ReadsRealFashionMnistCounts) {
    // scripts/install-deps.sh installs dataset-fashion-mnist; the published sizes are
    // 60,000 training and 10,000 test images.
    auto env = ember::cli::probe_environment(kRoot);
    ASSERT_TRUE(env.fashion_mnist.installed) << env.fashion_mnist.problem;
    EXPECT_EQ(env.fashion_mnist.train_images, 60000);
    EXPECT_EQ(env.fashion_mnist.train_labels, 60000);
    EXPECT_EQ(env.fashion_mnist.test_images, 10000);
    EXPECT_EQ(env.fashion_mnist.test_labels, 10000);
}

TEST(Environment, MissingDatasetSaysHowToInstall) {
    auto env = ember::cli::probe_environment("/nonexistent/fashion");
    EXPECT_FALSE(env.fashion_mnist.installed);
    EXPECT_NE(env.fashion_mnist.problem.find("/nonexistent/fashion/train-images-idx3-ubyte.gz"), std::string::npos);
    EXPECT_NE(ember::cli::environment_text(env).find("apt-get install dataset-fashion-mnist"), std::string::npos);
}

TEST(Environment, IdxHeaderErrorsNameTheFile) {
    std::string problem;
    std::string truncated = write_gz("ember_truncated", std::string("\0\0\x08", 3));
    EXPECT_EQ(ember::cli::idx_item_count(truncated, problem), -1);
    EXPECT_NE(problem.find(truncated), std::string::npos);
    EXPECT_NE(problem.find("truncated"), std::string::npos);

    problem.clear();
    std::string wrong = write_gz("ember_wrong_magic", std::string("PK\x03\x04\0\0\0\x01", 8));
    EXPECT_EQ(ember::cli::idx_item_count(wrong, problem), -1);
    EXPECT_NE(problem.find("not an IDX"), std::string::npos);

    problem.clear();
    std::string good = write_gz("ember_good", std::string("\0\0\x08\x01\0\0\x01\x2c", 8));
    EXPECT_EQ(ember::cli::idx_item_count(good, problem), 300);
    EXPECT_TRUE(problem.empty());
    fs::remove(truncated);
    fs::remove(wrong);
    fs::remove(good);
}

TEST(Environment, JsonHasEveryField) {
    auto env = ember::cli::probe_environment(kRoot);
    auto j = nlohmann::json::parse(ember::cli::environment_json(env));
    for (const char* key :
         {"ember", "cuda", "gpus", "cudnn", "nccl", "cupti", "nvtx", "mpi", "sqlite", "fashion_mnist", "display"})
        EXPECT_TRUE(j.contains(key)) << key;
    EXPECT_EQ(j["cuda"]["device_count"].get<int>(), static_cast<int>(env.devices.size()));
    EXPECT_EQ(j["cudnn"].get<std::string>().substr(0, 2), "9.");
    EXPECT_EQ(j["nccl"].get<std::string>().substr(0, 2), "2.");
}

}  // namespace
