#!/usr/bin/env python3
"""The Perfetto and pprof exports read back by the reference decoders, with the same
counts as `ember stats` on the same file.

  perfetto  `protoc --decode` against the schema (profiler/export/proto/
            perfetto_trace.proto): slices per category (kernel, memcpy, memset,
            cuda_api, nvtx) equal the instances of `ember stats --report
            kernels,memory,api,nvtx`.
  pprof     `go tool pprof -top`: the total equals the samples of `ember stats --report
            cpu`, and each function's flat and cum its self and total samples.

Inputs: the fixture trace (with CPU samples) and, when ../shared/real-traces is
present, real files of every kind: Kineto JSON, Nsight Systems and nvprof databases
(copied first: reading a trace caches its import beside it).

usage: reference_decoders_test.py EMBER WRITE_FIXTURE SOURCE_DIR WORK_DIR [REAL_TRACES]
Exit 77 (skipped) when neither protoc nor go is installed.
"""
import json
import os
import re
import shutil
import subprocess
import sys

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "support"))
from checks import check, copy_real_trace, exit_code  # noqa: E402

EMBER, WRITE_FIXTURE, SOURCE, WORK = sys.argv[1:5]
REAL = sys.argv[5] if len(sys.argv) > 5 else ""
PROTO = "profiler/export/proto/perfetto_trace.proto"


def run(arguments, **kwargs):
    return subprocess.run(arguments, check=True, capture_output=True, timeout=300, **kwargs)


def stats(trace, reports):
    out = run([EMBER, "stats", trace, "--report", reports, "--format", "json"]).stdout
    return json.loads(out)["reports"]


def perfetto_slices(trace):
    """Slice begins per category, decoded by protoc from `ember export --format perfetto`."""
    exported = trace + ".perfetto-trace"
    run([EMBER, "export", trace, "--format", "perfetto", "-o", exported])
    with open(exported, "rb") as data:
        text = run(["protoc", "--decode=ember.perfetto.Trace", "-I", SOURCE, os.path.join(SOURCE, PROTO)],
                   stdin=data).stdout.decode()
    categories = {}
    counts = {}
    # Top-level packets start at column 0; an interned category is defined once, in the
    # first packet that uses it.
    for packet in re.split(r"^packet \{$", text, flags=re.M)[1:]:
        for iid, name in re.findall(r"event_categories \{\s*iid: (\d+)\s*name: \"([^\"]*)\"", packet):
            categories[int(iid)] = name
        if "type: TYPE_SLICE_BEGIN" not in packet:
            continue
        event = packet.split("interned_data {")[0]
        for iid in re.findall(r"^    category_iids: (\d+)$", event, flags=re.M):
            name = categories.get(int(iid), "?")
            counts[name] = counts.get(name, 0) + 1
    return counts


def check_perfetto(trace, label):
    counts = perfetto_slices(trace)
    reports = stats(trace, "kernels,memory,api,nvtx")
    expected = {
        "kernel": sum(row["instances"] for row in reports.get("kernels", [])),
        "cuda_api": sum(row["instances"] for row in reports.get("api", [])),
        "nvtx": sum(row["instances"] for row in reports.get("nvtx", [])),
        "memcpy": sum(row["count"] for row in reports.get("memory", []) if row["operation"] != "memset"),
        "memset": sum(row["count"] for row in reports.get("memory", []) if row["operation"] == "memset"),
    }
    for category, count in expected.items():
        check(counts.get(category, 0) == count,
              "%s: perfetto %s slices %d, ember stats %d" % (label, category, counts.get(category, 0), count))
    print("perfetto %s: %s" % (label, ", ".join("%s %d" % item for item in sorted(counts.items()))))


PYTHON_FRAME = re.compile(r"^(.*) \((.+):(\d+)\)$")


