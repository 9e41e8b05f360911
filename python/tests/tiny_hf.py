"""Helpers the per-family tests share: a tiny config built by Transformers with eager
attention and experts (what FlopCounterMode counts), and smelt's model of it at a dense
workload of one sequence (the masked square eager attention computes). Imported only by
tests that have skipped themselves when torch or Transformers is missing."""

import transformers  # imported by the tests after their own importorskip

import smelt


def build(config):
    """The model Transformers builds from `config`, eager attention and experts."""
    cfg = transformers.AutoConfig.for_model(**config)
    return transformers.AutoModelForCausalLM.from_config(
        cfg, attn_implementation="eager", experts_implementation="eager"
    )


def smelt_model(config, tokens):
    """smelt's import of `config` at one dense sequence of `tokens`."""
    model = smelt.import_hf(config)
    model["workload"] = {"context": tokens, "mean_doc_len": tokens, "attention": "dense", "kv_dtype_bytes": 2}
    return model
