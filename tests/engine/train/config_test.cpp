// TrainConfig: TOML and overrides land in the right fields; every kind of bad input is
// refused with a message that names the file, line and key, or the flag.
#include "engine/train/config.h"
#include "tests/support/error_message.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

namespace {

using ember::train::ConfigError;
using ember::train::TrainConfig;

std::string error_of(const std::function<void()>& f) {
    return ember::test_support::error_message<ConfigError>(f);
}

TEST(TrainConfig, TomlSetsEveryKindOfField) {
    TrainConfig c;
    ember::train::load_toml_string(R"(
[model]
name = "resnet"
[data]
workers = 4
pin_memory = false
batch_size = "max"
[train]
epochs = 3
seed = 7
clip_grad_norm = 1.5
precision = "bf16"
[optimizer]
name = "adamw"
lr = 0.001
weight_decay = 0.05
[schedule]
name = "cosine"
t_max = 1000
warmup_steps = 100
[switches]
cuda_graph = true
)",
                                   "inline.toml", c);
    EXPECT_EQ(c.model, "resnet");
    EXPECT_EQ(c.workers, 4);
    EXPECT_FALSE(c.pin_memory);
    EXPECT_EQ(c.batch_size, "max");
    EXPECT_EQ(c.epochs, 3);
    EXPECT_EQ(c.seed, 7u);
    EXPECT_DOUBLE_EQ(c.clip_grad_norm, 1.5);
    EXPECT_EQ(c.precision, "bf16");
    EXPECT_EQ(c.optimizer, "adamw");
    // The default SGD momentum is not carried over to AdamW.
    EXPECT_EQ(c.optimizer_params, (std::map<std::string, double>{{"lr", 0.001}, {"weight_decay", 0.05}}));
    EXPECT_EQ(c.schedule, "cosine");
    EXPECT_EQ(c.schedule_params.at("t_max"), 1000.0);
    EXPECT_EQ(c.warmup_steps, 100);
    EXPECT_TRUE(c.cuda_graph);
}

TEST(TrainConfig, OverridesWinAndParseTypes) {
    TrainConfig c;
    ember::train::apply_override("train.epochs=5", c);
    ember::train::apply_override("switches.tf32=off", c);
    ember::train::apply_override("optimizer.lr=0.2", c);
    ember::train::apply_override("model.name=mlp", c);
    ember::train::apply_override("data.batch_size=256", c);
    EXPECT_EQ(c.epochs, 5);
    EXPECT_FALSE(c.tf32);
    EXPECT_DOUBLE_EQ(c.optimizer_params.at("lr"), 0.2);
    EXPECT_DOUBLE_EQ(c.optimizer_params.at("momentum"), 0.9);  // same optimizer keeps its params
    EXPECT_EQ(c.model, "mlp");
    EXPECT_EQ(c.batch_size, "256");
}

TEST(TrainConfig, ErrorsNameFileLineAndKey) {
    TrainConfig c;
    std::string e = error_of([&] { ember::train::load_toml_string("[train]\nepoch = 3\n", "run.toml", c); });
    EXPECT_NE(e.find("run.toml:2:"), std::string::npos) << e;
    EXPECT_NE(e.find("unknown key 'train.epoch'"), std::string::npos) << e;
    EXPECT_NE(e.find("did you mean 'train.epochs'"), std::string::npos) << e;

    e = error_of([&] { ember::train::load_toml_string("[train]\nepochs = \"three\"\n", "run.toml", c); });
    EXPECT_NE(e.find("run.toml:2:"), std::string::npos) << e;
    EXPECT_NE(e.find("train.epochs must be an integer"), std::string::npos) << e;

    e = error_of([&] { ember::train::load_toml_string("[model]\nname = \"vgg\"\n", "m.toml", c); });
    EXPECT_NE(e.find("model.name = \"vgg\" is not one of: mlp, cnn, resnet, transformer"), std::string::npos) << e;

    e = error_of([&] { ember::train::load_toml_string("[data]\nworkers = 1000\n", "d.toml", c); });
    EXPECT_NE(e.find("data.workers = 1000 is out of range"), std::string::npos) << e;

    e = error_of([&] { ember::train::load_toml_string("[gpu]\nx = 1\n", "g.toml", c); });
    EXPECT_NE(e.find("unknown section [gpu]"), std::string::npos) << e;

    e = error_of([&] { ember::train::load_toml_string("[train\nepochs=1\n", "broken.toml", c); });
    EXPECT_NE(e.find("broken.toml:1:"), std::string::npos) << e;

    e = error_of([&] { ember::train::apply_override("epochs=3", c); });
    EXPECT_NE(e.find("--set epochs=3: expected section.key=value"), std::string::npos) << e;

    e = error_of([&] { ember::train::apply_override("optimizer.lr=fast", c); });
    EXPECT_NE(e.find("optimizer.lr must be a number"), std::string::npos) << e;

    e = error_of([&] { ember::train::load_toml_file("/nonexistent/run.toml", c); });
    EXPECT_NE(e.find("/nonexistent/run.toml"), std::string::npos) << e;
}

