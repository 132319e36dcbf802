/* collector.h: the in-process C API of libember_collector.so. A program that links
 * ember::collector (the trainer's `--profile FILE`) records itself:
 *
 *   ember_collector_options options;
 *   ember_collector_options_init(&options);
 *   options.cpu_sample_hz = 99;
 *   if (ember_collector_start("run.db", &options) != 0) puts(ember_collector_last_error());
 *   ... work: NVTX ranges, CUDA calls ...
 *   ember_collector_stop();   // flushes and closes the file
 *
 * NVTX is captured with no environment variable: linking ember::collector compiles
 * a static NVTX injection hook into the program (nvtx_static_injection.cpp). CUDA
 * activity is recorded when a device is present; without one the collector says
 * "no CUDA device" once and records NVTX and host data only.
 * The same library, injected by `ember record`, starts itself from environment
 * variables (docs/collectors.md). */
#ifndef EMBER_COLLECTOR_H
#define EMBER_COLLECTOR_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ember_collector_options {
    int paused;           /* 1: open the file but capture nothing until ember_collector_resume() */
    int trace_cuda;       /* 1: CUPTI activity + API calls (default 1) */
    int trace_nvtx;       /* 1: NVTX ranges and marks (default 1) */
    double nvml_hz;       /* GPU counter sampling rate; 0 = off (default 20) */
    double cpu_sample_hz; /* CPU stack sampling rate; 0 = off (default 0) */
    int control_socket;   /* 1: listen for `ember attach PID ...` (default 0) */
    int quiet;            /* 1: no informational lines on stderr (default 0) */
} ember_collector_options;

typedef struct ember_collector_status {
    int recording; /* a session is open */
    int capturing; /* events are being recorded (not paused) */
    uint64_t events_recorded;
    uint64_t events_dropped;
    uint64_t cupti_dropped;
    char path[512];
} ember_collector_status;

void ember_collector_options_init(ember_collector_options* options);

/* Opens `path` (replacing it) and starts recording. 0 on success; -1 and
 * ember_collector_last_error() otherwise (also when a session is already open). */
int ember_collector_start(const char* path, const ember_collector_options* options);
/* Flushes everything and closes the file. 0 on success. */
int ember_collector_stop(void);
/* Everything recorded so far is committed to the file when it returns. */
int ember_collector_flush(void);
/* Capture on/off without closing the file (what cudaProfilerStart/Stop also do). */
int ember_collector_pause(void);
int ember_collector_resume(void);
int ember_collector_get_status(ember_collector_status* status);
/* A key of the trace's run_metadata (e.g. the program's settings, so the analyses know
 * what the run already applied); setting it again replaces the value. 0 on success. */
int ember_collector_set_metadata(const char* key, const char* value);
const char* ember_collector_last_error(void);

#ifdef __cplusplus
}
#endif

#endif /* EMBER_COLLECTOR_H */
