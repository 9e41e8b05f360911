//! The analytic cost model: parameters, per-token FLOPs and KV cache of a (looped) MoE
//! decoder Transformer, and its compute-equivalent sparsity.
//!
//! # Conventions
//!
//! Every count is exact (integers, or an exact fraction for per-token FLOPs) and checked for
//! overflow. A model has `L` physical layers of hidden size `H`. A loop of `span` layers run
//! `repeats` times gives `X = L + (repeats - 1)·span` layer executions. FLOPs and the KV cache
//! are counted once per *execution*; parameters once per *physical* layer. A layer's FFN is the
//! MoE, or, for the layers `[model.dense]` lists, a dense SwiGLU (a dense layer inside the loop
//! counts once per visit).
//!
//! The cost model counts, per token and per **execution** of a layer (a looped layer executed
//! twice is counted twice), forward, 2 FLOPs per multiply-add:
//!
//! | component | forward FLOPs per token | parameters (per physical layer) |
//! |---|---|---|
//! | Q, K, V, O projections | `2·H·(heads + 2·kv_heads)·head_dim + 2·heads·head_dim·H` | `H·(heads + 2·kv_heads)·head_dim + heads·head_dim·H` |
//! | MLA projections (`[model.mla]`, ranks `r_q`, `r`, widths `d_n`, `d_r`, `d_v`) | 2 × the parameters | `H·r_q + r_q·heads·(d_n+d_r)` (or `H·heads·(d_n+d_r)` when `r_q = 0`) `+ H·(r+d_r) + r·heads·(d_n+d_v) + heads·d_v·H` |
//! | attention biases (`attention_bias = "qkv"` or `"all"`) | not counted (adds) | `(heads + 2·kv_heads)·head_dim`, `+ H` with O |
//! | attention sinks (`attention_sinks`) | not counted (softmax) | `heads` |
//! | attention core (QKᵀ, PV) | `2·(qk width + v width)·c̄`: `4·heads·head_dim·c̄` for GQA, `2·heads·(d_n+d_r+d_v)·c̄` for MLA | – |
//! | router (MoE layers) | `2·H·experts` | `H·experts`, `+ experts` with `router_bias` |
//! | routed experts (MoE layers) | `top_k·2·3·H·expert_ffn` | `experts·3·H·expert_ffn`, `+ experts·(2·expert_ffn + H)` with `expert_bias` |
//! | LatentMoE (`latent = L`, MoE layers) | the routed experts at `L` instead of `H` (`top_k·2·3·L·expert_ffn`), plus the projections down and up, `2·2·H·L` | the experts at `L` (`experts·3·L·expert_ffn`), plus `2·H·L` (`fc1_latent_proj`, `fc2_latent_proj`) |
//! | shared experts (MoE layers) | `shared_experts·2·3·H·shared_ffn` | `shared_experts·3·H·shared_ffn` |
//! | shared-expert gate (`shared_gate = true`) | `2·H` | `H` |
//! | dense FFN (layers in `[model.dense]`) | `2·3·H·ffn` | `3·H·ffn` |
//! | norms | not counted | `2·H` (`4·H` with `post_norms`; `+ 3·H` per MoE layer with `branch_norms`) (+ q/k norms, or MLA's `r_q + r` latent norms), plus `H` once for the final norm; with `norm_bias` (LayerNorms), twice the `H` terms |
//! | router scales (`router_scale`, MoE layers) | not counted (elementwise) | `H + experts` |
//! | LM head (only if counted) | `2·H·vocab`, once per token | `vocab·H` (embeddings likewise), `+ vocab` with `lm_head_bias` |
//! | sparse attention indexer (`[model.indexer]`, `n_i` heads of width `d_i`, `topk`) | `2·(r_q·n_i·d_i + H·d_i + H·n_i)` + `2·n_i·(d_i+1)·c̄` (it scores every key the query may attend); the attention core then uses `c̄_topk` | `r_q·n_i·d_i + H·d_i + 2·d_i + H·n_i` (`wq_b`, `wk`, the key's LayerNorm, `weights_proj`) |
//! | Gated DeltaNet layers (`[model.recurrent]`, see below) | projections `2·H·(2K + 2V + 2·n_v) + 2·V·H`, the convolution and the chunked delta rule over the `context`-token sequence | `H·(2K + 2V + 2·n_v) + V·H + c·w + 2·n_v + d_v` |
//! | Mamba-2 layers (`[model.recurrent]` mixer `mamba2`, see below) | projections `2·H·(2I + 2·g·N + n_h) + 2·I·H`, the convolution and the chunked SSD scan over the `context`-token sequence | `H·(2I + 2·g·N + n_h) + I·H + c·w` (`+ c` conv bias, `+ 2I + 2·g·N + n_h + H` projection biases) `+ 3·n_h + I` |
//! | MTP module (`mtp_layers`, only if `[counting] mtp`) | per module: `2·2H·H` + one layer of full attention and the last layer's FFN (the MoE, or the dense FFN after a dense last layer, as Megatron-Core builds it) + the LM head if counted | per module: one such layer, `2H·H`, `3·H` norms, and its own embedding and head when those are counted |
//!
//! * A layer listed in `[model.dense]` (`layers = [...]`, 1-based, and `ffn`) has one dense
//!   SwiGLU FFN instead of the router, routed and shared experts (Qwen's `mlp_only_layers` and
//!   `decoder_sparse_step`); a dense layer inside the loop is counted once per visit.
//! * **Multi-head latent attention** (`[model.mla]`) is counted as training executes it: the
//!   latents are projected up to every head's keys and values (not the absorbed inference
//!   form). The KV cache holds the `kv_lora_rank` latent and the shared `qk_rope_head_dim` RoPE
//!   key per token and layer execution, not `2·kv_heads·head_dim`.
//! * **Windowed layers** (`[model.window]`): a sliding layer's query `t` attends `min(t, W)`
//!   keys of its document, a document `T(T+1)/2` pairs for `T ≤ W` and `W(W+1)/2 + (T−W)·W`
//!   beyond; a chunked layer's query attends the keys of its own `C`-token chunk (chunks start
//!   at the document's first token): `q·C(C+1)/2 + r(r+1)/2` pairs for `T = q·C + r`. Token
//!   weighted over the histogram as below; under `attention = "dense"` a windowed layer costs
//!   what a full one does (that convention counts the masked square). A windowed layer inside
//!   the loop stays windowed on every visit. The report gives the windowed layers' c̄ beside
//!   the full layers'.
//! * **A sparse attention indexer** (`[model.indexer]`, DeepSeek-V3.2's lightning indexer) on
//!   every layer scores each key a query may attend with `heads` small heads from the query
//!   latent, and the core runs on the `topk` best: query `t` attends `min(t, topk)` keys, the
//!   count of a sliding window of `topk` (so `c̄_topk` is the sliding window's; which keys
//!   differs). The indexer's scores cost `heads·(head_dim+1)` multiply-adds per pair (the dot
//!   products, then their weighted sum) over the full `c̄`; its key (`head_dim` elements) is
//!   cached per token beside MLA's latent. Its FP8 arithmetic is counted as any other FLOP, and
//!   its training (DeepSeek trains it on a KL loss against the attention it replaces) as
//!   3 × forward like the rest. The report gives `c̄_topk` beside the full `c̄`. Under
//!   `attention = "dense"` the core counts the whole square, as for windows.
//! * **Recurrent layers** (`[model.recurrent]`, Qwen3-Next's and Qwen3.5's Gated DeltaNet,
//!   with `n_k` query/key heads of width `d_k`, `n_v` value heads of width `d_v`, key width
//!   `K = n_k·d_k`, value width `V = n_v·d_v`, a `w`-tap depthwise convolution over
//!   `c = 2K + V` channels) replace the attention block of the layers they list (a looped one
//!   stays recurrent on every visit). Parameters per layer: `H·(2K + 2V + 2·n_v) + V·H`
//!   projections (q, k, v, z, b, a, out), `c·w` convolution, `2·n_v` (`A_log`, `dt_bias`) and
//!   `d_v` (the gated RMSNorm). Forward FLOPs per token: 2 × the projections' multiply-adds,
//!   plus, on the sequence of `T = context` tokens Transformers' torch path runs
//!   (`causal_conv1d_fn`, `torch_chunk_gated_delta_rule` with its chunk `C = 64`, the sequence
//!   padded to `P = C·⌈T/C⌉`), `2·((T + w − 1)·c·w + P·n_v·(2·C·d_k + C·d_v + 3·d_k·d_v))/T`:
//!   the convolution over the `T + w − 1` outputs `Conv1d` computes, and per chunk and value
//!   head `k_β·kᵀ`, `q·kᵀ`, `k_cumdecay·S`, `q·S`, `attn·v_new` and `kᵀ·v_new`. Not counted:
//!   the two unit-triangular solves per chunk, cumulative sums, exponentials, masks, the q/k
//!   l2 norms and the gated norm. A recurrent layer has no KV cache: it holds a state per
//!   sequence, `c·w` convolution inputs (as Transformers' cache keeps them) and the
//!   `n_v·d_k·d_v` delta-rule matrix per execution, reported beside the KV cache and included
//!   in the cache held at the context. The activation memory, the training memory and the
//!   kernel plan do not describe recurrent layers (nor one-block layers and the relu2 MLP
//!   below): they refuse them by name (the capability table below).
//! * **Full-attention layers of their own shape** (`[model.full_attention]`, Gemma 4's
//!   `global_head_dim` and `num_global_key_value_heads`): the layers neither windowed nor
//!   recurrent have `kv_heads'` key/value heads of width `d'` (queries: `heads` of `d'`),
//!   and every term above for them (projections, q/k norms, biases, the core's
//!   `4·heads·d'·c̄`, the KV cache's `2·kv_heads'·d'`) uses `d'` and `kv_heads'`; the
//!   windowed layers keep `head_dim` and `kv_heads`. With `k_eq_v` those layers have no
//!   value projection (the values are the key projection): `H·kv_heads'·d'` fewer
//!   parameters and as many multiply-adds per token; the cache still holds keys and values
//!   (they differ after their norms). The value norm (`v_norm`) has no scale: no parameters.
//!   Gemma 4's dense MLP beside its experts is one ungated shared expert (it runs on every
//!   token beside the routed ones). The activation memory, the training memory, the kernel
//!   plan and the launcher conventions refuse these pieces by name (the capability table
//!   below); the search matches a Gemma 4 Baseline, keeping the full-attention layers'
//!   shape.
//! * **Mamba-2 layers** (`[model.recurrent]` mixer `mamba2`, Nemotron-H's, with `n_h`
//!   heads of width `d`, inner width `I = n_h·d`, state `N`, `g` groups sharing `B` and `C`, a
//!   `w`-tap depthwise convolution over `c = I + 2·g·N` channels and the config's chunk
//!   `C`) replace the attention block as Gated DeltaNet does. Parameters per layer:
//!   `in_proj` `H·(2I + 2·g·N + n_h)` (z, x, B, C, dt), `out_proj` `I·H`, the convolution
//!   `c·w` (and its bias `c`), `A_log`, `D` and `dt_bias` `3·n_h`, the gated RMSNorm `I`.
//!   Forward FLOPs per token: 2 × the projections' multiply-adds, plus, on the sequence of
//!   `T = context` tokens `NemotronHMamba2Mixer`'s torch path runs (`causal_conv1d_fn`,
//!   `mamba2_chunk_scan` padded to `P = C·⌈T/C⌉` in `Z = P/C + 1` state slots, a zero initial
//!   state first), `2·((T + w − 1)·c·w + P·n_h·(C·N + C·d + 2·N·d) + Z²·n_h·N·d)/T`: the
//!   convolution, and the scan's five contractions: per chunk and head `C·Bᵀ` over every
//!   pair of the chunk, the masked scores times `x`, the chunk's state `Σ B·x` and its
//!   read-out by `C`, and the chunk-to-chunk recurrence computed as a `Z x Z` decay matrix
//!   applied to the `Z` states (quadratic in the chunks, as the code computes it). Not
//!   counted: the elementwise products by `dt`, the decays and `D`, softplus, cumulative
//!   sums, exponentials, masks and the gated norm. The state per sequence and execution:
//!   `c·w` convolution inputs and the `n_h·d·N` SSM state (fp32 in Nemotron-H's cache).
//! * **One-block layers** (`[model.blocks]`, Nemotron-H's, whose every layer is one norm and
//!   one block): a `mixer_only` layer has its token mixer (attention, or the recurrent mixer
//!   when `[model.recurrent]` lists it) and no FFN, an `ffn_only` layer its FFN (the MoE, or
//!   the dense FFN when `[model.dense]` lists it) and no mixer; each has one hidden-width norm
//!   instead of two. The attention counts run over the layers with attention, the MoE counts
//!   over the MoE layers, as everywhere.
//! * **The ungated MLP** (`model.moe.activation = "relu2"`, Nemotron-H's `down(relu(up·x)²)`)
//!   has two matrices of `H x ffn` instead of SwiGLU's three, in the routed and shared
//!   experts and the dense FFN alike: `2·H·ffn` parameters and `4·H·ffn` forward FLOPs per
//!   token per FFN.
//! * **The attention output gate** (`attention_gate`, Qwen3-Next's and Qwen3.5's gated
//!   attention): `q_proj` also produces a `heads·head_dim` gate, `H·heads·head_dim`
//!   parameters and 2 × as many FLOPs per token; its sigmoid and product are not counted.
//! * **Router and expert biases, sinks, MTP**: a router bias (gpt-oss's, DeepSeek-V3's
//!   `e_score_correction_bias`, stored in its checkpoint) and expert biases are parameters
//!   with no counted FLOPs; so are sinks (their logit joins the softmax). DeepSeek's grouped
//!   routing, `routed_scaling_factor` and scoring function change which experts run and how
//!   their outputs are weighted, not what is computed: no cost. MTP modules are training-only
//!   extra heads: counted only with `[counting] mtp = true` (DeepSeek reports 671B without
//!   them, 685B with them), never in the KV cache.
//! * **Training FLOPs** = 3 × forward.
//! * **c̄**, the mean number of keys a query attends: documents are packed into `context`-token
//!   sequences with a document mask. A causal document of length `T` gives `(T+1)/2`
//!   (`mean_doc_len`); `attention = "dense"` gives `T` (what most FLOP counters count). With a
//!   histogram `doc_lengths` the exact token-weighted value `Σ n·T(T+1)/2 / Σ n·T` is used, and
//!   the report also shows what the shortcut at the mean document length would have said (it is
//!   never larger).
//! * **Parameters** are counted once per physical layer; embeddings and the LM head are excluded
//!   unless `[counting]` includes them. **Active** parameters are those one token touches: the
//!   same with `top_k` experts instead of all.
//! * **KV cache per token** = Σ over attention-layer executions of `2·kv_heads·head_dim` elements (MLA:
//!   `kv_lora_rank + qk_rope_head_dim`; the second visit of a looped layer keeps its own keys
//!   and values); bytes = elements × `kv_dtype_bytes`. Every report also gives the cache **one
//!   sequence holds at the end of the workload's context**: `context` entries per full layer
//!   execution, `min(size, context)` per windowed one: a sliding layer holds the `W` keys its
//!   last query attends, a chunked layer a whole chunk of `C` (what a chunk's last query
//!   attends; the cache must hold it whichever token ends the context). Transformers'
//!   sliding-window cache keeps `W - 1` after a prefill (the incoming token's key completes
//!   the window), and its chunked layers use the same cache with the window set to the chunk
//!   (`layer_types` `"chunked_attention"` → `DynamicSlidingWindowLayer`), keeping `C - 1`: a
//!   count the report gives beside smelt's (`elements_cache`). The KV budget a match compares is the per-token figure unless `[counting] kv =
//!   "at_context"` (in the model file or the budget's `[counting]`) picks the held one, which
//!   is the one that sees windows.
//! * **Activation memory** ([`memory`]): the bytes per token a training step saves for the
//!   backward pass, by component, counted per layer *execution* (each visit of a looped
//!   layer saves its own) under a named policy. The **activations budget** is the
//!   per-token figure under `[counting] activations` (`megatron` unless set: the stack these
//!   models are trained with at scale, [`megatron`]); its weight defaults to 0: reported,
//!   not matched (and bounding nothing in conservative mode) unless the objective weighs it.
//!   A model holding a feature the budget's Megatron policy does not count has it reported
//!   as not counted ([`memory::uncounted`]).
//! * **Unfused counts** ([`memory`]): `unfused-eager` (a plain PyTorch step: every op
//!   saves what its backward reads, attention probabilities included, a row as long as the
//!   document per query and head), `unfused-flash` (a fused attention kernel: `q`, `k`,
//!   `v`, its output and an fp32 log-sum-exp per head), `unfused-selective` (the attention
//!   core recomputed, its inputs and output kept) and `unfused-full` (each execution's input
//!   only); the names `eager`, `flash`, `selective`, `full` read as them. Per execution, in
//!   elements of `activation_bytes` (2), besides the scores: `2H` norm inputs (and q/k or
//!   MLA latent norm inputs), the attention's normed input, `q`, `k`, `v` and output, the
//!   FFN's normed input, and in a MoE layer `E + k` router probabilities and weights,
//!   `k·(2H + 4·expert_ffn)` for the dispatched copies, SwiGLU intermediates and outputs
//!   (`7·expert_ffn` with gpt-oss's clamped SwiGLU, `activation = "clamped_swiglu"`),
//!   `4·shared_ffn` per shared expert; a dense layer `4·ffn`. They reproduce Korthikanti
//!   et al. (arXiv:2205.05198) for a GPT layer once their dropout is added; the module's
//!   docs give every tensor and convention. They are what an op-by-op step needs: a lower
//!   bound for a step whose every op is its own autograd node (a Transformers step saves
//!   1.1–1.8× the `unfused-eager` count), not for fused kernels that recompute elementwise
//!   ops (Megatron's SwiGLU and weighted SwiGLU keep `H + 3F` per routed copy, not
//!   `2H + 4F`).
//! * **Activations as Megatron-Core saves them** ([`megatron`]): `megatron`,
//!   `megatron-selective` (`recompute_granularity = "selective"`, `[counting]
//!   recompute_modules`: `core_attn`, `moe_act`, `layernorm`, `mla_up_proj`, `mlp`, `moe`,
//!   `shared_experts`) and `megatron-full`, tensor by tensor, from Megatron-LM and
//!   Transformer Engine at pinned commits, as the Megatron-MoE model zoo's recipes configure
//!   them (TE fused kernels and attention, sequence parallelism, grouped GEMM, the fused
//!   all-to-all permutation and router). Per execution and token, on the `tp · cp` GPUs
//!   holding it, `b` bytes per element: `2bH` norm inputs with an fp32 `rstd` each, the
//!   attention's normed input `bH`, `q`, `k`, `v`, the output (`b(2q + 2kv)`; MLA: the
//!   latents, their norms and `q`, `k`, `v` at their widths), fp32 softmax statistics
//!   `4a`, the FFN's normed input `bH`, a router `9E` plus the permutation's int32 map
//!   `4(2E + 1)`, per routed copy `etp·(bH + 12) + 3bF`, shared experts `3bF_s`, a dense FFN
//!   `3bF_d`. The tests hold them to Korthikanti et al.'s formula for the dense parts on
//!   Mixtral-8x7B, Qwen3-30B-A3B and DeepSeek-V3, every difference a named term.
//! * **Activations as a stack saves them** ([`transformers`]): `transformers-eager` (eager
//!   attention, eager experts) and `transformers-sdpa` (Transformers' defaults: SDPA
//!   attention, `grouped_mm` experts) count, storage by storage, what Transformers 5.24 on
//!   PyTorch 2.15 (CPU kernels) keeps for the backward pass, in float32
//!   (`activation_bytes = 4`) and in bfloat16 weights (`2`). `smelt cost MODEL --activations
//!   transformers-eager --activation-bytes 2 --context T --mean-doc-len T` adds the policy to
//!   `activations.policies[]` (`at_context`: one sequence of `T` tokens). Per layer
//!   execution and token, `b` the dtype's bytes (float32 is 4 whatever `b`):
//!
//!   | tensor | bytes |
//!   |---|---|
//!   | each RMSNorm (`weight · (x · rsqrt(mean x² + ε))` in float32): its float32 input (a copy in bf16), `rsqrt` per row, `x · rsqrt` in the dtype | `4H + 4 + b·H`, twice |
//!   | each LayerNorm with a bias (PhiMoE): its input, mean and `rstd` in the dtype | `b·H + 2b`, twice |
//!   | q/k norms: per head (Qwen3-MoE) / over the width (OLMoE, MiniMax-M2) | `4q + 4a + b·q` and `4kv + 4g + b·kv` / `4q + 4 + b·q` and `4kv + 4 + b·kv` |
//!   | the attention's normed input | `b·H` |
//!   | `q`, `k` after RoPE, `v`, the core's output | `b·(2q + 2kv')`: `kv' = kv` under SDPA (`enable_gqa`, which Transformers turns on for heads at most 256 wide) and with one KV head (`repeat_kv` is a view), `kv' = q` otherwise (eager attention, SDPA with wider heads) |
//!   | eager probabilities: the float32 softmax and, in bf16, its bf16 copy | `a·T̄·4` (float32), `a·T̄·6` (bf16) |
//!   | SDPA: the log-sum-exp | `4a` |
//!   | SDPA in a sliding-window layer whose window is no longer than `T` (Transformers then hands it a mask, and `enable_gqa` is off: `kv' = q` as under eager attention): the mask, additive, in the dtype | `b·T²` per sequence |
//!   | the FFN's normed input | `b·H` |
//!   | router: float32 softmax (MiniMax-M2: sigmoid) over `E`, int64 top-k indices, with renormalisation the top-k values and their sum; Granite-MoE's softmax over the top-k logits: the indices and that softmax; PhiMoE's SparseMixer (two rounds: bool mask, two int64 indices, softmax and weight in the dtype) | `4E + 8k (+ 4k + 4)`; `8k + 4k`; `2·(E + 16 + b·(E + 1))` |
//!   | eager experts, per routed copy: token/slot indices (one int64 storage), gathered input, `gate_up`, SiLU's output, the product, the routing weight, the down output, the weighted output `index_add_`'s backward keeps | `16 + b·(3H + 4F) + w` |
//!   | `grouped_mm` experts, per routed copy: three int64 index vectors, the sorted input, `gate_up`, SiLU's output, the product, the routing weight, the down output; per sequence the int32 group offsets | `24 + b·(2H + 4F) + w`; `4E` per sequence |
//!   | shared expert with its sigmoid gate (Qwen1.5/2-MoE); dense FFN | `b·(4F_s + 1 + H)`; `b·4F_d` |
//!   | RoPE's `cos` and `sin`, once per forward | `2·r·b`, `r` the rotated width (`rope_dim`, else `d`) |
//!   | SDPA after a RoPE that concatenates (`rope_dim`, MiniMax-M2), more than one head: `o_proj`'s contiguous copy of the head-major output | `b·q` |
//!
//!   gpt-oss (`transformers-eager` only: Transformers 5.24 builds no SDPA attention for it,
//!   and `transformers-sdpa` refuses it) differs in these rows: each RMSNorm multiplies by
//!   its weight before the cast, so `x · rsqrt` stays float32 (`4H + 4 + 4H`, twice); RoPE's
//!   `cos` and `sin` are `d/2` wide (it rotates halves: `d·b` once per forward); the sink's
//!   row maximum keeps int64 indices (`8a`) and the softmax, sink column included, runs in
//!   the dtype (`a·(T̄ + 1)·b`, no float32 copy); its router (`topk_softmax_dtype`) keeps
//!   the top-k indices and the softmax over the top-k logits in the dtype (`8k + b·k`); the
//!   clamped SwiGLU on `gate_up`'s strided views keeps `gate_up` and five widths per routed
//!   copy (`b·7F` in place of `b·4F`). Its biases (router, experts) save nothing. Under eager
//!   attention a sliding window saves nothing more (its mask is added; the probabilities are
//!   `T × T` whatever the window).
//!
//!   Multi-head latent attention (DeepSeek-V2, DeepSeek-V3, DeepSeek-V3.2, Kimi-K2, GLM-5)
//!   has its own rows ([`transformers`]); the sparse attention indexer beside it
//!   (DeepSeek-V3.2, GLM-5: `[model.indexer]`) runs under `torch.no_grad()` and its top-k
//!   only masks the scores: it saves nothing, under either policy, at any `T` (but where
//!   MLA's query/key heads are as wide as its value heads, GLM-5's shape: SDPA then runs
//!   PyTorch's flash kernel, which keeps the mask, `b·T²` per sequence).
//!
//!   Llama-4 (`llama4_text`, both stacks: Transformers 5.24 builds its experts one way,
//!   `Llama4TextExperts`, and raises on any `experts_implementation`) differs in these rows:
//!   its RoPE multiplies complex numbers in float32 (a complex64 table, `4d` once per
//!   forward in any dtype); on the layers with RoPE its L2 q/k norm without a weight
//!   (`qk_norm = "l2"`) keeps its float32 input and `rsqrt` per head (`4q + 4a + 4kv + 4g`;
//!   its output is the core's `q` and `k`); a NoPE layer (`[model.nope]`) with the
//!   temperature keeps the float32 scale of each position (`4`); eager probabilities are
//!   one softmax in the dtype (`a·T̄·b`); under SDPA a chunked layer whose chunk is no longer
//!   than `T` gets a mask as a sliding window does (`b·T²` per sequence, `kv' = q`); its
//!   router (`sigmoid_topk_scatter`) keeps the top-k indices and the float32 sigmoid over
//!   every expert (`8k + 4E`), and its experts run every token through every expert: per
//!   token and expert the routing weight, the repeated and the weighted input, `gate_up`,
//!   SiLU's output and the product (`E·b·(1 + 2H + 4F)`, in place of the per-copy rows).
//!
//!   Nemotron-H (`nemotron_h`, both stacks; `transformers/nemotron_h.rs` lists every
//!   tensor) has one norm and one block per layer (`NemotronHBlock`). Its norm keeps
//!   `x · rsqrt` in float32 (`8H + 4`, and in bf16 its weight's float32 copy, `4H` per
//!   sequence). Its Mamba-2 mixer, on PyTorch's path (no `mamba_ssm`), keeps per token
//!   `in_proj`'s whole output, the convolution's, `dt` before and after its softplus, `x`
//!   and `dt` in float32 and the gated RMSNorm's float32 tensors, and per sequence its
//!   chunked scan's float32 tensors over the sequence padded to `chunk_size` (`T_p`): the
//!   `L × L` decays and scores (`12·n·L·T_p`), `B` and `C` (`20·n·N·T_p`), `x` (`20·I·T_p`),
//!   the states and the chunk-to-chunk decay. Its attention has no RoPE; its MLPs are
//!   relu2 (ReLU's output and its square, `2b·F`); its router (`NemotronHTopkRouter`, one
//!   group) keeps `5E + 12k + 28` (bf16: its float32 input and weight copies too); an eager
//!   expert copy keeps `20 + b·(2W + 2F) + 4W`, a `grouped_mm` one `28 + b·(2W + 2F)`, `W`
//!   the experts' width (LatentMoE's latent width, whose `fc2_latent_proj` input adds `b·W`).
//!
//!   `w`, the routing weight per copy, is float32 (4) where the router keeps it so (Mixtral:
//!   `[model.moe] router = "softmax_renormalised_fp32"`), `b` where it casts it (`softmax`,
//!   `softmax_renormalised`: OLMoE, Qwen; `topk_softmax`: Granite-MoE;
//!   `sigmoid_renormalised_fp32`: MiniMax-M2, whose `e_score_correction_bias` saves nothing;
//!   `sparsemixer`: PhiMoE; `topk_softmax_dtype`: gpt-oss; DeepSeek's float32 routers:
//!   DeepSeek-V2, V3, V3.2, Kimi-K2, GLM-4.5, GLM-5). The import states the router for
//!   OLMoE, Qwen1.5/2-MoE, Qwen3-MoE (`norm_topk_prob`), Granite-MoE, gpt-oss, Llama-4,
//!   Mixtral, MiniMax-M2 and PhiMoE, and for the DeepSeek families where the config's
//!   routing keys are what Transformers' class builds; the Transformers policies refuse,
//!   naming the field, a model that does not state it (every other family but Nemotron-H,
//!   whose classes route with their own), Llama-4's
//!   pieces (chunked attention, NoPE layers, the L2 q/k norm, its router) beside what its
//!   classes do not build, MLA under SDPA with equal query/key and value widths but no
//!   indexer, a partial RoPE in a windowed layer under SDPA, gpt-oss under
//!   `transformers-sdpa` or any of its features (sinks, expert biases, the clamped SwiGLU)
//!   apart from the others, Gemma 4's pieces apart from its classes (`transformers/gemma4.rs`),
//!   another router bias, the MoE's input noise (`[model.moe] jitter`: `b·H` per token and
//!   draw, which the in-place product keeps; Mixtral's and MiniMax-M2's MoE block draws
//!   once, PhiMoE's block and router once each) beside another router, one-block layers
//!   but Nemotron-H's (`transformers/nemotron_h.rs`), and `activation_bytes` other than 2
//!   or 4. Under bf16
//!   autocast with float32 weights a step also keeps the bf16 copy of each weight a matmul
//!   reads: not modelled. python/tests/test_saved_tensors.py checks every figure against
//!   `saved_tensors_hooks` (each storage once) on the stock and looped models of those
//!   seventeen families, both stacks (gpt-oss: eager), both dtypes, two lengths, of Mixtral
//!   with sliding windows and of Llama-4 with chunks shorter than, equal to and longer than
//!   a length, of DeepSeek-V3.2 and GLM-5 with GLM-5's equal widths, and of Nemotron-H with
//!   LatentMoE and at lengths its scan pads: difference 0, and
//!   that every other family smelt imports is refused.
//!   The training memory counts them under data parallelism only.
//! * **Training memory** ([`training`], only with a `[training]` table): the static bytes
//!   of weights, gradients, master weights and optimizer moments (16 per parameter by
//!   default, as ZeRO counts mixed-precision Adam; embedding and LM head included), and
//!   per GPU under a layout of tensor, expert (and expert tensor), pipeline (uneven first
//!   and last stages, virtual stages), context and data parallelism with ZeRO stage 0–3:
//!   the static share plus the activations of the micro-batches in flight under 1F1B or
//!   the interleaved schedule, the transients and the optimizer step's temporaries; and
//!   whether it fits a card, with the single knob that would make it ([`fit`]).
//! * **Sparsity** (SMELT Eq. 1): `N_act_eq = (F/F0)·N0`, `S = 1 − N_act_eq/N`, with `F0, N0`
//!   the training FLOPs and parameters of the *fully-activated control*: same shapes, not
//!   looped, `experts = top_k`. `smelt cost MODEL --against BASELINE` measures the model
//!   against its Baseline's control, as the paper does for looped models.
//!
//! Counts are exact integers (FLOPs per token are an exact fraction, since `(T+1)/2` need not
//! be whole) and every operation is overflow-checked: a model too large to count in 64 bits is
//! an error, never a wrapped number.
//!
//! **Comparisons are under one convention.** `smelt cost MODEL --against BASELINE` (and
//! `smelt::compare`) costs the model under the Baseline's `[counting]` and workload: a
//! `config.json` (embeddings and LM head counted, the default workload) against a paper-style
//! model file (neither counted, its own workload) would otherwise differ by convention, not by
//! architecture. What was replaced is said on standard error, in the table and in the JSON
//! (`harmonised`).
//!
//! *Active* parameters are what one token touches in one pass over the physical layers: the
//! same, with `top_k` experts instead of all (router, shared experts, dense FFNs and norms in
//! full). Norms, biases, softmax, activations, the gate's sigmoid, routing top-k and residual
//! adds are not counted as FLOPs.
//!
//! # The model as the counts read it
//!
//! Every count reads the model resolved once ([`crate::model::Stack`]): one description per
//! physical layer (its token mixer, attention shape, window and indexer, FFN, norms and
//! executions), layers with equal descriptions grouped into kinds. Each kind is priced once
//! ([`layer_cost`] gives one layer's parameters and forward FLOPs per execution); the
//! parameters sum its cost over its physical layers, the FLOPs, KV cache and activations
//! over its executions. What a consumer of the stack does not describe is refused by name,
//! in one wording (`<field>: <consumer> does not model <feature>: ...`), as this table says
//! ([`crate::model::capability`]; the HF export builds each feature in the families whose
//! code has it):
//!
//! <!-- capabilities:begin -->
//! | feature (model field) | FLOPs, params, KV | activations | training memory | kernel plan | launcher FLOP formulas | HF export |
//! |---|---|---|---|---|---|---|
//! | multi-head latent attention (`[model.mla]`) | yes | yes | yes | yes | yes | yes |
//! | sliding-window layers (`[model.window]`) | yes | yes | yes | yes | yes | yes |
//! | chunked-attention layers (`[model.window]`) | yes | yes | yes | yes | yes | yes |
//! | attention sinks (`model.attention_sinks`) | yes | yes | yes | yes | yes | yes |
//! | a router bias (`model.moe.router_bias`) | yes | yes | yes | yes | yes | yes |
//! | biases in the experts (`model.moe.expert_bias`) | yes | yes | yes | yes | yes | yes |
//! | gpt-oss's clamped SwiGLU (`model.moe.activation`) | yes | yes | yes | yes | yes | yes |
//! | MTP modules (`model.mtp_layers`) | yes | yes | no | yes | yes | yes |
//! | LayerNorms with a bias (`model.norm_bias`) | yes | yes | yes | yes | yes | yes |
//! | a bias on the LM head (`model.lm_head_bias`) | yes | yes | yes | yes | yes | yes |
//! | a sparse attention indexer (`[model.indexer]`) | yes | yes | yes | yes | yes | yes |
//! | the MoE's input noise (`model.moe.jitter`) | yes | yes | yes | yes | yes | yes |
//! | gated_deltanet layers (`[model.recurrent]`) | yes | no | no | no | yes | yes |
//! | mamba2 layers (`[model.recurrent]`) | yes | no | no | no | yes | yes |
//! | an attention output gate (`model.attention_gate`) | yes | no | no | no | yes | yes |
//! | layers with one block (`[model.blocks]`) | yes | no | no | no | yes | yes |
//! | the ungated relu2 MLP (`model.moe.activation`) | yes | no | no | no | yes | yes |
//! | full-attention layers of their own shape (`[model.full_attention]`) | yes | no | no | no | no | yes |
//! | a norm on the values (`model.v_norm`) | yes | no | no | no | yes | yes |
//! | post-attention and post-FFN norms (`model.post_norms`) | yes | no | no | no | yes | yes |
//! | norms around the MoE branches (`model.moe.branch_norms`) | yes | no | no | no | yes | yes |
//! | the router's learned scales (`model.moe.router_scale`) | yes | no | no | no | yes | yes |
//! | Gemma's GeGLU (`model.moe.activation`) | yes | no | no | no | yes | yes |
//! | LatentMoE's latent experts (`model.moe.latent`) | yes | no | no | no | no | yes |
//! <!-- capabilities:end -->
//!
//! The activations column is the unfused counts' and the Megatron-Core policies': the
//! Transformers policies also count Gemma 4's pieces (full-attention layers of their own
//! shape, the value norm, the post norms, the branch norms, the router's scales, the GeGLU)
//! in Gemma 4's classes, and Nemotron-H's (Mamba-2 layers, one-block layers, the relu2 MLP,
//! LatentMoE's latent experts) in Nemotron-H's classes ([`transformers`]).
//!
//! In the code: c̄ is [`MeanKeys`] (the windowed layers' [`MeanKeys::windowed`], an indexer's
//! [`Keys::selected`]), the cache one sequence holds is [`KvAtContext`], the fully-activated
//! control is [`ModelSpec::control`], and a model is measured against its Baseline's control
//! by [`cost_against`].
//!
//! Reference: Wang et al., "SMELT: Scaling Laws for Compute-Matched MoE Looped
//! Transformers", arXiv 2609.01343, §2 and Appendix A.

