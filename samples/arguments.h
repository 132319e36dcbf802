// arguments.h: what the CPU samples share in reading their command lines.
#pragma once

#include <cstdio>
#include <cstdlib>

// The positive integer `text` given to `flag`; anything else is a usage error: names the
// sample, the flag and the text on stderr and exits 2.
inline long long sample_positive_integer(const char* sample, const char* flag, const char* text) {
    char* end = nullptr;
    long long value = std::strtoll(text, &end, 10);
    if (!end || *end != '\0' || value <= 0) {
        std::fprintf(stderr, "%s: %s needs a positive integer, got '%s'\n", sample, flag, text);
        std::exit(2);
    }
    return value;
}
