"""A looped model exported by smelt, built from the Baseline family's own Transformers classes.

The family's causal-LM class is built as it is (`AutoModelForCausalLM.from_config`), with one
decoder layer per *physical* layer (the parameters smelt counts, each once). Its decoder then
runs the layers in the matched order: the layers before the loop, the looped span
`loop_repeats` times, the rest. Each visit of a looped layer writes its own KV-cache slot (the
cache has one slot per layer execution, as smelt's KV budget counts it, and a recurrent
layer's conv and recurrent state are one slot's too), so cached decoding gives the full
forward's logits; inside the span every residual update (what a layer adds to its residual
stream: its token mixer's and its FFN's output, or the post norm's where the family norms
them) is scaled by `loop_residual_scale`.

Written by smelt for Transformers 5 (`AutoModelForCausalLM.from_config(config,
trust_remote_code=True)`). Generated file: regenerate it with smelt rather than editing it.
"""

import copy

from torch import nn
from transformers import AutoModelForCausalLM, GenerationMixin, PreTrainedModel

try:
    from .configuration_smelt_looped import SmeltLoopedConfig, run_as_executions
except ImportError:  # loaded as a plain module
    from configuration_smelt_looped import SmeltLoopedConfig, run_as_executions

# The modules whose outputs a decoder layer adds to its residual stream, by family
# (`text_config.model_type`) where they are not its token mixer and its FFN (below).
_RESIDUAL_UPDATES = {
    # NemotronHBlock: one norm and one block (Mamba-2, attention, MLP or MoE), whose output
    # is the update.
    "nemotron_h": ("mixer",),
    # Gemma4TextDecoderLayer norms each sub-layer's output before adding it (a scale before
    # an RMSNorm would cancel): the attention's post norm, and the FFN's, applied to the sum
    # of its dense MLP's and its experts' branches (each with a norm of its own).
    "gemma4_text": ("post_attention_layernorm", "post_feedforward_layernorm"),
}
# The token mixer of a decoder layer: attention, or Gated DeltaNet (Qwen3-Next, Qwen3.5).
_MIXER_NAMES = ("self_attn", "linear_attn")
# The FFN of a decoder layer, by family.
_FFN_NAMES = ("mlp", "feed_forward", "block_sparse_moe")
# Post norms in a family not named in _RESIDUAL_UPDATES would make its mixer's and FFN's
# outputs no updates: refused rather than scaled where the scale cancels.
_POST_NORM_NAMES = ("post_feedforward_layernorm", "post_mlp_layernorm", "post_self_attn_layernorm")


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

    @classmethod
    def _can_set_experts_implementation(cls) -> bool:
        # Transformers looks for `@use_experts_implementation` in this module's source; the
        # experts are the family's own modules, which carry it and read the implementation
        # from the text config this class hands them (`experts_implementation="grouped_mm"`
        # reaches them as it reaches the family's own model).
        return True


class SmeltLoopedForCausalLM(SmeltLoopedPreTrainedModel, GenerationMixin):
    def __init__(self, config: SmeltLoopedConfig):
        super().__init__(config)
        order = config.execution_order()
        # The family's model with one decoder layer per physical layer, built on a copy of
        # its config (the saved config keeps the physical layers)...
        self.language_model = AutoModelForCausalLM.from_config(copy.deepcopy(config.text_config))
        decoder = self.language_model.model
        layers = decoder.layers
        # ...then run as the executions: its config sizes the cache (a slot per execution, for
        # the keys and values and for a recurrent layer's states) and the masks by them.
        run_as_executions(self.language_model.config, order)
        decoder.layers = _LoopedLayers(layers, order)
        if hasattr(decoder, "first_kv_shared_layer_idx"):
            # Gemma 4 slices its inputs from this execution on (none: no layer shares KV).
            decoder.first_kv_shared_layer_idx = len(order)
        # Stateful (recurrent) families cannot roll their cache back: generation asks this.
        self._is_stateful = getattr(self.language_model, "_is_stateful", False)
        start = config.loop_first_layer - 1
        if config.loop_residual_scale != 1.0:
            model_type = config.text_config.model_type
            for layer in list(layers)[start : start + config.loop_span]:
                for module in self._residual_updates(layer, model_type):
                    module.register_forward_hook(_ScaleOutput(config.loop_residual_scale))
        self.post_init()

    @staticmethod
    def _residual_updates(layer: nn.Module, model_type: str) -> list[nn.Module]:
        """The modules whose outputs `layer` adds to its residual stream."""
        names = _RESIDUAL_UPDATES.get(model_type)
        if names is not None:
            modules = [getattr(layer, n, None) for n in names]
            if all(isinstance(m, nn.Module) for m in modules):
                return modules
            raise ValueError(
                f"smelt_looped: cannot scale the residual updates of {type(layer).__name__} "
                f"({model_type}: no {' and '.join(names)})"
            )
        mixers = [getattr(layer, n) for n in _MIXER_NAMES if isinstance(getattr(layer, n, None), nn.Module)]
        ffn = [getattr(layer, n) for n in _FFN_NAMES if isinstance(getattr(layer, n, None), nn.Module)]
        post = [n for n in _POST_NORM_NAMES if hasattr(layer, n)]
        if len(mixers) != 1 or len(ffn) != 1 or post:
            raise ValueError(
                f"smelt_looped: cannot scale the residual updates of {type(layer).__name__} "
                "(one token mixer, self_attn or linear_attn, and one FFN module, without post norms)"
            )
        return mixers + ffn

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
