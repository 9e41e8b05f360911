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
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Union

from . import _smelt
from .types import (
    BenchResult,
    Calibration,
    CardRow,
    CollectResult,
    CompareResult,
    CostResult,
    ExportResult,
    FitResult,
    GainResult,
    GridResult,
    LauncherFlopsResult,
    LauncherPairResult,
    MatchResult,
    MfuResult,
    ModelDict,
    PlanResult,
    PredictResult,
    Result,
    StepResult,
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
    "predict_step",
    "calibrate",
    "merge",
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
    exits 3). `result` is the result, as it would have been returned; `broken` holds the
    lines the command line says on standard error (after `smelt: `), one per broken
    tolerance, and the message is those lines."""

    def __init__(self, message: str, result: Dict[str, Any], broken: List[str]) -> None:
        super().__init__(message)
        self.result = result
        self.broken = broken
        self.field = "tolerance"
        self.rule = message


def _plain(value: Any) -> Any:
    """`json.dumps`' default: a path is its text, a set its sorted list."""
    if isinstance(value, os.PathLike):
        path = os.fspath(value)
        return os.fsdecode(path) if isinstance(path, bytes) else path
    if isinstance(value, (set, frozenset)):
        return sorted(value)
    if isinstance(value, Mapping):
        return dict(value)
    raise TypeError(
        f"holds a value of type {type(value).__name__} (only dicts, lists, str, int, float, "
        "bool, None and paths can be read)"
    )


def _nonfinite(value: Any, at: str) -> Optional[str]:
    """The dotted path (from `at`) of the first NaN or infinity in `value`, if any."""
    if isinstance(value, float) and not math.isfinite(value):
        return at
    if isinstance(value, Mapping):
        items: Any = value.items()
    elif isinstance(value, (list, tuple)):
        items = ((f"[{i}]", v) for i, v in enumerate(value))
    else:
        return None
    for key, item in items:
        key = str(key)
        found = _nonfinite(item, at + key if key.startswith("[") else f"{at}.{key}")
        if found is not None:
            return found
    return None


def _error(field: str, rule: str) -> SmeltError:
    err = SmeltError(f"{field}: {rule}")
    err.field = field
    err.rule = rule
    return err


def _request(**fields: Any) -> str:
    """The call's keywords as the library's request (JSON): None values left out, so that the
    library's defaults apply."""
    body = {k: v for k, v in fields.items() if v is not None}
    try:
        return json.dumps(body, default=_plain, allow_nan=False)
    except (RecursionError, ValueError, TypeError):
        pass
    for field, value in body.items():  # the keyword that cannot be sent, named
        try:
            json.dumps(value, default=_plain, allow_nan=False)
        except RecursionError:
            raise _error(field, "is nested too deeply to be a model, budget or grid") from None
        except ValueError:
            at = _nonfinite(value, field) or field
            raise _error(at, "is NaN or an infinity, which no field accepts") from None
        except TypeError as e:
            raise TypeError(f"{field}: {e}") from None
    raise _error("request", "cannot be sent as JSON")


def _workload(context: Any, mean_doc_len: Any, doc_lengths: Any, dense: Any) -> Dict[str, Any]:
    """The workload keywords as the request's `workload`; a dict histogram as its pairs."""
    if isinstance(doc_lengths, Mapping):
        doc_lengths = [[k, v] for k, v in doc_lengths.items()]
    elif isinstance(doc_lengths, (list, tuple)):
        doc_lengths = [list(p) if isinstance(p, (list, tuple)) else p for p in doc_lengths]
    w = {"context": context, "mean_doc_len": mean_doc_len, "doc_lengths": doc_lengths,
         "dense": dense}
    return {k: v for k, v in w.items() if v is not None and v is not False}


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


def _judged(text: str, strict: bool) -> Any:
    """A match, grid or sweep result; with `strict`, ToleranceError when a tolerance is
    broken, saying what the command line says."""
    answer = json.loads(text)
    result = _with_loops(answer["result"])
    if not isinstance(strict, bool):
        raise _error("strict", f"must be True or False (got {strict!r})")
    if strict and answer["tolerance"]:
        lines = answer["tolerance"]
        raise ToleranceError("\n".join(lines), result, lines)
    return result


def _progress(progress: Optional[Progress], quiet: Any) -> Dict[str, Any]:
    if progress is not None and not callable(progress):
        raise TypeError(f"progress: expected a callable progress(task, done, total), got "
                        f"{type(progress).__name__}")
    if not isinstance(quiet, bool):
        raise _error("quiet", f"must be True or False (got {quiet!r})")
    return {"progress": progress, "quiet": quiet}


