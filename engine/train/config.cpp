#include "engine/train/config.h"

#include <toml++/toml.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <sstream>
#include <variant>

namespace ember::train {
namespace {

using Member = std::variant<std::string TrainConfig::*, int TrainConfig::*, std::int64_t TrainConfig::*,
                            std::uint64_t TrainConfig::*, double TrainConfig::*, bool TrainConfig::*>;

struct Field {
    const char* section;
    const char* key;
    Member member;
    std::vector<const char*> choices = {};  // allowed strings (empty: any)
    double min = -std::numeric_limits<double>::infinity();
    double max = std::numeric_limits<double>::infinity();
};

const std::vector<Field>& fields() {
    using C = TrainConfig;
    static const std::vector<Field> table = {
        {"model", "name", &C::model, {"mlp", "cnn", "resnet", "transformer"}},
        {"data", "root", &C::data_root},
        {"data", "source", &C::data_source, {"idx", "png", "gpu"}},
        {"data", "png_dir", &C::png_dir},
        {"data", "batch_size", &C::batch_size},
        {"data", "workers", &C::workers, {}, 0, 64},
        {"data", "prefetch_factor", &C::prefetch_factor, {}, 1, 64},
        {"data", "pin_memory", &C::pin_memory},
        {"data", "persistent_workers", &C::persistent_workers},
        {"data", "augment", &C::augment},
        {"data", "drop_last", &C::drop_last},
        {"data", "train_limit", &C::train_limit, {}, 0, 60000},
        {"data", "test_limit", &C::test_limit, {}, 0, 10000},
        {"train", "epochs", &C::epochs, {}, 1, 100000},
        {"train", "max_steps", &C::max_steps, {}, 0},
        {"train", "seed", &C::seed, {}, 0},
        {"train", "backend", &C::backend, {"auto", "cpu", "cuda"}},
        {"train", "precision", &C::precision, {"fp32", "fp16", "bf16"}},
        {"train", "grad_accumulation", &C::grad_accumulation, {}, 1, 4096},
        {"train", "clip_grad_norm", &C::clip_grad_norm, {}, 0},
        {"train", "deterministic", &C::deterministic},
        {"train", "imbalance", &C::imbalance, {}, 0, 10},
        {"distributed", "bucket_mb", &C::bucket_mb, {}, 0.001, 65536},
        {"distributed", "first_bucket_mb", &C::first_bucket_mb, {}, 0.001, 65536},
        {"distributed", "overlap", &C::overlap},
        {"distributed", "zero", &C::zero, {}, 0, 1},
        {"distributed", "sync_batchnorm", &C::sync_batchnorm},
        {"optimizer", "name", &C::optimizer},
        {"schedule", "name", &C::schedule},
        {"schedule", "warmup_steps", &C::warmup_steps, {}, 0},
        {"switches", "cudnn_benchmark", &C::cudnn_benchmark},
        {"switches", "channels_last", &C::channels_last},
        {"switches", "conv_bias_before_bn", &C::conv_bias_before_bn},
        {"switches", "grads_to_none", &C::grads_to_none},
        {"switches", "fused_gelu", &C::fused_gelu},
        {"switches", "fused_layernorm", &C::fused_layernorm},
        {"switches", "fused_optimizer", &C::fused_optimizer},
        {"switches", "cuda_graph", &C::cuda_graph},
        {"switches", "tf32", &C::tf32},
        {"switches", "activation_checkpointing", &C::activation_checkpointing},
        {"switches", "layer_ranges", &C::layer_ranges},
        {"switches", "anomaly_check", &C::anomaly_check},
        {"switches", "sync_each_op", &C::sync_each_op},
        {"output", "checkpoint_dir", &C::checkpoint_dir},
        {"output", "checkpoint_every", &C::checkpoint_every, {}, 0},
        {"output", "resume", &C::resume},
        {"output", "metrics", &C::metrics_path},
        {"output", "tensorboard", &C::tensorboard_dir},
        {"output", "profile", &C::profile_path},
        {"output", "progress", &C::progress},
    };
    return table;
}

// Sections whose keys other than the listed fields are free-form numbers.
bool is_parameter_section(const std::string& section) {
    return section == "optimizer" || section == "schedule";
}

std::map<std::string, double>& parameters_of(const std::string& section, TrainConfig& c) {
    return section == "optimizer" ? c.optimizer_params : c.schedule_params;
}

std::size_t edit_distance(const std::string& a, const std::string& b) {
    std::vector<std::size_t> row(b.size() + 1);
    for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
    for (std::size_t i = 1; i <= a.size(); ++i) {
        std::size_t diagonal = row[0];
        row[0] = i;
        for (std::size_t j = 1; j <= b.size(); ++j) {
            std::size_t above = row[j];
            row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] != b[j - 1])});
            diagonal = above;
        }
    }
    return row[b.size()];
}

