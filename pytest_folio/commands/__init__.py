"""The ``python -m pytest_folio`` subcommands that are not about saved runs: ``check``
(:mod:`.check`) and ``shrink`` (:mod:`.shrink`); :mod:`pytest_folio.cli` dispatches them."""
