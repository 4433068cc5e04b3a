"""Time against folio size, one line per item, base dashed and patched solid.

matplotlib is the optional extra ``plot`` (``pip install 'pytest-folio[plot]'``); without
it, :func:`require_matplotlib` says so in one line instead of a traceback.
"""

from __future__ import annotations

import os
from typing import Any

from pytest_folio.sizes import format_size, parse_size
from pytest_folio.timing.compare import Comparison

MISSING = "plotting needs matplotlib: pip install 'pytest-folio[plot]'"


class PlotError(Exception):
    """Plotting cannot be done (no matplotlib, nothing with a folio size); one line."""


def require_matplotlib() -> Any:
    """pyplot on the non-interactive backend, or PlotError with the install hint."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise PlotError(MISSING) from None
    return plt


def plot_comparison(comparison: Comparison, path: str | os.PathLike[str]) -> int:
    """Draw ``comparison`` into ``path`` (format from the suffix); returns the lines drawn."""
    plt = require_matplotlib()
    fig, ax = plt.subplots(figsize=(8, 5))
    drawn = 0
    sizes: set[int] = set()
    units: set[str] = set()
    try:
        for n, group in enumerate(comparison.groups):
            points = []
            for row in group.rows:
                try:
                    points.append((parse_size(row.label), row.base_value, row.patched_value))
                except ValueError:
                    continue
            if not points:
                continue
            color = f"C{n % 10}"
            sizes.update(p[0] for p in points)
            units.add(group.unit)
            for side, style, label in ((1, "--", "base"), (2, "-", "patched")):
                xs = [p[0] for p in points if p[side] is not None]
                ys = [p[side] for p in points if p[side] is not None]
                if xs:
                    ax.plot(xs, ys, style, marker="o", color=color,
                            label=f"{group.name} ({label})")
                    drawn += 1
        if not drawn:
            raise PlotError("nothing to plot: no item has a folio size")
        ax.set_xscale("log", base=2)
        ax.set_xticks(sorted(sizes), [format_size(x) for x in sorted(sizes)])
        ax.set_xlabel("folio size")
        ax.set_ylabel(f"{comparison.what} ({', '.join(sorted(units))})")
        ax.set_title("base (dashed) against patched (solid)")
        ax.legend(fontsize="x-small")
        fig.tight_layout()
        try:
            fig.savefig(path)
        except (OSError, ValueError) as exc:
            raise PlotError(f"cannot write {os.fspath(path)}: {exc}") from None
    finally:
        plt.close(fig)
    return drawn
