"""Issue 38's last items and a hostile pass from Python: errors name the field (a NaN's own
path, an empty path's keyword), a model file's path is exported as `smelt export` writes it,
an export's router is one its family builds, a gain without a frontier is refused, and the
guide's laptop budget trains."""

import json
import math
import pathlib

import pytest

import smelt

ROOT = pathlib.Path(__file__).resolve().parents[2]
BUDGETS = ROOT / "budgets"
HF = ROOT / "tests" / "data" / "hf"
MODEL = BUDGETS / "base-200m-s95.toml"


@pytest.mark.parametrize(
    "call, field",
    [
        (lambda: smelt.predict(MODEL, card="h200", tokens=math.nan), "device.tokens"),
        (lambda: smelt.predict(MODEL, peak=math.inf), "device.peak"),
        (lambda: smelt.cost(MODEL, context=math.nan), "workload.context"),
        (lambda: smelt.cost(MODEL, doc_lengths={100: math.nan}), "workload.doc_lengths[0][1]"),
        (lambda: smelt.sweep(BUDGETS / "match-200m-s95.toml", "span", [math.nan]), "values[0]"),
        (lambda: smelt.mfu(MODEL, tokens_per_second=math.inf, card="h200"), "tokens_per_second"),
    ],
)
def test_a_nan_is_named_where_it_is(call, field):
    """A NaN or an infinity was named by its keyword only (`device`, `workload`)."""
    with pytest.raises(smelt.SmeltError, match="is NaN or an infinity") as e:
        call()
    assert e.value.field == field


def test_an_empty_path_and_a_bare_dict_are_named():
    """An empty path said ": No such file or directory"; a dict without `model` quoted a
    position in a JSON text the caller never wrote."""
    for call, field in [(lambda: smelt.cost(""), "spec"), (lambda: smelt.cost(MODEL, against=" "), "against")]:
        with pytest.raises(smelt.SmeltError, match="is an empty path") as e:
            call()
        assert e.value.field == field
    with pytest.raises(smelt.SmeltError) as e:
        smelt.cost({})
    assert "missing field `model`" in str(e.value) and "line 1" not in str(e.value)


def test_a_model_files_path_is_exported_as_smelt_export_writes_it(tmp_path):
    """A model file's path was read as a budget and refused ("model: belongs in a model
    file"); it is the model, as `smelt export MODEL` writes it; a config.json's path carries
    its keys."""
    out = smelt.export_hf(MODEL, tmp_path / "a", vocab=1000)
    assert out["residuals"] is None and [m["looped"] for m in out["models"]] == [False]
    config = json.loads((tmp_path / "a" / "config.json").read_text())
    assert config["hidden_size"] == 1280 and config["vocab_size"] == 1000
    written = smelt.export_toml(MODEL, tmp_path / "m.toml")
    assert written["models"][0]["path"] == str(tmp_path / "m.toml")
    assert smelt.cost(tmp_path / "m.toml")["params"] == smelt.cost(MODEL)["params"]
    smelt.export_hf(HF / "mixtral-8x7b-v0.1.json", tmp_path / "b")
    carried = json.loads((tmp_path / "b" / "config.json").read_text())
    assert carried["rope_theta"] == json.loads((HF / "mixtral-8x7b-v0.1.json").read_text())["rope_theta"]
    for kwargs, field in [({"force": True}, "force"), ({"vocab": 0}, "vocab"), ({"vocab": 1 << 25}, "vocab")]:
        with pytest.raises(smelt.SmeltError) as e:
            smelt.export_hf(MODEL, tmp_path / "c", **kwargs)
        assert e.value.field == field
    assert not (tmp_path / "c").exists()


def test_an_export_refuses_a_router_its_family_does_not_build(tmp_path):
    model = smelt.import_hf(HF / "mixtral-8x7b-v0.1.json")
    assert model["model"]["moe"]["router"] == "softmax_renormalised_fp32"
    model["model"]["moe"]["router"] = "softmax"
    with pytest.raises(smelt.SmeltError, match="MixtralForCausalLM") as e:
        smelt.export_hf(model, tmp_path / "x")
    assert e.value.field == "model.moe.router"
    assert not (tmp_path / "x").exists()


