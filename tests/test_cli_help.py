"""Every subcommand's --help is plain text that fits 80 columns: no reStructuredText
markup (``LOG``, :func:`...`) copied from a docstring."""

from __future__ import annotations

import re

import pytest

from pytest_folio.cli import build_parser

MARKUP = re.compile(r"``|:(func|mod|class|data|meth):`")


def subcommands() -> list[str]:
    parser = build_parser()
    action = next(a for a in parser._actions if a.dest == "command")
    return sorted(action.choices)     # type: ignore[arg-type]


@pytest.mark.parametrize("command", subcommands())
def test_help_is_plain_text_within_80_columns(command: str, capsys: pytest.CaptureFixture[str],
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    with pytest.raises(SystemExit) as exit_info:
        build_parser().parse_args([command, "--help"])
    assert exit_info.value.code == 0
    out = capsys.readouterr().out
    assert not MARKUP.search(out), out
    assert max(map(len, out.splitlines())) <= 80, out


def test_shrink_help_describes_the_log_plainly(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        build_parser().parse_args(["shrink", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "LOG is a failing .fsxops (ours, or one recorded by xfstests' fsx with " \
           "--record-ops) replayed against --folio-fs" in text
