#!/usr/bin/env python3
"""Kineto's GPU "[memory]" events through `ember stats --report gpu_memory`.

The PyTorch profiler (profile_memory=True) writes one "[memory]" instant per allocation
and free: "Addr", "Bytes" (negative: freed), "Total Allocated", "Total Reserved",
"Device Type" (1: CUDA) and "Device Id". ember's replay of the events (memory allocated
before the trace included) must give, per device, the largest "Total Allocated" as the
peak allocated bytes and the largest "Total Reserved" as the peak reserved bytes: the
truth is the file's own totals, read here with Python's json. Checked on a hand-built
trace (blocks freed that the trace never allocated, a segment released, two GPUs and
host memory) and on the real traces of ../shared/real-traces that have such events
(copied first; skipped, saying why, when that folder is absent).

usage: kineto_memory_test.py EMBER WORK_DIR REAL_TRACES_DIR
"""
import gzip
import json
import os
import shutil
import subprocess
import sys

EMBER, WORK, REAL = sys.argv[1:4]
failures = []


def check(condition, message):
    if not condition:
        failures.append(message)
        print("FAIL: " + message)


def load(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as f:
        return json.load(f)


def totals(trace):
    """Per CUDA device: (largest Total Allocated, largest Total Reserved, events)."""
    per_device = {}
    for event in trace.get("traceEvents", []):
        args = event.get("args", {})
        if event.get("name") != "[memory]" or args.get("Device Type") != 1:
            continue
        if "Addr" not in args or "Total Allocated" not in args:
            continue
        allocated, reserved, count = per_device.get(args["Device Id"], (0, 0, 0))
        per_device[args["Device Id"]] = (max(allocated, args["Total Allocated"]),
                                         max(reserved, args.get("Total Reserved", 0)), count + 1)
    return per_device


def check_trace(path, label):
    expected = totals(load(path))
    out = subprocess.run([EMBER, "stats", path, "--report", "gpu_memory", "--format", "json"], check=True,
                         capture_output=True, timeout=240).stdout
    rows = json.loads(out)["reports"]["gpu_memory"]
    got = {row["device"]: (row["peak_allocated_bytes"], row["peak_reserved_bytes"]) for row in rows}
    for device, (allocated, reserved, count) in expected.items():
        check(device in got, "%s: device %d (%d [memory] events) not in the report" % (label, device, count))
        if device not in got:
            continue
        check(got[device][0] == allocated,
              "%s: device %d peak allocated %d, largest Total Allocated %d" % (label, device, got[device][0], allocated))
        check(got[device][1] == reserved,
              "%s: device %d peak reserved %d, largest Total Reserved %d" % (label, device, got[device][1], reserved))
        print("%s: device %d: %d [memory] events, peak allocated %d, peak reserved %d (= the file's totals)"
              % (label, device, count, allocated, reserved))
    check(set(got) == set(expected), "%s: devices %s in the report, %s in the file" % (label, sorted(got), sorted(expected)))
    return expected


def hand_built():
    """GPU 0: 3 MiB live before the trace (1 MiB of it freed in the trace at 0xA00), a
    block of 2 MiB allocated and freed, one of 5 MiB allocated and kept, a segment of
    20 MiB released; GPU 1: one block; host memory events that are not GPU memory."""
    MiB = 1 << 20
    events = [{"ph": "X", "cat": "cpu_op", "name": "aten::empty", "pid": 1, "tid": 1, "ts": 100, "dur": 100}]
    state = {0: [3 * MiB, 40 * MiB], 1: [0, 2 * MiB]}

    def memory(ts, device, address, size, reserved_change=0, device_type=1):
        if device_type == 1:
            state[device][0] += size
            state[device][1] += reserved_change
        events.append({"ph": "i", "s": "t", "cat": "cpu_instant_event", "name": "[memory]", "pid": 1, "tid": 1,
                       "ts": ts, "args": {"Addr": address, "Bytes": size, "Total Allocated": state.get(device, [0])[0],
                                          "Total Reserved": state.get(device, [0, 0])[1], "Device Type": device_type,
                                          "Device Id": device}})

    memory(110, 0, 0xB00, 2 * MiB)              # 5 MiB in use
    memory(120, 0, 0xA00, -1 * MiB)             # a block from before the trace: 4 MiB
    memory(130, 0, 0xC00, 5 * MiB)              # 9 MiB: the peak
    memory(140, 0, 0xB00, -2 * MiB, -20 * MiB)  # 7 MiB, a segment released
    memory(150, 1, 0xD00, 1 * MiB)
    memory(160, -1, 0xE00, 64, 0, device_type=0)  # host memory
    return {"schemaVersion": 1, "traceEvents": events}, {0: (9 * MiB, 40 * MiB), 1: (1 * MiB, 2 * MiB)}


def main():
    shutil.rmtree(WORK, ignore_errors=True)
    os.makedirs(WORK)
    trace, want = hand_built()
    path = os.path.join(WORK, "memory.json")
    with open(path, "w") as f:
        json.dump(trace, f)
    got = check_trace(path, "hand-built")
    check({d: v[:2] for d, v in got.items()} == want, "the hand-built trace's own totals are not the intended ones")
    real = ["kineto/h100_bert_small.json.gz",
            "kineto-wild/CodingPlatelets_SwitchTransformers_trace_128token_100Kpar_4exp_4batch_128seq.json.gz",
            "kineto-wild/marcalph_kernelforge_192-222-51-72_4336.1774353536539013415.pt.trace.json"]
    if os.path.isdir(REAL):
        for relative in real:
            source = os.path.join(REAL, relative)
            if not os.path.exists(source):
                print("%s absent: not checked" % relative)
                continue
            copy = os.path.join(WORK, os.path.basename(relative))
            shutil.copyfile(source, copy)
            check(check_trace(copy, relative), "%s: no GPU [memory] events with addresses" % relative)
    else:
        print("real traces skipped: %s is absent" % REAL)
    if failures:
        print("%d check(s) failed" % len(failures))
        return 1
    shutil.rmtree(WORK, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
