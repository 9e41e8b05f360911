"""Fixtures shared by the test files."""

import pytest


@pytest.fixture
def two_architectures(tmp_path):
    """An endpoints CSV of two architectures on one synthetic surface (the second with a
    smaller A: a positive gain), 27 endpoints each (three token counts: with two, E, K and c
    would not be determined, and smelt refuses the fit)."""
    rows = ["arch,cell,F,S,D,loss"]
    for arch, a in (("base", 400.0), ("smelt", 300.0)):
        for i, f in enumerate((1e9, 3e9, 1e10)):
            for s in (0.0, 0.5, 0.9):
                for d in (1e10, 1e11, 1e12):
                    loss = 1.8 + a * (1 - s) ** 0.3 / f**0.3 + 400.0 / d**0.3
                    rows.append(f"{arch},c{i}-{s},{f:e},{s},{d:e},{loss!r}")
    csv = tmp_path / "endpoints.csv"
    csv.write_text("\n".join(rows) + "\n")
    return csv
