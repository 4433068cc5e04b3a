"""Errors every layer may raise for a user's mistake; the commands turn them into one line."""


class CommandError(Exception):
    """Bad input to a subcommand: main prints the message as one line and exits 2."""
