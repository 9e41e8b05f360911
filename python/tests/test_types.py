"""The TypedDicts of `smelt.types` equal to what the library returns, both ways: every key
of every result (samples.py: every function that returns one, on models that use every
part of a model file) is typed, with a type its value has; and every typed key occurs in
some result. After a change of a result's JSON, rewrite them with gen_types.py."""

import typing

import pytest

import smelt.types
import samples

NONE = type(None)


def hints(cls):
    return typing.get_type_hints(cls, vars(smelt.types))


def is_typeddict(tp):
    return isinstance(tp, type) and issubclass(tp, dict) and hasattr(tp, "__annotations__")


def check(value, tp, at, seen):
    """Fails unless `value` has type `tp`; records in `seen` each (TypedDict, key) met."""
    origin = typing.get_origin(tp)
    if tp is typing.Any:
        pytest.fail(f"{at}: typed Any")
    if origin is typing.Union:
        errors = []
        for member in typing.get_args(tp):
            try:
                check(value, member, at, seen)
                return
            except (AssertionError, pytest.fail.Exception) as e:
                errors.append(str(e))
        pytest.fail(f"{at}: {value!r:.80} is none of {tp}: {errors}")
    if tp is NONE:
        assert value is None, f"{at}: {value!r:.80} is not None"
    elif is_typeddict(tp):
        assert isinstance(value, dict), f"{at}: not a dict but {type(value).__name__}"
        types = hints(tp)
        for k, v in value.items():
            assert k in types, f"{at}: key {k!r} is not in {tp.__name__}"
            seen.add((tp.__name__, k))
            check(v, types[k], f"{at}.{k}", seen)
    elif origin is list:
        assert isinstance(value, list), f"{at}: not a list"
        (item,) = typing.get_args(tp)
        for i, v in enumerate(value):
            check(v, item, f"{at}[{i}]", seen)
    elif origin is dict:
        assert isinstance(value, dict), f"{at}: not a dict"
        key, item = typing.get_args(tp)
        for k, v in value.items():
            assert isinstance(k, key), f"{at}: key {k!r}"
            check(v, item, f"{at}.{k}", seen)
    elif tp is float:
        assert isinstance(value, (int, float)) and not isinstance(value, bool), f"{at}: {value!r}"
    else:
        assert type(value) is tp, f"{at}: {value!r:.80} is not {tp.__name__}"


def every_class(tp, found):
    """Every TypedDict reachable from `tp`."""
    if is_typeddict(tp):
        if tp in found:
            return
        found.add(tp)
        for t in hints(tp).values():
            every_class(t, found)
    for arg in typing.get_args(tp):
        every_class(arg, found)


def test_the_typeddicts_are_the_json_the_library_returns(tmp_path):
    seen = set()
    roots = set()
    for name, value in samples.samples(tmp_path):
        tp = getattr(smelt.types, name)
        roots.add(tp)
        check(value, tp, name, seen)
    found = set()
    for tp in roots:
        every_class(tp, found)
    typed = {(tp.__name__, k) for tp in found for k in hints(tp)}
    assert not typed - seen, f"typed keys no result has: {sorted(typed - seen)}"


def test_the_public_functions_name_these_types():
    for fn, tp in [(smelt.cost, "CostResult"), (smelt.match, "MatchResult"),
                   (smelt.predict, "PredictResult"), (smelt.mfu, "MfuResult"),
                   (smelt.predict_step, "StepResult"),
                   (smelt.launcher_flops, "LauncherFlopsResult"), (smelt.calibrate, "Calibration"),
                   (smelt.merge, "GridResult"), (smelt.import_hf, "ModelDict"),
                   (smelt.plan, "PlanResult"), (smelt.collect, "CollectResult")]:
        assert tp in str(typing.get_type_hints(fn, vars(smelt) | vars(smelt.types))["return"])
    model = hints(smelt.types.Model)
    for key in ("full_attention", "recurrent", "blocks", "qk_norm", "attention_bias"):
        assert key in model
    assert "shared_experts" in hints(smelt.types.Moe) and "shared" not in hints(smelt.types.Moe)
    assert hints(smelt.types.GainResult)["reference"] is smelt.types.GainFit
    for key in ("activations", "training"):
        assert key in hints(smelt.types.CostResult)
    assert "predicted_time" in hints(smelt.types.MatchResult)
