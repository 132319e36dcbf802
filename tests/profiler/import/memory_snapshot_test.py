#!/usr/bin/env python3
"""PyTorch memory snapshots through `ember import` and `ember stats --report gpu_memory`.

The peak allocated bytes of every device must equal an independent replay written
here (alloc adds, free_completed subtracts, blocks live before the trace began
included, as PyTorch's memory_viz counts them), read with a restricted Unpickler whose
find_class raises, so nothing in a snapshot runs here either. Checked on hand-built
snapshots of every format era (written with Python's pickle, protocols 0 to 5), on an
OOM, on malicious pickles (their code must not run: ember refuses them with exit 2
naming the opcode) and on the real snapshots of ../shared/real-traces (copied to a
temporary folder first; skipped, saying why, when that folder is absent).

usage: memory_snapshot_test.py EMBER WORK_DIR REAL_TRACES_DIR
"""
import io
import json
import os
import pickle
import shutil
import subprocess
import sys

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "support"))
from checks import check, failed  # noqa: E402


class DataOnly(pickle.Unpickler):
    def find_class(self, module, name):
        raise pickle.UnpicklingError(f"refused: {module}.{name}")


def load(path):
    with open(path, "rb") as f:
        return DataOnly(f).load()


def replay(snapshot):
    """Per device: (peak allocated, peak reserved), the memory_viz way."""
    if isinstance(snapshot, list):
        segments, traces = snapshot, []
    else:
        segments, traces = snapshot["segments"], snapshot.get("device_traces", [])
    devices = {s.get("device", 0) for s in segments} | {d for d, t in enumerate(traces) if t}
    result = {}
    for device in devices:
        trace = traces[device] if device < len(traces) else []
        live = {}
        initially = []
        for e in trace:
            if e["action"] == "alloc":
                live[e["addr"]] = e["size"]
            elif e["action"] == "free_completed":
                if e["addr"] in live:
                    del live[e["addr"]]
                else:
                    initially.append(e["size"])
        mapped = {}
        initial_reserved = 0
        for e in trace:
            if e["action"] in ("segment_alloc", "segment_map"):
                mapped[e["addr"]] = mapped.get(e["addr"], 0) + e["size"]
            elif e["action"] in ("segment_free", "segment_unmap"):
                got = min(mapped.get(e["addr"], 0), e["size"])
                if got:
                    mapped[e["addr"]] -= got
                    if mapped[e["addr"]] <= 0:
                        del mapped[e["addr"]]
                initial_reserved += e["size"] - got
        for s in segments:
            if s.get("device", 0) != device:
                continue
            in_trace = sum(v for a, v in mapped.items() if s["address"] <= a < s["address"] + s["total_size"])
            initial_reserved += max(0, s["total_size"] - in_trace)
            address = s["address"]
            for b in s["blocks"]:
                a = b.get("address", address)
                address = a + b["size"]
                if b["state"] == "active_allocated" and a not in live:
                    initially.append(b.get("requested_size", b["size"]))
        allocated = peak = sum(initially)
        reserved = peak_reserved = initial_reserved
        live = {}
        for e in trace:
            action = e["action"]
            if action == "alloc":
                live[e["addr"]] = e["size"]
                allocated += e["size"]
            elif action == "free_completed":
                allocated -= live.pop(e["addr"], e["size"])
            elif action in ("segment_alloc", "segment_map"):
                reserved += e["size"]
            elif action in ("segment_free", "segment_unmap"):
                reserved -= e["size"]
            peak = max(peak, allocated)
            peak_reserved = max(peak_reserved, reserved)
        result[device] = (peak, peak_reserved)
    return result


def run(args, **kw):
    return subprocess.run(args, capture_output=True, text=True, **kw)