def test_a_gain_without_a_frontier_is_refused(tmp_path):
    rows = ["arch,cell,F,S,D,loss"]
    for arch, a in (("base", -0.5), ("smelt", 0.3)):
        for i, f in enumerate((1e9, 3e9, 1e10)):
            for s in (0.0, 0.5, 0.9):
                for d in (1e10, 1e11, 1e12):
                    loss = 1.8 + 400.0 * (1 - s) ** 0.3 / f**a + 400.0 / d**0.3
                    rows.append(f"{arch},c{i}-{s},{f:e},{s},{d:e},{loss!r}")
    csv = tmp_path / "endpoints.csv"
    csv.write_text("\n".join(rows) + "\n")
    with pytest.raises(smelt.SmeltError, match="no compute-optimal frontier") as e:
        smelt.gain(csv, "base", "smelt", starts="small")
    assert e.value.field == "reference"


def test_the_guides_laptop_budget_trains():
    """The guide's launcher lines on the laptop budget it names: the looped model
    Transformers builds has the parameter count the guide states."""
    torch = pytest.importorskip("torch", reason="torch is not installed (CI installs it)")
    transformers = pytest.importorskip("transformers", reason="transformers is not installed")
    guide = (ROOT / "docs" / "guide.md").read_text()
    assert "`examples/study/match-s-s75.toml`" in guide and "has 890,928 parameters" in guide
    import tempfile

    with tempfile.TemporaryDirectory() as out:
        match = smelt.match(ROOT / "examples" / "study" / "match-s-s75.toml", strict=True)
        smelt.export_hf(match, out, vocab=256)
        config = transformers.AutoConfig.from_pretrained(out, trust_remote_code=True)
        model = transformers.AutoModelForCausalLM.from_config(config, trust_remote_code=True)
        assert sum(p.numel() for p in model.parameters()) == 890_928
        optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4)
        batch = {"input_ids": torch.randint(0, 256, (2, 64))}
        loss = model(**batch, labels=batch["input_ids"]).loss
        loss.backward()
        optimizer.step()
        assert math.isfinite(loss.item())


BUDGET = BUDGETS / "match-200m-s95-small.toml"


@pytest.mark.parametrize(
    "call, field",
    [
        (lambda v: smelt.mfu(MODEL, 1e5, gpus=v, card="h200"), "gpus"),
        (lambda v: smelt.cost(MODEL, context=v), "workload.context"),
        (lambda v: smelt.predict(MODEL, card="h200", tokens=v), "device.tokens"),
        (lambda v: smelt.match(BUDGET, top=v), "top"),
    ],
)
@pytest.mark.parametrize("value, got", [(2**70, "1.1805916207174113e"), (2**64, "1.8446744073709552e"), (-1, "-1")])
def test_an_integer_no_field_can_hold_names_the_field_and_the_range(call, field, value, got):
    """An int past 2^64 said "invalid type: floating point `1.18e21`, expected u64" (JSON
    carries it as a float); a negative one "expected u64". Both name the field and the
    range it takes."""
    with pytest.raises(smelt.SmeltError) as e:
        call(value)
    assert e.value.field == field
    assert e.value.rule.startswith(f"must be a whole number from 0 to {2**64 - 1}; got {got}"), e.value.rule
    assert "expected u64" not in str(e.value) and "usize" not in str(e.value)


def test_every_smelt_error_has_field_and_rule():
    """A parser's error (`cost({})`) had `field` but no `rule` (its message is the rule now);
    one raised by hand, or naming no field, has both, None."""
    with pytest.raises(smelt.SmeltError) as e:
        smelt.cost({})
    assert e.value.field == "model"
    assert "missing field `model`" in e.value.rule
    bare = smelt.SmeltError("raised by hand")
    assert bare.field is None and bare.rule is None
    with pytest.raises(smelt.SmeltError) as e:
        smelt.cost(BUDGETS / "no-such-file.toml")
    assert hasattr(e.value, "field") and hasattr(e.value, "rule")
