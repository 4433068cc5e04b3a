"""The kernel's page-cache constants the model is built on (x86-64 values)."""

PAGE_SHIFT = 12
PAGE_SIZE = 1 << PAGE_SHIFT
# include/linux/pagemap.h: min(PMD_ORDER, MAX_PAGE_ORDER) on x86-64, i.e. 2 MiB folios.
MAX_PAGECACHE_ORDER = 9
