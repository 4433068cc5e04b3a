"""Errors every layer may raise for a user's mistake; the commands turn them into one line.
And :func:`errno_of`, how the suites and the oracle read an answer that may be an error."""

from collections.abc import Callable


def errno_of(call: Callable[[], object]) -> int | None:
    """The errno ``call`` fails with, or None when it succeeds."""
    try:
        call()
    except OSError as exc:
        return exc.errno
    return None


class CommandError(Exception):
    """Bad input to a subcommand: main prints the message as one line and exits 2."""
