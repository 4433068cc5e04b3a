"""The kernel's base constants every layer shares (x86-64 values).

The bottom layer: it imports nothing of ours, so targets, timing and the plugin can name
PAGE_SIZE without importing the model package.
"""

PAGE_SHIFT = 12
PAGE_SIZE = 1 << PAGE_SHIFT
# include/linux/pagemap.h: min(PMD_ORDER, MAX_PAGE_ORDER) on x86-64, i.e. 2 MiB folios.
MAX_PAGECACHE_ORDER = 9
