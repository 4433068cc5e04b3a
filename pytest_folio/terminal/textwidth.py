"""Every line the plugin prints for people fits :data:`WIDTH` columns: summary lines wrap
at spaces onto indented continuation lines, so an 80-column terminal, a CI log and a
mail quote show them whole."""

from __future__ import annotations

import textwrap

WIDTH = 80
INDENT = "    "


def wrap(text: str, width: int = WIDTH, indent: str = INDENT) -> list[str]:
    """``text`` as lines of at most ``width`` columns, continuations indented by
    ``indent``; only a word longer than a line (a path) overruns it, kept whole to copy
    and paste."""
    return textwrap.wrap(text, width=width, subsequent_indent=indent,
                         break_on_hyphens=False, break_long_words=False) or [""]
