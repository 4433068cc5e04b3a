"""Fresh implementations written by a new user from the docs alone (not the kit's own
helpers): file systems and MTD devices in styles unlike each other and the examples."""
