// native_spin.cpp: a program that is neither CPython nor a CUDA/NVTX user, for
// `ember record --native` and `ember dump --native` (python_native_only_test.cpp).
// `native_spin SECONDS`: main runs spin_in_known_function() for SECONDS (or until
// SIGTERM) while a second thread, named "sleeper", sleeps in nanosleep; it prints
// "ready" once both run and exits with status 3 ("terminated" first after SIGTERM).
#include <pthread.h>
#include <signal.h>
#include <time.h>

#include <cstdio>
#include <cstdlib>

namespace {

volatile sig_atomic_t g_terminated = 0;

void on_terminate(int) {
    g_terminated = 1;
}

double monotonic_seconds() {
    timespec now{};
    clock_gettime(CLOCK_MONOTONIC, &now);
    return static_cast<double>(now.tv_sec) + static_cast<double>(now.tv_nsec) / 1e9;
}

void* sleep_forever(void*) {
    for (;;) {
        timespec pause{1000, 0};
        nanosleep(&pause, nullptr);
    }
    return nullptr;
}

}  // namespace

// The function the tests look for in the stacks. It spends nearly all its time in its
// own loop (the clock is read once per million iterations).
extern "C" __attribute__((noinline)) long spin_in_known_function(double seconds) {
    volatile long counter = 0;
    const double end = monotonic_seconds() + seconds;
    while (!g_terminated && monotonic_seconds() < end)
        for (int step = 0; step < 1000000; ++step) counter = counter + 1;
    return counter;
}

int main(int argc, char** argv) {
    const double seconds = argc > 1 ? std::atof(argv[1]) : 2.0;
    struct sigaction terminate {};
    terminate.sa_handler = on_terminate;
    sigemptyset(&terminate.sa_mask);
    sigaction(SIGTERM, &terminate, nullptr);
    pthread_t sleeper;
    if (pthread_create(&sleeper, nullptr, sleep_forever, nullptr) != 0) return 1;
    pthread_setname_np(sleeper, "sleeper");
    std::printf("ready\n");
    std::fflush(stdout);
    const long counted = spin_in_known_function(seconds);  // used after the call: no tail call, main stays on the stack
    if (g_terminated) std::printf("terminated\n");
    std::printf("counted %ld\n", counted);
    return 3;
}
