"""Fixtures shared by the test files."""

import pytest

import samples


@pytest.fixture
def two_architectures(tmp_path):
    """An endpoints CSV of two architectures on one synthetic surface (the second with a
    smaller A: a positive gain), 27 endpoints each (`samples.two_architectures`)."""
    return samples.two_architectures(tmp_path)