def ember_peaks(ember, path):
    out = run([ember, "stats", path, "--report", "gpu_memory", "--format", "json"])
    if out.returncode != 0:
        raise AssertionError(f"ember stats {path} failed ({out.returncode}): {out.stderr}")
    document = json.loads(out.stdout)
    reports = document["reports"]
    rows = reports["gpu_memory"]
    return {r["device"]: (r["peak_allocated_bytes"], r["peak_reserved_bytes"]) for r in rows}, reports


def compare(ember, path, label):
    expected = replay(load(path))
    got, reports = ember_peaks(ember, path)
    for device, (peak, peak_reserved) in sorted(expected.items()):
        got_peak, got_reserved = got.get(device, (None, None))
        print(f"{label}: device {device}: peak allocated {got_peak} (replay {peak}), "
              f"peak reserved {got_reserved} (replay {peak_reserved})")
        check(got_peak == peak, f"{label}: device {device}: peak allocated {got_peak} != replay {peak}")
        check(got_reserved == peak_reserved, f"{label}: device {device}: peak reserved {got_reserved} != replay {peak_reserved}")
    check(set(got) == set(expected), f"{label}: devices {sorted(got)} != {sorted(expected)}")
    return reports


# --- hand-built snapshots, one per era ---------------------------------------------------

MB = 1 << 20


def frames_py(line):
    return [{"name": "malloc", "filename": "CUDACachingAllocator.cpp", "line": 0},
            {"name": "forward", "filename": "/work/model.py", "line": line},
            {"name": "main", "filename": "/work/train.py", "line": 7}]


def era_1_13():
    return [{"device": 0, "address": 0x7f0000000000, "total_size": 20 * MB, "stream": 0, "segment_type": "large",
             "allocated_size": 6 * MB, "active_size": 6 * MB,
             "blocks": [{"size": 2 * MB, "state": "active_allocated", "history": []},
                        {"size": 4 * MB, "state": "active_allocated", "history": []},
                        {"size": 14 * MB, "state": "inactive", "history": []}]}]


def era_2_0():
    base = 0x7f1000000000
    return {"segments": [{"device": 0, "address": base, "total_size": 8 * MB, "stream": 0, "segment_type": "large",
                          "allocated_size": 6 * MB, "active_size": 6 * MB, "requested_size": 6 * MB,
                          "blocks": [{"size": 2 * MB, "requested_size": 2 * MB, "state": "active_allocated",
                                      "history": [{"addr": base, "real_size": 2 * MB, "frames": frames_py(11)}]},
                                     {"size": 2 * MB, "requested_size": 2 * MB, "state": "inactive", "history": []},
                                     {"size": 4 * MB, "requested_size": 4 * MB - 512, "state": "active_allocated",
                                      "history": [{"addr": base + 4 * MB, "real_size": 4 * MB, "frames": frames_py(12)}]}]}],
            "device_traces": [[{"action": "snapshot", "addr": 0, "size": 6 * MB - 512, "stream": 0}]]}


