// dump_command.cpp: `ember dump --pid PID`: every Python thread's current stack of a
// running process, printed once; the process goes on (collectors/python/outside_sampler.h).
// With --native, mixed stacks, and any program's native stacks when it is not CPython.
#include "cli/command_errors.h"
#include "cli/commands.h"
#include "collectors/python/outside_sampler.h"

#include <CLI/CLI.hpp>

#include <cstdio>
#include <iostream>
#include <memory>
#include <sstream>
#include <string>

namespace ember::cli {

void add_dump_command(CLI::App& app) {
    auto pid = std::make_shared<int>(0);
    auto subprocesses = std::make_shared<bool>(false);
    auto native = std::make_shared<bool>(false);
    CLI::App* dump = app.add_subcommand(
        "dump", "Print every Python thread's current stack of a running process, once (ember dump --pid 4242)");
    dump->add_option("--pid", *pid, "the process to read (CPython 3.8 to 3.13)")->required();
    dump->add_flag(
        "--subprocesses", *subprocesses,
        "also every CPython process descended from it (with --native, every process), each under its own pid");
    dump->add_flag("--native", *native,
                   "mixed stacks: the native frames around the Python ones, or the native stacks alone of a program "
                   "that is not Python (the threads are stopped for the unwind, then resumed)");
    dump->callback([pid, subprocesses, native] {
        if (*pid <= 0) fail_command("dump", "--pid must be a process id, not " + std::to_string(*pid));
        std::ostringstream text;
        try {
            collector::python::write_dump(*pid, text, *subprocesses, *native);
        } catch (const collector::python::PythonReadError& error) {
            fail_command("dump", "--pid " + std::to_string(*pid) + ": " + error.what());
        }
        std::cout << text.str() << std::flush;
    });
}

}  // namespace ember::cli
