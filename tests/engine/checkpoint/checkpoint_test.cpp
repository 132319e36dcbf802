// checkpoint_test.cpp: resume reproduces the uninterrupted run bit for bit (CPU,
// deterministic), and wrong or damaged checkpoints are refused with a message naming
// the mismatch.
#include "engine/checkpoint/checkpoint.h"
#include "engine/checkpoint/crc32.h"
#include "engine/nn/models.h"
#include "engine/nn/training_step.h"

#include "tests/engine/nn/batches.h"
#include "tests/support/error_message.h"
#include "tests/support/temp_dir.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace ember::checkpoint {
namespace {

using nn::test::Batch;
using nn::test::make_batch;

namespace fs = std::filesystem;

struct TrainingRun {
    std::unique_ptr<nn::Model> model;
    std::unique_ptr<optim::Optimizer> optimizer;
    std::unique_ptr<nn::Trainer> trainer;
};

TrainingRun make_run(const std::string& model_name, const std::string& optimizer_name, uint64_t seed) {
    TrainingRun run;
    nn::ModelOptions options;
    options.mlp_hidden = {64, 32};
    options.dropout = 0.2f;
    options.cnn_channels1 = 4;
    options.cnn_channels2 = 8;
    options.cnn_hidden = 16;
    run.model = nn::make_model(model_name, options);
    nn::BuildOptions build;
    build.seed = seed;
    build.pool_chunk_bytes = 8u << 20;
    run.model->build(build);
    optim::Hyperparameters hp = {{"lr", optimizer_name == "sgd" ? 0.05 : 1e-3}};
    if (optimizer_name == "sgd") hp["momentum"] = 0.9;
    run.optimizer =
        optim::make_optimizer(optimizer_name, hp, run.model->parameters().segments(), optim::OptimizerBackend::cpu);
    run.trainer = std::make_unique<nn::Trainer>(*run.model, *run.optimizer, nn::TrainerOptions{});
    return run;
}

std::vector<float> download(const nn::FlatBuffer& buffer, std::size_t count) {
    std::vector<float> out(count);
    buffer.download(out.data(), count * sizeof(float));
    return out;
}

class CheckpointTest : public ::testing::Test {
  protected:
    std::string path(const std::string& name) const { return directory_.path(name); }
    test_support::TempDir directory_{"ember_nn_checkpoint"};
};

TEST_F(CheckpointTest, ResumeIsBitIdentical) {
    struct Case {
        const char* model;
        const char* optimizer;
    };
    for (Case c : {Case{"mlp", "adam"}, Case{"cnn", "sgd"}, Case{"mlp", "nadam"}, Case{"mlp", "novograd"}}) {
        const int first = 3, second = 3;
        std::vector<Batch> batches;
        for (int i = 0; i < first + second; ++i) batches.push_back(make_batch(8, 100 + i));

        TrainingRun straight = make_run(c.model, c.optimizer, 1);
        for (const Batch& b : batches) straight.trainer->step(b.x, b.y);

        TrainingRun interrupted = make_run(c.model, c.optimizer, 1);
        for (int i = 0; i < first; ++i) interrupted.trainer->step(batches[i].x, batches[i].y);
        TrainingPosition position{2, 0xabcdefull, 1, first * 8};
        save_checkpoint(path("resume.ckpt"), *interrupted.model, *interrupted.optimizer, *interrupted.trainer,
                        position);

        TrainingRun resumed =
            make_run(c.model, c.optimizer, 999);  // different init: everything must come from the file
        TrainingPosition restored =
            load_checkpoint(path("resume.ckpt"), *resumed.model, *resumed.optimizer, *resumed.trainer);
        EXPECT_EQ(restored.epoch, 2);
        EXPECT_EQ(restored.rng_state, 0xabcdefull);
        EXPECT_EQ(restored.sampler_index, first * 8);
        EXPECT_EQ(resumed.trainer->steps(), first);
        EXPECT_EQ(resumed.optimizer->step_count(), first);
        EXPECT_EQ(resumed.optimizer->export_state().nadam_mu_product,
                  interrupted.optimizer->export_state().nadam_mu_product);
        for (int i = first; i < first + second; ++i) resumed.trainer->step(batches[i].x, batches[i].y);

        nn::ParameterStore& a = straight.model->parameters();
        nn::ParameterStore& b = resumed.model->parameters();
        EXPECT_EQ(download(a.master(), a.flat_length()), download(b.master(), b.flat_length())) << c.model;
        EXPECT_EQ(download(a.state_buffer(), a.state_length()), download(b.state_buffer(), b.state_length()))
            << c.model;
        for (int s = 0; s < straight.optimizer->state_buffer_count(); ++s) {
            const float* x = straight.optimizer->state_buffer(s);
            const float* y = resumed.optimizer->state_buffer(s);
            const std::size_t n = straight.optimizer->parameter_count();
            EXPECT_EQ(std::vector<float>(x, x + n), std::vector<float>(y, y + n)) << c.optimizer << " state " << s;
        }
        EXPECT_EQ(straight.optimizer->export_state().segment_norms, resumed.optimizer->export_state().segment_norms);
    }
}

std::string refusal(const std::function<void()>& load) {
    return test_support::error_message<CheckpointError>(load, "(not refused)");
}

void corrupt_byte(const std::string& file, std::size_t offset_from_end) {
    std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(0, std::ios::end);
    const auto size = static_cast<std::size_t>(f.tellg());
    f.seekg(static_cast<std::streamoff>(size - offset_from_end));
    char c;
    f.read(&c, 1);
    c ^= 0x5a;
    f.seekp(static_cast<std::streamoff>(size - offset_from_end));
    f.write(&c, 1);
}

TEST_F(CheckpointTest, WrongOrCorruptCheckpointsAreRefused) {
    TrainingRun mlp = make_run("mlp", "adam", 1);
    Batch batch = make_batch(8, 5);
    mlp.trainer->step(batch.x, batch.y);
    const std::string good = path("good.ckpt");
    save_checkpoint(good, *mlp.model, *mlp.optimizer, *mlp.trainer);
    save_checkpoint(good, *mlp.model, *mlp.optimizer, *mlp.trainer);  // overwriting is atomic too
    for (const auto& entry : fs::directory_iterator(directory_.path()))
        EXPECT_EQ(entry.path().filename().string().find(".tmp"), std::string::npos) << entry.path();
    CheckpointHeader header = read_checkpoint_header(good);
    EXPECT_EQ(header.format_version, kFormatVersion);
    EXPECT_EQ(header.model_name, "mlp");
    EXPECT_EQ(header.optimizer_name, "adam");

    TrainingRun cnn = make_run("cnn", "adam", 1);
    std::string message = refusal([&] { load_checkpoint(good, *cnn.model, *cnn.optimizer, *cnn.trainer); });
    const std::string mlp_count = "52,";  // 784*64+64 + 64*32+32 + 32*10+10 = 52,650
    EXPECT_NE(message.find("checkpoint model 'mlp' (52,650 parameters) does not match 'cnn'"), std::string::npos)
        << message;

    TrainingRun sgd = make_run("mlp", "sgd", 1);
    message = refusal([&] { load_checkpoint(good, *sgd.model, *sgd.optimizer, *sgd.trainer); });
    EXPECT_NE(message.find("optimizer 'adam' does not match 'sgd'"), std::string::npos) << message;

    TrainingRun target = make_run("mlp", "adam", 2);
    std::vector<float> before = download(target.model->parameters().master(), target.model->parameters().flat_length());

    const std::string damaged = path("damaged.ckpt");
    fs::copy_file(good, damaged);
    corrupt_byte(damaged, 100);
    message = refusal([&] { load_checkpoint(damaged, *target.model, *target.optimizer, *target.trainer); });
    EXPECT_NE(message.find("CRC mismatch: file truncated or corrupt"), std::string::npos) << message;

    const std::string truncated = path("truncated.ckpt");
    fs::copy_file(good, truncated);
    fs::resize_file(truncated, fs::file_size(good) - 1000);
    message = refusal([&] { load_checkpoint(truncated, *target.model, *target.optimizer, *target.trainer); });
    EXPECT_NE(message.find("truncated"), std::string::npos) << message;

    const std::string header_damage = path("header.ckpt");
    fs::copy_file(good, header_damage);
    corrupt_byte(header_damage, fs::file_size(good) - 20);  // inside the model name / counts
    message = refusal([&] { load_checkpoint(header_damage, *target.model, *target.optimizer, *target.trainer); });
    EXPECT_NE(message, "(not refused)");

    const std::string version = path("version.ckpt");
    fs::copy_file(good, version);
    {
        std::fstream f(version, std::ios::in | std::ios::out | std::ios::binary);
        f.seekp(8);
        uint32_t future = kFormatVersion + 1;
        f.write(reinterpret_cast<const char*>(&future), sizeof future);
    }
    message = refusal([&] { load_checkpoint(version, *target.model, *target.optimizer, *target.trainer); });
    EXPECT_NE(message.find("format version 2 is not supported"), std::string::npos) << message;

    const std::string not_checkpoint = path("text.ckpt");
    std::ofstream(not_checkpoint) << "hello";
    message = refusal([&] { load_checkpoint(not_checkpoint, *target.model, *target.optimizer, *target.trainer); });
    EXPECT_NE(message.find("not an ember checkpoint"), std::string::npos) << message;

    message =
        refusal([&] { load_checkpoint(path("missing.ckpt"), *target.model, *target.optimizer, *target.trainer); });
    EXPECT_NE(message.find("missing.ckpt"), std::string::npos) << message;

    TrainingRun lbfgs = make_run("mlp", "lbfgs", 1);
    message = refusal([&] { save_checkpoint(path("lbfgs.ckpt"), *lbfgs.model, *lbfgs.optimizer, *lbfgs.trainer); });
    EXPECT_NE(message.find("cannot checkpoint optimizer 'lbfgs'"), std::string::npos) << message;

    // Nothing was restored from any refused file.
    EXPECT_EQ(download(target.model->parameters().master(), target.model->parameters().flat_length()), before);
    (void)mlp_count;
}

TEST(Crc32, MatchesTheStandardCheckValue) {
    const char* text = "123456789";
    EXPECT_EQ(crc32(text, 9), 0xCBF43926u);  // the CRC-32/IEEE check value
    EXPECT_EQ(crc32_update(crc32(text, 4), text + 4, 5), 0xCBF43926u);
}

}  // namespace
}  // namespace ember::checkpoint
