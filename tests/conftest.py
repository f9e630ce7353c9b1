"""Shared pytest configuration.

Hypothesis profiles: ``ci`` (default; fast enough for a 2-core CI machine) and ``thorough``
(10 000 examples per property, for a long local run). Select with the environment variable
``HYPOTHESIS_PROFILE``, e.g. ``HYPOTHESIS_PROFILE=thorough python3 -m pytest tests/test_interp_vs_naive.py``.
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

# the tests import their helpers (naive.py, cases.py) as top-level modules
sys.path.insert(0, str(Path(__file__).resolve().parent))

_COMMON = dict(deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
settings.register_profile("ci", max_examples=60, derandomize=True, print_blob=True, **_COMMON)
settings.register_profile("thorough", max_examples=10_000, print_blob=True, **_COMMON)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


@pytest.fixture
def one_thread():
    """PyTorch on one thread for the test (the CI machine has 2 shared cores; OpenMP spinning costs more
    than it gains). Modules that run compiled models use it for every test:
    ``pytestmark = pytest.mark.usefixtures("one_thread")``."""
    import torch  # (here, not at the top: most test modules never load PyTorch)

    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)
