// control_socket.h: `ember attach PID start|stop|flush|status` talks to a recorded
// process over a Unix-domain socket. The socket lives in a private directory
// ($XDG_RUNTIME_DIR/ember, else /tmp/ember-<uid>) that must be a real directory
// owned by the user with mode 0700; the socket file is 0600 and the server checks
// each peer's uid (SO_PEERCRED) and refuses any other user. One request per
// connection: a command line in, one reply line out ("ok ..." or "error ...").
#pragma once

#include <atomic>
#include <string>
#include <thread>

struct sockaddr_un;

namespace ember::collector {

class Session;

// The private directory, created 0700 if missing. Empty and `error` filled when it
// exists with another owner, another mode (e.g. world-writable) or is not a directory.
std::string control_directory(std::string* error);
// Checks an existing directory: owned by us, a directory (not a link), mode 0700.
bool check_private_directory(const std::string& path, std::string* error);
std::string control_socket_path(const std::string& directory, long pid);

class ControlServer {
  public:
    ~ControlServer() { stop(); }
    bool start(Session& session, std::string* error);
    void stop();
    const std::string& path() const { return path_; }

  private:
    void serve(Session& session);
    std::string path_;
    int listener_ = -1;
    std::atomic<bool> stop_requested_{false};
    std::thread thread_;
};

// Client side: sends `command` to process `pid`, waits at most timeout_ms for the
// reply. false and `error` filled when the socket is missing, unsafe or silent.
bool control_request(long pid, const std::string& command, std::string* reply, std::string* error,
                     int timeout_ms = 5000);

// Shared by client and server (control_client.cpp).
namespace control_detail {
std::string system_error(const std::string& what);
bool fill_address(const std::string& path, struct sockaddr_un& address, std::string* error);
bool read_line(int socket, std::string* line, int timeout_ms);
void write_all(int socket, const std::string& text);
}  // namespace control_detail

// What the server does with one command line (exposed for tests).
std::string handle_control_command(Session& session, const std::string& command);

}  // namespace ember::collector
