#!/usr/bin/env python3
"""Importing a Kineto trace with 10^7 GPU "[memory]" events: `ember import` and
`ember stats --report gpu_memory` against Python's json.load of the same file, in the
same run (wall time and peak RSS of each, each in its own process).

The trace is what the PyTorch profiler writes with profile_memory=True for a training
loop on one GPU, made up but shaped like the real ones (h100_bert_small.json.gz in
../shared/real-traces/kineto): per step a "ProfilerStep#N" range; in it, per layer, a
forward op ("aten::linear") that allocates its activation and a workspace and frees the
workspace, then per layer in reverse a backward op that allocates a gradient, frees it
and frees the layer's activation. Sizes are rounded up to 512 bytes as the caching
allocator does; the same block sizes come back each step, so addresses repeat (a cache
hit); "Total Allocated" is the replay of the events and "Total Reserved" grows by 2 MiB
(small blocks) or 20 MiB segments when a step first needs more, and never shrinks. The
parameters (allocated before the profiler started) are only in "Total Allocated", as in
a real trace. Every event carries "Addr", "Bytes", "Total Allocated", "Total Reserved",
"Device Type" 1 and "Device Id" 0.

It is written as it is generated (one event per line), so the generator's memory does
not grow with the file. The expected peak allocated and reserved bytes are printed, and
checked against ember's gpu_memory report.

usage: kineto_memory_scale.py EMBER WORK_DIR [--events N] [--python auto|yes|no]

--python auto runs json.load only when MemAvailable holds the file's size plus about
1.6 KiB per event (what json.load of these events takes), so a shared machine is not
pushed into swap or the OOM killer; the line says when it was left out.
"""
import argparse
import json
import os
import subprocess
import sys
import time

LAYERS = 48
ALIGN = 512
SMALL = 1 << 20           # requests up to 1 MiB come from 2 MiB segments
SMALL_SEGMENT = 2 << 20
LARGE_SEGMENT = 20 << 20
PARAMETERS = 1_300_000_000  # bytes allocated before the trace began (weights, optimizer state)


def round_up(n, to):
    return (n + to - 1) // to * to


class Allocator:
    """The totals a caching allocator reports: allocated (the replay) and reserved
    (segments, grown on demand and never released). Block addresses are fixed per
    (step-independent) slot, as the cache hands the same block back each step."""

    def __init__(self):
        self.allocated = PARAMETERS
        self.reserved = round_up(PARAMETERS, LARGE_SEGMENT)
        self.in_use_small = 0
        self.in_use_large = PARAMETERS
        self.small_capacity = 0
        self.large_capacity = self.reserved
        self.peak_allocated = self.allocated
        self.peak_reserved = self.reserved

    def alloc(self, size):
        self.allocated += size
        if size <= SMALL:
            self.in_use_small += size
            while self.in_use_small > self.small_capacity:
                self.small_capacity += SMALL_SEGMENT
                self.reserved += SMALL_SEGMENT
        else:
            self.in_use_large += size
            while self.in_use_large > self.large_capacity:
                grow = max(LARGE_SEGMENT, round_up(size, SMALL_SEGMENT))
                self.large_capacity += grow
                self.reserved += grow
        self.peak_allocated = max(self.peak_allocated, self.allocated)
        self.peak_reserved = max(self.peak_reserved, self.reserved)

    def free(self, size):
        self.allocated -= size
        if size <= SMALL:
            self.in_use_small -= size
        else:
            self.in_use_large -= size


