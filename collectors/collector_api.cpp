// collector_api.cpp: the in-process C API (include/ember/collector.h).
#include "ember/collector.h"

#include "collectors/cupti_collector.h"
#include "collectors/session.h"

#include <cstring>
#include <exception>
#include <mutex>
#include <string>

namespace {

std::mutex g_error_mutex;
std::string g_last_error;

int fail(const std::string& message) {
    std::lock_guard lock(g_error_mutex);
    g_last_error = message;
    return -1;
}

}  // namespace

extern "C" {

__attribute__((visibility("default"))) void ember_collector_options_init(ember_collector_options* options) {
    if (!options) return;
    std::memset(options, 0, sizeof *options);
    options->trace_cuda = 1;
    options->trace_nvtx = 1;
    options->nvml_hz = 20.0;
}

__attribute__((visibility("default"))) int ember_collector_start(const char* path,
                                                                 const ember_collector_options* options) {
    using namespace ember::collector;
    if (!path || !*path) return fail("ember_collector_start: no output path");
    ember_collector_options defaults;
    ember_collector_options_init(&defaults);
    if (!options) options = &defaults;
    SessionOptions session_options;
    session_options.path = path;
    session_options.paused = options->paused != 0;
    session_options.trace_cuda = options->trace_cuda != 0;
    session_options.trace_nvtx = options->trace_nvtx != 0;
    session_options.nvml_hz = options->nvml_hz;
    session_options.cpu_sample_hz = options->cpu_sample_hz;
    session_options.control_socket = options->control_socket != 0;
    session_options.quiet = options->quiet != 0;
    try {
        start_session(session_options);
    } catch (const std::exception& failure) {
        return fail(std::string("ember_collector_start: ") + failure.what());
    }
    return 0;
}

__attribute__((visibility("default"))) int ember_collector_stop(void) {
    std::string error;
    if (!ember::collector::stop_session(&error)) return fail("ember_collector_stop: " + error);
    return 0;
}

__attribute__((visibility("default"))) int ember_collector_set_metadata(const char* key, const char* value) {
    ember::collector::Session* session = ember::collector::current_session();
    if (!session) return fail("ember_collector_set_metadata: no session is open");
    if (!key || !*key || !value) return fail("ember_collector_set_metadata: no key or no value");
    try {
        session->writer().set_metadata(key, value);
    } catch (const std::exception& failure) {
        return fail(std::string("ember_collector_set_metadata: ") + failure.what());
    }
    return 0;
}

__attribute__((visibility("default"))) int ember_collector_flush(void) {
    ember::collector::Session* session = ember::collector::current_session();
    if (!session) return fail("ember_collector_flush: no session is open");
    try {
        ember::collector::cupti_flush(true);
        session->writer().flush();
    } catch (const std::exception& failure) {
        return fail(std::string("ember_collector_flush: ") + failure.what());
    }
    return 0;
}

__attribute__((visibility("default"))) int ember_collector_pause(void) {
    ember::collector::Session* session = ember::collector::current_session();
    if (!session) return fail("ember_collector_pause: no session is open");
    session->set_capturing(false);
    return 0;
}

__attribute__((visibility("default"))) int ember_collector_resume(void) {
    ember::collector::Session* session = ember::collector::current_session();
    if (!session) return fail("ember_collector_resume: no session is open");
    session->set_capturing(true);
    return 0;
}

__attribute__((visibility("default"))) int ember_collector_get_status(ember_collector_status* status) {
    if (!status) return fail("ember_collector_get_status: null status");
    std::memset(status, 0, sizeof *status);
    ember::collector::Session* session = ember::collector::current_session();
    if (!session) return 0;
    status->recording = 1;
    status->capturing = session->capturing() ? 1 : 0;
    ember::store::WriterStats stats = session->writer().stats();
    status->events_recorded = stats.events_recorded;
    status->events_dropped = stats.events_dropped;
    status->cupti_dropped = session->cupti_dropped();
    std::strncpy(status->path, session->options().path.c_str(), sizeof status->path - 1);
    return 0;
}

__attribute__((visibility("default"))) const char* ember_collector_last_error(void) {
    std::lock_guard lock(g_error_mutex);
    return g_last_error.c_str();
}

}  // extern "C"
