#!/usr/bin/env bash
# speedscope_browser_test.sh: loads `ember export --format speedscope` output in
# the real speedscope web app (npm package `speedscope`, its static release
# build) in headless Chromium, and checks that speedscope imported it: on
# success speedscope sets the page title to "<profile name> - speedscope" and
# lists the profiles; on a rejected file the title stays "speedscope" (the test
# checks that too, with a deliberately broken file, so it cannot pass blindly).
#
# usage: speedscope_browser_test.sh EMBER WRITE_FIXTURE_TRACE CACHE_DIR
# Exit 0 pass, 1 fail, 77 skip (only when chromium or the npm package cannot be
# installed on this machine).
set -uo pipefail

EMBER=$1
WRITE_FIXTURE=$2
CACHE_DIR=$3
SPEEDSCOPE_VERSION=1.25.0

skip() { echo "SKIP: $*"; exit 77; }
fail() { echo "FAIL: $*"; exit 1; }

if ! command -v chromium >/dev/null 2>&1; then
  if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null 2>&1; then
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends chromium >/dev/null 2>&1 ||
      { apt-get update -q >/dev/null 2>&1 &&
        DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends chromium >/dev/null 2>&1; }
  fi
  command -v chromium >/dev/null 2>&1 || skip "chromium is not installed and cannot be installed (scripts/install-deps.sh installs it)"
fi
command -v npm >/dev/null 2>&1 || skip "npm is not installed"
command -v python3 >/dev/null 2>&1 || fail "python3 is needed to serve the files"

RELEASE="$CACHE_DIR/node_modules/speedscope/dist/release"
if [ ! -f "$RELEASE/index.html" ]; then
  mkdir -p "$CACHE_DIR"
  npm install --no-audit --no-fund --prefix "$CACHE_DIR" "speedscope@$SPEEDSCOPE_VERSION" >"$CACHE_DIR/npm.log" 2>&1 ||
    { cat "$CACHE_DIR/npm.log"; skip "npm install speedscope@$SPEEDSCOPE_VERSION failed"; }
  [ -f "$RELEASE/index.html" ] || fail "speedscope@$SPEEDSCOPE_VERSION has no dist/release/index.html"
fi

WORK=$(mktemp -d)
SERVER_PID=""
cleanup() {
  if [ -n "$SERVER_PID" ]; then kill "$SERVER_PID" 2>/dev/null; wait "$SERVER_PID" 2>/dev/null; fi
  rm -rf "$WORK"
}
trap cleanup EXIT

mkdir -p "$WORK/site"
cp -r "$RELEASE" "$WORK/site/speedscope"
"$WRITE_FIXTURE" "$WORK/browser-fixture.db" || fail "could not write the fixture trace"
"$EMBER" export "$WORK/browser-fixture.db" --format speedscope -o "$WORK/site/profile.json" || fail "ember export failed"
# A file speedscope must reject: a close event that does not match the open frame.
cat >"$WORK/site/broken.json" <<'JSON'
{"$schema":"https://www.speedscope.app/file-format-schema.json","name":"broken","shared":{"frames":[{"name":"a"},{"name":"b"}]},
 "profiles":[{"type":"evented","name":"x","unit":"nanoseconds","startValue":0,"endValue":5,
 "events":[{"type":"O","frame":0,"at":0},{"type":"C","frame":1,"at":5}]}]}
JSON

PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()')
(cd "$WORK/site" && exec python3 -m http.server "$PORT" --bind 127.0.0.1) >"$WORK/server.log" 2>&1 &
SERVER_PID=$!
for _ in $(seq 1 50); do
  python3 -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:$PORT/profile.json')" 2>/dev/null && break
  sleep 0.1
done

load() {  # prints the DOM speedscope built for profile URL $1
  timeout 120 chromium --headless --no-sandbox --disable-gpu --disable-background-networking \
    --disable-component-update --no-first-run --user-data-dir="$WORK/chrome-$2" \
    --virtual-time-budget=15000 --dump-dom \
    "http://127.0.0.1:$PORT/speedscope/index.html#profileURL=http://127.0.0.1:$PORT/$1" 2>"$WORK/chrome-$2.log"
}

DOM=$(load profile.json good) || { cat "$WORK/chrome-good.log"; fail "chromium failed on the exported profile"; }
echo "$DOM" | grep -q "<title>browser-fixture.db - speedscope</title>" ||
  { echo "$DOM" | head -c 3000; fail "speedscope did not import the exported profile (title not set)"; }
echo "$DOM" | grep -q "thread main (tid 100)" || fail "the first profile (thread main) is not shown"
echo "$DOM" | grep -q "1/5" || fail "speedscope does not list the 5 exported profiles"

BROKEN=$(load broken.json broken) || fail "chromium failed on the broken profile"
echo "$BROKEN" | grep -q "<title>broken - speedscope</title>" && fail "speedscope accepted a broken file: the check cannot tell"

echo "PASS: speedscope $SPEEDSCOPE_VERSION imported the export (5 profiles) and rejected a broken file"
