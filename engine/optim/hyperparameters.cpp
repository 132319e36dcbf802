// hyperparameters.cpp: defaults, range checks and unknown-field errors.
#include "engine/optim/hyperparameters.h"

#include <cmath>
#include <sstream>
#include <stdexcept>

namespace ember::optim {

HyperparameterReader::HyperparameterReader(std::string optimizer, const Hyperparameters& values)
    : optimizer_(std::move(optimizer)), values_(values) {}

void HyperparameterReader::fail(const std::string& field, const std::string& why) const {
    throw std::invalid_argument(optimizer_ + ": hyper-parameter '" + field + "' " + why);
}

double HyperparameterReader::number(const std::string& field, double fallback, double min, double max) {
    read_.insert(field);
    auto it = values_.find(field);
    if (it == values_.end()) return fallback;
    double value = it->second;
    if (!std::isfinite(value) || value < min || value > max) {
        std::ostringstream why;
        why << "is " << value << ", must be in [" << min << ", " << max << "]";
        fail(field, why.str());
    }
    return value;
}

bool HyperparameterReader::flag(const std::string& field, bool fallback) {
    read_.insert(field);
    auto it = values_.find(field);
    if (it == values_.end()) return fallback;
    if (it->second != 0.0 && it->second != 1.0) {
        std::ostringstream why;
        why << "is " << it->second << ", must be 0 or 1";
        fail(field, why.str());
    }
    return it->second != 0.0;
}

void HyperparameterReader::reject_unknown() const {
    for (const auto& [field, value] : values_)
        if (!read_.count(field)) fail(field, "is not a hyper-parameter of this optimizer");
}

}  // namespace ember::optim
