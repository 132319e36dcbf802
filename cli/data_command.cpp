// data_command.cpp: `ember data prepare fashion-mnist --format png --out DIR`, which
// writes the IDX data set as an image folder (one 8-bit grayscale PNG per sample,
// DIR/<split>/<label>_<class>/<index>.png) for the loader's file-decoding path.
#include "engine/data/data_error.h"
#include "engine/data/fashion_mnist.h"
#include "engine/data/prepare.h"
#include "cli/command_errors.h"
#include "cli/commands.h"

#include <CLI/CLI.hpp>
#include <fmt/core.h>

#include <chrono>
#include <cstdio>
#include <memory>

namespace ember::cli {

namespace {

struct PrepareCommandOptions {
    std::string dataset;
    std::string format = "png";
    std::string out;
    std::string root = data::kFashionMnistDefaultRoot;
    std::string split = "both";
    int64_t limit = 0;
};

void run_prepare(const PrepareCommandOptions& options) {
    data::PrepareOptions prepare;
    prepare.root = options.root;
    prepare.out = options.out;
    prepare.limit = options.limit;
    if (options.split == "train")
        prepare.splits = {data::Split::train};
    else if (options.split == "test")
        prepare.splits = {data::Split::test};
    for (data::Split split : prepare.splits) {
        std::string missing = data::fashion_mnist_missing(options.root, split);
        if (!missing.empty()) fail_command("data prepare", missing);
    }
    auto start = std::chrono::steady_clock::now();
    int64_t written = 0;
    try {
        written = data::prepare_fashion_mnist_png(prepare, [](data::Split split, int64_t done, int64_t total) {
            if (done % 10000 == 0 || done == total) {
                fmt::print("{}: {}/{} PNG files\n", data::split_name(split), done, total);
                std::fflush(stdout);
            }
        });
    } catch (const std::exception& error) {
        fail_at_run_time("data prepare", error.what());
    }
    double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    fmt::print("wrote {} PNG files under {} in {:.1f} s\n", written, options.out, seconds);
}

}  // namespace

void add_data_command(CLI::App& app) {
    CLI::App* data_app = app.add_subcommand("data", kDataDescription);
    data_app->require_subcommand(1);

    auto options = std::make_shared<PrepareCommandOptions>();
    CLI::App* prepare = data_app->add_subcommand(
        "prepare", "Write a data set as one PNG per sample: OUT/<split>/<label>_<class>/<index>.png");
    prepare->add_option("dataset", options->dataset, "Which data set")
        ->required()
        ->check(CLI::IsMember({"fashion-mnist"}));
    prepare->add_option("--format", options->format, "Image format")
        ->check(CLI::IsMember({"png"}))
        ->capture_default_str();
    prepare->add_option("--out", options->out, "Output folder")->required();
    prepare->add_option("--root", options->root, "Where the Fashion-MNIST IDX files live")->capture_default_str();
    prepare->add_option("--split", options->split, "Which split to write")
        ->check(CLI::IsMember({"train", "test", "both"}))
        ->capture_default_str();
    prepare->add_option("--limit", options->limit, "Write only the first N samples of each split (0 = all)")
        ->check(CLI::NonNegativeNumber)
        ->capture_default_str();
    prepare->callback([options] { run_prepare(*options); });
}

}  // namespace ember::cli
