"""The fsx-style suite's engine: xfstests' ltp/fsx operations checked against a model.

- :class:`FsxEngine` runs random operations (or a replayed ``.fsxops`` log) against a
  :class:`~pytest_folio.targets.protocols.FileSystem`, with fsx's reports;
- :class:`FsxOptions` / :func:`parse_fsx_args` are fsx's options and flags;
- :func:`read_fsxops` / :func:`write_fsxops` are fsx's replay format;
- :mod:`pytest_folio.fsx.machine` is the Hypothesis state-machine form.
"""

from pytest_folio.fsx.config import FsxOptions, parse_fsx_args
from pytest_folio.fsx.engine import FsxEngine, FsxFailure, FsxResult
from pytest_folio.fsx.log import FsxopsError, LogEntry, parse_fsxops, read_fsxops, write_fsxops

__all__ = ["FsxEngine", "FsxFailure", "FsxOptions", "FsxResult", "FsxopsError", "LogEntry",
           "parse_fsx_args", "parse_fsxops", "read_fsxops", "write_fsxops"]
