"""The native half of smelt (Rust, PyO3). Not for direct use: `smelt`'s functions check
their arguments and call these. A source is ("path", PATH), ("json", TEXT) or ("hf", TEXT);
`workload` is the JSON of the workload changes; every function returns JSON text."""

from typing import Any, Callable, List, Optional, Tuple

__version__: str

class SmeltError(ValueError):
    field: Optional[str]
    rule: Optional[str]

Source = Tuple[str, str]
Progress = Optional[Callable[[str, int, int], Any]]

def cost(spec: Source, against: Optional[Source], workload: Optional[str]) -> str: ...
def match_(
    budget: Source, base_dir: Optional[str], top: int, force: bool, advise: bool,
    workload: Optional[str],
) -> str: ...
def grid(
    grid: Source, base_dir: Optional[str], force: bool, workload: Optional[str],
    progress: Progress, quiet: bool,
) -> str: ...
def sweep(
    budget: Source, knob: str, values: Optional[List[int]], values_text: Optional[str],
    base_dir: Optional[str], force: bool, workload: Optional[str], progress: Progress,
    quiet: bool,
) -> str: ...
def fit(
    endpoints: str, group: Optional[str], starts: str, search: str, progress: Progress,
    quiet: bool,
) -> str: ...
def gain(
    endpoints: str, reference: str, target: str, group: str, compute: List[float],
    sparsity: List[float], bootstrap: int, seed: int, starts: str, search: str,
    progress: Progress, quiet: bool,
) -> str: ...
def bench(
    model: Source, against: Optional[Source], backend: str, tokens: Optional[int],
    routing: str, rounds: int, max_seconds: float, peak_tflops: Optional[float],
    workload: Optional[str], progress: Progress, quiet: bool,
) -> str: ...
def import_hf(config: Source) -> str: ...
def export_budget(
    budget: Source, base_dir: Optional[str], path: str, format: str, family: Optional[str],
    vocab: Optional[int], force: bool, workload: Optional[str], inputs: List[str],
    overwrite: bool,
) -> str: ...
def export_result(
    result: str, path: str, format: str, family: Optional[str], vocab: Optional[int],
    baseline_config: Optional[str], inputs: List[str], overwrite: bool,
) -> str: ...
def families() -> List[Tuple[str, str]]: ...
def cards() -> str: ...
def launcher_flops(spec: Source, against: Optional[Source], workload: Optional[str]) -> str: ...
def mfu(
    spec: Source, tokens_per_second: float, gpus: int, card: Optional[str],
    peak_tflops: Optional[float], workload: Optional[str],
) -> str: ...
def predict(
    model: Source, against: Optional[Source], card: Optional[str], peak_tflops: Optional[float],
    bandwidth_tbs: Optional[float], launch_us: Optional[float], calibration: Optional[str],
    attention: Optional[str], experts: Optional[str], tokens: Optional[int], routing: str,
    workload: Optional[str],
) -> str: ...
def plan(
    source: Source, base_dir: Optional[str], compute: List[float], global_batch: int,
    force: bool, workload: Optional[str], export: Optional[str], family: Optional[str],
    vocab: Optional[int], inputs: List[str], overwrite: bool, progress: Progress, quiet: bool,
) -> str: ...
def collect(manifest: str, results: str, partial: bool, output: Optional[str]) -> str: ...
