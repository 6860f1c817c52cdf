"""Which GPUs a run may use (`--gpus`, the spec's top-level `gpus:`) and how many each
attempt takes (`server.gpus:`): parsed here, resolved against the host in launch/gpu.py."""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import Enum

from diagbench.errors import UserError
from diagbench.yamlsrc import Src

__all__ = [
    "GpuMode",
    "GpuRequest",
    "gpu_request_option",
    "parse_gpu_request",
    "parse_gpus_key",
    "parse_gpus_per_attempt",
]

# an index as nvidia-smi numbers them, or a UUID (full or a prefix, as CUDA accepts them)
_GPU_ID = re.compile(r"^(\d+|(GPU|MIG)-[0-9A-Za-z/-]+)$")
_EXAMPLE = "all, none, or GPU ids such as 0,1,2,3 (indices or GPU-... UUIDs)"


class GpuMode(str, Enum):
    ALL = "all"  # every GPU this process may use (NVML or nvidia-smi, within CUDA_VISIBLE_DEVICES)
    NONE = "none"  # diagbench hands out no GPU: servers see what diagbench sees
    LIST = "list"  # exactly these, used as given even where no GPU can be queried

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class GpuRequest:
    """What was asked for: all, none, or a list of GPU ids."""

    mode: GpuMode
    ids: tuple[str, ...] = ()

    def __str__(self) -> str:
        return ",".join(self.ids) if self.mode is GpuMode.LIST else self.mode.value

    def to_json(self) -> str | list[str]:
        return list(self.ids) if self.mode is GpuMode.LIST else self.mode.value


def parse_gpu_request(text: str) -> GpuRequest:
    """`all`, `none` or `0,1,2,3`; a ValueError says what is wrong."""
    word = text.strip()
    if word.lower() in (GpuMode.ALL.value, GpuMode.NONE.value):
        return GpuRequest(GpuMode(word.lower()))
    return _listed([part.strip() for part in word.split(",")])


def _listed(ids: list[str]) -> GpuRequest:
    if not ids or any(not i for i in ids):
        raise ValueError(f"expected {_EXAMPLE}")
    bad = [i for i in ids if not _GPU_ID.match(i)]
    if bad:
        raise ValueError(f"'{bad[0]}' is not a GPU id; expected {_EXAMPLE}")
    twice = sorted({i for i in ids if ids.count(i) > 1})
    if twice:
        raise ValueError(f"GPU {twice[0]} is listed twice")
    return GpuRequest(GpuMode.LIST, tuple(ids))


def gpu_request_option(text: str) -> GpuRequest:
    """`--gpus TEXT`, as a usage error naming the option."""
    try:
        return parse_gpu_request(text)
    except ValueError as exc:
        raise UserError(f"--gpus {text}: {exc}") from None


def parse_gpus_key(src: Src) -> GpuRequest:
    """The spec's top-level `gpus:` (what `--gpus` defaults to): all, none, or a list."""
    if src.is_list():
        ids = [item.text("a GPU id") for item in src.items()]
    else:
        text = src.text(_EXAMPLE)
        if text.isdigit() and "," not in text:
            raise src.error(
                f"a bare number is ambiguous here: top-level gpus lists the GPUs to use ({_EXAMPLE})",
                f"write [{text}] for GPU {text}, or server.gpus: {text} for {text} GPU(s) per attempt",
            )
        try:
            return parse_gpu_request(text)
        except ValueError as exc:
            raise src.error(str(exc)) from None
    try:
        return _listed(ids)
    except ValueError as exc:
        raise src.error(str(exc)) from None


def parse_gpus_per_attempt(src: Src) -> int:
    """`server.gpus: N`: GPUs each attempt gets (0 for servers that need none)."""
    count = src.integer("a number of GPUs per attempt (0 or more)")
    if count < 0:
        raise src.expected("a number of GPUs per attempt (0 or more)")
    return count