def cost(
    spec: Source,
    against: Optional[Source] = None,
    *,
    context: Optional[int] = None,
    mean_doc_len: Optional[int] = None,
    doc_lengths: Any = None,
    dense: bool = False,
) -> Union[CostResult, CompareResult]:
    """Parameters, FLOPs per token, KV cache and sparsity of a model: the fields of
    `smelt cost --format json`.

    `spec` is a model dict ({"model": {...}, "workload": {...}}), a Hugging Face config dict
    (one with `model_type`), or a path to a model file, a config.json or a model directory
    smelt exported. With `against` (a Baseline, the same kinds), the fields of
    `smelt cost --against`. The workload keywords replace the file's workload (module docs).
    """
    return _loads(_smelt.cost(_request(spec=spec, against=against, workload=_workload(context, mean_doc_len, doc_lengths, dense))))


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
    text = _smelt.match_(_request(budget=budget, top=top, base_dir=base_dir, force=force,
                                  advise=advise, workload=_workload(context, mean_doc_len, doc_lengths, dense)))
    return _judged(text, strict)


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
    text = _smelt.grid(_request(grid=grid, base_dir=base_dir, force=force, workload=_workload(context, mean_doc_len, doc_lengths, dense)),
                       **_progress(progress, quiet))
    return _judged(text, strict)


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
    if isinstance(values, (tuple, range)):
        values = list(values)
    text = _smelt.sweep(_request(budget=budget, knob=knob, values=values, base_dir=base_dir,
                                 force=force, workload=_workload(context, mean_doc_len, doc_lengths, dense)), **_progress(progress, quiet))
    return _judged(text, strict)


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
    return _loads(_smelt.fit(_request(endpoints=endpoints, group=group, starts=starts,
                                      search=search), **_progress(progress, quiet)))


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
    text = _smelt.gain(
        _request(endpoints=endpoints, reference=reference, target=target, group=group,
                 compute=list(compute), sparsity=list(sparsity), bootstrap=bootstrap, seed=seed,
                 starts=starts, search=search),
        **_progress(progress, quiet),
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
    text = _smelt.bench_(
        _request(model=model, against=against, backend=backend, tokens=tokens, routing=routing,
                 rounds=rounds, max_seconds=max_seconds, peak=peak, workload=_workload(context, mean_doc_len, doc_lengths, dense)),
        **_progress(progress, quiet),
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
    return _loads(_smelt.import_hf(_request(config=config)))


def launcher_flops(
    spec: Source,
    against: Optional[Source] = None,
    *,
    context: Optional[int] = None,
    mean_doc_len: Optional[int] = None,
    doc_lengths: Any = None,
    dense: bool = False,
) -> Union[LauncherFlopsResult, LauncherPairResult]:
    """Per-token training FLOPs as each training stack's log counts them (Megatron-LM,
    torchtitan, 6N, PaLM's 6N + attention), beside smelt's exact count, with the features
    each convention ignores: the fields of `smelt cost --conventions --format json`. With
    `against` (the Baseline; `spec` is then the looped model), each convention's looped /
    Baseline ratio beside the exact one: what a launcher's log would say of the pair."""
    return _loads(_smelt.launcher_flops(_request(spec=spec, against=against, workload=_workload(context, mean_doc_len, doc_lengths, dense))))


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
) -> MfuResult:
    """Model FLOP/s and MFU of a training run (`tokens_per_second` over the whole run, on
    `gpus` GPUs) under the exact count and each launcher convention: the fields of
    `smelt mfu --format json`. Give `card` (an id of smelt's table of cards, e.g.
    "h100-sxm", or a driver's name for one: "h100" is the SXM card, as for `predict`; an
    unknown one is an error listing them) or `peak` (a dense peak per GPU in TFLOP/s, as
    `--peak`)."""
    return _loads(_smelt.mfu(_request(spec=spec, tokens_per_second=tokens_per_second,
                                      gpus=gpus, card=card, peak=peak, workload=_workload(context, mean_doc_len, doc_lengths, dense))))


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
) -> PredictResult:
    """The predicted step time of `model`'s layer stack (and of `against`, its Baseline,
    with the time ratio) from a roofline over the bench's kernel plan: the fields of
    `smelt predict --format json`. Give `card` (an id of smelt's table of cards, or a
    driver's name for one: "h200" is the SXM card), or `peak` (TFLOP/s) with `bandwidth`
    (TB/s), or a `calibration` file (`smelt calibrate`) alone for its own device.
    `attention` is "fused" or "unfused", `experts` "grouped" or "per-expert" (defaults as
    the command line's)."""
    device = {"card": card, "peak": peak, "bandwidth": bandwidth, "launch_us": launch_us,
              "calibration": calibration, "attention": attention, "experts": experts,
              "tokens": tokens, "routing": routing}
    device = {k: v for k, v in device.items() if v is not None}
    return _loads(_smelt.predict(_request(model=model, against=against, device=device,
                                          workload=_workload(context, mean_doc_len, doc_lengths, dense))))


