"""The private pytest API the plugin uses where pytest has no public one, checked so a
pytest release that changes it fails here, by name, instead of in a user's run.

- ``Metafunc._arg2fixturedefs``: which definition of a fixture a test gets (a user's
  override of ``mtd_device`` must not be parametrized behind its back);
- the terminal writer's ``_file`` and ``_current_line`` (``TerminalReporter._tw``): the
  one-line progress status is drawn past the writer's bookkeeping and put back exactly.
"""

from __future__ import annotations

import pytest

pytest_plugins = ["pytester"]


def test_metafunc_still_maps_fixture_names_to_their_definitions(
        pytester: pytest.Pytester) -> None:
    pytester.makeconftest("""
        import pytest
        seen = []
        @pytest.fixture
        def thing(): return 1
        def pytest_generate_tests(metafunc):
            defs = metafunc._arg2fixturedefs.get("thing") or ()
            seen.append(defs[-1].func.__module__)
        def pytest_collection_finish(session):
            assert seen == ["conftest"], seen
    """)
    pytester.makepyfile("def test_it(thing): assert thing == 1")
    pytester.runpytest_inprocess("-p", "no:folio", "-p", "no:cacheprovider").assert_outcomes(
        passed=1)


def test_the_terminal_writer_still_has_its_file_and_current_line(
        pytester: pytest.Pytester) -> None:
    pytester.makeconftest("""
        def pytest_sessionstart(session):
            tw = session.config.pluginmanager.get_plugin("terminalreporter")._tw
            assert hasattr(tw, "_file") and hasattr(tw._file, "write")
            assert isinstance(tw._current_line, str)
            assert isinstance(tw.fullwidth, int)
    """)
    pytester.makepyfile("def test_it(): pass")
    pytester.runpytest_inprocess("-p", "no:folio", "-p", "no:cacheprovider").assert_outcomes(
        passed=1)
