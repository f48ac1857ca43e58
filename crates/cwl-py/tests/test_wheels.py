"""The wheels install into a fresh virtual environment and work there:
`cwl --version` from the cwl-cli wheel, `import cwl` from the extension's.

Runs when CWL_WHEELS names a directory holding both wheels (CI builds
them there with `maturin build`); skipped otherwise, with the reason."""

from __future__ import annotations

import os
import subprocess
import sys
import venv
from pathlib import Path

import pytest


def wheels() -> tuple[Path, Path]:
    folder = os.environ.get("CWL_WHEELS")
    if not folder:
        pytest.skip("CWL_WHEELS is not set: build the wheels with maturin build (see docs/python.md)")
    found = {}
    for name in ("cwl_cli", "cwl"):
        matches = sorted(Path(folder).glob(f"{name}-*.whl"))
        assert matches, f"no {name} wheel in {folder}"
        found[name] = matches[-1]
    return found["cwl_cli"], found["cwl"]


def test_both_wheels_install_in_a_fresh_venv_and_run(tmp_path):
    cli, extension = wheels()
    root = tmp_path / "venv"
    venv.create(root, with_pip=True)
    bin_dir = root / ("Scripts" if sys.platform == "win32" else "bin")
    subprocess.run(
        [bin_dir / "python", "-m", "pip", "install", "--quiet", "--no-index",
         "--disable-pip-version-check", cli, extension],
        check=True,
    )
    version = subprocess.run([bin_dir / "cwl", "--version"], check=True,
                             capture_output=True, text=True).stdout
    assert version.startswith("cwl "), version
    probe = ("import cwl; c = cwl.Context(budget=1000); "
             "c.push({'role': 'user', 'content': 'hi'}); print(cwl.__version__, c.tokens)")
    out = subprocess.run([bin_dir / "python", "-c", probe], check=True,
                         capture_output=True, text=True, cwd=tmp_path).stdout
    assert out.split()[0] == version.split()[1] and int(out.split()[1]) > 0, out