std::string suggestion(const std::string& full_key) {
    std::string best;
    std::size_t best_distance = 4;  // only near misses
    for (const auto& k : known_keys()) {
        std::size_t d = edit_distance(full_key, k);
        if (d < best_distance) {
            best_distance = d;
            best = k;
        }
    }
    return best.empty() ? "" : " (did you mean '" + best + "'?)";
}

const Field* find_field(const std::string& section, const std::string& key) {
    for (const auto& f : fields())
        if (section == f.section && key == f.key) return &f;
    return nullptr;
}

// A value from TOML or from an override, before it meets the field's type.
using Value = std::variant<std::string, std::int64_t, double, bool>;

std::string describe(const Value& v) {
    if (auto s = std::get_if<std::string>(&v)) return "\"" + *s + "\"";
    if (auto i = std::get_if<std::int64_t>(&v)) return std::to_string(*i);
    if (auto d = std::get_if<double>(&v)) {
        std::ostringstream os;
        os << *d;
        return os.str();
    }
    return std::get<bool>(v) ? "true" : "false";
}

void check_range(const Field& f, double x, const std::string& where) {
    if (x < f.min || x > f.max) {
        std::ostringstream os;
        os << where << f.section << "." << f.key << " = " << x << " is out of range [" << f.min << ", " << f.max << "]";
        throw ConfigError(os.str());
    }
}

// Stores `value` into the field; `where` prefixes errors ("FILE:LINE:COL: ").
void assign(const Field& f, const Value& value, TrainConfig& c, const std::string& where) {
    std::string name = std::string(f.section) + "." + f.key;
    auto wrong = [&](const char* expected) {
        throw ConfigError(where + name + " must be " + expected + ", got " + describe(value));
    };
    std::visit(
        [&](auto member) {
            using T = std::remove_reference_t<decltype(c.*member)>;
            if constexpr (std::is_same_v<T, std::string>) {
                std::string s;
                if (auto p = std::get_if<std::string>(&value))
                    s = *p;
                else if (auto i = std::get_if<std::int64_t>(&value))
                    s = std::to_string(*i);
                else
                    wrong("a string");
                if (!f.choices.empty() &&
                    std::none_of(f.choices.begin(), f.choices.end(), [&](const char* choice) { return s == choice; })) {
                    std::string list;
                    for (const char* choice : f.choices) list += (list.empty() ? "" : ", ") + std::string(choice);
                    throw ConfigError(where + name + " = \"" + s + "\" is not one of: " + list);
                }
                c.*member = s;
            } else if constexpr (std::is_same_v<T, bool>) {
                if (auto b = std::get_if<bool>(&value))
                    c.*member = *b;
                else
                    wrong("true or false");
            } else if constexpr (std::is_same_v<T, double>) {
                double x = 0;
                if (auto d = std::get_if<double>(&value))
                    x = *d;
                else if (auto i = std::get_if<std::int64_t>(&value))
                    x = double(*i);
                else
                    wrong("a number");
                check_range(f, x, where);
                c.*member = x;
            } else {
                auto i = std::get_if<std::int64_t>(&value);
                if (!i) wrong("an integer");
                check_range(f, double(*i), where);
                c.*member = static_cast<T>(*i);
            }
        },
        f.member);
}

void set_key(const std::string& section, const std::string& key, const Value& value, TrainConfig& c,
             const std::string& where) {
    if (const Field* f = find_field(section, key)) {
        if (section == "optimizer" && key == "name") {
            // A different optimizer does not inherit the previous one's hyper-parameters.
            std::string before = c.optimizer;
            assign(*f, value, c, where);
            if (c.optimizer != before) c.optimizer_params.clear();
            return;
        }
        if (section == "schedule" && key == "name") {
            std::string before = c.schedule;
            assign(*f, value, c, where);
            if (c.schedule != before) c.schedule_params.clear();
            return;
        }
        assign(*f, value, c, where);
        return;
    }
    if (is_parameter_section(section)) {
        double x = 0;
        const std::string full_key = section + "." + key;
        c.boolean_parameters.erase(full_key);
        c.integer_parameters.erase(full_key);
        if (auto d = std::get_if<double>(&value)) {
            x = *d;
        } else if (auto i = std::get_if<std::int64_t>(&value)) {
            x = double(*i);
            c.integer_parameters.insert(full_key);
        } else if (auto b = std::get_if<bool>(&value)) {
            x = *b ? 1.0 : 0.0;
            c.boolean_parameters.insert(full_key);
        } else {
            throw ConfigError(where + section + "." + key + " must be a number, got " + describe(value));
        }
        if (!std::isfinite(x)) throw ConfigError(where + section + "." + key + " must be finite");
        parameters_of(section, c)[key] = x;
        return;
    }
    throw ConfigError(where + "unknown key '" + section + "." + key + "'" + suggestion(section + "." + key));
}

