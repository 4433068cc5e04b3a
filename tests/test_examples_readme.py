"""The examples' READMEs work verbatim: every pytest command they show runs in its
example's directory and passes. The ready-made suites run a cheap selection (through
``PYTEST_ADDOPTS``, which leaves the command as written): the main job runs them all."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import CHECKOUT, subprocess_env

EXAMPLES = ("own_fs", "own_mtd")
CHEAP = "-p no:cacheprovider --folio-fsx-ops=300 --folio-hypothesis=off"
# for commands running the ready-made suites: one reading and one writing test of each
SUITES_SELECTION = "-k 'test_read or test_out_of_range_is_einval or test_fsx_page_aligned'"


def readme_commands(example: str) -> list[str]:
    """The pytest commands in the example README's code blocks, comments removed."""
    text = (CHECKOUT / "examples" / example / "README.md").read_text()
    commands = []
    for block in re.findall(r"^```[a-z]*\n(.*?)^```", text, re.M | re.S):
        for line in block.splitlines():
            command = line.split(" #")[0].strip()
            if re.match(r"(python -m )?pytest\b", command):
                commands.append(command)
    return commands


CASES = [(example, command) for example in EXAMPLES for command in readme_commands(example)]


def test_each_example_readme_shows_its_commands() -> None:
    assert {example for example, _ in CASES} == set(EXAMPLES)


@pytest.mark.parametrize(("example", "command"), CASES,
                         ids=[f"{e}: {c}" for e, c in CASES])
def test_an_example_readme_command_runs_verbatim(example: str, command: str) -> None:
    addopts = CHEAP + (f" {SUITES_SELECTION}" if "pytest_folio.suites" in command else "")
    env = subprocess_env()
    env["PYTEST_ADDOPTS"] = addopts     # after: subprocess_env drops the outer run's
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    words = shlex.split(command)
    if words[0] == "python":
        words[0] = sys.executable
    proc = subprocess.run(words, cwd=CHECKOUT / "examples" / example, env=env,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
    assert re.search(r"\d+ passed", proc.stdout), proc.stdout[-3000:]
