#!/usr/bin/env python3
"""kineto_scale.py: a larger Kineto (PyTorch profiler) trace from a real one.

The trace's events are repeated, copy after copy, each copy shifted past the end of the
one before: times by the trace's span (rounded up to a whole millisecond, plus one), and
every id that links events by the largest such id in the trace plus one, so that copies
never share one: correlation ids (GPU work, runtime calls and the "ac2g" flows, whose
"id" is the correlation id), external ids, flow and async ids, Python ids and parent
ids, record function ids, event indexes and autograd sequence numbers. All of them move
by the same shift, so an id that two kinds share (a flow's "id" and a kernel's
"correlation", a CPU op's "External id" and a 2021 runtime call's "external id") stays
shared. The step number of ProfilerStep#N moves past the largest step. Metadata events
("ph": "M") and every top-level key but traceEvents are written once, as they were.
Numbers keep the text they had in the source (Kineto writes times to the nanosecond:
"ts": 1695767011349417.742), so an importer reads the same nanoseconds, shifted, in
every copy.

  python3 bench/kineto_scale.py SOURCE.json[.gz] OUT.json --size-mb 2500
  python3 bench/kineto_scale.py SOURCE.json[.gz] OUT.json --copies 100

Standard library only. One copy is rendered from per-event templates (the event's JSON
split around the values that change), so a copy costs a join, not a json.dumps.
"""
import argparse
import decimal
import gzip
import json
import math
import re
import sys

# Keys in "args" whose values link events and are shifted per copy.
LINKING_ARGS = ("correlation", "External id", "external id", "Python id", "Python parent id",
                "Record function id", "Ev Idx", "Sequence number")
STEP_NAME = re.compile(r"^ProfilerStep#(\d+)$")


class Marker:
    """A value in an event that changes per copy: (kind, original)."""

    def __init__(self, kind, value):
        self.kind = kind
        self.value = value


def open_text(path, mode):
    return gzip.open(path, mode + "t", encoding="utf-8") if path.endswith(".gz") else open(path, mode, encoding="utf-8")


def number_text(value):
    """The source's text of a number read with parse_float=Decimal."""
    return str(value) if isinstance(value, decimal.Decimal) else json.dumps(value)


def dumps_exact(value):
    """json.dumps, with each number read as a Decimal written as its source text."""
    markers = []
    return "".join(p if isinstance(p, str) else number_text(markers[p].value) for p in template_of(value, markers, False))


def template_of(event, markers, moves=True):
    """The event's JSON as a list: strings, and indexes into `markers` where a value changes."""
    event = dict(event) if moves else event
    if moves and "ts" in event:
        event["ts"] = Marker("ts", event["ts"])
    if moves and "id" in event and isinstance(event["id"], int) and event.get("ph") != "M":
        event["id"] = Marker("id", event["id"])
    name = event.get("name") if moves else None
    if isinstance(name, str) and STEP_NAME.match(name):
        event["name"] = Marker("step", int(STEP_NAME.match(name).group(1)))
    args = event.get("args") if moves else None
    if isinstance(args, dict):
        args = dict(args)
        for key in LINKING_ARGS:
            if isinstance(args.get(key), int) and not isinstance(args.get(key), bool):
                args[key] = Marker(key, args[key])
        event["args"] = args
    found = []

    def encode(value):
        if isinstance(value, Marker):
            found.append(value)
            return "\ue000%d\ue001" % (len(found) - 1)
        if isinstance(value, decimal.Decimal):
            found.append(Marker("number", value))
            return "\ue000%d\ue001" % (len(found) - 1)
        raise TypeError(type(value))

    text = json.dumps(event, default=encode, ensure_ascii=False, separators=(",", ":"))
    parts = []
    for i, piece in enumerate(re.split("\"\ue000(\\d+)\ue001\"", text)):
        if i % 2 == 0:
            parts.append(piece)
        else:
            parts.append(len(markers))
            markers.append(found[int(piece)])
    return parts


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("source")
    parser.add_argument("output")
    size = parser.add_mutually_exclusive_group(required=True)
    size.add_argument("--size-mb", type=float, help="approximate size of the output (10^6 bytes)")
    size.add_argument("--copies", type=int)
    options = parser.parse_args()

    with open_text(options.source, "r") as source:
        trace = json.load(source, parse_float=decimal.Decimal)
    if not isinstance(trace, dict) or not isinstance(trace.get("traceEvents"), list):
        sys.exit(f"{options.source}: not a Kineto trace (no traceEvents array)")
    events = trace["traceEvents"]
    metadata = [e for e in events if e.get("ph") == "M"]
    body = [e for e in events if e.get("ph") != "M"]

    # The shift of each kind of value per copy.
    first = min((decimal.Decimal(str(e["ts"])) for e in body if "ts" in e), default=decimal.Decimal(0))
    last = max((decimal.Decimal(str(e["ts"])) + decimal.Decimal(str(e.get("dur", 0))) for e in body if "ts" in e),
               default=decimal.Decimal(0))
    shift = {"ts": (math.ceil((last - first) / 1000) + 1) * 1000}
    markers = []
    templates = [template_of(e, markers) for e in body]
    # One shift for every id: the same number may be a flow's "id" and a kernel's
    # "correlation", or a CPU op's "External id" and a runtime call's "external id".
    for marker in markers:
        if marker.kind == "step":
            shift["step"] = max(shift.get("step", 0), marker.value + 1)
        elif marker.kind not in ("ts", "number"):
            shift["id"] = max(shift.get("id", 0), marker.value + 1)
    rendered = [number_text(m.value) if m.kind == "number" else None for m in markers]

    def render_copy(copy):
        values = list(rendered)
        for i, marker in enumerate(markers):
            if marker.kind == "number":
                continue
            moved = marker.value + copy * shift[marker.kind if marker.kind in ("ts", "step") else "id"]
            if marker.kind == "ts":
                values[i] = number_text(moved)
            elif marker.kind == "step":
                values[i] = json.dumps("ProfilerStep#%d" % moved)
            else:
                values[i] = str(moved)
        return ",\n".join("".join(p if isinstance(p, str) else values[p] for p in t) for t in templates)

    one_copy = len(render_copy(0).encode("utf-8"))
    copies = options.copies or max(1, math.ceil(options.size_mb * 1e6 / one_copy))

    with open(options.output, "w", encoding="utf-8") as out:
        out.write("{\n")
        keys = list(trace.keys())
        for index, key in enumerate(keys):
            out.write(json.dumps(key) + ": ")
            if key != "traceEvents":
                out.write(dumps_exact(trace[key]))
            else:
                out.write("[\n")
                for event in metadata:
                    out.write(dumps_exact(event) + ",\n")
                for copy in range(copies):
                    out.write(render_copy(copy))
                    out.write(",\n" if copy + 1 < copies else "\n")
                out.write("]")
            out.write(",\n" if index + 1 < len(keys) else "\n}\n")
    print(f"{options.output}: {copies} copies of {len(body)} events (+{len(metadata)} metadata), "
          f"time shift {shift['ts']} us per copy", file=sys.stderr)


if __name__ == "__main__":
    main()
