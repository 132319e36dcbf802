// hyperparameters.h: optimizer hyper-parameters as name -> number (booleans are 0/1),
// read through a HyperparameterReader that supplies defaults, checks ranges and
// rejects names the optimizer does not know, always naming the field in the error.
#pragma once

#include <map>
#include <set>
#include <string>

namespace ember::optim {

using Hyperparameters = std::map<std::string, double>;

class HyperparameterReader {
  public:
    HyperparameterReader(std::string optimizer, const Hyperparameters& values);

    // The value of `field` or `fallback`; throws std::invalid_argument naming the
    // optimizer and field when outside [min, max].
    double number(const std::string& field, double fallback, double min, double max);
    // Like number() but only 0 or 1 is accepted.
    bool flag(const std::string& field, bool fallback);
    // Throws naming every given field that no number()/flag() call asked for.
    void reject_unknown() const;

    [[noreturn]] void fail(const std::string& field, const std::string& why) const;

  private:
    std::string optimizer_;
    const Hyperparameters& values_;
    std::set<std::string> read_;
};

}  // namespace ember::optim
