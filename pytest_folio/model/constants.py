"""The page-cache constants the model is built on, re-exported from the bottom layer
(:mod:`pytest_folio.linux.constants`) so model code and existing imports keep one spelling."""

from pytest_folio.linux.constants import MAX_PAGECACHE_ORDER, PAGE_SHIFT, PAGE_SIZE

__all__ = ["MAX_PAGECACHE_ORDER", "PAGE_SHIFT", "PAGE_SIZE"]
