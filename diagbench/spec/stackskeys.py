"""`server.stacks` and `server.spin`: when stacks are taken, what the server is asked to keep
for them (faulthandler, PyTorch's flight recorder), and the spin rule's window."""

from __future__ import annotations

from diagbench.yamlsrc import Src, suggest

__all__ = ["OPT_INS", "STACKS_DEFAULT", "STACKS_WHEN", "parse_stacks", "spin_words", "stacks_when"]

STACKS_DEFAULT = "on-timeout"
STACKS_WHEN = ("on-timeout", "always", "never")
# taken on a timeout, and the server asked to keep more: its own stacks on SIGUSR2
# (faulthandler), or each rank's last collectives (PyTorch's flight recorder)
OPT_INS = ("faulthandler", "flight-recorder")


def parse_stacks(src: Src) -> str:
    """server.stacks: when stacks are taken (on-timeout, always, never), or faulthandler /
    flight-recorder (on timeout, with what the server keeps for them)."""
    word = src.string()
    if word not in (*STACKS_WHEN, *OPT_INS):
        words = [*STACKS_WHEN, *OPT_INS]
        raise src.error(f"expected one of {', '.join(words)}, got {word!r}", suggest(word, words))
    return word


def stacks_when(word: str) -> str:
    return STACKS_DEFAULT if word in OPT_INS else word


def spin_words(spin_s: float) -> str:
    """The spin rule as `plan` shows it (launch/spin.py applies it)."""
    return (
        f"stacks sampled every second; every rank at the same waiting frame in the program's code for {spin_s:g}s "
        "(and 3 samples) ends the attempt as stalled, however busy its CPU; a long silent GPU kernel looks the same"
    )
