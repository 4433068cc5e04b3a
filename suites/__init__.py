"""Reusable suites (installed as ``pytest_folio.suites``): base classes and ready-to-run modules.

Run them all against the bundled reference with ``pytest -p pytest_folio --pyargs
pytest_folio.suites``.
"""
