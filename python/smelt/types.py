"""The shapes of what smelt's functions return: the JSON contracts of the command line
(`smelt ... --format json`), as TypedDicts for type checkers and editors.

A dict keyed by budget (`residuals`, `ratios`, `tolerance`, ...) has one entry per budget
smelt reports: "flops", "params", "kv" (and any budget added later), so it is typed as a
mapping. A model's `loop` is always present: `None` for a model without one.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, TypedDict, Union

PerBudget = Dict[str, float]
"""One number per budget, by name: {"flops": ..., "params": ..., "kv": ...}."""


class Loop(TypedDict):
    """The looped block: layers `first` .. `first + span - 1` (1-based) run `repeats` times."""

    first: int
    span: int
    repeats: int
    residual_scale: float


class Moe(TypedDict, total=False):
    """The Mixture-of-Experts FFN of every layer not listed as dense."""

    experts: int
    top_k: int
    expert_ffn: int
    shared: int
    shared_ffn: int
    shared_gate: bool


class Model(TypedDict, total=False):
    """A model file's `[model]` table (optional parts absent when unused, except `loop`)."""

    layers: int
    hidden: int
    heads: int
    kv_heads: int
    head_dim: int
    vocab: int
    tie_embeddings: bool
    moe: Moe
    loop: Optional[Loop]
    mla: Dict[str, Any]
    window: Dict[str, Any]
    indexer: Dict[str, Any]
    dense: Dict[str, Any]


class Workload(TypedDict, total=False):
    """What the attention cost and KV cache are evaluated at."""

    context: int
    mean_doc_len: int
    doc_lengths: List[List[int]]
    attention: str
    kv_dtype_bytes: int


class ModelDict(TypedDict, total=False):
    """A model file as a dict: valid input to `cost`, `bench` and the exports."""

    name: str
    model: Model
    workload: Workload
    counting: Dict[str, Any]


class CostResult(TypedDict, total=False):
    """`smelt cost --format json`: parameters, FLOPs per token, KV cache, sparsity."""

    name: str
    conventions: Dict[str, Any]
    physical_layers: int
    layer_executions: int
    params: Dict[str, Any]
    flops_per_token: Dict[str, Any]
    kv_cache_per_token: Dict[str, Any]
    attention: Dict[str, Any]
    sparsity: Dict[str, Any]


class MatchResult(TypedDict, total=False):
    """`smelt match --format json`: the looped configuration matching a budget."""

    name: str
    mode: str
    baseline: ModelDict
    looped: ModelDict
    budgets: Dict[str, Dict[str, int]]
    residuals: PerBudget
    ratios: PerBudget
    score: List[float]
    sparsity: Dict[str, float]
    tolerance: PerBudget
    within_tolerance: Optional[bool]  # None: no [tolerance] set, nothing checked
    broken: List[str]
    lattice: Dict[str, int]
    ranked: List[Dict[str, Any]]
    floor: Dict[str, Any]
    advice: List[Dict[str, Any]]


class GridCell(TypedDict, total=False):
    """One cell of a grid, matched."""

    scale: str
    sparsity_label: str
    sparse: bool
    baseline: ModelDict
    looped: ModelDict
    ratios: PerBudget
    residuals: PerBudget
    score: List[float]
    sparsity: Dict[str, float]
    within_tolerance: Optional[bool]  # None: no [tolerance] set, nothing checked
    broken: List[str]
    lattice: Dict[str, int]
    time: Dict[str, Any]


class GridResult(TypedDict, total=False):
    """`smelt grid --format json`: every cell matched, with the summary."""

    name: str
    mode: str
    cells: List[GridCell]
    summary: Dict[str, Any]


class SweepRow(TypedDict):
    """One value of a sweep, matched."""

    value: int
    layer_executions: int
    looped: ModelDict
    ratios: PerBudget
    residuals: PerBudget
    sparsity: Dict[str, float]
    within_tolerance: Optional[bool]  # None: no [tolerance] set, nothing checked
    broken: List[str]


class SweepResult(TypedDict, total=False):
    """`smelt sweep --format json`: one row per value of the knob."""

    name: str
    knob: str
    baseline: ModelDict
    rows: List[SweepRow]


class FitResult(TypedDict):
    """`smelt fit --format json`: one fitted surface per group."""

    fits: List[Dict[str, Any]]


class GainResult(TypedDict, total=False):
    """`smelt gain --format json`: the compute-efficiency gain table."""

    reference: str
    target: str
    rows: List[Dict[str, Any]]


class BenchResult(TypedDict, total=False):
    """`smelt bench --format json`: the GEMMs of a training step timed."""

    backend: str
    device: str
    library: str
    launch_floor_seconds: float
    ceiling_flops_per_second: float
    peak_flops_per_second: float
    ceiling_of_peak: float
    options: Dict[str, Any]
    models: List[Dict[str, Any]]
    time_ratio: float
    time_ratio_stats: Dict[str, Any]
    flop_ratio: float


class ExportedModel(TypedDict):
    """One model an export wrote."""

    name: str
    path: str
    files: List[str]
    looped: bool


class ExportResult(TypedDict):
    """What an export wrote: `models` has one entry for a match or a model, one per cell or
    value for a grid or a sweep; `residuals` are the match's when the export matched a
    budget, else None."""

    path: str
    models: List[ExportedModel]
    residuals: Optional[PerBudget]


Result = Union[MatchResult, GridResult, SweepResult]
"""A result `export_hf` and `export_toml` accept."""


Calibration = Dict[str, Any]
CardRow = Dict[str, Any]
LauncherFlopsResult = Dict[str, Any]
MfuResult = Dict[str, Any]
PredictResult = Dict[str, Any]
