#!/usr/bin/env bash
# The package as it ships: build the sdist and the wheel (`python -m build`: the wheel is built
# from the sdist, so both must hold everything), check that the wheel holds every file of
# diagbench/ that git tracks (modules and data: packs, remedies, debug sets, schemas, the HTML
# assets, faulthandler_site), install it into a fresh venv and run the demo from a folder that
# holds only the demo's spec: no source tree anywhere on the path, the wheel alone.
# (.ci/readme.sh runs the README's own `pip install .` and demo in a fresh clone.)
set -euo pipefail
cd "$(dirname "$0")/.."
root="$PWD"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

python3 -m venv "$work/build-venv"
"$work/build-venv/bin/pip" install -q build
# built from a copy of the files git knows (tracked, or new and not ignored), as a fresh clone has
# them: a checkout's leftovers (an egg-info's SOURCES.txt) must not put into the sdist what the
# package data leaves out
mkdir "$work/src"
git ls-files -z --cached --others --exclude-standard | tar --null -T - -cf - | tar -xf - -C "$work/src"
"$work/build-venv/bin/python" -m build --outdir "$work/dist" "$work/src" >"$work/build.log" 2>&1 || { cat "$work/build.log"; exit 1; }
wheel=("$work"/dist/diagbench-*.whl)
sdist=("$work"/dist/diagbench-*.tar.gz)
echo "built: $(basename "${wheel[0]}") $(basename "${sdist[0]}")"

git ls-files diagbench >"$work/tracked.txt"
python3 - "${wheel[0]}" "${sdist[0]}" "$work/tracked.txt" <<'EOF'
import sys, tarfile, zipfile
wheel, sdist, tracked_list = sys.argv[1:]
tracked = set(open(tracked_list).read().split())
in_wheel = set(zipfile.ZipFile(wheel).namelist())
in_sdist = {n.split("/", 1)[1] for n in tarfile.open(sdist).getnames() if "/" in n}
problems = [f"wheel lacks {n}" for n in sorted(tracked - in_wheel)]
problems += [f"sdist lacks {n}" for n in sorted(tracked - in_sdist)]
data = ["logs/packs/", "remedies/", "debugsets/", "schemas/", "render/assets/", "launch/faulthandler_site/"]
for folder in data:  # each data folder ships, and with more than an __init__.py
    shipped = [n for n in in_wheel if n.startswith("diagbench/" + folder) and not n.endswith("__init__.py")]
    problems += [] if shipped else [f"wheel has no file under diagbench/{folder}"]
if problems:
    sys.exit("\n".join(problems))
print(f"the wheel holds all {len(tracked)} tracked files of diagbench/ (data: {', '.join(data)})")
EOF

python3 -m venv "$work/venv"
"$work/venv/bin/pip" install -q "${wheel[0]}"
mkdir "$work/demo"
cp experiments/demo.yaml "$work/demo/"
cd "$work/demo"  # nothing of the checkout here: what runs is what the wheel installed
installed="$("$work/venv/bin/python" -c 'import diagbench; print(diagbench.__file__)')"
case "$installed" in
  "$work/venv/"*) echo "diagbench imported from the wheel: $installed" ;;
  *) echo "diagbench imported from $installed, not from the wheel's venv" >&2; exit 1 ;;
esac
"$work/venv/bin/diagbench" schema spec >/dev/null  # the shipped schemas
COLUMNS=100 "$work/venv/bin/diagbench" run demo.yaml --runs-dir "$work/runs"
cd "$root"
