// attach_command.cpp: `ember attach PID start|stop|flush|status`, the remote
// control of a process recorded by `ember record` (or by the in-process API with
// the control socket on). Talks to collectors/control_socket over the private
// Unix-domain socket of that process.
#include "collectors/control_socket.h"
#include "cli/command_errors.h"
#include "cli/commands.h"

#include <CLI/CLI.hpp>

#include <cstdio>
#include <memory>
#include <string>

namespace ember::cli {

namespace {

struct AttachOptions {
    long pid = 0;
    std::string command;
    int timeout_ms = 5000;
};

}  // namespace

void add_attach_command(CLI::App& app) {
    auto options = std::make_shared<AttachOptions>();
    CLI::App* attach =
        app.add_subcommand("attach", "Control a recording process: start or stop capture, flush, status");
    attach->add_option("pid", options->pid, "process id of the recorded program")->required();
    attach->add_option("command", options->command, "start, stop, flush or status")
        ->required()
        ->check(CLI::IsMember({"start", "stop", "flush", "status"}));
    attach->add_option("--timeout-ms", options->timeout_ms, "how long to wait for the reply (default 5000)");
    attach->callback([options] {
        std::string reply, error;
        if (!collector::control_request(options->pid, options->command, &reply, &error, options->timeout_ms))
            fail_at_run_time("attach", error);
        // The process answered, and refused ("error ..."): the request failed there.
        if (reply.rfind("ok", 0) != 0) fail_at_run_time("attach", reply);
        std::printf("%s\n", reply.c_str());
    });
}

}  // namespace ember::cli
