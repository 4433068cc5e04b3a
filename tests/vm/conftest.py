"""The VM tests' marker: ``vm_boot`` is the real boot (slow under TCG; CI's vm stage boots
anyway, so a unit stage may leave it out with ``-m "not vm_boot"``)."""

import pytest


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "vm_boot: boots a real kernel under qemu (runs only where qemu is present)")
