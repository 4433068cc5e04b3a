"""pytest-folio: a pytest plugin for page caches, block2mtd, ramfs and what is built on them."""

__version__ = "0.1.0"