mod attention;
mod compare;
mod count;
pub mod fit;
mod layer;
pub mod megatron;
pub mod memory;
mod peaks;
mod per_budget;
mod shard;
pub mod training;
pub mod transformers;
mod types;

pub use attention::{Keys, MeanKeys, Shortcut};
pub use compare::{Comparison, compare};
pub use count::layer_cost;
pub use memory::{
    ActivationBreakdown, ActivationReport, PolicyActivations, activation_report, activations,
};
pub use peaks::{PeakPair, peak_pair};
pub use per_budget::{BudgetKind, Exactness, PerBudget, Ratios, Residuals, Term, TermStatus};
pub use training::{StageMemory, TrainingMemory, training_memory};
pub use types::{
    AttentionReport, Budgets, ControlReport, Conventions, Cost, FlopBreakdown, FlopReport,
    KvAtContext, KvReport, ParamBreakdown, ParamReport, RecurrentState, SelectedKeys, Sparsity,
    WindowedKeys,
};

use crate::error::{Error, Result};
use crate::model::{Counting, KvCount, Model, ModelSpec, Stack, Workload};
use crate::units::{Bytes, Flops, KvElements, product};
use layer::StackCost;

/// FLOPs per multiply-add.
pub const FLOPS_PER_MULTIPLY_ADD: u64 = 2;
/// Training FLOPs over forward FLOPs (forward + a backward of twice the forward).
pub const TRAINING_OVER_FORWARD: u64 = 3;

