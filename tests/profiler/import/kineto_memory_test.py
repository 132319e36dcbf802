#!/usr/bin/env python3
"""Kineto's GPU "[memory]" events through `ember stats --report gpu_memory`.

The PyTorch profiler (profile_memory=True) writes one "[memory]" instant per allocation
and free: "Addr", "Bytes" (negative: freed), "Total Allocated", "Total Reserved",
"Device Type" (1: CUDA) and "Device Id". ember's replay of the events (memory allocated
before the trace included) must give, per device, the largest "Total Allocated" as the
peak allocated bytes and the largest "Total Reserved" as the peak reserved bytes: the
truth is the file's own totals, read here with Python's json. Each allocation is the
op's open on its thread (pid/tid) then: the blocks live at the peak, grouped by that op,
must equal this script's own replay of the file (the innermost host event open at the
allocation, found by start and end times rather than by ember's nesting depths, past
aten::empty and its kin). Checked on a hand-built
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

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "support"))
from checks import check, copy_real_trace, exit_code  # noqa: E402

EMBER, WORK, REAL = sys.argv[1:4]


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


NOT_RANGES = {"kernel", "Kernel", "gpu_memcpy", "Memcpy", "gpu_memset", "Memset", "cuda_runtime", "Runtime",
              "cuda_driver", "Driver", "cuda_sync", "gpu_user_annotation", "Trace", "overhead", "Overhead"}
HELPERS = {"aten::empty", "aten::empty_strided", "aten::empty_like", "aten::new_empty", "aten::new_empty_strided",
           "aten::resize_"}


def range_name(name):
    """The name ember gives a host event (ProfilerStep#N: "step"; the loader's wait)."""
    if name.startswith("ProfilerStep#") and name[len("ProfilerStep#"):].isdigit():
        return "step"
    if name.startswith("enumerate(DataLoader)") and "__next__" in name:
        return "dataloader/wait"
    return name


def ops_at_peak(trace):
    """Per CUDA device: {op: (blocks, bytes)} of the blocks the trace allocated and still
    held at the first event with the largest Total Allocated."""
    ranges = {}
    for event in trace.get("traceEvents", []):
        if event.get("ph") != "X" or event.get("cat") in NOT_RANGES or not isinstance(event.get("pid"), int):
            continue
        if "ts" not in event:
            continue
        start = float(event["ts"])
        ranges.setdefault((event["pid"], event.get("tid")), []).append(
            (start, start + float(event.get("dur", 0)), range_name(event.get("name", ""))))

    def op_of(key, time):
        best = best_helper = None
        for start, end, name in ranges.get(key, []):
            if not (start <= time < end):
                continue
            # The innermost: started last; of two starting together, the shorter.
            if name in HELPERS:
                if best_helper is None or (start, -end) > best_helper[:2]:
                    best_helper = (start, -end, name)
            elif best is None or (start, -end) > best[:2]:
                best = (start, -end, name)
        chosen = best or best_helper
        return chosen[2] if chosen else "(no op open on its thread)"

    per_device = {}
    for event in trace.get("traceEvents", []):
        args = event.get("args", {})
        if event.get("name") != "[memory]" or args.get("Device Type") != 1 or "Addr" not in args:
            continue
        if "Total Allocated" not in args:
            continue
        state = per_device.setdefault(args["Device Id"], {"live": {}, "peak": -1, "at_peak": {}})
        if args["Bytes"] >= 0:
            state["live"][args["Addr"]] = (args["Bytes"], (event["pid"], event.get("tid")), float(event["ts"]))
        else:
            state["live"].pop(args["Addr"], None)
        if args["Total Allocated"] > state["peak"]:
            state["peak"] = args["Total Allocated"]
            state["at_peak"] = dict(state["live"])
    result = {}
    for device, state in per_device.items():
        by_op = {}
        for size, key, time in state["at_peak"].values():
            op = op_of(key, time)
            blocks, total = by_op.get(op, (0, 0))
            by_op[op] = (blocks + 1, total + size)
        result[device] = by_op
    return result


def check_trace(path, label):
    trace = load(path)
    expected = totals(trace)
    out = subprocess.run([EMBER, "stats", path, "--report", "gpu_memory", "--format", "json", "--top", "1000000"],
                         check=True, capture_output=True, timeout=240).stdout
    reports = json.loads(out)["reports"]
    rows = reports["gpu_memory"]
    want_ops = ops_at_peak(trace)
    for device, by_op in want_ops.items():
        got_ops = {row["place"]: (row["blocks"], row["bytes"]) for row in reports["gpu_memory_at_peak_by_op"]
                   if row["device"] == device and row["place"] != "(allocated before the trace began)"}
        check(got_ops == by_op, "%s: device %d live at the peak by op\n  ember:  %s\n  replay: %s"
              % (label, device, sorted(got_ops.items()), sorted(by_op.items())))
        top = sorted(by_op.items(), key=lambda item: -item[1][1])[:3]
        print("%s: device %d: %d ops hold blocks live at the peak, the largest %s (= the replay)"
              % (label, device, len(by_op), ", ".join("%s %d B" % (op, v[1]) for op, v in top)))
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
    block of 2 MiB allocated and freed, one of 1 MiB by a second thread, one of 5 MiB
    allocated and kept, a segment of
    20 MiB released; GPU 1: one block; host memory events that are not GPU memory."""
    MiB = 1 << 20
    events = [{"ph": "X", "cat": "cpu_op", "name": "aten::empty", "pid": 1, "tid": 1, "ts": 100, "dur": 100},
              {"ph": "X", "cat": "cpu_op", "name": "aten::linear", "pid": 1, "tid": 1, "ts": 125, "dur": 10},
              {"ph": "X", "cat": "cpu_op", "name": "aten::empty", "pid": 1, "tid": 1, "ts": 128, "dur": 4},
              {"ph": "X", "cat": "user_annotation", "name": "loader", "pid": 1, "tid": 2, "ts": 100, "dur": 100}]
    state = {0: [3 * MiB, 40 * MiB], 1: [0, 2 * MiB]}

    def memory(ts, device, address, size, reserved_change=0, device_type=1, tid=1):
        if device_type == 1:
            state[device][0] += size
            state[device][1] += reserved_change
        events.append({"ph": "i", "s": "t", "cat": "cpu_instant_event", "name": "[memory]", "pid": 1, "tid": tid,
                       "ts": ts, "args": {"Addr": address, "Bytes": size, "Total Allocated": state.get(device, [0])[0],
                                          "Total Reserved": state.get(device, [0, 0])[1], "Device Type": device_type,
                                          "Device Id": device}})

    memory(110, 0, 0xB00, 2 * MiB)              # 5 MiB in use (in aten::empty alone)
    memory(115, 0, 0xF00, 1 * MiB, tid=2)       # 6 MiB (by the loader's thread)
    memory(120, 0, 0xA00, -1 * MiB)             # a block from before the trace: 5 MiB
    memory(130, 0, 0xC00, 5 * MiB)              # 10 MiB: the peak (in aten::empty in aten::linear)
    memory(140, 0, 0xB00, -2 * MiB, -20 * MiB)  # 8 MiB, a segment released
    memory(150, 1, 0xD00, 1 * MiB)
    memory(160, -1, 0xE00, 64, 0, device_type=0)  # host memory
    return {"schemaVersion": 1, "traceEvents": events}, {0: (10 * MiB, 40 * MiB), 1: (1 * MiB, 2 * MiB)}


def main():
    shutil.rmtree(WORK, ignore_errors=True)
    os.makedirs(WORK)
    trace, want = hand_built()
    path = os.path.join(WORK, "memory.json")
    with open(path, "w") as f:
        json.dump(trace, f)
    got = check_trace(path, "hand-built")
    check({d: v[:2] for d, v in got.items()} == want, "the hand-built trace's own totals are not the intended ones")
    MiB = 1 << 20
    check(ops_at_peak(trace)[0] == {"aten::linear": (1, 5 * MiB), "aten::empty": (1, 2 * MiB), "loader": (1, 1 * MiB)},
          "the hand-built trace's replay by op is not the intended one: %s" % ops_at_peak(trace)[0])
    real = ["kineto/h100_bert_small.json.gz",
            "kineto-wild/CodingPlatelets_SwitchTransformers_trace_128token_100Kpar_4exp_4batch_128seq.json.gz",
            "kineto-wild/marcalph_kernelforge_192-222-51-72_4336.1774353536539013415.pt.trace.json"]
    if os.path.isdir(REAL):
        for relative in real:
            copy = copy_real_trace(REAL, relative, WORK)
            if copy is None:
                continue
            check(check_trace(copy, relative), "%s: no GPU [memory] events with addresses" % relative)
    else:
        print("real traces skipped: %s is absent" % REAL)
    return exit_code(WORK)


if __name__ == "__main__":
    sys.exit(main())