def era_2_1(times=False, extras=False, oom=False):
    a = 0x7f2000000000
    shared = frames_py(21)  # one list object: the pickle shares it through its memo
    other = frames_py(22)
    t = [1_700_000_000_000_000]

    def ev(action, addr, size, frames=shared, **more):
        e = {"action": action, "addr": addr, "size": size, "stream": 0, "frames": frames}
        if times:
            t[0] += 5
            e["time_us"] = t[0]
        if extras:
            e["compile_context"] = "N/A"
        e.update(more)
        return e

    trace0 = [ev("free_completed", a + 8 * MB, 1 * MB),  # allocated before the trace began
              ev("segment_alloc", a + 20 * MB, 4 * MB),
              ev("alloc", a + 20 * MB, 3 * MB),
              ev("alloc", a, 2 * MB, other),
              ev("free_requested", a, 2 * MB, other),
              ev("free_completed", a, 2 * MB, other),
              ev("alloc", a + 2 * MB, 1 * MB)]
    if oom:
        trace0.append(ev("oom", 0, 64 * MB, device_free=5 * MB))
    trace1 = [ev("segment_map", a + 0x100000000, 2 * MB),
              ev("alloc", a + 0x100000000, 1 * MB),
              ev("segment_map", a + 0x100000000 + 2 * MB, 2 * MB),
              ev("alloc", a + 0x100000000 + 2 * MB, 2 * MB),
              ev("free_completed", a + 0x100000000, 1 * MB),
              ev("segment_unmap", a + 0x100000000, 2 * MB)]
    segments = [
        {"device": 0, "address": a, "total_size": 20 * MB, "stream": 0, "segment_type": "large",
         "segment_pool_id": (0, 0), "is_expandable": False, "frames": [],
         "blocks": [{"address": a, "size": 2 * MB, "requested_size": 2 * MB, "state": "inactive", "frames": []},
                    {"address": a + 2 * MB, "size": 1 * MB, "requested_size": 1 * MB, "state": "active_allocated",
                     "frames": shared},
                    {"address": a + 3 * MB, "size": 5 * MB, "requested_size": 5 * MB, "state": "active_allocated",
                     "frames": other},  # live before the trace, never freed
                    {"address": a + 8 * MB, "size": 12 * MB, "requested_size": 0, "state": "inactive", "frames": []}]},
        {"device": 0, "address": a + 20 * MB, "total_size": 4 * MB, "stream": 0, "segment_type": "large",
         "segment_pool_id": (0, 0), "is_expandable": False, "frames": shared,
         "blocks": [{"address": a + 20 * MB, "size": 4 * MB, "requested_size": 3 * MB, "state": "active_allocated",
                     "frames": shared}]},
        {"device": 1, "address": a + 0x100000000 + 2 * MB, "total_size": 2 * MB, "stream": 7, "segment_type": "small",
         "segment_pool_id": (0, 1), "is_expandable": True, "frames": [],
         "blocks": [{"address": a + 0x100000000 + 2 * MB, "size": 2 * MB, "requested_size": 2 * MB,
                     "state": "active_allocated", "frames": shared}]},
    ]
    snapshot = {"segments": segments, "device_traces": [trace0, trace1]}
    if extras:
        snapshot["allocator_settings"] = {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True",
                                          "expandable_segments": True, "max_split_size": -1}
        snapshot["external_annotations"] = [
            {"device": 0, "name": "forward", "stage": "START", "time_us": 1_700_000_000_000_001},
            {"device": 0, "name": "forward", "stage": "END", "time_us": 1_700_000_000_000_100},
            {"device": 0, "name": "lonely", "stage": "START", "time_us": 1_700_000_000_000_050}]
        snapshot["user_metadata"] = {"run": "unit"}
    return snapshot


def write(folder, name, value, protocol):
    path = os.path.join(folder, name)
    with open(path, "wb") as f:
        pickle.dump(value, f, protocol=protocol)
    return path


