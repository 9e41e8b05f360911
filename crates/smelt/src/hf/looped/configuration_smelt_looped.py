"""Configuration of a looped model exported by smelt (`smelt match --format hf -o DIR`).

A looped model is a stock Transformers decoder of the family named by `text_config`
(`model_type`), whose layers `loop_first_layer .. loop_first_layer + loop_span - 1` (1-based)
are executed `loop_repeats` times back to back with shared weights; every residual update
inside that span is scaled by `loop_residual_scale`. The model smelt costed is exactly this
one: `modeling_smelt_looped.py` builds it from the family's own classes.

Written by smelt for Transformers 5 (`AutoConfig.from_pretrained(DIR, trust_remote_code=True)`).
Generated file: regenerate it with smelt rather than editing it.
"""

import copy

from transformers import AutoConfig, PreTrainedConfig
from transformers.configuration_utils import SubConfigSpec


# Per-layer lists of a family's config, indexed by layer execution at run time:
# `layer_types` (Qwen3-Next's and Qwen3.5's Gated DeltaNet or attention, Gemma 4's and
# gpt-oss's sliding or full attention) and Nemotron-H's `layers_block_type` (which
# NemotronHConfig also names `layer_types`).
_PER_LAYER_KEYS = ("layer_types", "layers_block_type")

# Keys a looped model cannot honour, with why: each is refused unless 0 (or absent).
_UNLOOPABLE_KEYS = {
    # Gemma 4: layers reusing an earlier layer's keys and values, counted from the end.
    "num_kv_shared_layers": "layers sharing another layer's KV cache",
    # Gemma 4: an input embedding per physical layer, indexed by layer execution.
    "hidden_size_per_layer_input": "per-layer input embeddings",
}


def run_as_executions(config: PreTrainedConfig, order: list[int]) -> None:
    """Changes a family's `config` of physical layers, in place, into the config its decoder
    reads at run time: one layer per execution (`order`: the physical layer of each), so that
    the cache and the masks are sized by the executions; per-layer lists, and per-layer
    overrides (`per_layer_config`: Gemma 4's full-attention shapes), in execution order."""
    layers = config.num_hidden_layers
    lists = {}
    for key in _PER_LAYER_KEYS:
        values = getattr(config, key, None)
        if isinstance(values, (list, tuple)) and len(values) == layers:
            lists[key] = [values[p] for p in order]
    spec = config.__dict__.get("_heterogeneity_spec")
    for key, values in lists.items():
        setattr(config, key, values)
    # NemotronHConfig derives num_hidden_layers from layers_block_type (its setter ignores it).
    config.num_hidden_layers = len(order)
    if spec is not None:
        overrides = spec.per_layer_overrides
        config.per_layer_config = {e: copy.deepcopy(overrides[p]) for e, p in enumerate(order) if p in overrides}


class SmeltLoopedConfig(PreTrainedConfig):
    model_type = "smelt_looped"
    sub_configs_defaults = {"text_config": SubConfigSpec(config_class=AutoConfig, model_type="mixtral")}

    text_config: dict | PreTrainedConfig | None = None
    loop_first_layer: int = 1
    loop_span: int = 0
    loop_repeats: int = 1
    loop_residual_scale: float = 1.0
    tie_word_embeddings: bool = False

    def __post_init__(self, **kwargs):
        super().__post_init__(**kwargs)
        layers = self.text_config.num_hidden_layers
        first, span, repeats = self.loop_first_layer, self.loop_span, self.loop_repeats
        if span < 1 or repeats < 2:
            raise ValueError(f"smelt_looped: loop_span {span} and loop_repeats {repeats} describe no loop")
        if first < 1 or first + span - 1 > layers:
            raise ValueError(
                f"smelt_looped: layers {first}..{first + span - 1} are not within the "
                f"{layers} layers of text_config"
            )
        for key, what in _UNLOOPABLE_KEYS.items():
            if getattr(self.text_config, key, None):
                raise ValueError(
                    f"smelt_looped: text_config.{key} is {getattr(self.text_config, key)}: {what} cannot be looped"
                )
        self.tie_word_embeddings = self.text_config.tie_word_embeddings

    def execution_order(self) -> list[int]:
        """The 0-based physical layer of each layer execution, in order."""
        layers = self.text_config.num_hidden_layers
        start, end = self.loop_first_layer - 1, self.loop_first_layer - 1 + self.loop_span
        return list(range(start)) + list(range(start, end)) * self.loop_repeats + list(range(end, layers))

    def executions_config(self) -> PreTrainedConfig:
        """`text_config` as the decoder sees it at run time (`run_as_executions`)."""
        config = copy.deepcopy(self.text_config)
        run_as_executions(config, self.execution_order())
        return config

    def get_text_config(self, decoder=None, encoder=None):
        # What generation sizes its cache by: one slot per layer execution.
        return self.executions_config()
