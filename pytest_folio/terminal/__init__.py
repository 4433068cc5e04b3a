"""What the run prints for people on the terminal: the width every line fits
(:mod:`.textwidth`), live progress (:mod:`.progress`), the skip summary (:mod:`.skips`)
and the notice of stale failures (:mod:`.stale`)."""
