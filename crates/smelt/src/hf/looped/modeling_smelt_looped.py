"""A looped model exported by smelt, built from the Baseline family's own Transformers classes.

The family's causal-LM class is built as it is (`AutoModelForCausalLM.from_config`), with one
decoder layer per *physical* layer (the parameters smelt counts, each once). Its decoder then
runs the layers in the matched order: the layers before the loop, the looped span
`loop_repeats` times, the rest. Each visit of a looped layer writes its own KV-cache slot (the
cache has one slot per layer execution, as smelt's KV budget counts it), so cached decoding
gives the full forward's logits; inside the span every residual update (attention and FFN
output) is scaled by `loop_residual_scale`.

Written by smelt for Transformers 5 (`AutoModelForCausalLM.from_config(config,
trust_remote_code=True)`). Generated file: regenerate it with smelt rather than editing it.
"""

import copy

from torch import nn
from transformers import AutoModelForCausalLM, GenerationMixin, PreTrainedModel

try:
    from .configuration_smelt_looped import _PER_LAYER_KEYS, SmeltLoopedConfig
except ImportError:  # loaded as a plain module
    from configuration_smelt_looped import _PER_LAYER_KEYS, SmeltLoopedConfig

# The FFN of a decoder layer, by family.
_FFN_NAMES = ("mlp", "feed_forward", "block_sparse_moe")


class _Visit:
    """One execution of a physical decoder layer: its cache slot set, then the layer called."""

    def __init__(self, layer: nn.Module, execution: int, indexed: list[nn.Module]):
        self._layer = layer
        self._execution = execution
        self._indexed = indexed

    def __call__(self, *args, **kwargs):
        for module in self._indexed:
            module.layer_idx = self._execution
        return self._layer(*args, **kwargs)

    def __getattr__(self, name):
        # Only the layer's public attributes (e.g. `attention_type`); private and special
        # names are this object's, so that copying and pickling see a plain object.
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self._layer, name)


class _LoopedLayers(nn.ModuleList):
    """The physical layers (what is stored and trained), iterated in execution order."""

    def __init__(self, layers: nn.ModuleList, order: list[int]):
        super().__init__()
        for i, layer in enumerate(layers):
            self.add_module(str(i), layer)
        indexed = [[m for m in layer.modules() if hasattr(m, "layer_idx")] for layer in layers]
        self._visits = [_Visit(layers[p], e, indexed[p]) for e, p in enumerate(order)]

    def __iter__(self):
        return iter(self._visits)

    def __len__(self):
        return len(self._visits)

    def __getitem__(self, index):
        return self._visits[index]

    def physical(self) -> list[nn.Module]:
        return list(self._modules.values())


class _ScaleOutput:
    """A forward hook scaling a sub-layer's output: its residual update (a class, not a
    closure, so that the model pickles)."""

    def __init__(self, scale: float):
        self.scale = scale

    def __call__(self, _module, _inputs, output):
        if isinstance(output, tuple):
            return (output[0] * self.scale,) + tuple(output[1:])
        return output * self.scale


class SmeltLoopedPreTrainedModel(PreTrainedModel):
    config_class = SmeltLoopedConfig
    base_model_prefix = "language_model"
    supports_gradient_checkpointing = True
    _supports_sdpa = True
    _supports_flash_attn = True
    _supports_flex_attn = True
    _can_compile_fullgraph = False


class SmeltLoopedForCausalLM(SmeltLoopedPreTrainedModel, GenerationMixin):
    def __init__(self, config: SmeltLoopedConfig):
        super().__init__(config)
        order = config.execution_order()
        # The family's model with one decoder layer per physical layer, built on a copy of
        # its config (the saved config keeps the physical layers)...
        self.language_model = AutoModelForCausalLM.from_config(copy.deepcopy(config.text_config))
        decoder = self.language_model.model
        layers = decoder.layers
        # ...then run as the executions: its config sizes the cache and the masks by them.
        executions = config.executions_config()
        for key in ("num_hidden_layers",) + _PER_LAYER_KEYS:
            if hasattr(executions, key):
                setattr(self.language_model.config, key, getattr(executions, key))
        decoder.layers = _LoopedLayers(layers, order)
        start = config.loop_first_layer - 1
        if config.loop_residual_scale != 1.0:
            for layer in list(layers)[start : start + config.loop_span]:
                self._scale_residuals(layer, config.loop_residual_scale)
        self.post_init()

    @staticmethod
    def _scale_residuals(layer: nn.Module, scale: float):
        ffn = [getattr(layer, n) for n in _FFN_NAMES if isinstance(getattr(layer, n, None), nn.Module)]
        if not isinstance(getattr(layer, "self_attn", None), nn.Module) or len(ffn) != 1:
            raise ValueError(
                f"smelt_looped: cannot scale the residual updates of {type(layer).__name__} "
                "(no self_attn and one FFN module)"
            )
        layer.self_attn.register_forward_hook(_ScaleOutput(scale))
        ffn[0].register_forward_hook(_ScaleOutput(scale))

    def get_input_embeddings(self):
        return self.language_model.get_input_embeddings()

    def set_input_embeddings(self, value):
        self.language_model.set_input_embeddings(value)

    def get_output_embeddings(self):
        return self.language_model.get_output_embeddings()

    def set_output_embeddings(self, value):
        self.language_model.set_output_embeddings(value)

    def forward(self, *args, **kwargs):
        return self.language_model(*args, **kwargs)
