#!/usr/bin/env python3
"""Importing a large PyTorch memory snapshot: `ember import` against Python's pickle.load
of the same file, in the same run (time and peak RSS of each, in its own process).

The large snapshot is a real one scaled up: its segments once, then its device trace
repeated until the file reaches --bytes, each repetition's addresses shifted by 2^40 (so
repetitions do not free each other's blocks). It is written opcode by opcode, as
PyTorch's pickle would be (protocol 4, frame lists and strings shared through the memo,
appends in batches of 1,000), without building the whole value in memory.

usage: memory_snapshot_scale.py EMBER SNAPSHOT WORK_DIR [--bytes N]
"""
import argparse
import os
import pickle
import resource
import struct
import subprocess
import sys
import time


class DataOnly(pickle.Unpickler):
    def find_class(self, module, name):
        raise pickle.UnpicklingError(f"refused: {module}.{name}")


class Writer:
    """Plain values as protocol 4 opcodes; strings and containers marked `shared` memoized."""

    def __init__(self, out):
        self.out = out
        self.memo = {}  # id(object) or ("str", text) -> memo index
        self.keep = []  # objects memoized by id stay alive

    def get(self, index):
        self.out.write(b"h" + bytes([index]) if index < 256 else b"j" + struct.pack("<I", index))

    def memoize(self, key):
        self.memo[key] = len(self.memo)
        self.out.write(b"\x94")

    def value(self, v):
        w = self.out.write
        if v is None:
            w(b"N")
        elif v is True:
            w(b"\x88")
        elif v is False:
            w(b"\x89")
        elif isinstance(v, int):
            if 0 <= v < 256:
                w(b"K" + bytes([v]))
            elif -(1 << 31) <= v < (1 << 31):
                w(b"J" + struct.pack("<i", v))
            else:
                n = (v.bit_length() + 8) // 8
                w(b"\x8a" + bytes([n]) + v.to_bytes(n, "little", signed=True))
        elif isinstance(v, float):
            w(b"G" + struct.pack(">d", v))
        elif isinstance(v, str):
            key = ("str", v)
            if key in self.memo:
                return self.get(self.memo[key])
            data = v.encode()
            w((b"\x8c" + bytes([len(data)])) if len(data) < 256 else (b"X" + struct.pack("<I", len(data))))
            w(data)
            self.memoize(key)
        elif isinstance(v, (list, tuple, dict)):
            if id(v) in self.memo:
                return self.get(self.memo[id(v)])
            self.keep.append(v)
            if isinstance(v, tuple):
                w(b"(")
                for item in v:
                    self.value(item)
                w(b"t")
                self.memoize(id(v))
            elif isinstance(v, list):
                w(b"]")
                self.memoize(id(v))
                for start in range(0, len(v), 1000):
                    w(b"(")
                    for item in v[start:start + 1000]:
                        self.value(item)
                    w(b"e")
            else:
                w(b"}")
                self.memoize(id(v))
                w(b"(")
                for k, item in v.items():
                    self.value(k)
                    self.value(item)
                w(b"u")
        else:
            raise TypeError(type(v))


def write_scaled(source, target, size):
    with open(source, "rb") as f:
        snapshot = DataOnly(f).load()
    trace = snapshot["device_traces"][0]
    with open(target, "wb") as f:
        w = Writer(f)
        f.write(b"\x80\x04}(")
        w.value("segments")
        w.value(snapshot["segments"])
        w.value("device_traces")
        f.write(b"](](")  # the outer list and device 0's list, its first batch open
        in_batch = 0
        events = 0
        repetition = 0
        while f.tell() < size:
            shift = repetition << 40
            for e in trace:
                event = dict(e)
                if event.get("addr"):
                    event["addr"] += shift
                f.write(b"}(")
                for k, item in event.items():
                    w.value(k)
                    w.value(item)
                f.write(b"u")
                events += 1
                in_batch += 1
                if in_batch == 1000:
                    f.write(b"e(")
                    in_batch = 0
            repetition += 1
        f.write(b"e")  # device 0's last batch
        for _ in snapshot["device_traces"][1:]:
            f.write(b"]")
        f.write(b"eu.")  # the outer list's batch, the top dict's items
    return events, repetition


def measure(command):
    started = time.monotonic()
    result = subprocess.run(command, capture_output=True, text=True)
    seconds = time.monotonic() - started
    if result.returncode != 0:
        sys.exit(f"{' '.join(command)} failed: {result.stderr}")
    return seconds, result.stdout


PYTHON_LOAD = """
import pickle, resource, sys, time
class DataOnly(pickle.Unpickler):
    def find_class(self, module, name):
        raise pickle.UnpicklingError(module + "." + name)
started = time.monotonic()
with open(sys.argv[1], "rb") as f:
    snapshot = DataOnly(f).load()
seconds = time.monotonic() - started
print(sum(len(t) for t in snapshot["device_traces"]), seconds, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
"""


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("ember")
    parser.add_argument("snapshot")
    parser.add_argument("work")
    parser.add_argument("--bytes", type=int, default=1 << 30)
    args = parser.parse_args()
    os.makedirs(args.work, exist_ok=True)
    big = os.path.join(args.work, "scaled.pickle")
    started = time.monotonic()
    events, repetitions = write_scaled(args.snapshot, big, args.bytes)
    print(f"wrote {big}: {os.path.getsize(big):,} bytes, {events:,} events ({repetitions} repetitions) "
          f"in {time.monotonic() - started:.1f} s")

    # ember: import (the time and peak RSS of the child process, from /usr/bin/time).
    db = os.path.join(args.work, "scaled.db")
    seconds, _ = measure(["/usr/bin/time", "-f", "%M", "-o", os.path.join(args.work, "ember.rss"), args.ember,
                          "import", big, "-o", db])
    with open(os.path.join(args.work, "ember.rss")) as f:
        ember_rss_kb = int(f.read().split()[-1])
    print(f"ember import:      {seconds:7.1f} s, peak RSS {ember_rss_kb / 1024:8.0f} MiB, output {os.path.getsize(db):,} bytes")

    # Python: pickle.load of the same file (restricted Unpickler, plain dicts), in its own process.
    _, out = measure([sys.executable, "-c", PYTHON_LOAD, big])
    loaded, python_seconds, python_rss_kb = out.split()
    print(f"python pickle.load: {float(python_seconds):7.1f} s, peak RSS {int(python_rss_kb) / 1024:8.0f} MiB "
          f"({int(loaded):,} events)")
    os.remove(big)
    for suffix in ("", "-wal", "-shm"):
        if os.path.exists(db + suffix):
            os.remove(db + suffix)


if __name__ == "__main__":
    main()