/// Parameters of `model`: `(total, active)` breakdowns.
pub fn params(model: &Model, counting: &Counting) -> Result<(ParamBreakdown, ParamBreakdown)> {
    count::params_of(model, &StackCost::of(&Stack::of(model)?)?, counting)
}

/// Forward FLOPs per token of `model` on `workload`, by component.
pub fn forward_flops(
    model: &Model,
    workload: &Workload,
    counting: &Counting,
) -> Result<FlopBreakdown> {
    forward_flops_with(model, &Keys::of(workload, model)?, counting)
}

/// [`forward_flops`] with the workload's keys per query already computed (for search).
pub fn forward_flops_with(
    model: &Model,
    keys: &Keys,
    counting: &Counting,
) -> Result<FlopBreakdown> {
    let stack = Stack::of(model)?;
    keys.check(&stack)?;
    count::forward_of(model, &StackCost::of(&stack)?, keys, counting)
}

/// Forward FLOPs per token of `model`'s MTP modules on `workload`, by component (each
/// module's block and its `2·2H·H` projection, in `projections`; its LM head not
/// included): what a framework that runs them (Megatron-Core, on the last pipeline stage)
/// computes beyond [`forward_flops`]. Zero without MTP modules; `[counting] mtp` does not
/// change it.
pub fn mtp_forward_flops(model: &Model, workload: &Workload) -> Result<FlopBreakdown> {
    let stack = Stack::of(model)?;
    let keys = Keys::of(workload, model)?;
    keys.check(&stack)?;
    count::mtp_forward_of(model, &StackCost::of(&stack)?, &keys)
}

