#!/usr/bin/env bash
# The README's first screen, as a new user pastes it: its first code block's commands, run in
# a fresh clone of this checkout (a browser-free check that they still work).
set -euo pipefail
cd "$(dirname "$0")/.."
where="$(mktemp -d)"
trap 'rm -rf "$where"' EXIT
git clone -q . "$where/diagbench"
cp README.md "$where/diagbench/README.md"  # the README as it is here, committed or not
cd "$where/diagbench"
# the first fenced block: its command lines (comments left out), each run as written; the test
# command's line is what .ci/run itself runs, so it is left out here (the suite once is enough)
awk '/^```/{n++; next} n==1 && !/^#/ && NF && !/pytest/' README.md > first-screen.sh
grep -q 'diagbench run experiments/demo.yaml' first-screen.sh  # the demo is still on the first screen
cat first-screen.sh
export COLUMNS=80
bash -euo pipefail first-screen.sh
