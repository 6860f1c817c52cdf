"""What a user or a server gave, quoted back on the terminal: as written (no `:x:` turned into
an emoji), cut to a few words when it is long, and never with a secret in it; each case failed
before its fix."""

from __future__ import annotations

from pathlib import Path

from conftest import run_cli

TOKEN = "hf_" + "AbCdEfGhIjKlMnOpQrStUvWxYz01234567"  # a Hugging Face token's shape
NAMED = "mysecretvalue123456"  # secret by its name only


def not_yaml(path: Path) -> Path:
    """A file that is not YAML at all (a password file, say): one long plain value to YAML."""
    lines = ["root:x:0:0:root:/root:/bin/bash", f"HF_TOKEN={NAMED}", f"backup {TOKEN} here"] * 40
    path.write_text("\n".join(lines) + "\n")
    return path


def test_a_spec_that_is_not_yaml_is_quoted_in_a_few_words_without_its_secrets(tmp_path: Path) -> None:
    spec = not_yaml(tmp_path / "spec.yaml")
    done = run_cli("run", str(spec), cwd=tmp_path)
    assert done.returncode == 2
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and len(lines[0]) < len(str(spec)) + 150, done.stderr  # not the whole file
    assert 'expected a mapping of spec keys at the top, got "root:x:0:0:root:/root:/bin/bash' in lines[0]
    assert "characters)" in lines[0]
    assert NAMED not in done.stderr and TOKEN[:12] not in done.stderr


def test_a_secret_named_in_a_short_value_is_blanked_in_the_message(tmp_path: Path) -> None:
    spec = tmp_path / "spec.yaml"
    spec.write_text(f"HF_TOKEN={NAMED}\n")
    done = run_cli("run", str(spec), cwd=tmp_path)
    assert done.returncode == 2
    assert NAMED not in done.stderr
    assert 'got "HF_TOKEN=<redacted>"' in done.stderr


def test_a_signatures_file_that_is_not_a_pack_is_named_a_pack(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_text("Loading\n")
    done = run_cli("classify", "--signatures", str(not_yaml(tmp_path / "pack.yaml")), str(log), cwd=tmp_path)
    assert done.returncode == 2
    assert "expected a mapping of signature pack keys at the top" in done.stderr
    assert NAMED not in done.stderr and TOKEN[:12] not in done.stderr
    (tmp_path / "empty.yaml").write_text("")
    done = run_cli("classify", "--signatures", str(tmp_path / "empty.yaml"), str(log), cwd=tmp_path)
    assert done.returncode == 2
    assert "the file is empty (is this the signature pack you meant?)" in done.stderr


def test_a_log_line_with_emoji_codes_is_shown_as_written(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    line = "torch.OutOfMemoryError: CUDA out of memory :x: :smile: tried"
    log.write_text(f"Loading\n{line}\n")
    done = run_cli("classify", str(log), cwd=tmp_path)
    assert done.returncode == 1, done.stderr
    assert f"2 | {line}" in done.stdout
    assert "\N{CROSS MARK}" not in done.stdout and "\N{SMILING FACE WITH SMILING EYES}" not in done.stdout