/// KV cache of `model` on `workload`: per token, and held by one sequence at the context.
pub fn kv_cache(model: &Model, workload: &Workload, counting: &Counting) -> Result<KvReport> {
    let stack = Stack::of(model)?;
    kv_report(&stack, &StackCost::of(&stack)?, workload, counting)
}

/// [`kv_cache`] of `stack`, whose layers cost `cost`.
fn kv_report(
    stack: &Stack,
    cost: &StackCost,
    workload: &Workload,
    counting: &Counting,
) -> Result<KvReport> {
    let bytes = |e: KvElements| {
        Ok::<_, crate::Error>(Bytes(product(
            &[e.0, workload.kv_dtype_bytes],
            "kv_cache.bytes",
        )?))
    };
    let (elements, (conv, delta)) = count::kv_elements(cost, None)?;
    let context = workload.context;
    let window = stack.window();
    let held = window.map(|w| w.size.min(context));
    let at_context = kv_at_context(stack, cost, context)?;
    // Transformers' sliding-window cache: W - 1 keys after a prefill of at least W tokens.
    // Its chunked layers use the same cache with the window set to the chunk: C - 1.
    let cache_held = window.filter(|w| w.size <= context).map(|w| w.size - 1);
    let elements_cache = match cache_held {
        Some(h) => Some(count::kv_held(cost, context, h)?),
        None => None,
    };
    Ok(KvReport {
        elements,
        bytes: bytes(elements)?,
        at_context: KvAtContext {
            context: workload.context,
            elements: at_context,
            bytes: bytes(at_context)?,
            held_per_windowed_layer: held,
            elements_cache,
        },
        budget: counting.kv,
        recurrent_state: match (cost.recurrent(), stack.recurrent()) {
            (Some(r), Some(mixer)) => {
                let elements = KvElements(crate::units::add(conv, delta, "kv_cache.state")?);
                let fp32 = crate::units::add(
                    product(&[conv, workload.kv_dtype_bytes], "kv_cache.state")?,
                    product(&[delta, 4], "kv_cache.state")?,
                    "kv_cache.state",
                )?;
                Some(RecurrentState {
                    kind: mixer.as_str(),
                    conv_per_execution: r.conv_state,
                    delta_per_execution: r.delta_state,
                    executions: cost.recurrent_executions(),
                    elements,
                    bytes: bytes(elements)?,
                    bytes_fp32_delta: Bytes(fp32),
                })
            }
            _ => None,
        },
    })
}

