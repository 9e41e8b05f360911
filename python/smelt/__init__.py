"""smelt: compute-matched budgets (training FLOPs, parameters, KV cache) for looped MoE
Transformers.

Every function takes plain dicts (the structure of smelt's files, as `json.loads` or
`tomllib.loads` would give) or paths (`str` or `os.PathLike`), and returns plain dicts with
the fields of the command line's JSON output (`smelt ... --format json`); their shapes are
in `smelt.types`. Every bad input raises `SmeltError` (a `ValueError`) naming the field and
the rule (`err.field`), or `TypeError` for a value of the wrong type; Ctrl-C interrupts long
calls (`KeyboardInterrupt`).

Workload keywords, on `cost`, `match`, `grid`, `sweep`, `bench` and the exports, replace
that part of the file's own workload, as the command line's flags do: `context` (tokens),
`mean_doc_len` (tokens), `doc_lengths` (a CSV path with the header `length,count`, a list
of `(length, count)` pairs, or a dict `{length: count}`), `dense` (dense attention instead
of causal).

Long calls (`grid`, `sweep`, `fit`, `gain`, `bench`) take `progress`, a callable
`progress(task, done, total)` called as the work advances, and `quiet` (default True;
False prints progress on standard error).
"""

from __future__ import annotations

import json
import math
import os
import tempfile
from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple, Union

from . import _smelt
from .types import (
    BenchResult,
    CollectResult,
    CostResult,
    ExportResult,
    FitResult,
    GainResult,
    GridResult,
    MatchResult,
    ModelDict,
    PlanResult,
    Result,
    SweepResult,
)

__all__ = [
    "SmeltError",
    "ToleranceError",
    "cost",
    "match",
    "grid",
    "sweep",
    "fit",
    "gain",
    "bench",
    "import_hf",
    "export_hf",
    "export_toml",
    "families",
    "cards",
    "launcher_flops",
    "mfu",
    "predict",
    "plan",
    "collect",
    "__version__",
]

__version__: str = _smelt.__version__

SmeltError = _smelt.SmeltError
SmeltError.field = None
SmeltError.rule = None

Source = Union[Mapping[str, Any], str, "os.PathLike[str]"]
"""A model, budget or grid: a dict of the file's structure, or a path to the file."""

Progress = Callable[[str, int, int], Any]
"""`progress(task, done, total)`: `total` 0 when unknown."""


class ToleranceError(SmeltError):
    """A result outside the budget's tolerances, raised with `strict=True` (the command line
    exits 3). `result` is the result, as it would have been returned; `broken` names each
    broken tolerance."""

    def __init__(self, message: str, result: Dict[str, Any], broken: List[str]) -> None:
        super().__init__(message)
        self.result = result
        self.broken = broken
        self.field = "tolerance"
        self.rule = message


def _error(field: str, rule: str) -> SmeltError:
    err = SmeltError(f"{field}: {rule}")
    err.field = field
    err.rule = rule
    return err


def _wrong_type(field: str, want: str, value: Any) -> TypeError:
    return TypeError(f"{field}: expected {want}, got {type(value).__name__}")


def _int(field: str, value: Any, lo: int, hi: int) -> int:
    """`value` as an int from `lo` to `hi`, or SmeltError/TypeError naming `field`."""
    if isinstance(value, bool) or not isinstance(value, int):
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        else:
            raise _wrong_type(field, "an integer", value)
    if not lo <= value <= hi:
        raise _error(field, f"must be between {lo} and {hi} (got {value})")
    return value


def _opt_int(field: str, value: Any, lo: int, hi: int) -> Optional[int]:
    return None if value is None else _int(field, value, lo, hi)


