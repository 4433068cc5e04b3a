"""The timing collector and its reports.

``collector`` listens to ``pytest_folio_measurement`` and merges xdist workers' data,
``storage`` saves and loads runs (JSON, versioned, atomic), ``compare`` pairs a base run
with a patched one, ``stats`` decides what is significant, ``table`` and ``plot`` render
the comparison, ``machine`` describes where a run was measured, ``commands`` holds the
``compare`` and ``bandwidth`` subcommands of ``python -m pytest_folio``.
"""
