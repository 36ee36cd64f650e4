"""The integration suite's scheduling over pytest-xdist workers (tests/support/schedule.py says why)."""

from __future__ import annotations

import pytest

from support.schedule import make_scheduler


@pytest.hookimpl(tryfirst=True)
def pytest_xdist_make_scheduler(config, log):
    return make_scheduler(config, log)
