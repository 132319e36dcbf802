// error_message.h: the message of the error a call throws, for tests that check an
// error names the field, file or flag at fault.
#pragma once

#include <string>
#include <utility>

namespace ember::test_support {

// what() of the Error that `call` throws, or `if_none` when it returns normally (so a
// check that the message names something fails, showing `if_none`). Any other
// exception goes on to the test.
template <typename Error, typename Call>
std::string error_message(Call&& call, std::string if_none = "") {
    try {
        std::forward<Call>(call)();
    } catch (const Error& error) {
        return error.what();
    }
    return if_none;
}

}  // namespace ember::test_support
