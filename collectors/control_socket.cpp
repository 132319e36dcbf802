// control_socket.cpp: the private control socket (see control_socket.h).
#include "collectors/control_socket.h"

#include "collectors/cupti_collector.h"
#include "collectors/session.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

namespace ember::collector {

using namespace control_detail;

std::string handle_control_command(Session& session, const std::string& command) {
    if (command == "start") {
        session.set_capturing(true);
        return "ok capturing";
    }
    if (command == "stop") {
        session.set_capturing(false);
        return "ok paused";
    }
    if (command == "flush") {
        try {
            cupti_flush(true);
            session.writer().flush();
        } catch (const std::exception& failure) {
            return std::string("error ") + failure.what();
        }
        return "ok flushed";
    }
    if (command == "status") {
        store::WriterStats stats = session.writer().stats();
        return std::string("ok ") + (session.capturing() ? "capturing" : "paused") + " file=" + session.options().path +
               " events=" + std::to_string(stats.events_recorded) + " dropped=" + std::to_string(stats.events_dropped) +
               " cupti_dropped=" + std::to_string(session.cupti_dropped());
    }
    return "error unknown command '" + command + "' (start, stop, flush, status)";
}

bool ControlServer::start(Session& session, std::string* error) {
    std::string directory = control_directory(error);
    if (directory.empty()) return false;
    path_ = control_socket_path(directory, static_cast<long>(getpid()));
    sockaddr_un address;
    if (!fill_address(path_, address, error)) return false;
    listener_ = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (listener_ < 0) {
        *error = system_error("socket");
        return false;
    }
    unlink(path_.c_str());  // a stale socket of an earlier process with our pid
    // The socket file is created 0600: umask 0177 for the bind, then restored.
    mode_t previous_mask = umask(0177);
    int bound = bind(listener_, reinterpret_cast<sockaddr*>(&address), sizeof address);
    umask(previous_mask);
    if (bound != 0 || chmod(path_.c_str(), 0600) != 0 || listen(listener_, 4) != 0) {
        *error = system_error("bind/listen " + path_);
        close(listener_);
        listener_ = -1;
        return false;
    }
    thread_ = std::thread([this, &session] { serve(session); });
    session.say("control socket " + path_ + " (ember attach " + std::to_string(getpid()) + " start|stop|flush|status)");
    return true;
}

void ControlServer::serve(Session& session) {
    while (!stop_requested_.load()) {
        pollfd ready{listener_, POLLIN, 0};
        if (poll(&ready, 1, 100) <= 0) continue;
        int client = accept4(listener_, nullptr, nullptr, SOCK_CLOEXEC);
        if (client < 0) continue;
        ucred peer{};
        socklen_t length = sizeof peer;
        if (getsockopt(client, SOL_SOCKET, SO_PEERCRED, &peer, &length) != 0 || peer.uid != getuid()) {
            session.say("control socket: refused a connection from uid " + std::to_string(peer.uid) + " (pid " +
                        std::to_string(peer.pid) + ")");
            write_all(client, "error refused: not the recording user\n");
            close(client);
            continue;
        }
        std::string command;
        if (read_line(client, &command, 2000)) write_all(client, handle_control_command(session, command) + "\n");
        close(client);
    }
}

void ControlServer::stop() {
    if (listener_ < 0) return;
    stop_requested_.store(true);
    if (thread_.joinable()) thread_.join();
    close(listener_);
    listener_ = -1;
    unlink(path_.c_str());
}

}  // namespace ember::collector
