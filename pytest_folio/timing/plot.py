"""Time against folio (or block) size, one line per item, base dashed and patched solid.

matplotlib is the optional extra ``plot`` (``pip install 'pytest-folio[plot]'``); without
it, :func:`require_matplotlib` says so in one line instead of a traceback.
"""

from __future__ import annotations

import os
from typing import Any

from pytest_folio.sizes import format_size
from pytest_folio.timing.compare import Comparison, label_size

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
    fig, ax = plt.subplots(figsize=(11, 6), layout="constrained")
    drawn = 0
    sizes: set[int] = set()
    units: set[str] = set()
    values: list[float] = []
    axis = "folio size"
    try:
        for n, group in enumerate(comparison.groups):
            color = f"C{n % 10}"
            for style, side in (("--", "base"), ("-", "patched")):
                xs: list[int] = []
                ys: list[float] = []
                for row in group.rows:
                    value = row.base_value if side == "base" else row.patched_value
                    size = label_size(row.label)
                    if size is not None and value is not None:
                        if "=" in row.label.partition(",")[0]:
                            axis = "block size"       # bs=16K rows (ramfs, fsx)
                        xs.append(size)
                        ys.append(value)
                if xs:
                    sizes.update(xs)
                    units.add(group.unit)
                    ax.plot(xs, ys, style, marker="o", color=color,
                            label=group.name if side == "patched" else None)
                    values.extend(ys)
                    drawn += 1
        if not drawn:
            raise PlotError("nothing to plot: no item has a folio or block size")
        ax.set_xscale("log", base=2)
        if min(values) > 0 and max(values) / min(values) > 20:
            ax.set_yscale("log")          # items of very different cost stay readable
        ax.set_xticks(sorted(sizes), [format_size(x) for x in sorted(sizes)])
        ax.set_xlabel(axis)
        ax.set_ylabel(f"{comparison.what} ({', '.join(sorted(units))})")
        ax.set_title("base (dashed) against patched (solid)")
        fig.legend(loc="outside right upper", fontsize="x-small")
        try:
            fig.savefig(path)
        except (OSError, ValueError) as exc:
            raise PlotError(f"cannot write {os.fspath(path)}: {exc}") from None
    finally:
        plt.close(fig)
    return drawn