def predict_step(
    model: Source,
    card: str,
    global_batch: int,
    *,
    tp: Optional[int] = None,
    ep: Optional[int] = None,
    pp: Optional[int] = None,
    vp: Optional[int] = None,
    first_stage_layers: Optional[int] = None,
    last_stage_layers: Optional[int] = None,
    cp: Optional[int] = None,
    dp: Optional[int] = None,
    gpus: Optional[int] = None,
    zero: Optional[int] = None,
    micro_batch: Optional[int] = None,
    recompute: Optional[str] = None,
    framework: Optional[str] = None,
    dispatcher: Optional[str] = None,
    context: Optional[int] = None,
    mean_doc_len: Optional[int] = None,
    doc_lengths: Any = None,
    dense: bool = False,
) -> StepResult:
    """One training step of `model` on `card` with `global_batch` sequences per optimizer
    step, under a parallel layout: the fields of `smelt predict --card CARD --global-batch N
    --format json`, per GPU, with `tokens_per_second_per_gpu` and the memory verdict.

    The layout, as the command line's flags of the same names (each degree 1 to 2^20, 1
    unless given): `tp` tensor parallelism (with sequence parallelism), `ep` expert
    parallelism (divides `tp · dp · cp` and the routed experts), `pp` pipeline stages
    (1F1B), `vp` virtual stages per GPU (interleaved; needs `pp > 1`),
    `first_stage_layers` / `last_stage_layers` an uneven pipeline split, `cp` context
    parallelism, `dp` data parallelism or `gpus` (then `dp = gpus / (tp · pp · cp)`),
    `zero` the ZeRO stage 0 to 3 (default 1), `micro_batch` sequences per micro-batch.
    `recompute` is "none", "selective" or "full", `framework` "megatron-core" or "fsdp2",
    `dispatcher` "alltoall" or "deepep" (defaults: the first). `context` is the sequence
    length; `mean_doc_len`, `doc_lengths` and `dense` the workload, as `cost`'s."""
    layout = {"tp": tp, "ep": ep, "pp": pp, "vp": vp, "first_stage_layers": first_stage_layers,
              "last_stage_layers": last_stage_layers, "cp": cp, "dp": dp, "gpus": gpus,
              "zero": zero, "micro_batch": micro_batch, "recompute": recompute,
              "framework": framework, "dispatcher": dispatcher}
    layout = {k: v for k, v in layout.items() if v is not None}
    return _loads(_smelt.predict_step(_request(
        model=model, card=card, global_batch=global_batch, layout=layout,
        workload=_workload(context, mean_doc_len, doc_lengths, dense))))


def cards() -> List[CardRow]:
    """The table of cards `mfu` and `predict` take (as `smelt mfu --card`): each card's id,
    name, the words (`fragments`) that name it (joined by spaces, its short name: "h100" is
    the H100 SXM), its dense bf16 peak (FLOP/s), memory bandwidth (bytes/s) and their
    source."""
    return _loads(_smelt.cards())


def families() -> Dict[str, str]:
    """The Hugging Face families (`model_type`) smelt reads and writes, with what each is."""
    return dict(_smelt.families())


def _export(source: Any, path: Any, fmt: str, **options: Any) -> ExportResult:
    return _loads(_smelt.export(_request(source=source, path=path, format=fmt, **options)))


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

    `source` is a result of `match`, `grid` or `sweep`, a model (a dict, or the path of a
    model file, a config.json or a model directory, written as `smelt export` writes it), or
    a budget (a dict or a path, matched first, as the command line does). A looped model is a model directory at
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
    return _export(source, path, "hf", family=family, vocab=vocab, baseline=baseline,
                   base_dir=base_dir, force=force, overwrite=overwrite,
                   workload=_workload(context, mean_doc_len, doc_lengths, dense))


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
    return _export(source, path, "model", base_dir=base_dir, force=force, overwrite=overwrite,
                   workload=_workload(context, mean_doc_len, doc_lengths, dense))


def calibrate(
    bench: Union[BenchResult, str, "os.PathLike[str]"],
    output: Optional[Union[str, "os.PathLike[str]"]] = None,
) -> Calibration:
    """A calibration for `predict` fitted to a bench's measured kernels: `smelt calibrate`.
    `bench` is a result of `bench` or a path to `smelt bench --format json`'s file; with
    `output`, the calibration is also written there (never over the bench report)."""
    return _loads(_smelt.calibrate(_request(bench=bench, output=output)))


def merge(
    shards: Sequence[Union[GridResult, str, "os.PathLike[str]"]],
    output: Optional[Union[str, "os.PathLike[str]"]] = None,
) -> GridResult:
    """The results of a grid benchmarked in shards (`smelt grid --bench --shard K/N`; paths
    to their JSON files, or the results) joined into the grid's: `smelt merge`. Shards of
    different runs, or a missing or repeated shard, are refused. With `output`, the merged
    grid is also written there."""
    if isinstance(shards, (str, os.PathLike, Mapping)):
        raise TypeError("shards: expected a list of shards (paths or results)")
    return _loads(_smelt.merge(_request(shards=list(shards), output=output)))


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
    if isinstance(compute, (str, bytes, Mapping)):
        raise _error("compute", f"must be a list of numbers of FLOPs (got {compute!r})")
    text = _smelt.plan(_request(source=source, compute=list(compute), global_batch=global_batch,
                                export=export, family=family, vocab=vocab,
                                overwrite=overwrite or None, base_dir=base_dir,
                                force=force or None,
                                workload=_workload(context, mean_doc_len, doc_lengths, dense)),
                       **_progress(progress, quiet))
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
    return _loads(_smelt.collect(_request(manifest=manifest, results=results, output=output,
                                          partial=partial or None)))