def check_pprof(trace, label):
    exported = trace + ".pb.gz"
    run([EMBER, "export", trace, "--format", "pprof", "-o", exported])
    env = dict(os.environ, HOME=WORK, PPROF_TMPDIR=WORK)
    top = run(["go", "tool", "pprof", "-top", "-symbolize=none", "-sample_index=samples", "-nodecount=1000000",
               "-nodefraction=0", "-edgefraction=0", exported], env=env).stdout.decode()
    total = re.search(r"of (\d+) total", top)
    check(total is not None, "%s: no total in pprof -top:\n%s" % (label, top))
    if total is None:
        return
    total = int(total.group(1))
    reports = stats(trace, "cpu")
    samples = sum(row["samples"] for row in reports.get("cpu_threads", []))
    check(total == samples, "%s: pprof total %d, ember stats cpu %d samples" % (label, total, samples))
    flat, cum = {}, {}
    for line in top.splitlines():
        match = re.match(r"^\s*(\d+)\s+[\d.]+%\s+[\d.]+%\s+(\d+)\s+[\d.]+%\s+(.*)$", line)
        if match:
            flat[match.group(3)] = int(match.group(1))
            cum[match.group(3)] = int(match.group(2))
    python_flat = {}
    for row in reports.get("cpu_functions", []):
        name = row["function"]
        python = PYTHON_FRAME.match(name)
        if python:  # pprof's functions hold every line of a Python function
            python_flat[python.group(1)] = python_flat.get(python.group(1), 0) + row["self_samples"]
            continue
        check(flat.get(name, 0) == row["self_samples"],
              "%s: %s flat %d, ember self %d" % (label, name, flat.get(name, 0), row["self_samples"]))
        total_samples = round(row["total_percent"] * samples / 100)
        check(cum.get(name, 0) == total_samples,
              "%s: %s cum %d, ember total %d" % (label, name, cum.get(name, 0), total_samples))
    for name, self_samples in python_flat.items():
        check(flat.get(name, 0) == self_samples, "%s: Python %s flat %d, ember %d" % (label, name, flat.get(name, 0), self_samples))
    print("pprof %s: %d samples, %d functions" % (label, total, len(flat)))


def main():
    has_protoc = shutil.which("protoc") is not None
    has_go = shutil.which("go") is not None
    if not has_protoc and not has_go:
        print("skipped: neither protoc (protobuf-compiler) nor go (golang-go) is installed")
        return 77
    if not has_protoc:
        print("perfetto checks skipped: protoc (protobuf-compiler) is not installed")
    if not has_go:
        print("pprof checks skipped: go (golang-go) is not installed")
    os.makedirs(WORK, exist_ok=True)
    fixture = os.path.join(WORK, "fixture.db")
    run([WRITE_FIXTURE, fixture, "--with-cpu-samples"])
    perfetto_inputs = [(fixture, "fixture")]
    pprof_inputs = [(fixture, "fixture")]
    real = {
        "kineto/h100_bert_small.json.gz": (True, False),
        "kineto/v100_resnet50_workers0.json.gz": (True, False),
        "nsys/saxpy_rank0.sqlite": (True, False),
        "nvprof/ZhangXin8069_qcu_mpi_dslash.nvvp": (True, False),
        "nsys-versions/caoye310_Lower-Triangular-Solves_report1.sqlite": (True, True),
    }
    if REAL and os.path.isdir(REAL):
        for relative, (perfetto, pprof) in real.items():
            copy = copy_real_trace(REAL, relative, WORK)
            if copy is None:
                continue
            if perfetto:
                perfetto_inputs.append((copy, relative))
            if pprof:
                pprof_inputs.append((copy, relative))
    else:
        print("real traces skipped: %s is absent" % (REAL or "../shared/real-traces"))
    if has_protoc:
        for trace, label in perfetto_inputs:
            check_perfetto(trace, label)
    if has_go:
        for trace, label in pprof_inputs:
            check_pprof(trace, label)
    shutil.rmtree(WORK, ignore_errors=True)
    return exit_code()


if __name__ == "__main__":
    sys.exit(main())