std::string location(const std::string& source, const toml::source_region& r) {
    return source + ":" + std::to_string(r.begin.line) + ":" + std::to_string(r.begin.column) + ": ";
}

void load_table(const toml::table& root, const std::string& source, TrainConfig& c) {
    // Process "name" keys first so a new optimizer's parameters are not cleared.
    for (const auto& [section_key, section_node] : root) {
        std::string section(section_key.str());
        const toml::table* table = section_node.as_table();
        if (!table)
            throw ConfigError(location(source, section_node.source()) + "'" + section + "' must be a table like [" +
                              section + "]");
        bool known_section =
            is_parameter_section(section) ||
            std::any_of(fields().begin(), fields().end(), [&](const Field& f) { return section == f.section; });
        if (!known_section)
            throw ConfigError(location(source, section_node.source()) + "unknown section [" + section + "]");
        for (int pass = 0; pass < 2; ++pass) {
            for (const auto& [k, node] : *table) {
                std::string key(k.str());
                if ((key == "name") != (pass == 0)) continue;
                Value value;
                if (auto s = node.value<std::string>(); s && node.is_string())
                    value = *s;
                else if (node.is_integer())
                    value = *node.value<std::int64_t>();
                else if (node.is_floating_point())
                    value = *node.value<double>();
                else if (node.is_boolean())
                    value = *node.value<bool>();
                else
                    throw ConfigError(location(source, node.source()) + section + "." + key +
                                      " has an unsupported type (arrays and tables are not used)");
                set_key(section, key, value, c, location(source, node.source()));
            }
        }
    }
}

Value parse_override_value(const std::string& text) {
    if (text == "true" || text == "on" || text == "yes") return true;
    if (text == "false" || text == "off" || text == "no") return false;
    if (text.size() >= 2 && (text.front() == '"' || text.front() == '\'') && text.back() == text.front())
        return text.substr(1, text.size() - 2);
    char* end = nullptr;
    errno = 0;
    long long i = std::strtoll(text.c_str(), &end, 10);
    if (!text.empty() && *end == '\0' && errno == 0) return static_cast<std::int64_t>(i);
    double d = std::strtod(text.c_str(), &end);
    if (!text.empty() && *end == '\0') return d;
    return text;
}

// The shortest text that reads back as the same double ("0.05", not
// "0.050000000000000003"), always with a decimal point or exponent so TOML reads a float.
std::string number_text(double x) {
    char text[400];
    // Fixed notation for everyday magnitudes (0.0005 rather than 5e-04).
    const bool everyday = x == 0 || (std::abs(x) >= 1e-5 && std::abs(x) < 1e15);
    auto [end, error] = everyday ? std::to_chars(text, text + sizeof(text), x, std::chars_format::fixed)
                                 : std::to_chars(text, text + sizeof(text), x);
    std::string out(text, end);
    if (out.find_first_of(".eEn") == std::string::npos) out += ".0";  // n: nan/inf never get here (finite)
    return out;
}

// A free-form optimizer/schedule parameter, as it was written.
std::string parameter_text(const TrainConfig& c, const std::string& section, const std::string& key, double x) {
    const std::string full_key = section + "." + key;
    if (c.boolean_parameters.count(full_key)) return x != 0 ? "true" : "false";
    if (c.integer_parameters.count(full_key) && x == std::floor(x) && std::abs(x) < 9e15)
        return std::to_string(static_cast<long long>(x));
    return number_text(x);
}

std::string toml_value(const Field& f, const TrainConfig& c) {
    return std::visit(
        [&](auto member) -> std::string {
            using T = std::remove_cvref_t<decltype(c.*member)>;
            const T& v = c.*member;
            if constexpr (std::is_same_v<T, std::string>) {
                std::ostringstream os;
                os << toml::value<std::string>(v);
                return os.str();
            } else if constexpr (std::is_same_v<T, bool>) {
                return v ? "true" : "false";
            } else if constexpr (std::is_same_v<T, double>) {
                return number_text(v);
            } else {
                return std::to_string(v);
            }
        },
        f.member);
}

}  // namespace

