"""Time against folio (or block) size: one line per item and column, each item with its
own colour and marker (fourteen items stay apart), each column with its own dash
(base dashed, patched solid).

matplotlib is the optional extra ``plot`` (``pip install 'pytest-folio[plot]'``); without
it, :func:`require_matplotlib` says so in one line instead of a traceback.
"""

from __future__ import annotations

import io
import itertools
import os
from pathlib import Path
from typing import Any

from pytest_folio.files import write_file
from pytest_folio.sizes import format_size, parse_size
from pytest_folio.timing.compare import Comparison
from pytest_folio.timing.table import Table, of

MISSING = "plotting needs matplotlib: pip install 'pytest-folio[plot]'"
MARKERS = ("o", "s", "^", "v", "D", "P", "X", "*", "<", ">", "h", "p", "d", "8")
DASHES = ("--", "-", ":", "-.")
AXES = {"folio": "folio size", "bs": "block size"}


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


def item_styles(count: int) -> list[tuple[str, str]]:
    """(colour, marker) for ``count`` items, no two alike: ten colours against fourteen
    markers, stepping both, so neighbours differ in each and 140 pairs are distinct."""
    pairs = itertools.islice(zip(itertools.cycle(f"C{n}" for n in range(10)),
                                 itertools.cycle(MARKERS)), count)
    return list(pairs)


def plot_format(path: str | os.PathLike[str]) -> str:
    """The image format ``path`` names by its suffix (``png``, ``svg``, ``pdf``, ...), or
    PlotError: a directory, a name with no suffix (matplotlib would write NAME.png
    instead) or a format matplotlib cannot write."""
    name = os.fspath(path)
    if Path(name).is_dir():
        raise PlotError(f"--plot {name}: a directory; name the image file, e.g. "
                        f"{os.path.join(name, 'compare.png')}")
    kind = Path(name).suffix[1:].lower()
    if not kind:
        raise PlotError(f"--plot {name}: no suffix to say the image format (.png, .svg, "
                        f".pdf, ...)")
    require_matplotlib()
    from matplotlib.backend_bases import FigureCanvasBase
    kinds = FigureCanvasBase.get_supported_filetypes()
    if kind not in kinds:
        raise PlotError(f"--plot {name}: .{kind} is not an image format matplotlib "
                        f"writes: one of {', '.join('.' + k for k in sorted(kinds))}")
    return kind


def plot_table(t: Table | Comparison, path: str | os.PathLike[str]) -> int:
    """Draw ``t`` into ``path`` (format from the suffix, written as
    :func:`~pytest_folio.files.write_file` writes); returns the lines drawn."""
    t = t if isinstance(t, Table) else of(t)
    kind = plot_format(path)
    plt = require_matplotlib()
    fig, ax = plt.subplots(figsize=(11, 6), layout="constrained")
    key = t.size_key
    drawn = 0
    sizes: set[int] = set()
    values: list[float] = []
    try:
        for group, (color, marker) in zip(t.groups, item_styles(len(t.groups)), strict=True):
            for column in range(len(t.headings)):
                points = sorted((parse_size(line.params[key]), line.cells[column].value)
                                for line in group.lines
                                if key in line.params and line.cells[column].value is not None)
                if not points:
                    continue
                xs, ys = [x for x, _ in points], [float(y or 0) for _, y in points]
                ax.plot(xs, ys, DASHES[column % len(DASHES)], marker=marker, color=color,
                        label=group.name if column == len(t.headings) - 1 else None)
                sizes.update(xs)
                values.extend(ys)
                drawn += 1
        if not drawn or key is None:
            raise PlotError("nothing to plot: no item has a folio or block size")
        ax.set_xscale("log", base=2)
        if min(values) > 0 and max(values) / min(values) > 20:
            ax.set_yscale("log")          # items of very different cost stay readable
        ax.set_xticks(sorted(sizes), [format_size(x) for x in sorted(sizes)])
        ax.set_xlabel(AXES[key])
        units = sorted({g.unit for g in t.groups})
        ax.set_ylabel(f"{t.statistic} of the {t.what} ({', '.join(units)})")
        ax.set_title(", ".join(f"{h.title} ({DASHES[i % len(DASHES)]})"
                               for i, h in enumerate(t.headings)))
        fig.legend(loc="outside right upper", fontsize="x-small")
        image = io.BytesIO()
        try:
            fig.savefig(image, format=kind)
            write_file(path, image.getvalue())
        except (OSError, ValueError) as exc:
            raise PlotError(f"cannot write {os.fspath(path)}: {exc}") from None
    finally:
        plt.close(fig)
    return drawn


def plot_comparison(comparison: Comparison, path: str | os.PathLike[str]) -> int:
    """Base against patched (the table's two columns); kept for callers of old."""
    return plot_table(comparison, path)
