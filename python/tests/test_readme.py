"""The guide's launcher lines (docs/guide.md, "Hand the looped model to a trainer") run as written: the looped model is matched, exported, built
by Transformers and trained (on a tiny budget in place of the 200M one, so that CI trains it
in seconds; every other character of the block is the README's)."""

import pathlib
import re

import pytest

torch = pytest.importorskip("torch", reason="torch is not installed (CI installs it)")
pytest.importorskip("transformers", reason="transformers is not installed")

ROOT = pathlib.Path(__file__).resolve().parents[2]

TINY = """
name = "tiny"
[baseline.model]
layers = 4
hidden = 64
heads = 4
kv_heads = 2
head_dim = 16
moe = { experts = 8, top_k = 2, expert_ffn = 32 }
[baseline.workload]
context = 32
mean_doc_len = 32
[recipe]
span = "half"
repeats = 2
[lattice]
hidden = { step = 16, min = 32, max = 64 }
experts = { step = 1, min = 2, max = 16 }
expert_ffn = { ratio = "1/2", multiple = 8 }
head_dim = { step = 8, min = 8, max = 16 }
"""


def launcher_block():
    readme = (ROOT / "docs" / "guide.md").read_text()
    section = readme.split("## Hand the looped model to a trainer", 1)[1]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


def test_the_readme_launcher_trains_the_looped_model(tmp_path, monkeypatch):
    code = launcher_block()
    assert len([line for line in code.splitlines() if line.strip()]) <= 11
    budget = tmp_path / "tiny.toml"
    assert '"budgets/match-200m-s95.toml"' in code
    code = code.replace('"budgets/match-200m-s95.toml"', "budget")
    monkeypatch.chdir(tmp_path)
    torch.manual_seed(0)
    batches = [{"input_ids": torch.randint(0, 50304, (2, 16))} for _ in range(2)]
    budget.write_text(TINY)
    scope = {"batches": batches, "budget": str(budget)}
    exec(compile(code, "docs/guide.md", "exec"), scope)
    model, match = scope["model"], scope["match"]
    assert model.config.model_type == "smelt_looped"
    loop = match["looped"]["model"]["loop"]
    assert (model.config.loop_span, model.config.loop_repeats) == (loop["span"], loop["repeats"])
    assert all(p.grad is None for p in model.parameters())  # zero_grad ran after each step
