"""The library apart from the lab: `import posenc` needs torch only; the lab's commands give a
one-line install hint where a dependency of posenc[lab] is missing."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

import posenc.cli

ROOT = Path(__file__).resolve().parents[1]
LAB = ("matplotlib", "tqdm", "sqlite3", "numpy")


def test_import_posenc_loads_no_lab_dependency():
    """What `import posenc` adds to `import torch` (torch itself loads tqdm, via torch.hub)."""
    code = (
        "import sys, torch; before = set(sys.modules); import posenc; "
        f"print([m for m in {LAB!r} if m in sys.modules and m not in before])"
    )
    env = {"PYTHONPATH": str(ROOT / "src"), "PATH": "/usr/bin:/bin"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_core_dependencies_are_torch_and_the_lab_an_extra():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert [d.split(">")[0] for d in project["dependencies"]] == ["torch"]
    lab = {d.split(">")[0] for d in project["optional-dependencies"]["lab"]}
    assert {"matplotlib", "tqdm"} <= lab
    assert "posenc[lab]" in project["optional-dependencies"]["test"]
    install = (ROOT / "scripts" / "install.sh").read_text()
    assert ".[lab," in install and ".[test]" in install


@pytest.mark.parametrize("missing", posenc.cli.LAB_DEPENDENCIES)
def test_a_missing_lab_dependency_gives_a_one_line_hint(missing, monkeypatch, capsys):
    def fail(name, *args, **kwargs):
        raise ModuleNotFoundError(f"No module named {missing!r}", name=missing)

    monkeypatch.setattr(posenc.cli.importlib, "import_module", fail)
    for command in ("explain", "arena", "bench"):
        assert posenc.cli.main([command]) == 2
        err = capsys.readouterr().err.strip()
        assert err == f"posenc {command}: error: needs {missing}: pip install 'posenc[lab]'"