std::vector<std::string> known_keys() {
    std::vector<std::string> keys;
    for (const auto& f : fields()) keys.push_back(std::string(f.section) + "." + f.key);
    return keys;
}

void load_toml_string(const std::string& text, const std::string& source_name, TrainConfig& c) {
    toml::table root;
    try {
        root = toml::parse(text, source_name);
    } catch (const toml::parse_error& e) {
        throw ConfigError(location(source_name, e.source()) + std::string(e.description()));
    }
    load_table(root, source_name, c);
}

void load_toml_file(const std::string& path, TrainConfig& c) {
    toml::table root;
    try {
        root = toml::parse_file(path);
    } catch (const toml::parse_error& e) {
        std::string what(e.description());
        if (e.source().begin.line == 0 || what.find("open") != std::string::npos)
            throw ConfigError(path + ": cannot read the config file (" + what + ")");
        throw ConfigError(location(path, e.source()) + what);
    }
    load_table(root, path, c);
}

void apply_override(const std::string& assignment, TrainConfig& c) {
    auto eq = assignment.find('=');
    auto dot = assignment.find('.');
    if (eq == std::string::npos || dot == std::string::npos || dot > eq)
        throw ConfigError("--set " + assignment + ": expected section.key=value (e.g. train.epochs=3)");
    std::string section = assignment.substr(0, dot);
    std::string key = assignment.substr(dot + 1, eq - dot - 1);
    set_key(section, key, parse_override_value(assignment.substr(eq + 1)), c, "--set " + assignment + ": ");
}

void validate(const TrainConfig& c) {
    if (c.data_source == "png" && c.png_dir.empty())
        throw ConfigError(
            "data.source = \"png\" needs data.png_dir (write one with "
            "`ember data prepare fashion-mnist --format png --out DIR`)");
    if (c.batch_size != "max") {
        char* end = nullptr;
        long long b = std::strtoll(c.batch_size.c_str(), &end, 10);
        if (c.batch_size.empty() || *end != '\0' || b < 1 || b > 65536)
            throw ConfigError("data.batch_size = \"" + c.batch_size + "\" must be an integer in [1, 65536] or \"max\"");
    }
    if (c.data_source == "gpu" && c.backend == "cpu")
        throw ConfigError("data.source = \"gpu\" needs train.backend = \"cuda\" or \"auto\"");
    if (c.precision != "fp32" && c.backend == "cpu")
        throw ConfigError("train.precision = \"" + c.precision +
                          "\" (AMP) needs the cuda backend; the cpu backend trains in fp32");
    if (!c.resume.empty() && c.checkpoint_dir.empty() && c.checkpoint_every > 0)
        throw ConfigError("output.checkpoint_every needs output.checkpoint_dir");
}

std::string to_toml(const TrainConfig& c) {
    std::string out;
    std::string section;
    for (const auto& f : fields()) {
        if (section != f.section) {
            if (!section.empty() && is_parameter_section(section))
                for (const auto& [k, v] : parameters_of(section, const_cast<TrainConfig&>(c)))
                    out += k + " = " + parameter_text(c, section, k, v) + "\n";
            section = f.section;
            out += (out.empty() ? "[" : "\n[") + section + "]\n";
        }
        out += std::string(f.key) + " = " + toml_value(f, c) + "\n";
    }
    // The last section in the table is [output]: no parameters after it.
    return out;
}

std::string settings_line(const TrainConfig& c) {
    auto parameters = [&](const std::string& section, const std::map<std::string, double>& values) {
        std::string text;
        for (const auto& [key, value] : values) {
            const bool flag = c.boolean_parameters.count(section + "." + key) > 0;
            if (flag && value == 0) continue;  // a switch that is off says nothing
            text += (text.empty() ? "" : ", ") + key + (flag ? "" : " " + parameter_text(c, section, key, value));
        }
        return text.empty() ? std::string() : " (" + text + ")";
    };
    std::string line = c.model + ", " + c.optimizer + parameters("optimizer", c.optimizer_params);
    if (c.schedule != "constant" && !c.schedule.empty())
        line += ", " + c.schedule + parameters("schedule", c.schedule_params);
    line += ", batch " + c.batch_size + ", " + std::to_string(c.epochs) + (c.epochs == 1 ? " epoch" : " epochs");
    if (c.max_steps > 0) line += " (at most " + std::to_string(c.max_steps) + " steps)";
    line += ", " + c.precision + ", backend " + c.backend + ", " + std::to_string(c.workers) +
            (c.workers == 1 ? " worker" : " workers");
    if (c.train_limit > 0) line += ", first " + std::to_string(c.train_limit) + " training images";
    return line;
}

}  // namespace ember::train
