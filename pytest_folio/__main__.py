"""``python -m pytest_folio compare BASE.json PATCHED.json`` and the other subcommands."""

import sys

from pytest_folio.cli import main

sys.exit(main())
