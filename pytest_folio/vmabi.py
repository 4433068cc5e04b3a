"""What the VM runner's host and guest both name: the console marker the guest's lines
start with and the guest's directories. A module of its own at the bottom, so guest-side
code below the suites (:mod:`pytest_folio.mtdtests.kernel_powercut`) shares the names
with the runner without importing it."""

MARK = "@@folio-vm"
GUEST_RUN = "/run/folio"  # everything the guest writes lives under here
GUEST_OUT = f"{GUEST_RUN}/out"  # the writable share: results travel back through it