def _float(field: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise _wrong_type(field, "a number", value)
    try:
        return float(value)
    except OverflowError:
        raise _error(field, f"must be a finite number (got {value})") from None


def _str(field: str, value: Any) -> str:
    if not isinstance(value, str):
        raise _wrong_type(field, "a string", value)
    return value


def _bool(field: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise _wrong_type(field, "True or False", value)
    return value


_U64 = 2**64 - 1


def _path(field: str, value: Any) -> str:
    """A path argument as text; TOML or JSON text given instead is refused plainly."""
    if not isinstance(value, (str, os.PathLike)):
        raise _wrong_type(field, "a path (str or os.PathLike)", value)
    path = os.fspath(value)
    if isinstance(path, bytes):
        path = os.fsdecode(path)
    if not os.path.exists(path):
        stripped = path.lstrip()
        if "\n" in path or stripped.startswith(("[", "{")) or (" = " in path and os.sep not in path):
            raise _error(
                field,
                "got the text of a file where a path is expected: pass a path to the file, or "
                "its structure as a dict (e.g. tomllib.loads(text) or json.loads(text))",
            )
    return path


def _plain(value: Any) -> Any:
    """`json.dumps`' default: a path inside a dict is its text."""
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    if isinstance(value, (set, frozenset)):
        return sorted(value)
    raise TypeError(type(value).__name__)


def _dumps(field: str, value: Any) -> str:
    try:
        return json.dumps(value, default=_plain, allow_nan=False)
    except RecursionError:
        raise _error(field, "is nested too deeply to be a model, budget or grid") from None
    except ValueError:
        raise _error(field, "holds NaN or an infinity, which no field accepts") from None
    except TypeError as e:
        raise TypeError(
            f"{field}: holds a value of type {e} (only dicts, lists, str, int, float, bool, "
            "None and paths can be read)"
        ) from None


def _source(field: str, value: Any) -> Tuple[str, str]:
    """A model, budget or grid for the native layer: ("path", PATH), ("json", TEXT), or
    ("hf", TEXT) for a Hugging Face config dict (one with `model_type` and no `model`)."""
    if isinstance(value, Mapping):
        kind = "hf" if "model_type" in value and "model" not in value else "json"
        return kind, _dumps(field, dict(value))
    if isinstance(value, (str, os.PathLike)):
        return "path", _path(field, value)
    raise _wrong_type(field, "a dict or a path", value)


def _workload(
    context: Optional[int],
    mean_doc_len: Optional[int],
    doc_lengths: Any,
    dense: bool,
) -> Optional[str]:
    changes: Dict[str, Any] = {}
    if context is not None:
        changes["context"] = _int("context", context, 1, _U64)
    if mean_doc_len is not None:
        changes["mean_doc_len"] = _int("mean_doc_len", mean_doc_len, 1, _U64)
    if doc_lengths is not None:
        if isinstance(doc_lengths, (str, os.PathLike)):
            changes["doc_lengths_path"] = _path("doc_lengths", doc_lengths)
        else:
            pairs = doc_lengths.items() if isinstance(doc_lengths, Mapping) else doc_lengths
            if not isinstance(pairs, Iterable):
                raise _wrong_type("doc_lengths", "a path, a dict or a list of pairs", doc_lengths)
            hist = []
            for i, pair in enumerate(pairs):
                if not isinstance(pair, Sequence) or isinstance(pair, str) or len(pair) != 2:
                    raise _error(f"doc_lengths[{i}]", "must be a (length, count) pair")
                hist.append([
                    _int(f"doc_lengths[{i}].length", pair[0], 0, _U64),
                    _int(f"doc_lengths[{i}].count", pair[1], 0, _U64),
                ])
            changes["doc_lengths"] = hist
    if _bool("dense", dense):
        changes["dense"] = True
    return json.dumps(changes) if changes else None


def _with_loops(value: Any) -> Any:
    """Every model dict in a result with its `loop` key present (None without a loop)."""
    if isinstance(value, dict):
        model = value.get("model")
        if isinstance(model, dict) and "layers" in model and "moe" in model:
            model.setdefault("loop", None)
        for v in value.values():
            _with_loops(v)
    elif isinstance(value, list):
        for v in value:
            _with_loops(v)
    return value


def _loads(text: str) -> Any:
    return _with_loops(json.loads(text))


class _InlineBaseline:
    """A budget whose Baseline is a Hugging Face config given inline (a dict with
    `model_type`): the config is written to a temporary config.json the budget names, and
    error messages name it as the inline config."""

    def __init__(self, field: str, budget: Any) -> None:
        self.field = field
        self.budget = budget
        self.dir: Optional[tempfile.TemporaryDirectory] = None

    def __enter__(self) -> Any:
        b = self.budget
        if isinstance(b, Mapping) and isinstance(b.get("baseline"), Mapping):
            base = b["baseline"]
            if "model_type" in base and "model" not in base:
                self.dir = tempfile.TemporaryDirectory(prefix="smelt-baseline-")
                path = os.path.join(self.dir.name, "config.json")
                with open(path, "w", encoding="utf-8") as f:
                    f.write(_dumps(f"{self.field}.baseline", dict(base)))
                return {**b, "baseline": path}
        return b

    def __exit__(self, kind: Any, err: Any, tb: Any) -> None:
        if self.dir is not None:
            if isinstance(err, SmeltError) and err.args:
                path = os.path.join(self.dir.name, "config.json")
                err.args = (str(err.args[0]).replace(f"'{path}'", "the inline config.json")
                            .replace(path, "the inline config.json"),) + err.args[1:]
            self.dir.cleanup()

    def config(self) -> Optional[str]:
        """The inline config as JSON text, when there is one."""
        if self.dir is None:
            return None
        return _dumps(f"{self.field}.baseline", dict(self.budget["baseline"]))


def _base_dir(base_dir: Any) -> Optional[str]:
    return None if base_dir is None else _path("base_dir", base_dir)


def _broken(result: Dict[str, Any]) -> List[str]:
    """Each broken tolerance of a match, grid or sweep result, in words."""
    if "cells" in result:
        return [f"{c['scale']} {c['sparsity_label']}: {', '.join(c['broken'])}"
                for c in result["cells"] if c["within_tolerance"] is False]
    if "rows" in result:
        return [f"{result['knob']} {r['value']}: {', '.join(r['broken'])}"
                for r in result["rows"] if r["within_tolerance"] is False]
    return [", ".join(result.get("broken", []))] if result.get("within_tolerance") is False else []


def _checked(result: Any, strict: bool) -> Any:
    if _bool("strict", strict):
        broken = _broken(result)
        if broken:
            raise ToleranceError("tolerance not met: " + "; ".join(broken), result, broken)
    return result


def _progress(progress: Optional[Progress], quiet: bool) -> Tuple[Optional[Progress], bool]:
    if progress is not None and not callable(progress):
        raise _wrong_type("progress", "a callable progress(task, done, total)", progress)
    return progress, _bool("quiet", quiet)


def cost(
    spec: Source,
    against: Optional[Source] = None,
    *,
    context: Optional[int] = None,
    mean_doc_len: Optional[int] = None,
    doc_lengths: Any = None,
    dense: bool = False,
) -> CostResult:
    """Parameters, FLOPs per token, KV cache and sparsity of a model: the fields of
    `smelt cost --format json`.

    `spec` is a model dict ({"model": {...}, "workload": {...}}), a Hugging Face config dict
    (one with `model_type`), or a path to a model file, a config.json or a model directory
    smelt exported. With `against` (a Baseline, the same kinds), the fields of
    `smelt cost --against`. The workload keywords replace the file's workload (module docs).
    """
    w = _workload(context, mean_doc_len, doc_lengths, dense)
    other = None if against is None else _source("against", against)
    return _loads(_smelt.cost(_source("spec", spec), other, w))


def match(
    budget: Source,
    top: int = 1,
    *,
    base_dir: Optional[Union[str, "os.PathLike[str]"]] = None,
    force: bool = False,
    advise: bool = False,
    strict: bool = False,
    context: Optional[int] = None,
    mean_doc_len: Optional[int] = None,
    doc_lengths: Any = None,
    dense: bool = False,
) -> MatchResult:
    """The looped configuration matching a budget: the fields of `smelt match --format json`.

    `budget` is a budget dict or a path to a budget file; its `baseline` may be a path, a
    model dict, or a Hugging Face config dict. Relative paths in a dict are taken from
    `base_dir` (default: the working directory). `top` (1 to 1000) keeps the best
    configurations (`ranked`); `force` searches a lattice over the size limit; `advise`
    explains the floor and re-solves refinements (`floor`, `advice`); `strict` raises
    `ToleranceError` when a tolerance is broken (the command line exits 3).
    """
    top = _int("top", top, 1, 1000)
    w = _workload(context, mean_doc_len, doc_lengths, dense)
    args = (_base_dir(base_dir), top, _bool("force", force), _bool("advise", advise), w)
    with _InlineBaseline("budget", budget) as b:
        result = _loads(_smelt.match_(_source("budget", b), *args))
    return _checked(result, strict)


def grid(
    grid: Source,
    *,
    base_dir: Optional[Union[str, "os.PathLike[str]"]] = None,
    force: bool = False,
    strict: bool = False,
    context: Optional[int] = None,
    mean_doc_len: Optional[int] = None,
    doc_lengths: Any = None,
    dense: bool = False,
    progress: Optional[Progress] = None,
    quiet: bool = True,
) -> GridResult:
    """Every cell of a grid matched, with the summary: the fields of
    `smelt grid --format json` (`cells`, `summary`). `strict` raises `ToleranceError` when a
    cell breaks a tolerance."""
    w = _workload(context, mean_doc_len, doc_lengths, dense)
    progress, quiet = _progress(progress, quiet)
    text = _smelt.grid(_source("grid", grid), _base_dir(base_dir), _bool("force", force), w,
                       progress, quiet)
    return _checked(_loads(text), strict)


def sweep(
    budget: Source,
    knob: str,
    values: Union[str, Sequence[int]],
    *,
    base_dir: Optional[Union[str, "os.PathLike[str]"]] = None,
    force: bool = False,
    strict: bool = False,
    context: Optional[int] = None,
    mean_doc_len: Optional[int] = None,
    doc_lengths: Any = None,
    dense: bool = False,
    progress: Optional[Progress] = None,
    quiet: bool = True,
) -> SweepResult:
    """The budget re-matched for every value of one recipe knob ("span", "depth" or
    "repeats"): the fields of `smelt sweep --format json`. `values` is a list of integers
    or a string such as "0..=12" or "8,10,12" (1 to 1024 values)."""
    _str("knob", knob)
    if isinstance(values, str):
        listed, text = None, values
    elif isinstance(values, Iterable):
        listed = [_int(f"values[{i}]", v, 0, _U64) for i, v in enumerate(values)]
        if not listed:
            raise _error("values", "needs at least one value")
        text = None
    else:
        raise _wrong_type("values", "a list of integers or a string such as '0..=12'", values)
    w = _workload(context, mean_doc_len, doc_lengths, dense)
    progress, quiet = _progress(progress, quiet)
    with _InlineBaseline("budget", budget) as b:
        out = _smelt.sweep(_source("budget", b), knob, listed, text, _base_dir(base_dir),
                           _bool("force", force), w, progress, quiet)
    return _checked(_loads(out), strict)


def fit(
    endpoints: Union[str, "os.PathLike[str]"],
    group: Optional[str] = None,
    starts: str = "standard",
    search: str = "screened",
    *,
    progress: Optional[Progress] = None,
    quiet: bool = True,
) -> FitResult:
    """A scaling-law surface per group of an endpoints CSV (a path; columns F, S, D, loss
    and optional group columns): the fields of `smelt fit --format json` (`fits`). `starts`
    is "standard", "small" or "paper"; `search` is "screened" (every start scored, L-BFGS
    from the best-scored) or "exhaustive" (L-BFGS from every start), as `--search`."""
    progress, quiet = _progress(progress, quiet)
    g = None if group is None else _str("group", group)
    return _loads(_smelt.fit(_path("endpoints", endpoints), g, _str("starts", starts),
                             _str("search", search), progress, quiet))


def gain(
    endpoints: Union[str, "os.PathLike[str]"],
    reference: str,
    target: str,
    group: str = "arch",
    compute: Sequence[float] = (1e20, 1e21),
    sparsity: Sequence[float] = (0.85, 0.95, 0.97),
    bootstrap: int = 0,
    seed: int = 0,
    starts: str = "standard",
    search: str = "screened",
    *,
    progress: Optional[Progress] = None,
    quiet: bool = True,
) -> GainResult:
    """The compute-efficiency gain of `target` over `reference` (two values of the `group`
    column of an endpoints CSV, a path) at each compute and sparsity: the fields of
    `smelt gain --format json`. `bootstrap` resamples (0 to 1,000,000) give intervals,
    drawn from `seed`; `starts` and `search` as for `fit`."""
    progress, quiet = _progress(progress, quiet)
    computes = [_float(f"compute[{i}]", c) for i, c in enumerate(compute)]
    sparsities = [_float(f"sparsity[{i}]", s) for i, s in enumerate(sparsity)]
    text = _smelt.gain(
        _path("endpoints", endpoints), _str("reference", reference), _str("target", target),
        _str("group", group), computes, sparsities, _int("bootstrap", bootstrap, 0, 1_000_000),
        _int("seed", seed, 0, _U64), _str("starts", starts), _str("search", search),
        progress, quiet,
    )
    return _loads(text)


def bench(
    model: Source,
    against: Optional[Source] = None,
    backend: str = "cpu",
    tokens: Optional[int] = None,
    routing: str = "balanced",
    rounds: int = 3,
    max_seconds: float = 600.0,
    peak: Optional[float] = None,
    *,
    repeats: Any = None,
    context: Optional[int] = None,
    mean_doc_len: Optional[int] = None,
    doc_lengths: Any = None,
    dense: bool = False,
    progress: Optional[Progress] = None,
    quiet: bool = True,
) -> BenchResult:
    """The GEMMs of one training step of the layer stack timed on `backend` ("cpu", or
    "cuda" in a build with it): the fields of `smelt bench --format json`. `model` and
    `against` are as for `cost`; `tokens` defaults to the backend's; `rounds` timed rounds
    per kernel shape (1 to 100; `repeats=` is refused: it names a loop's executions);
    `max_seconds` bounds the run. `peak` is the device's dense peak in TFLOP/s, as the
    command line's `--peak` (default: a GPU's datasheet peak when the device is known)."""
    if repeats is not None:
        raise _error("repeats", "is now rounds= (timed rounds per kernel shape); repeats "
                                "names a loop's executions")
    if peak is not None:
        peak = _float("peak", peak)
        if not (math.isfinite(peak) and peak > 0):
            raise _error("peak", f"must be a positive number of TFLOP/s (got {peak})")
        if peak > 1e6:
            raise _error("peak", f"is in TFLOP/s, as --peak is; {peak:g} looks like FLOP/s: "
                                 f"pass {peak / 1e12:g}")
    w = _workload(context, mean_doc_len, doc_lengths, dense)
    progress, quiet = _progress(progress, quiet)
    other = None if against is None else _source("against", against)
    text = _smelt.bench(
        _source("model", model), other, _str("backend", backend),
        _opt_int("tokens", tokens, 1, 1 << 20), _str("routing", routing),
        _int("rounds", rounds, 1, 100), _float("max_seconds", max_seconds), peak, w,
        progress, quiet,
    )
    return _loads(text)


def import_hf(config: Source) -> ModelDict:
    """A Hugging Face config.json (a dict, or a path to the file or to a model directory
    smelt exported) as a model dict, valid input to `cost`. The embedding and LM head are
    counted (MTP modules are not); the workload is smelt's default (4096-token context, mean document length
    991, causal). What the cost model cannot describe is refused with a SmeltError saying
    why.

    Families (model_type): mixtral, qwen2_moe, qwen3_moe, olmoe, deepseek_v2, deepseek_v3,
    deepseek_v32, kimi_k2, glm4_moe, glm_moe_dsa, gpt_oss, minimax_m2, llama4_text (and a
    llama4 wrapper's text decoder), granitemoe, phimoe, qwen3_next, qwen3_5_moe_text (and a
    qwen3_5_moe wrapper's text decoder), gemma4_text (and a gemma4 wrapper's text decoder),
    nemotron_h.
    `families()` gives each with what it is.
    """
    return _loads(_smelt.import_hf(_source("config", config)))


def launcher_flops(
    spec: Source,
    against: Optional[Source] = None,
    *,
    context: Optional[int] = None,
    mean_doc_len: Optional[int] = None,
    doc_lengths: Any = None,
    dense: bool = False,
) -> Dict[str, Any]:
    """Per-token training FLOPs as each training stack's log counts them (Megatron-LM,
    torchtitan, 6N, PaLM's 6N + attention), beside smelt's exact count, with the features
    each convention ignores: the fields of `smelt cost --conventions --format json`. With
    `against` (the Baseline; `spec` is then the looped model), each convention's looped /
    Baseline ratio beside the exact one: what a launcher's log would say of the pair."""
    w = _workload(context, mean_doc_len, doc_lengths, dense)
    other = None if against is None else _source("against", against)
    return _loads(_smelt.launcher_flops(_source("spec", spec), other, w))


def mfu(
    spec: Source,
    tokens_per_second: float,
    gpus: int = 1,
    card: Optional[str] = None,
    peak: Optional[float] = None,
    *,
    context: Optional[int] = None,
    mean_doc_len: Optional[int] = None,
    doc_lengths: Any = None,
    dense: bool = False,
) -> Dict[str, Any]:
    """Model FLOP/s and MFU of a training run (`tokens_per_second` over the whole run, on
    `gpus` GPUs) under the exact count and each launcher convention: the fields of
    `smelt mfu --format json`. Give `card` (an id of smelt's table of cards, e.g.
    "h100-sxm", or a driver's name for one: "h100" is the SXM card, as for `predict`; an
    unknown one is an error listing them) or `peak` (a dense peak per GPU in TFLOP/s, as
    `--peak`)."""
    tps = _float("tokens_per_second", tokens_per_second)
    g = _int("gpus", gpus, 1, _U64)
    c = None if card is None else _str("card", card)
    p = None if peak is None else _float("peak", peak)
    if (c is None) == (p is None):
        raise _error("card", "give a card or a peak, not both or neither")
    w = _workload(context, mean_doc_len, doc_lengths, dense)
    return _loads(_smelt.mfu(_source("spec", spec), tps, g, c, p, w))


def predict(
    model: Source,
    against: Optional[Source] = None,
    card: Optional[str] = None,
    peak: Optional[float] = None,
    bandwidth: Optional[float] = None,
    *,
    launch_us: Optional[float] = None,
    calibration: Any = None,
    attention: Optional[str] = None,
    experts: Optional[str] = None,
    tokens: Optional[int] = None,
    routing: str = "balanced",
    context: Optional[int] = None,
    mean_doc_len: Optional[int] = None,
    doc_lengths: Any = None,
    dense: bool = False,
) -> Dict[str, Any]:
    """The predicted step time of `model`'s layer stack (and of `against`, its Baseline,
    with the time ratio) from a roofline over the bench's kernel plan: the fields of
    `smelt predict --format json`. Give `card` (an id of smelt's table of cards, or a
    driver's name for one: "h200" is the SXM card), or `peak` (TFLOP/s) with `bandwidth`
    (TB/s), or a `calibration` file (`smelt calibrate`) alone for its own device.
    `attention` is "fused" or "unfused", `experts` "grouped" or "per-expert" (defaults as
    the command line's)."""
    c = None if card is None else _str("card", card)
    p = None if peak is None else _float("peak", peak)
    b = None if bandwidth is None else _float("bandwidth", bandwidth)
    lu = None if launch_us is None else _float("launch_us", launch_us)
    cal = None if calibration is None else _path("calibration", calibration)
    a = None if attention is None else _str("attention", attention)
    e = None if experts is None else _str("experts", experts)
    t = _opt_int("tokens", tokens, 1, 1 << 20)
    r = _str("routing", routing)
    w = _workload(context, mean_doc_len, doc_lengths, dense)
    base = None if against is None else _source("against", against)
    return _loads(
        _smelt.predict(_source("model", model), base, c, p, b, lu, cal, a, e, t, r, w)
    )


def cards() -> List[Dict[str, Any]]:
    """The table of cards `mfu` and `predict` take (as `smelt mfu --card`): each card's id,
    name, the words (`fragments`) that name it (joined by spaces, its short name: "h100" is
    the H100 SXM), its dense bf16 peak (FLOP/s), memory bandwidth (bytes/s) and their
    source."""
    return _loads(_smelt.cards())


def families() -> Dict[str, str]:
    """The Hugging Face families (`model_type`) smelt reads and writes, with what each is."""
    return dict(_smelt.families())


def _export(
    source: Any,
    path: Any,
    fmt: str,
    family: Optional[str],
    vocab: Optional[int],
    base_dir: Any,
    force: bool,
    baseline: Any,
    w: Optional[str],
    overwrite: bool = False,
) -> ExportResult:
    out = _path("path", path)
    replace = _bool("overwrite", overwrite)
    fam = None if family is None else _str("family", family)
    voc = _opt_int("vocab", vocab, 1, 1 << 24)
    is_result = isinstance(source, Mapping) and any(
        k in source for k in ("looped", "cells", "rows", "model"))
    if not is_result:
        if baseline is not None:
            raise _error("baseline", "is for a result; a budget names its own Baseline")
        inputs = [] if isinstance(source, Mapping) else [_path("source", source)]
        with _InlineBaseline("source", source) as b:
            text = _smelt.export_budget(_source("source", b), _base_dir(base_dir), out, fmt,
                                        fam, voc, _bool("force", force), w, inputs, replace)
        return _loads(text)
    if w is not None:
        raise _error("workload", "applies when a budget is matched, not to a result")
    config = None
    read = []
    if baseline is not None:
        if isinstance(baseline, Mapping):
            config = _dumps("baseline", dict(baseline))
        else:
            read = [_path("baseline", baseline)]
            with open(read[0], encoding="utf-8") as f:
                config = f.read()
    text = _smelt.export_result(_dumps("source", dict(source)), out, fmt, fam, voc, config, read,
                                replace)
    return _loads(text)


def export_hf(
    source: Union[Source, Result],
    path: Union[str, "os.PathLike[str]"],
    *,
    family: Optional[str] = None,
    vocab: Optional[int] = None,
    baseline: Optional[Union[Mapping[str, Any], str, "os.PathLike[str]"]] = None,
    base_dir: Optional[Union[str, "os.PathLike[str]"]] = None,
    force: bool = False,
    overwrite: bool = False,
    context: Optional[int] = None,
    mean_doc_len: Optional[int] = None,
    doc_lengths: Any = None,
    dense: bool = False,
) -> ExportResult:
    """Writes matched models for Hugging Face Transformers: the files of `smelt match
    --format hf -o PATH` (and `smelt grid/sweep --export PATH`).

    `source` is a result of `match`, `grid` or `sweep`, a model dict, or a budget (a dict or
    a path, matched first, as the command line does). A looped model is a model directory at
    `path` (config.json of model_type "smelt_looped" with the family's config as
    `text_config`, and the code that builds it looped), which
    `AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(path,
    trust_remote_code=True), trust_remote_code=True)` builds with the family's own classes,
    looped as matched; a model without a loop is its family's plain config.json in the
    folder `path`. A grid or sweep result is a folder with one entry per cell or value
    (`200m-s95/`, `span-8/`).

    `family` names the family to write (default: the Baseline's config.json, else the one
    whose conventions the model follows); `vocab` supplies a vocabulary the Baseline lacks;
    `baseline` (for a result: the Baseline's config.json, a dict or a path) carries its
    other keys (rope, norms, token ids) over. The folder is written all or nothing; no input
    file is ever overwritten, and a file smelt did not write there (a model directory's own
    config.json, or one edited since smelt wrote it) only with `overwrite=True`.
    """
    w = _workload(context, mean_doc_len, doc_lengths, dense)
    return _export(source, path, "hf", family, vocab, base_dir, force, baseline, w, overwrite)


def export_toml(
    source: Union[Source, Result],
    path: Union[str, "os.PathLike[str]"],
    *,
    base_dir: Optional[Union[str, "os.PathLike[str]"]] = None,
    force: bool = False,
    overwrite: bool = False,
    context: Optional[int] = None,
    mean_doc_len: Optional[int] = None,
    doc_lengths: Any = None,
    dense: bool = False,
) -> ExportResult:
    """Writes smelt's model file (TOML, valid input to `cost` and `smelt cost`): the file of
    `smelt match --format model -o PATH`, its first line saying to what it was matched and
    how well. `source` is as for `export_hf`; a grid or sweep result is a folder of
    `NAME.toml` files (`smelt grid --export PATH --export-format model`)."""
    w = _workload(context, mean_doc_len, doc_lengths, dense)
    return _export(source, path, "model", None, None, base_dir, force, None, w, overwrite)


def plan(
    source: Source,
    compute: Sequence[float],
    global_batch: int,
    *,
    export: Optional[Union[str, "os.PathLike[str]"]] = None,
    family: Optional[str] = None,
    vocab: Optional[int] = None,
    overwrite: bool = False,
    base_dir: Optional[Union[str, "os.PathLike[str]"]] = None,
    force: bool = False,
    context: Optional[int] = None,
    mean_doc_len: Optional[int] = None,
    doc_lengths: Any = None,
    dense: bool = False,
    progress: Optional[Progress] = None,
    quiet: bool = True,
) -> PlanResult:
    """The run matrix of an IsoFLOP study: the fields of `smelt plan --format json`.

    `source` is a grid or a budget (a dict or a path; a budget names a `baseline`). Per cell,
    its Baseline and looped model at each compute level in `compute` (FLOPs): tokens by the
    exact per-token training FLOPs, in whole optimizer steps of `global_batch` sequences of
    the workload's context (`context` sets it), the compute reached within half a step.
    With `export` (a folder), every model is written there for Transformers with the
    manifest `manifest.jsonl` (`smelt plan --export`): each run's `directory` and
    `config_sha256` are then set and `manifest` is its path."""
    if isinstance(compute, (str, bytes)) or not isinstance(compute, Iterable):
        raise _wrong_type("compute", "a list of numbers of FLOPs", compute)
    levels = [_float(f"compute[{i}]", c) for i, c in enumerate(compute)]
    batch = _int("global_batch", global_batch, 1, 1 << 32)
    out = None if export is None else _path("export", export)
    fam = None if family is None else _str("family", family)
    voc = _opt_int("vocab", vocab, 1, 1 << 24)
    if out is None and (fam is not None or voc is not None or overwrite):
        raise _error("export", "family, vocab and overwrite apply to an export; give export")
    w = _workload(context, mean_doc_len, doc_lengths, dense)
    progress, quiet = _progress(progress, quiet)
    inputs = [] if isinstance(source, Mapping) else [_path("source", source)]
    with _InlineBaseline("source", source) as b:
        text = _smelt.plan(_source("source", b), _base_dir(base_dir), levels, batch,
                           _bool("force", force), w, out, fam, voc, inputs,
                           _bool("overwrite", overwrite), progress, quiet)
    return _loads(text)


def collect(
    manifest: Union[str, "os.PathLike[str]"],
    results: Union[str, "os.PathLike[str]"],
    *,
    output: Optional[Union[str, "os.PathLike[str]"]] = None,
    partial: bool = False,
) -> CollectResult:
    """The endpoints `fit` reads from a plan's manifest and its runs' results (CSV or JSON
    lines with `id`, `tokens`, `loss`, optionally `config_sha256`): `smelt collect`. Raises
    `SmeltError` naming the run for a result of a run not planned, a run given twice, tokens
    or a model that differ from the plan, and (without `partial`) a planned run without a
    result; `cells_lacking` names the cells that lack runs. `output` also writes the CSV."""
    out = None if output is None else _path("output", output)
    text = _smelt.collect(_path("manifest", manifest), _path("results", results),
                          _bool("partial", partial), out)
    return _loads(text)
