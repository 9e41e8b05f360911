"""The shapes of what smelt's functions return: the JSON contracts of the command line
(`smelt ... --format json`), as TypedDicts for type checkers and editors.

Written by `python/tests/gen_types.py` from representative results, and held equal to what
the library returns (every key, both ways) by `python/tests/test_types.py`. Every class is
`total=False`: a key smelt leaves out when it does not apply (a model's optional parts, a
match's advice) is absent. A dict keyed by budget (`residuals`, `ratios`, `tolerance`, ...)
has one entry per budget smelt reports ("flops", "params", "kv", "activations", "time"), so
it is typed as a mapping. A model's `loop` is always present: `None` without one.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, TypedDict, Union


class CollectResultEndpoints(TypedDict, total=False):
    C: float
    D: int
    F: float
    S: float
    arch: str
    cell: str
    compute: float
    loss: float
    run: str


class CollectResult(TypedDict, total=False):
    cells_lacking: List[Any]
    csv: str
    endpoints: List[CollectResultEndpoints]
    missing: List[Any]
    path: str


class PlanResultRunsConventions(TypedDict, total=False):
    compute_reached: float
    convention: str
    reached_over_compute: float
    steps: int
    training_flops_per_token: float


class PlanResultRuns(TypedDict, total=False):
    arch: str
    cell: str
    compute: float
    compute_reached: float
    config_sha256: str
    conventions: List[PlanResultRunsConventions]
    directory: str
    global_batch: int
    id: str
    model: str
    reached_over_compute: float
    sequence_length: int
    sparsity: float
    steps: int
    tokens: int
    training_flops_per_token: float
    training_flops_per_token_exact: str


class PlanResultModels(TypedDict, total=False):
    arch: str
    cell: str
    name: str
    training_flops_per_token: float


class PlanResult(TypedDict, total=False):
    computes: List[float]
    global_batch: int
    manifest: str
    models: List[PlanResultModels]
    name: str
    runs: List[PlanResultRuns]
    sequence_length: int
    tokens_per_step: int


class ExportedModel(TypedDict, total=False):
    files: List[str]
    looped: bool
    name: str
    path: str


class ExportResult(TypedDict, total=False):
    models: List[ExportedModel]
    path: str
    residuals: Optional[Dict[str, float]]


class CardRow(TypedDict, total=False):
    fp8_peak_flops_per_second: Optional[float]
    fragments: List[str]
    id: str
    memory_bytes_per_second: float
    memory_capacity_bytes: float
    name: str
    peak_flops_per_second: float
    source: str


class LauncherPairResultCounts(TypedDict, total=False):
    baseline: int
    convention: str
    looped: int
    ratio: float


class LauncherPairResult(TypedDict, total=False):
    counts: List[LauncherPairResultCounts]
    label: str


class LauncherFlopsResultRefused(TypedDict, total=False):
    convention: str
    reason: str


class MfuResultRefused(TypedDict, total=False):
    convention: str
    reason: str


class LauncherFlopsResultCounts(TypedDict, total=False):
    convention: str
    ignored_here: List[str]
    ignores: List[str]
    ratio_to_exact: float
    source: str
    training_flops: int


class LauncherFlopsResult(TypedDict, total=False):
    counts: List[LauncherFlopsResultCounts]
    layer_executions: int
    name: str
    physical_layers: int
    refused: List[LauncherFlopsResultRefused]
    sequence_length: int


class MfuResultRows(TypedDict, total=False):
    convention: str
    mfu: float
    model_flops_per_second: float
    per_gpu_flops_per_second: float
    training_flops: int


class MfuResult(TypedDict, total=False):
    card: str
    gpus: int
    name: str
    peak_flops_per_second: float
    peak_source: str
    refused: List[MfuResultRefused]
    rows: List[MfuResultRows]
    tokens_per_second: float


class StepResultMemory(TypedDict, total=False):
    card_bytes: float
    peak_bytes: float
    reason: str
    verdict: str


class StepResultStepMicroBatch(TypedDict, total=False):
    attention: float
    ep_comm: float
    experts: float
    fsdp_comm: float
    fsdp_copies: float
    gemm: float
    gpu: float
    host: float
    memory_bound: float
    pp_comm: float
    recompute: float
    recurrent: float
    tp_comm: float


class StepResultStepRequestTraining(TypedDict, total=False):
    dp: int
    ep: int
    grad_bytes: int
    master_bytes: int
    micro_batch: int
    optimizer_bytes: int
    pp: int
    tp: int
    weight_bytes: int
    zero: int


class StepResultStepRequestSystem(TypedDict, total=False):
    card: str
    gpus_per_nvlink_domain: int
    id: str
    name: str
    network_bytes_per_second: float
    network_port_bytes_per_second: float
    nvlink_bytes_per_second: float
    source: str


class StepResultStepRequest(TypedDict, total=False):
    attention: str
    card: str
    dispatcher: str
    framework: str
    global_batch: int
    recompute: str
    system: StepResultStepRequestSystem
    training: StepResultStepRequestTraining


class StepResultStep(TypedDict, total=False):
    bubble: float
    dp_comm: float
    gpus: int
    host_bound: bool
    micro_batch: StepResultStepMicroBatch
    micro_batches: int
    mtp_modules: int
    mtp_modules_not_run: int
    optimizer: float
    request: StepResultStepRequest
    rows_per_expert: float
    step_seconds: float
    tokens_per_second_per_gpu: float


class StepResult(TypedDict, total=False):
    megatron_mfu: float
    megatron_tflops_per_gpu: float
    memory: StepResultMemory
    model: str
    step: StepResultStep
    step_seconds: float
    tokens_per_second_per_gpu: float


class PredictResultModelsComponentsBounds(TypedDict, total=False):
    compute: float
    launch: float
    memory: float


class PredictResultModelsComponents(TypedDict, total=False):
    bounds: PredictResultModelsComponentsBounds
    component: str
    seconds: float
    time_share: float


class PredictResultModelsBounds(TypedDict, total=False):
    compute: float
    launch: float
    memory: float


class PredictResultModels(TypedDict, total=False):
    bounds: PredictResultModelsBounds
    components: List[PredictResultModelsComponents]
    cost_flops_share_of_peak: float
    flops_per_token: float
    launches: int
    layer_executions: int
    lower_bound: bool
    name: str
    seconds: float
    seconds_per_token: float
    tokens: int


class PredictResultBasisOptions(TypedDict, total=False):
    routing: str
    tokens: int


class PredictResultBasisDevice(TypedDict, total=False):
    element_bytes: int
    launch_seconds: float
    memory_bytes_per_second: float
    name: str
    peak_flops_per_second: float
    source: str


class PredictResultBasis(TypedDict, total=False):
    attention: str
    calibrated: bool
    device: PredictResultBasisDevice
    experts: str
    options: PredictResultBasisOptions


class PredictResult(TypedDict, total=False):
    basis: PredictResultBasis
    flop_ratio: float
    models: List[PredictResultModels]
    time_ratio: float


class CalibrationTraffic(TypedDict, total=False):
    rms_relative_error: float
    seconds_per_byte: float
    seconds_per_flop: float
    shapes: int


class CalibrationCurves(TypedDict, total=False):
    experts: List[List[float]]
    gemm: List[List[float]]
    softmax: List[List[float]]
    tile: List[List[float]]


class CalibrationDevice(TypedDict, total=False):
    element_bytes: int
    launch_seconds: float
    memory_bytes_per_second: None
    name: str
    peak_flops_per_second: float
    source: str


class Calibration(TypedDict, total=False):
    backend: str
    curves: CalibrationCurves
    device: CalibrationDevice
    models: List[str]
    shapes: int
    source: str
    traffic: CalibrationTraffic


class BenchResultTimeRatioStats(TypedDict, total=False):
    interval: List[float]
    median: float
    noisy: bool
    rounds: int


BenchResultModelsKernelsKernel = TypedDict("BenchResultModelsKernelsKernel", {
    "batch": "int",
    "component": "str",
    "count": "int",
    "k": "int",
    "m": "int",
    "n": "int",
    "op": "str",
    "pass": "str",
}, total=False)


class BenchResultModelsKernels(TypedDict, total=False):
    kernel: BenchResultModelsKernelsKernel
    launch_bound: bool
    seconds: float


class BenchResultModelsComponents(TypedDict, total=False):
    component: str
    executed_flops: int
    flop_share: float
    flops: int
    flops_per_second: float
    of_ceiling: float
    seconds: float
    time_share: float


class BenchResultModels(TypedDict, total=False):
    analytic_flops_per_token: float
    components: List[BenchResultModelsComponents]
    documents: int
    executed_flops: int
    flops_exact: bool
    flops_per_token: float
    kernel_shapes: int
    kernels: List[BenchResultModelsKernels]
    launch_bound_shapes: int
    launch_bound_time_share: float
    launches: int
    layer_executions: int
    name: str
    plan_flops_per_token: float
    rounds_spread: float
    seconds_per_layer_execution: float
    seconds_per_token: float
    tokens: int


class BenchResultOptions(TypedDict, total=False):
    backend: str
    max_seconds: float
    rounds: int
    routing: str
    tokens: int


class BenchResult(TypedDict, total=False):
    backend: str
    ceiling_flops_per_second: float
    ceiling_rounds: List[float]
    ceiling_spread: float
    device: str
    flop_ratio: float
    launch_floor_seconds: float
    models: List[BenchResultModels]
    options: BenchResultOptions
    time_ratio: float
    time_ratio_stats: BenchResultTimeRatioStats
    workloads: List[str]


class GainResultRowsGainInterval(TypedDict, total=False):
    defined: int
    hi: float
    lo: float
    median: float


class GainResultRows(TypedDict, total=False):
    compute: float
    f_star_reference: float
    f_star_target: float
    gain: float
    gain_interval: GainResultRowsGainInterval
    loss_reference: float
    loss_target: float
    sparsity: float
    tpp_reference: float
    tpp_target: float


class GainResultBootstrap(TypedDict, total=False):
    resamples: int
    seed: int


class GainResultGammaTargetInterval(TypedDict, total=False):
    defined: int
    hi: float
    lo: float
    median: float


class GainResultGammaReferenceInterval(TypedDict, total=False):
    defined: int
    hi: float
    lo: float
    median: float


class GainFitConvergence(TypedDict, total=False):
    grad_max: float
    iterations: int
    polished: int
    polished_at_best: int
    search: str
    starts: int
    termination: str


class GainFit(TypedDict, total=False):
    A: float
    E: float
    K: float
    a: float
    b: float
    c: float
    cells: int
    convergence: GainFitConvergence
    delta: float
    form: str
    gamma: float
    group: str
    objective: float
    points: int
    rmse: float
    scale: str


class GainResult(TypedDict, total=False):
    bootstrap: GainResultBootstrap
    cells: int
    gamma_reference_interval: GainResultGammaReferenceInterval
    gamma_target_interval: GainResultGammaTargetInterval
    reference: GainFit
    rows: List[GainResultRows]
    target: GainFit


class FitResultFitsConvergence(TypedDict, total=False):
    grad_max: float
    iterations: int
    polished: int
    polished_at_best: int
    search: str
    starts: int
    termination: str


class FitResultFits(TypedDict, total=False):
    A: float
    E: float
    K: float
    a: float
    b: float
    c: float
    cells: int
    convergence: FitResultFitsConvergence
    delta: float
    form: str
    gamma: float
    group: str
    objective: float
    points: int
    rmse: float
    scale: str


class FitResult(TypedDict, total=False):
    fits: List[FitResultFits]


class SweepRowSparsity(TypedDict, total=False):
    baseline: float
    looped: float


class SweepRow(TypedDict, total=False):
    broken: List[str]
    layer_executions: int
    looped: ModelDict
    ratios: Dict[str, float]
    residuals: Dict[str, float]
    sparsity: SweepRowSparsity
    value: int
    within_tolerance: bool


class SweepResult(TypedDict, total=False):
    baseline: ModelDict
    knob: str
    name: str
    rows: List[SweepRow]


class GridResultSummary(TypedDict, total=False):
    looped_gets_more: Dict[str, int]
    max_abs_residual: Dict[str, float]
    mean_residual: Dict[str, float]
    sparse_cells: int
    within_tolerance: None


class GridCellSparsity(TypedDict, total=False):
    baseline: float
    looped: float


class GridCellLattice(TypedDict, total=False):
    evaluated: int
    lattice_points: int
    scored: int


class GridCell(TypedDict, total=False):
    baseline: ModelDict
    broken: List[str]
    lattice: GridCellLattice
    looped: ModelDict
    ratios: Dict[str, float]
    residuals: Dict[str, float]
    scale: str
    score: List[float]
    sparse: bool
    sparsity: GridCellSparsity
    sparsity_label: str
    within_tolerance: None


class GridResult(TypedDict, total=False):
    cells: List[GridCell]
    mode: str
    name: str
    summary: GridResultSummary


class MatchResultPeakPerGpu(TypedDict, total=False):
    baseline: int
    refused: str


class MatchResultSparsity(TypedDict, total=False):
    baseline: float
    looped: float


class MatchResultRanked(TypedDict, total=False):
    model: Model
    rank: int
    residuals: Dict[str, float]
    score: List[float]
    time_residual: float


class MatchResultPredictedTimeBasisOptions(TypedDict, total=False):
    routing: str
    tokens: int


class MatchResultPredictedTimeBasisDevice(TypedDict, total=False):
    element_bytes: int
    launch_seconds: float
    memory_bytes_per_second: float
    name: str
    peak_flops_per_second: float
    source: str


class MatchResultPredictedTimeBasis(TypedDict, total=False):
    attention: str
    calibrated: bool
    device: MatchResultPredictedTimeBasisDevice
    experts: str
    options: MatchResultPredictedTimeBasisOptions


class MatchResultPredictedTime(TypedDict, total=False):
    baseline_seconds_per_token: float
    basis: MatchResultPredictedTimeBasis
    looped_seconds_per_token: float
    ratio: float
    residual: float
    weight: float


class Loop(TypedDict, total=False):
    first: int
    repeats: int
    residual_scale: float
    span: int


class MatchResultLattice(TypedDict, total=False):
    evaluated: int
    lattice_points: int
    predicted: int
    scored: int


class MatchResultFloor(TypedDict, total=False):
    budget: str
    knob: str
    step_moves: float
    why: str


class MatchResultBudgets(TypedDict, total=False):
    baseline: Dict[str, int]
    looped: Union[Dict[str, float], Dict[str, int]]


class MatchResultAdvice(TypedDict, total=False):
    change: str
    knob: str
    residuals: Dict[str, float]
    score: List[float]
    time_residual: float
    within_tolerance: Optional[bool]


class MatchResult(TypedDict, total=False):
    advice: List[MatchResultAdvice]
    baseline: ModelDict
    broken: List[str]
    budgets: MatchResultBudgets
    floor: MatchResultFloor
    lattice: MatchResultLattice
    looped: ModelDict
    mode: str
    name: str
    peak_per_gpu: MatchResultPeakPerGpu
    predicted_time: MatchResultPredictedTime
    ranked: List[MatchResultRanked]
    ratios: Dict[str, float]
    residuals: Dict[str, float]
    score: List[float]
    sparsity: MatchResultSparsity
    tolerance: Dict[str, float]
    within_tolerance: Optional[bool]


class CompareResult(TypedDict, total=False):
    baseline: CostResult
    model: CostResult
    residuals: Dict[str, float]


class CostResultTrainingStages(TypedDict, total=False):
    activations: int
    activations_per_micro_batch: int
    dispatch_transient: int
    executions: int
    expert_params: int
    grads: int
    head: int
    in_flight: int
    layers: List[int]
    optimizer: int
    optimizer_step: int
    params: int
    peak: int
    recompute_transient: int
    stage: int
    static_bytes: int
    weights: int


class CostResultTrainingTraining(TypedDict, total=False):
    dp: int
    ep: int
    grad_bytes: int
    master_bytes: int
    micro_batch: int
    optimizer_bytes: int
    pp: int
    tp: int
    weight_bytes: int
    zero: int


class CostResultTraining(TypedDict, total=False):
    bytes_per_param: int
    embedding: int
    gpus: int
    params: int
    peak: int
    peak_stage: int
    policy: str
    stages: List[CostResultTrainingStages]
    static_bytes: int
    training: CostResultTrainingTraining


class CostResultAttentionSelected(TypedDict, total=False):
    mean_keys_exact: str
    mean_keys_per_query: float
    topk: int


class CostResultKvCachePerTokenRecurrentState(TypedDict, total=False):
    bytes: int
    bytes_fp32_delta: int
    conv_per_execution: int
    delta_per_execution: int
    elements: int
    executions: int
    kind: str


class CostResultAttentionWindowed(TypedDict, total=False):
    kind: str
    mean_keys_exact: str
    mean_keys_per_query: float
    size: int


class CostResultSparsityControl(TypedDict, total=False):
    flops_training: float
    of: str
    params: int


class CostResultSparsity(TypedDict, total=False):
    control: CostResultSparsityControl
    n_act_eq: float
    s: float


class CostResultAttention(TypedDict, total=False):
    mean_keys_exact: str
    mean_keys_per_query: float
    selected: CostResultAttentionSelected
    windowed: CostResultAttentionWindowed


class CostResultActivationsPoliciesBreakdown(TypedDict, total=False):
    attention: int
    dense: int
    experts: int
    ffn_input: int
    indexer: int
    layer_inputs: int
    norms: int
    router: int
    scores: int
    shared: int


class CostResultActivationsPolicies(TypedDict, total=False):
    at_context: int
    breakdown: CostResultActivationsPoliciesBreakdown
    per_token: int
    policy: str


class CostResultActivations(TypedDict, total=False):
    activation_bytes: int
    budget: str
    policies: List[CostResultActivationsPolicies]
    refused: str


class CostResultKvCachePerTokenAtContext(TypedDict, total=False):
    bytes: int
    context: int
    elements: int
    elements_cache: int
    held_per_windowed_layer: int


class CostResultKvCachePerToken(TypedDict, total=False):
    at_context: CostResultKvCachePerTokenAtContext
    budget: str
    bytes: int
    elements: int
    recurrent_state: CostResultKvCachePerTokenRecurrentState


class CostResultFlopsPerTokenForwardBreakdown(TypedDict, total=False):
    attention_core: float
    dense: int
    experts: int
    indexer: int
    latent_projections: int
    lm_head: int
    mtp: int
    projections: int
    recurrent_core: int
    recurrent_projections: int
    router: int
    shared: int


class CostResultFlopsPerToken(TypedDict, total=False):
    forward: float
    forward_breakdown: CostResultFlopsPerTokenForwardBreakdown
    training: float


class CostResultParamsActiveBreakdown(TypedDict, total=False):
    attention: int
    dense: int
    embeddings: int
    experts: int
    indexer: int
    latent_projections: int
    lm_head: int
    mtp: int
    norms: int
    recurrent: int
    router: int
    shared: int


class CostResultParamsBreakdown(TypedDict, total=False):
    attention: int
    dense: int
    embeddings: int
    experts: int
    indexer: int
    latent_projections: int
    lm_head: int
    mtp: int
    norms: int
    recurrent: int
    router: int
    shared: int


class CostResultParams(TypedDict, total=False):
    active: int
    active_breakdown: CostResultParamsActiveBreakdown
    breakdown: CostResultParamsBreakdown
    total: int


class CostResultConventionsWorkload(TypedDict, total=False):
    attention: str
    context: int
    kv_dtype_bytes: int
    mean_doc_len: int


class CostResultConventions(TypedDict, total=False):
    attention: str
    attention_keys_from: str
    embeddings_counted: bool
    flops_per_multiply_add: int
    kv_budget: str
    kv_dtype_bytes: int
    lm_head_counted: bool
    mtp_counted: bool
    training_over_forward: int
    workload: CostResultConventionsWorkload


class CostResult(TypedDict, total=False):
    activations: CostResultActivations
    attention: CostResultAttention
    conventions: CostResultConventions
    flops_per_token: CostResultFlopsPerToken
    kv_cache_per_token: CostResultKvCachePerToken
    layer_executions: int
    name: str
    params: CostResultParams
    physical_layers: int
    sparsity: CostResultSparsity
    training: CostResultTraining


class Training(TypedDict, total=False):
    dp: int
    ep: int
    grad_bytes: int
    master_bytes: int
    micro_batch: int
    optimizer_bytes: int
    pp: int
    tp: int
    weight_bytes: int
    zero: int


class ModelNope(TypedDict, total=False):
    layers: List[int]
    temperature: bool


class ModelDense(TypedDict, total=False):
    ffn: int
    layers: List[int]


class MoeRouterGroups(TypedDict, total=False):
    groups: int
    topk_groups: int


class ModelIndexer(TypedDict, total=False):
    head_dim: int
    heads: int
    topk: int


class ModelMla(TypedDict, total=False):
    kv_lora_rank: int
    q_lora_rank: int
    qk_nope_head_dim: int
    qk_rope_head_dim: int
    v_head_dim: int


class ModelRecurrentMixerGatedDeltanet(TypedDict, total=False):
    conv_kernel: int
    key_head_dim: int
    key_heads: int
    value_head_dim: int
    value_heads: int


class ModelBlocks(TypedDict, total=False):
    ffn_only: List[int]
    mixer_only: List[int]


class ModelRecurrentMixerMamba2(TypedDict, total=False):
    chunk: int
    conv_bias: bool
    conv_kernel: int
    groups: int
    head_dim: int
    heads: int
    state: int


class ModelRecurrentMixer(TypedDict, total=False):
    gated_deltanet: ModelRecurrentMixerGatedDeltanet
    mamba2: ModelRecurrentMixerMamba2


class ModelRecurrent(TypedDict, total=False):
    layers: List[int]
    mixer: ModelRecurrentMixer


class ModelFullAttention(TypedDict, total=False):
    head_dim: int
    k_eq_v: bool
    kv_heads: int


class ModelWindow(TypedDict, total=False):
    kind: str
    layers: List[int]
    size: int


class Counting(TypedDict, total=False):
    embeddings: bool
    kv: str
    lm_head: bool


class Workload(TypedDict, total=False):
    attention: str
    context: int
    kv_dtype_bytes: int
    mean_doc_len: int


class Moe(TypedDict, total=False):
    activation: str
    branch_norms: bool
    expert_bias: bool
    expert_ffn: int
    experts: int
    jitter: float
    latent: int
    router: str
    router_bias: bool
    router_groups: MoeRouterGroups
    router_scale: bool
    shared_experts: int
    shared_ffn: int
    shared_gate: bool
    top_k: int


class Model(TypedDict, total=False):
    attention_bias: str
    attention_gate: bool
    attention_sinks: bool
    blocks: ModelBlocks
    dense: ModelDense
    full_attention: ModelFullAttention
    head_dim: int
    heads: int
    hidden: int
    indexer: ModelIndexer
    kv_heads: int
    layers: int
    lm_head_bias: bool
    loop: Optional[Loop]
    mla: ModelMla
    moe: Moe
    mtp_layers: int
    nope: ModelNope
    norm_bias: bool
    post_norms: bool
    qk_norm: str
    recurrent: ModelRecurrent
    rope_dim: int
    tie_embeddings: bool
    v_norm: bool
    vocab: int
    window: ModelWindow


class ModelDict(TypedDict, total=False):
    counting: Counting
    model: Model
    name: str
    training: Training
    workload: Workload


PerBudget = Dict[str, float]
"""One number per budget, by name."""

Result = Union[MatchResult, GridResult, SweepResult]
"""A result `export_hf` and `export_toml` accept."""
