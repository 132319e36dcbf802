// control_client.cpp: the client half of the control socket and the private
// directory checks both halves share (see control_socket.h). No session code, so
// the `ember` command links it without CUPTI.
#include "collectors/control_socket.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace ember::collector {

namespace control_detail {

std::string system_error(const std::string& what) {
    return what + ": " + std::strerror(errno);
}

bool fill_address(const std::string& path, sockaddr_un& address, std::string* error) {
    std::memset(&address, 0, sizeof address);
    address.sun_family = AF_UNIX;
    if (path.size() >= sizeof address.sun_path) {
        *error = "socket path too long: " + path;
        return false;
    }
    std::memcpy(address.sun_path, path.c_str(), path.size() + 1);
    return true;
}

std::string trim(std::string text) {
    while (!text.empty() && (text.back() == '\n' || text.back() == '\r' || text.back() == ' ')) text.pop_back();
    return text;
}

// Reads one line (or up to `limit` bytes) within timeout_ms.
bool read_line(int socket, std::string* line, int timeout_ms) {
    line->clear();
    char buffer[256];
    while (line->size() < 4096) {
        pollfd ready{socket, POLLIN, 0};
        if (poll(&ready, 1, timeout_ms) <= 0) return false;
        ssize_t got = read(socket, buffer, sizeof buffer);
        if (got <= 0) return !line->empty();
        line->append(buffer, static_cast<std::size_t>(got));
        if (line->find('\n') != std::string::npos) break;
    }
    *line = trim(line->substr(0, line->find('\n')));
    return true;
}

void write_all(int socket, const std::string& text) {
    std::size_t sent = 0;
    while (sent < text.size()) {
        ssize_t wrote = send(socket, text.data() + sent, text.size() - sent, MSG_NOSIGNAL);
        if (wrote <= 0) return;
        sent += static_cast<std::size_t>(wrote);
    }
}

}  // namespace control_detail

using namespace control_detail;

bool check_private_directory(const std::string& path, std::string* error) {
    struct stat info {};
    if (lstat(path.c_str(), &info) != 0) {
        *error = system_error("control directory " + path);
        return false;
    }
    if (!S_ISDIR(info.st_mode)) {
        *error = "control directory " + path + " is not a directory (refusing it)";
        return false;
    }
    if (info.st_uid != getuid()) {
        *error = "control directory " + path + " belongs to uid " + std::to_string(info.st_uid) +
                 ", not to this user (refusing it)";
        return false;
    }
    if ((info.st_mode & 0077) != 0) {
        char mode[8];
        std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(info.st_mode & 07777));
        *error = "control directory " + path + " has mode " + mode + "; it must be 0700 (refusing it)";
        return false;
    }
    return true;
}

std::string control_directory(std::string* error) {
    std::string path;
    if (const char* runtime = std::getenv("XDG_RUNTIME_DIR"); runtime && *runtime)
        path = std::string(runtime) + "/ember";
    else
        path = "/tmp/ember-" + std::to_string(getuid());
    if (mkdir(path.c_str(), 0700) != 0 && errno != EEXIST) {
        *error = system_error("mkdir " + path);
        return "";
    }
    if (!check_private_directory(path, error)) return "";
    return path;
}

std::string control_socket_path(const std::string& directory, long pid) {
    return directory + "/ember-" + std::to_string(pid) + ".sock";
}

bool control_request(long pid, const std::string& command, std::string* reply, std::string* error, int timeout_ms) {
    std::string directory = control_directory(error);
    if (directory.empty()) return false;
    std::string path = control_socket_path(directory, pid);
    sockaddr_un address;
    if (!fill_address(path, address, error)) return false;
    int connection = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (connection < 0) {
        *error = system_error("socket");
        return false;
    }
    if (connect(connection, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0) {
        *error = system_error("connect " + path) + " (is process " + std::to_string(pid) +
                 " recorded with a control socket?)";
        close(connection);
        return false;
    }
    write_all(connection, command + "\n");
    bool answered = read_line(connection, reply, timeout_ms);
    close(connection);
    if (!answered) {
        *error = "no reply from " + path + " within " + std::to_string(timeout_ms) + " ms";
        return false;
    }
    return true;
}

}  // namespace ember::collector
