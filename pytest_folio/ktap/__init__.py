"""The kernel's own tests through KTAP: a log read into a tree of results (:mod:`.log`),
its tests as the session's items (:mod:`.items`), and the runner that makes one log of
KTAP-speaking programs' output (:mod:`.run`, run in the VM guest)."""