TEST(TrainConfig, ValidateCrossFieldRules) {
    TrainConfig c;
    c.data_source = "png";
    EXPECT_NE(error_of([&] { ember::train::validate(c); }).find("data.png_dir"), std::string::npos);
    c = TrainConfig{};
    c.batch_size = "12x";
    EXPECT_NE(error_of([&] { ember::train::validate(c); }).find("data.batch_size"), std::string::npos);
    c = TrainConfig{};
    c.backend = "cpu";
    c.precision = "fp16";
    EXPECT_NE(error_of([&] { ember::train::validate(c); }).find("needs the cuda backend"), std::string::npos);
    EXPECT_EQ(error_of([&] { ember::train::validate(TrainConfig{}); }), "");
}

TEST(TrainConfig, EffectiveConfigRoundTrips) {
    TrainConfig a;
    a.model = "transformer";
    a.optimizer = "lamb";
    a.optimizer_params = {{"lr", 0.002}, {"weight_decay", 0.01}};
    a.schedule = "onecycle";
    a.schedule_params = {{"max_lr", 0.01}};
    a.workers = 3;
    a.augment = true;
    a.profile_path = "run.db";
    std::string text = ember::train::to_toml(a);
    TrainConfig b;
    ember::train::load_toml_string(text, "effective.toml", b);
    EXPECT_EQ(ember::train::to_toml(b), text);
    EXPECT_EQ(b.model, "transformer");
    EXPECT_EQ(b.optimizer_params, a.optimizer_params);
    EXPECT_EQ(b.schedule_params, a.schedule_params);
    EXPECT_EQ(b.profile_path, "run.db");
}

TEST(TrainConfig, PrintsValuesAsWritten) {
    TrainConfig c;
    ember::train::load_toml_string(
        "[optimizer]\nname = 'sgd'\nlr = 0.05\nmomentum = 0.9\nnesterov = true\n"
        "dampening = 0\n[schedule]\nname = 'onecycle'\nmax_lr = 0.1\nthree_phase = false\n"
        "[train]\nclip_grad_norm = 1.0\n",
        "written.toml", c);
    const std::string text = ember::train::to_toml(c);
    for (const char* line : {"lr = 0.05\n", "momentum = 0.9\n", "nesterov = true\n", "dampening = 0\n",
                             "max_lr = 0.1\n", "three_phase = false\n", "clip_grad_norm = 1.0\n"})
        EXPECT_NE(text.find(line), std::string::npos) << line << " in\n" << text;
    // The shortest text that reads back to the same double, never 0.050000000000000003.
    EXPECT_EQ(text.find("0000000"), std::string::npos) << text;
    TrainConfig again;
    ember::train::load_toml_string(text, "again.toml", again);
    EXPECT_EQ(ember::train::to_toml(again), text);
    EXPECT_EQ(again.optimizer_params, c.optimizer_params);
    // One line of what matters: booleans that are on by name, off ones not at all.
    EXPECT_EQ(ember::train::settings_line(c).substr(0, 89),
              "cnn, sgd (dampening 0, lr 0.05, momentum 0.9, nesterov), onecycle (max_lr 0.1), batch 128");
}

}  // namespace