/// The KV budget `counting` asks for.
fn kv_budget(
    stack: &Stack,
    cost: &StackCost,
    context: u64,
    counting: &Counting,
) -> Result<KvElements> {
    match counting.kv {
        KvCount::PerToken => Ok(count::kv_elements(cost, None)?.0),
        KvCount::AtContext => kv_at_context(stack, cost, context),
    }
}

/// [`count::kv_held`] under smelt's convention: `min(window, context)` keys per windowed
/// layer.
fn kv_at_context(stack: &Stack, cost: &StackCost, context: u64) -> Result<KvElements> {
    let held = stack.window().map_or(0, |w| w.size.min(context));
    count::kv_held(cost, context, held)
}

/// The budgets of a validated spec, without the report around them.
pub fn budgets(spec: &ModelSpec) -> Result<Budgets> {
    budgets_with(
        &spec.model,
        &Keys::of(&spec.workload, &spec.model)?,
        spec.workload.context,
        &spec.counting,
    )
}

/// [`budgets`] of a model with the workload's keys per query already computed (for
/// search); `context` is the workload's, for a KV budget counted at the context.
pub fn budgets_with(
    model: &Model,
    keys: &Keys,
    context: u64,
    counting: &Counting,
) -> Result<Budgets> {
    let stack = Stack::of(model)?;
    keys.check(&stack)?;
    let cost = StackCost::of(&stack)?;
    let (total, _) = count::params_of(model, &cost, counting)?;
    let forward = count::forward_of(model, &cost, keys, counting)?.total()?;
    Ok(Budgets {
        flops: forward.checked_mul(TRAINING_OVER_FORWARD)?,
        params: total.total()?,
        kv: kv_budget(&stack, &cost, context, counting)?,
        // Not counted for what the activation memory does not model: 0, which the
        // objective refuses to weigh.
        activations: match BudgetKind::Activations.uncounted_in(&stack, counting) {
            Some(_) => crate::units::ActivationBytes::ZERO,
            None => {
                memory::policy_activations(&stack, keys, context, counting, counting.activations)?
                    .total()?
            }
        },
    })
}

