#!/usr/bin/env python3
"""check_optimizer_comparison.py: checks the output of sample_optimizer_comparison.

The SVG must be well-formed XML with three panels of seven curves each (every point
inside the figure), tick labels on both axes and a seven-entry legend; the CSV must hold
every step of every (network, optimizer) pair, and every loss curve must end (mean of
its last tenth of steps) below its first loss.

usage: check_optimizer_comparison.py FILE.svg FILE.csv STEPS
"""
import csv
import math
import sys
import xml.etree.ElementTree as ElementTree

NETWORKS = 3
OPTIMIZERS = 7
SVG = "{http://www.w3.org/2000/svg}"


def fail(message):
    print("check_optimizer_comparison: " + message, file=sys.stderr)
    sys.exit(1)


def check_svg(path):
    try:
        root = ElementTree.parse(path).getroot()
    except (OSError, ElementTree.ParseError) as error:
        fail(f"{path} is not well-formed XML: {error}")
    if root.tag != SVG + "svg":
        fail(f"{path}: root element is {root.tag}, not svg")
    width, height = float(root.get("width")), float(root.get("height"))
    panels = [g for g in root.iter(SVG + "g") if g.get("class") == "panel"]
    if len(panels) != NETWORKS:
        fail(f"{path}: {len(panels)} panels, expected {NETWORKS}")
    for index, panel in enumerate(panels):
        titles = [t.text for t in panel.iter(SVG + "text") if t.get("class") == "panel-title"]
        curves = [p for p in panel.iter(SVG + "polyline") if p.get("class") == "curve"]
        if len(titles) != 1 or not titles[0]:
            fail(f"{path}: panel {index} has no title")
        if len(curves) != OPTIMIZERS:
            fail(f"{path}: panel {index} has {len(curves)} curves, expected {OPTIMIZERS}")
        colors = {curve.get("stroke") for curve in curves}
        if len(colors) != OPTIMIZERS:
            fail(f"{path}: panel {index} curves share colors: {sorted(colors)}")
        for curve in curves:
            points = curve.get("points").split()
            if len(points) < 2:
                fail(f"{path}: panel {index} has a curve with {len(points)} points")
            for point in points:
                x, y = (float(v) for v in point.split(","))
                if not (math.isfinite(x) and math.isfinite(y) and 0 <= x <= width and 0 <= y <= height):
                    fail(f"{path}: panel {index} point {point} outside the {width}x{height} figure")
        for axis in ("x-tick-label", "y-tick-label"):
            ticks = [t.text for t in panel.iter(SVG + "text") if t.get("class") == axis]
            if len(ticks) < 3:
                fail(f"{path}: panel {index} has {len(ticks)} {axis}s")
            for tick in ticks:
                float(tick)  # raises on a malformed number
        labels = [t.text for t in panel.iter(SVG + "text") if t.get("class") == "axis-label"]
        if not labels:
            fail(f"{path}: panel {index} has no axis label")
    legend = [t.text for t in root.iter(SVG + "text") if t.get("class") == "legend-label"]
    if len(legend) != OPTIMIZERS:
        fail(f"{path}: legend has {len(legend)} entries, expected {OPTIMIZERS}")
    print(f"{path}: well-formed, {NETWORKS} panels x {OPTIMIZERS} curves, legend {legend}")


def check_csv(path, steps):
    curves = {}
    with open(path, newline="") as file:
        for row in csv.DictReader(file):
            curves.setdefault((row["network"], row["optimizer"]), []).append(
                (int(row["step"]), float(row["loss"])))
    if len(curves) != NETWORKS * OPTIMIZERS:
        fail(f"{path}: {len(curves)} curves, expected {NETWORKS * OPTIMIZERS}")
    for (network, optimizer), rows in curves.items():
        if [step for step, _ in rows] != list(range(1, steps + 1)):
            fail(f"{path}: {network}/{optimizer} does not hold steps 1..{steps} in order")
        losses = [loss for _, loss in rows]
        tail = losses[-max(1, steps // 10):]
        ending = sum(tail) / len(tail)
        if not (math.isfinite(ending) and ending < losses[0]):
            fail(f"{path}: {network}/{optimizer} ended at {ending:.4f}, not below its start {losses[0]:.4f}")
        print(f"{network:30s} {optimizer:18s} {losses[0]:.4f} -> {ending:.4f}")


if __name__ == "__main__":
    if len(sys.argv) != 4:
        fail("usage: check_optimizer_comparison.py FILE.svg FILE.csv STEPS")
    check_svg(sys.argv[1])
    check_csv(sys.argv[2], int(sys.argv[3]))
