// command_errors_test.cpp: the one exit-code rule (cli/command_errors.h) for an exception
// that reaches a program's main (ember-mpi's): a trace file's error is bad input, 2;
// anything else a failure at run time, 1 — as the README's "Exit codes" say.
#include "cli/command_errors.h"

#include <gtest/gtest.h>

#include <new>
#include <stdexcept>

namespace {

TEST(CommandErrors, ATraceErrorIsBadInput) {
    const ember::store::TraceError missing(ember::store::TraceErrorKind::not_found, "rank3.db", "cannot open");
    EXPECT_EQ(ember::cli::exit_code_of(missing), 2);
    // Caught as the std::exception it reaches main as.
    const std::exception& caught = missing;
    EXPECT_EQ(ember::cli::exit_code_of(caught), 2);
}

TEST(CommandErrors, AnythingElseIsAFailureAtRunTime) {
    EXPECT_EQ(ember::cli::exit_code_of(std::runtime_error("MPI_Allgatherv failed: MPI_ERR_TRUNCATE")), 1);
    EXPECT_EQ(ember::cli::exit_code_of(std::bad_alloc()), 1);
}

}  // namespace