/// For a histogram workload, what the mean-length shortcut says: the exact count of
/// `spec`'s model (whose layers are `layer`) with `keys` taken at the histogram's mean
/// document length ([`Keys::at_mean_length`]), against the exact training FLOPs `exact`.
/// `None` for a `mean_doc_len` workload, and when the count at that fractional length does
/// not fit in 128 bits (its denominators are products of the document and token counts).
fn shortcut(
    spec: &ModelSpec,
    layer: &StackCost,
    keys: &Keys,
    exact: Flops,
) -> Result<Option<Shortcut>> {
    let at_mean = keys.at_mean_length(&spec.workload).and_then(|at| {
        at.map(|(mean, short)| {
            let forward = count::forward_of(&spec.model, layer, &short, &spec.counting)?.total()?;
            Ok((mean, short, forward.checked_mul(TRAINING_OVER_FORWARD)?))
        })
        .transpose()
    });
    let (mean, short, training) = match at_mean {
        Ok(Some(at)) => at,
        Ok(None) | Err(Error::Overflow { .. }) => return Ok(None),
        Err(e) => return Err(e),
    };
    let training = training.as_f64();
    Ok(Some(Shortcut {
        mean_doc_len: mean,
        mean_keys_per_query: short.full.as_f64(),
        training_flops: training,
        relative_to_exact: crate::units::relative(training, exact.as_f64()),
    }))
}