class Evil:
    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def main():
    if len(sys.argv) != 4:
        print(__doc__)
        return 2
    ember, work, real = sys.argv[1:]
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)

    # Eras, each under several protocols.
    eras = [("era_1_13", era_1_13(), [0, 2, 4]),
            ("era_2_0", era_2_0(), [0, 1, 2, 4]),
            ("era_2_1", era_2_1(), [2, 4, 5]),
            ("era_2_2", era_2_1(times=True), [3, 4]),
            ("era_2_5_plus", era_2_1(times=True, extras=True), [0, 1, 2, 3, 4, 5]),
            ("oom", era_2_1(times=True, oom=True), [4])]
    for name, value, protocols in eras:
        for protocol in protocols:
            path = write(work, f"{name}.p{protocol}.pickle", value, protocol)
            reports = compare(ember, path, f"{name} protocol {protocol}")
            if name == "era_2_0":
                peak = reports["gpu_memory"][0]["peak_allocated_bytes"]
                check(peak == 6 * MB - 512, f"era 2.0: peak {peak} is not the snapshot event's size")
            if name == "oom":
                rows = reports["gpu_memory_oom"]
                check(bool(rows) and rows[0]["request_bytes"] == 64 * MB and rows[0]["device_free_bytes"] == 5 * MB,
                      f"oom: {rows}")
            if name == "era_2_1" and protocol == 4:
                lines = {r["place"] for r in reports["gpu_memory_at_peak_by_line"]}
                check("forward (/work/model.py:21)" in lines, f"era 2.1: allocating lines {lines}")
            if name == "era_2_5_plus" and protocol == 4:
                out = run([ember, "stats", path, "--report", "nvtx", "--format", "json"])
                check(out.returncode == 0 and "forward" in out.stdout, f"era 2.5: annotation range missing: {out.stdout[:400]}")

    # Strict: an event that breaks the format is skipped by default, refused with --strict.
    broken = era_2_1(times=True)
    broken["device_traces"][0].append({"action": "teleport", "addr": 1, "size": 1, "stream": 0})
    path = write(work, "broken.pickle", broken, 4)
    out = run([ember, "import", path, "-o", os.path.join(work, "broken.db")])
    check(out.returncode == 0 and "unknown action" in (out.stdout + out.stderr), f"lenient import: {out.returncode} {out.stdout} {out.stderr}")
    out = run([ember, "import", "--strict", path, "-o", os.path.join(work, "broken-strict.db")])
    check(out.returncode == 2 and "teleport" in out.stderr, f"strict import: {out.returncode} {out.stderr}")

    # Malicious pickles: refused, exit 2, opcode and offset named, nothing run.
    for protocol in range(0, 6):
        marker = os.path.join(work, f"pwned{protocol}")
        path = write(work, f"evil.p{protocol}.pickle", {"segments": [], "device_traces": [[Evil(marker)]]}, protocol)
        out = run([ember, "import", path, "-o", os.path.join(work, f"evil{protocol}.db")])
        check(out.returncode == 2, f"evil protocol {protocol}: exit {out.returncode}")
        check(("GLOBAL" in out.stderr or "REDUCE" in out.stderr) and "byte" in out.stderr and path in out.stderr,
              f"evil protocol {protocol}: message {out.stderr!r}")
        check(not os.path.exists(marker), f"evil protocol {protocol}: os.system ran")
    raw_reduce = os.path.join(work, "reduce.pickle")
    with open(raw_reduce, "wb") as f:
        f.write(b"\x80\x02N)R.")
    out = run([ember, "import", raw_reduce, "-o", os.path.join(work, "reduce.db")])
    check(out.returncode == 2 and "REDUCE" in out.stderr and "byte 4" in out.stderr, f"REDUCE: {out.stderr!r}")

    # The real snapshots, copied away from the shared folder (a read writes a cache beside it).
    folder = os.path.join(real, "memory-snapshots")
    if not os.path.isdir(folder):
        print(f"skipping the real snapshots: {folder} is absent")
    else:
        copies = os.path.join(work, "real")
        os.makedirs(copies)
        for name in sorted(os.listdir(folder)):
            if name.endswith(".pickle"):
                path = shutil.copy(os.path.join(folder, name), copies)
                compare(ember, path, name)

    # Two snapshots into one job file (ember merge's way): every device of each, its peaks kept.
    first = write(work, "job_a.pickle", era_2_1(times=True), 4)
    second = write(work, "job_b.pickle", era_2_0(), 4)
    job = os.path.join(work, "job.db")
    out = run([ember, "import", first, second, "-o", job])
    check(out.returncode == 0, f"job import: {out.stderr}")
    if out.returncode == 0:
        got, _ = ember_peaks(ember, job)
        expected = sorted(list(replay(load(first)).values()) + list(replay(load(second)).values()))
        check(sorted(got.values()) == expected, f"job file: peaks {sorted(got.values())} != {expected}")

    if failed():
        return 1
    print("all memory snapshot checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