def layer_sizes(layer):
    """(activation, workspace, gradient) request sizes of one layer, rounded as the
    allocator rounds them."""
    hidden = 1024 + 256 * (layer % 4)
    activation = round_up(32 * 128 * hidden * 2, ALIGN)          # bf16 activations, 8-12 MiB
    workspace = round_up(4096 + 1000 * (layer % 7), ALIGN)       # small cuBLAS workspace
    gradient = round_up(hidden * hidden * 2 // 4, ALIGN)         # 0.5-1.1 MiB
    return activation, workspace, gradient


def write_trace(path, events_wanted):
    pid = 19392
    base_ts = 1_419_247_000_000.0  # us
    allocator = Allocator()
    ts = [base_ts]
    index = [0]
    written = [0]
    out = open(path, "w", buffering=1 << 22)
    out.write('{"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "NVIDIA H100 80GB HBM3", '
              '"totalGlobalMem": 85029158912, "computeMajor": 9, "computeMinor": 0, "numSms": 132}], '
              '"distributedInfo": {"backend": "nccl", "rank": 0, "world_size": 1}, '
              '"traceEvents": [\n')
    first = [True]

    def emit(text):
        if not first[0]:
            out.write(",\n")
        first[0] = False
        out.write(text)

    def memory(address, size):
        # size > 0: an allocation; < 0: a free.
        if size > 0:
            allocator.alloc(size)
        else:
            allocator.free(-size)
        ts[0] += 0.25
        emit('{"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]", "pid": %d, "tid": %d, '
             '"ts": %.3f, "args": {"Total Reserved": %d, "Total Allocated": %d, "Bytes": %d, "Addr": %d, '
             '"Device Id": 0, "Device Type": 1, "Ev Idx": %d}}'
             % (pid, pid, ts[0], allocator.reserved, allocator.allocated, size, address, index[0]))
        index[0] += 1
        written[0] += 1

    def op(name, start, end):
        emit('{"ph": "X", "cat": "cpu_op", "name": "%s", "pid": %d, "tid": %d, "ts": %.3f, "dur": %.3f, '
             '"args": {"External id": %d}}' % (name, pid, pid, start, end - start, index[0]))

    activation_base = 0x7F00_0000_0000
    small_base = 0x7E00_0000_0000
    step = 0
    while written[0] < events_wanted:
        step_start = ts[0]
        ops = []
        # Forward: the activation stays, the workspace is freed.
        activation_address = []
        address = activation_base
        for layer in range(LAYERS):
            activation, workspace, _ = layer_sizes(layer)
            start = ts[0]
            activation_address.append(address)
            memory(address, activation)
            workspace_address = small_base + layer * 0x10000
            memory(workspace_address, workspace)
            memory(workspace_address, -workspace)
            address += round_up(activation, SMALL_SEGMENT)
            ops.append(("aten::linear", start, ts[0] + 0.1))
        # Backward, in reverse: a gradient allocated and freed, the activation freed.
        for layer in reversed(range(LAYERS)):
            activation, _, gradient = layer_sizes(layer)
            start = ts[0]
            gradient_address = small_base + 0x1000_0000 + layer * 0x200000
            memory(gradient_address, gradient)
            memory(gradient_address, -gradient)
            memory(activation_address[layer], -activation)
            ops.append(("aten::linear_backward", start, ts[0] + 0.1))
        ts[0] += 1.0
        op("ProfilerStep#%d" % step, step_start - 0.05, ts[0])
        for name, start, end in ops:
            op(name, start, end)
        step += 1
    out.write("\n]}\n")
    out.close()
    return written[0], step, allocator.peak_allocated, allocator.peak_reserved


def measure(command, rss_file):
    started = time.monotonic()
    result = subprocess.run(["/usr/bin/time", "-f", "%M", "-o", rss_file] + command, capture_output=True, text=True)
    seconds = time.monotonic() - started
    if result.returncode != 0:
        sys.exit(f"{' '.join(command)} failed ({result.returncode}): {result.stderr[-2000:]}")
    with open(rss_file) as f:
        rss_kb = int(f.read().split()[-1])
    return seconds, rss_kb, result.stdout


PYTHON_LOAD = """
import json, sys, time
started = time.monotonic()
with open(sys.argv[1]) as f:
    trace = json.load(f)
seconds = time.monotonic() - started
print(sum(1 for e in trace["traceEvents"] if e.get("name") == "[memory]"), seconds)
"""


def mem_available_bytes():
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    return 0


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("ember")
    parser.add_argument("work")
    parser.add_argument("--events", type=int, default=10_000_000)
    parser.add_argument("--python", choices=("auto", "yes", "no"), default="auto")
    parser.add_argument("--keep", action="store_true", help="keep the trace and its import")
    args = parser.parse_args()
    os.makedirs(args.work, exist_ok=True)
    trace = os.path.join(args.work, f"memory_{args.events}.json")
    started = time.monotonic()
    events, steps, peak_allocated, peak_reserved = write_trace(trace, args.events)
    size = os.path.getsize(trace)
    print(f"wrote {trace}: {size:,} bytes, {events:,} [memory] events, {steps:,} steps "
          f"in {time.monotonic() - started:.1f} s; expected peaks: allocated {peak_allocated:,} B, "
          f"reserved {peak_reserved:,} B")

    db = os.path.join(args.work, f"memory_{args.events}.db")
    for suffix in ("", "-wal", "-shm"):
        if os.path.exists(db + suffix):
            os.remove(db + suffix)
    seconds, rss_kb, _ = measure([args.ember, "import", trace, "-o", db], os.path.join(args.work, "import.rss"))
    print(f"ember import:                      {seconds:7.1f} s, {size / seconds / 1e6:6.0f} MB/s, "
          f"peak RSS {rss_kb / 1024:7.0f} MiB, output {os.path.getsize(db):,} bytes")

    seconds, rss_kb, out = measure([args.ember, "stats", db, "--report", "gpu_memory", "--format", "json"],
                                   os.path.join(args.work, "stats.rss"))
    report = json.loads(out)
    row = report["reports"]["gpu_memory"][0]
    ok = row["peak_allocated_bytes"] == peak_allocated and row["peak_reserved_bytes"] == peak_reserved
    print(f"ember stats --report gpu_memory:   {seconds:7.1f} s, peak RSS {rss_kb / 1024:7.0f} MiB; peak allocated "
          f"{row['peak_allocated_bytes']:,} B, reserved {row['peak_reserved_bytes']:,} B "
          f"({'equal to' if ok else 'NOT equal to'} the generator's)")

    need = size + 1600 * events  # the file as one str, then about 1.6 KiB per event (measured at 2 * 10^5)
    run_python = args.python == "yes" or (args.python == "auto" and mem_available_bytes() > need + (2 << 30))
    if run_python:
        seconds, rss_kb, out = measure([sys.executable, "-c", PYTHON_LOAD, trace], os.path.join(args.work, "python.rss"))
        loaded, load_seconds = out.split()
        print(f"python json.load:                  {float(load_seconds):7.1f} s, {size / float(load_seconds) / 1e6:6.0f} "
              f"MB/s, peak RSS {rss_kb / 1024:7.0f} MiB ({int(loaded):,} [memory] events)")
    else:
        print(f"python json.load:                  left out: needs about {need / 2**30:.1f} GiB, "
              f"{mem_available_bytes() / 2**30:.1f} GiB available")
    if not args.keep:
        os.remove(trace)
        for suffix in ("", "-wal", "-shm"):
            if os.path.exists(db + suffix):
                os.remove(db + suffix)
    if not ok:
        sys.exit(1)


if __name__ == "__main__":
    main()
