"""What Linux defines, with its names: the page-cache constants, the UAPI constants and
the MTD core's range checks. The lowest layer: it imports nothing else of the package."""