/// The cost of `spec`, with sparsity measured against its own fully-activated control.
pub fn cost(spec: &ModelSpec) -> Result<Cost> {
    cost_against(spec, spec)
}

/// The cost of `spec`, with sparsity measured against the fully-activated control of
/// `baseline` (how a looped model is measured against its Baseline's scale).
pub fn cost_against(spec: &ModelSpec, baseline: &ModelSpec) -> Result<Cost> {
    spec.validate()?;
    baseline.validate()?;
    let stack = Stack::of(&spec.model)?;
    let layer = StackCost::of(&stack)?;
    let keys = Keys::of_stack(&spec.workload, &stack)?;
    let (breakdown, active_breakdown) = count::params_of(&spec.model, &layer, &spec.counting)?;
    let forward_breakdown = count::forward_of(&spec.model, &layer, &keys, &spec.counting)?;
    let forward = forward_breakdown.total()?;
    let training = forward.checked_mul(TRAINING_OVER_FORWARD)?;
    let total = breakdown.total()?;

    let control = baseline.control();
    let control_budgets = budgets(&control)?;
    let n_act_eq =
        training.as_f64() / control_budgets.flops.as_f64() * control_budgets.params.as_f64();
    let shortcut = shortcut(spec, &layer, &keys, training)?;

    Ok(Cost {
        name: spec.name.clone(),
        conventions: Conventions {
            flops_per_multiply_add: FLOPS_PER_MULTIPLY_ADD,
            training_over_forward: TRAINING_OVER_FORWARD,
            attention: spec.workload.attention,
            attention_keys_from: if spec.workload.doc_lengths.is_some() {
                "doc_lengths"
            } else {
                "mean_doc_len"
            },
            embeddings_counted: spec.counting.embeddings,
            lm_head_counted: spec.counting.lm_head,
            kv_dtype_bytes: spec.workload.kv_dtype_bytes,
            mtp_counted: spec.counting.mtp,
            kv_budget: spec.counting.kv,
            workload: spec.workload.clone(),
        },
        physical_layers: spec.model.layers,
        layer_executions: stack.executions(),
        params: ParamReport {
            total,
            active: active_breakdown.total()?,
            breakdown,
            active_breakdown,
        },
        flops_per_token: FlopReport {
            training,
            forward,
            forward_breakdown,
        },
        kv_cache_per_token: kv_report(&stack, &layer, &spec.workload, &spec.counting)?,
        activations: activation_report(&spec.model, &keys, spec.workload.context, &spec.counting)?,
        training: spec
            .training
            .as_ref()
            .map(|t| training_memory(spec, t))
            .transpose()?,
        fit: None,
        attention: AttentionReport {
            mean_keys_per_query: keys.full.as_f64(),
            mean_keys_exact: keys.full.to_string(),
            windowed: keys.windowed.map(|(kind, size, w)| WindowedKeys {
                kind,
                size,
                mean_keys_per_query: w.as_f64(),
                mean_keys_exact: w.to_string(),
            }),
            selected: keys.selected.map(|(topk, s)| SelectedKeys {
                topk,
                mean_keys_per_query: s.as_f64(),
                mean_keys_exact: s.to_string(),
            }),
            mean_length_shortcut: shortcut,
        },
        sparsity: Sparsity {
            s: 1.0 - n_act_eq / total.as_f64(),
            n_act_eq,
            control: ControlReport {
                of: baseline
                    .name
                    .clone()
                    .unwrap_or_else(|| "the model".to_owned()),
                flops_training: control_budgets.flops,
                params: control_budgets.params,
            },
        },
    })
}
