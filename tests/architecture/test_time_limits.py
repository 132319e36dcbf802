#!/usr/bin/env python3
"""Every CTest test has a time limit (its TIMEOUT property), so a hang fails within
minutes and names the test instead of eating the whole run. Reads CTest's own listing
(ctest --show-only=json-v1) of the build directory given as the argument."""
import json
import subprocess
import sys

build = sys.argv[1]
listing = subprocess.run(["ctest", "--test-dir", build, "--show-only=json-v1"],
                         check=True, capture_output=True, text=True).stdout
tests = json.loads(listing)["tests"]
missing = []
for test in tests:
    limits = [p["value"] for p in test.get("properties", []) if p["name"] == "TIMEOUT"]
    if not limits or float(limits[0]) <= 0:
        missing.append(test["name"])
print(f"{len(tests)} tests, {len(tests) - len(missing)} with a TIMEOUT")
if len(tests) < 100:
    sys.exit(f"only {len(tests)} tests listed in {build}: the listing is not the suite")
for name in missing:
    print(f"no time limit: {name}")
sys.exit(1 if missing else 0)
