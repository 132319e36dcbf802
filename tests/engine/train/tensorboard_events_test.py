#!/usr/bin/env python3
"""`ember train --tensorboard DIR` read back as TensorBoard reads it, by code of its own.

Each record of the event file: an 8-byte little-endian length, the masked CRC-32C of
those bytes, the data, the masked CRC-32C of the data (CRC-32C computed here bit by bit,
independently of ember's table). Each record's data decoded by `protoc --decode` against
engine/train/tensorboard_event.proto. Then the scalars against the run's own JSONL
metrics: one event per step with its loss and learning rate, the per-epoch test accuracy
and loss, the dataloader wait; under `mpirun -np 2`, the all-reduce wait per step and a
file written by rank 0 alone.

usage: tensorboard_events_test.py EMBER SOURCE_DIR WORK_DIR
"""
import glob
import json
import os
import re
import shutil
import struct
import subprocess
import sys

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "support"))
from checks import check, exit_code  # noqa: E402

EMBER, SOURCE, WORK = sys.argv[1:4]
PROTO = "engine/train/tensorboard_event.proto"


def crc32c(data):
    crc = 0xFFFFFFFF
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ 0x82F63B78 if crc & 1 else crc >> 1
    return crc ^ 0xFFFFFFFF


def masked(crc):
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def records(path):
    data = open(path, "rb").read()
    at = 0
    while at < len(data):
        check(at + 12 <= len(data), "%s: record header cut short at byte %d" % (path, at))
        (length,) = struct.unpack_from("<Q", data, at)
        (length_crc,) = struct.unpack_from("<I", data, at + 8)
        check(length_crc == masked(crc32c(data[at:at + 8])), "%s: bad length CRC at byte %d" % (path, at))
        body = data[at + 12:at + 12 + length]
        check(len(body) == length, "%s: record cut short at byte %d" % (path, at))
        (body_crc,) = struct.unpack_from("<I", data, at + 12 + length)
        check(body_crc == masked(crc32c(body)), "%s: bad data CRC at byte %d" % (path, at))
        yield body
        at += 12 + length + 4


def decode(body):
    """(step, wall_time, file_version, {tag: value}) of one Event, through protoc."""
    text = subprocess.run(["protoc", "--decode=ember.tensorboard.Event", "-I", SOURCE, os.path.join(SOURCE, PROTO)],
                          input=body, capture_output=True, check=True, timeout=60).stdout.decode()
    step = re.search(r"^step: (\d+)$", text, re.M)
    wall = re.search(r"^wall_time: ([\d.e+]+)$", text, re.M)
    version = re.search(r'^file_version: "([^"]*)"$', text, re.M)
    values = {tag: float(value) for tag, value in
              re.findall(r'tag: "([^"]*)"\s*simple_value: ([-\d.e+naifNAIF]+)', text)}
    return (int(step.group(1)) if step else 0, float(wall.group(1)) if wall else 0.0,
            version.group(1) if version else None, values)


def events_of(directory):
    files = glob.glob(os.path.join(directory, "events.out.tfevents.*"))
    check(len(files) == 1, "%s: %d event files, expected one" % (directory, len(files)))
    return [decode(body) for body in records(files[0])] if files else []


def close(a, b):
    return abs(a - b) <= 1e-5 * max(1.0, abs(b))  # the scalars are float32


def check_single_process():
    run_dir = os.path.join(WORK, "single")
    metrics = os.path.join(WORK, "single.jsonl")
    subprocess.run([EMBER, "train", "--model", "mlp", "--epochs", "2", "--train-limit", "1000", "--test-limit", "300",
                    "--batch-size", "100", "--optimizer", "adam", "--lr", "0.001", "--seed", "5", "--no-progress",
                    "--workers", "1", "--tensorboard", run_dir, "--metrics", metrics],
                   check=True, capture_output=True, timeout=240)
    events = events_of(run_dir)
    check(events and events[0][2] == "brain.Event:2", "the first record is not file_version brain.Event:2")
    lines = [json.loads(line) for line in open(metrics)]
    steps = [line for line in lines if line["type"] == "step"]
    epochs = [line for line in lines if line["type"] == "epoch"]
    per_step = {step: values for step, _, _, values in events[1:] if "train/learning_rate" in values}
    per_epoch = [(step, values) for step, _, _, values in events[1:] if "test/accuracy" in values]
    check(len(per_step) == 20, "%d step events for 20 steps" % len(per_step))
    for record in steps:
        values = per_step.get(record["step"], {})
        check(close(values.get("train/loss", float("nan")), record["loss"]),
              "step %d: loss %s, metrics %s" % (record["step"], values.get("train/loss"), record["loss"]))
        check(close(values.get("train/learning_rate", float("nan")), record["lr"]),
              "step %d: learning rate %s, metrics %s" % (record["step"], values.get("train/learning_rate"), record["lr"]))
        check(values.get("train/images_per_second", 0) > 0, "step %d: no throughput" % record["step"])
        check(values.get("train/dataloader_wait_ms", -1) >= 0, "step %d: no dataloader wait" % record["step"])
        check("train/allreduce_wait_ms" not in values, "step %d: all-reduce wait in a single process" % record["step"])
    check(len(per_epoch) == len(epochs) == 2, "%d epoch events, %d epoch records" % (len(per_epoch), len(epochs)))
    for (step, values), record in zip(per_epoch, epochs):
        check(step == record["step"], "epoch event at step %d, metrics %d" % (step, record["step"]))
        check(close(values["test/accuracy"], record["test_accuracy"]), "test accuracy %s, metrics %s" %
              (values["test/accuracy"], record["test_accuracy"]))
        check(close(values["test/loss"], record["test_loss"]), "test loss differs from the metrics")
        check(close(values["epoch/dataloader_wait_seconds"], record["dataloader_wait_seconds"]),
              "dataloader wait differs from the metrics")
    walls = [wall for _, wall, _, _ in events]
    check(walls == sorted(walls), "wall times go back")
    print("single process: %d events, %d steps, %d epochs" % (len(events), len(per_step), len(per_epoch)))


def check_two_ranks():
    if shutil.which("mpirun") is None:
        print("two ranks skipped: mpirun is absent")
        return
    run_dir = os.path.join(WORK, "ranks")
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    subprocess.run(["mpirun", "-np", "2", "--oversubscribe", "--mca", "btl", "self,vader", "--mca", "plm_rsh_agent", "",
                    EMBER, "train", "--model", "mlp", "--epochs", "1", "--train-limit", "800", "--test-limit", "200",
                    "--batch-size", "100", "--no-progress", "--workers", "1", "--tensorboard", run_dir],
                   check=True, capture_output=True, timeout=240, env=env)
    events = events_of(run_dir)  # one file: rank 0 writes
    waits = [values["train/allreduce_wait_ms"] for _, _, _, values in events if "train/learning_rate" in values]
    check(len(waits) == 4, "%d steps with an all-reduce wait, expected 4 (800 images / 2 ranks / 100)" % len(waits))
    check(all(wait >= 0 for wait in waits), "a negative all-reduce wait")
    print("two ranks: all-reduce wait per step %s ms" % ", ".join("%.3f" % wait for wait in waits))


def main():
    if shutil.which("protoc") is None:
        print("skipped: protoc (protobuf-compiler) is not installed")
        return 77
    shutil.rmtree(WORK, ignore_errors=True)
    os.makedirs(WORK)
    check_single_process()
    check_two_ranks()
    return exit_code(WORK)


if __name__ == "__main__":
    sys.exit(main())
