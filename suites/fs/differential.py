"""Differential mode: the target against an oracle, one random sequence on both."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack, contextmanager

import pytest

from pytest_folio.files import write_file
from pytest_folio.fixtures.failures import keep_failure
from pytest_folio.fixtures.fs import REPRODUCE, fs_rerun_command, fs_target
from pytest_folio.fsx.differential import (
    MAXLEN,
    Mismatch,
    common,
    compare,
    dump_ops,
    generate,
    read_fsdiff,
    shrink,
)
from pytest_folio.params import item_params
from pytest_folio.session import session, settings
from pytest_folio.sizes import format_size
from pytest_folio.suites.fs.base import _Base
from pytest_folio.targets.protocols import AnyFileSystem

SHRINK_SECONDS = 10.0     # ddmin's budget: a handful of calls, found in seconds


class FsDifferential(_Base):
    """Differential mode (``--folio-fs-oracle``, on by default when ``--folio-fs`` is not
    the reference): one random sequence of ``--folio-fsx-ops`` operations from the run's
    seed on the target and on the oracle, every return value, errno, size and byte
    compared (:mod:`pytest_folio.fsx.differential`). A difference is shrunk to a handful of
    calls, saved as a ``.fsdiff`` log and printed with the command that replays it
    (``--folio-fs-oracle-replay``)."""

    def test_the_target_matches_the_oracle(self, filesystem: AnyFileSystem,
                                           fs_oracle: AnyFileSystem,
                                           request: pytest.FixtureRequest,
                                           tmp_path_factory: pytest.TempPathFactory) -> None:
        folio = settings(request.config)
        oracle = session(request.config).fs_oracle
        any_errno = oracle is not None and oracle.any_errno
        if folio.fs_oracle_replay is not None:
            ops = read_fsdiff(folio.fs_oracle_replay)
        else:
            ops = generate(folio.fsx_seed, common(filesystem, fs_oracle), folio.fsx_ops,
                           maxlen=max(MAXLEN, 3 * filesystem.blocksize),
                           unit=filesystem.blocksize)
        try:
            compare(filesystem, fs_oracle, ops, any_errno=any_errno)
        except Mismatch as exc:
            found = exc
        else:
            return
        if request.config.get_verbosity() > 0:    # -v: the unshrunk run's last calls too
            request.node.add_report_section("call", "differential (before shrinking)",
                                            "\n".join(found.log[-25:]))
        request.node.stash[REPRODUCE] = False     # the message says it already
        blocksize = filesystem.blocksize

        @contextmanager
        def pair() -> Iterator[tuple[AnyFileSystem, AnyFileSystem]]:
            assert oracle is not None
            target = fs_target(request.config)
            with ExitStack() as stack:
                scratch = (tmp_path_factory.mktemp("folio-shrink")
                           if target.kind == "factory" else None)
                yield (stack.enter_context(target.open(
                           blocksize, scratch, item_params(request.node).cache_bytes)),
                       stack.enter_context(oracle.open(blocksize)))

        budget = folio.shrink_budget(SHRINK_SECONDS)
        small = ops
        if budget > 0:
            small, found = shrink(ops, found, pair, seconds=budget, any_errno=any_errno)
        where = folio.fsx_dir or tmp_path_factory.mktemp("folio-differential")
        where.mkdir(parents=True, exist_ok=True)
        # one log per parameter: the bounded-cache run ([4K-cache64K]) beside the plain one
        label = getattr(getattr(request.node, "callspec", None), "id", None) or format_size(
            blocksize)
        log = where / f"differential-{label}.fsdiff"
        write_file(log, dump_ops(small))
        [log] = keep_failure(request.node, log)
        calls = "\n".join(f"  {line}" for line in found.log)
        detail = f"\n{found.detail}" if found.detail else ""
        keep = [f"--folio-fsx-dir={folio.fsx_dir}"] if folio.fsx_dir else []
        replay = fs_rerun_command(request.node, *keep, f"--folio-fs-oracle-replay={log}")
        unshrunk = " (not shrunk: --folio-shrink-seconds=0)" if budget <= 0 else ""
        pytest.fail(f"differential: {found}\n{len(small)} of {len(ops)} operations "
                    f"show it{unshrunk} (oracle's outcomes):\n{calls}{detail}\nlog: {log}\n"
                    f"replay: {replay}", pytrace=False)

