#!/usr/bin/env python3
"""An independent anchor for `smelt bench`: PyTorch times one training step (forward and
backward) of one layer of the Baseline and one of the matched looped model, written the
way a trainer writes them, and reports the looped / Baseline time per token next to the
FLOP ratio.

    smelt match budgets/match-200m-s95.toml --format json > match.json
    python3 benches/anchor.py match.json [--tokens 16384] [--device cuda] [--rounds 20]

The layer: RMSNorm, Q/K/V/O projections (with the model's biases), causal attention inside
each document (SDPA on the documents of the workload's mean length, packed in a batch),
RMSNorm, a router GEMM, top-k softmax gates, and the routed experts (SwiGLU) as a trainer
runs them: tokens sorted by expert, then `torch._grouped_mm` over the expert groups where
PyTorch has it for the device and dtype, else one GEMM per expert. Routing is forced to
smelt's balanced assignment (token i goes to experts i*k .. i*k+k-1 mod E) so that both
tools time the same expert loads; the router GEMM still runs. Shared experts are run as
dense SwiGLU GEMMs. A model with dense-FFN layers is refused (its layers differ), and so is
one with multi-head latent attention, windowed layers or an indexer (the anchor's layer is
GQA with full causal attention).

Per-token time of a model = its layer's time x its layer executions (every layer alike);
the ratio is looped / Baseline. Output: one JSON object on stdout.
"""

import argparse
import json
import statistics
import sys
import time

import torch
import torch.nn.functional as F


def executions(model):
    loop = model.get("loop")
    extra = loop["span"] * (loop["repeats"] - 1) if loop else 0
    return model["layers"] + extra


class Layer(torch.nn.Module):
    def __init__(self, m, dtype, device):
        super().__init__()
        if m.get("dense"):
            sys.exit("anchor.py: models with [model.dense] layers are not supported")
        for key, what in (("mla", "multi-head latent attention"), ("window", "windowed layers"),
                          ("indexer", "a sparse attention indexer")):
            if m.get(key):
                sys.exit(f"anchor.py: models with {what} ([model.{key}]) are not supported: "
                         "the anchor's layer is GQA with full causal attention")
        h, d = m["hidden"], m["head_dim"]
        self.heads, self.kv_heads, self.d = m["heads"], m["kv_heads"], d
        moe = m["moe"]
        self.experts, self.top_k, ffn = moe["experts"], moe["top_k"], moe["expert_ffn"]
        bias = m.get("attention_bias", "none")
        kw = dict(dtype=dtype, device=device)
        self.q = torch.nn.Linear(h, self.heads * d, bias=bias != "none", **kw)
        self.k = torch.nn.Linear(h, self.kv_heads * d, bias=bias != "none", **kw)
        self.v = torch.nn.Linear(h, self.kv_heads * d, bias=bias != "none", **kw)
        self.o = torch.nn.Linear(self.heads * d, h, bias=bias == "all", **kw)
        self.norm1 = torch.nn.RMSNorm(h, **kw)
        self.norm2 = torch.nn.RMSNorm(h, **kw)
        self.router = torch.nn.Linear(h, self.experts, bias=False, **kw)
        scale = h**-0.5
        self.w_gate_up = torch.nn.Parameter(torch.randn(self.experts, h, 2 * ffn, **kw) * scale)
        self.w_down = torch.nn.Parameter(torch.randn(self.experts, ffn, h, **kw) * ffn**-0.5)
        self.shared = None
        if moe.get("shared_experts", 0):
            s = moe["shared_experts"] * moe["shared_ffn"]
            self.shared = torch.nn.ModuleList(
                [torch.nn.Linear(h, 2 * s, bias=False, **kw), torch.nn.Linear(s, h, bias=False, **kw)]
            )
            self.shared_gate = (
                torch.nn.Linear(h, 1, bias=False, **kw) if moe.get("shared_gate") else None
            )
        self.grouped = hasattr(torch, "_grouped_mm") and device == "cuda" and dtype == torch.bfloat16

    def attention(self, x, docs, length):
        t = x.shape[0]
        q = self.q(x).view(docs, length, self.heads, self.d).transpose(1, 2)
        k = self.k(x).view(docs, length, self.kv_heads, self.d).transpose(1, 2)
        v = self.v(x).view(docs, length, self.kv_heads, self.d).transpose(1, 2)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
        return self.o(a.transpose(1, 2).reshape(t, self.heads * self.d))

    def experts_forward(self, x, order, counts):
        xs = x[order // self.top_k]
        if self.grouped:
            offs = torch.cumsum(counts, 0, dtype=torch.int32)
            gu = torch._grouped_mm(xs, self.w_gate_up, offs=offs)
            g, u = gu.chunk(2, dim=-1)
            return torch._grouped_mm(F.silu(g) * u, self.w_down, offs=offs)
        # One view per expert (unbind: one gradient for the stack, not one per expert).
        gate_up, down = self.w_gate_up.unbind(0), self.w_down.unbind(0)
        out = []
        for x_e, wgu, wd in zip(xs.split(counts.tolist()), gate_up, down):
            g, u = (x_e @ wgu).chunk(2, dim=-1)
            out.append((F.silu(g) * u) @ wd)
        return torch.cat(out)

    def forward(self, x, docs, length, assignment, order, counts):
        x = x + self.attention(self.norm1(x), docs, length)
        y = self.norm2(x)
        logits = self.router(y)
        gates = torch.softmax(logits.float(), -1).gather(1, assignment).to(x.dtype)
        out = self.experts_forward(y, order, counts)
        weighted = out * gates.reshape(-1)[order].unsqueeze(1)
        moe = torch.zeros_like(y).index_add_(0, order // self.top_k, weighted)
        if self.shared is not None:
            g, u = self.shared[0](y).chunk(2, dim=-1)
            s = self.shared[1](F.silu(g) * u)
            if self.shared_gate is not None:
                s = s * torch.sigmoid(self.shared_gate(y))
            moe = moe + s
        return x + moe


def time_layer(m, workload, tokens, device, dtype, repeats):
    length = workload.get("mean_doc_len")
    if not length:
        sys.exit("anchor.py: needs a workload with mean_doc_len (documents of one length)")
    docs = max(1, tokens // length)
    t = docs * length
    layer = Layer(m, dtype, device)
    e, k = layer.experts, layer.top_k
    # smelt's balanced routing: token i -> experts (i*k + j) mod E.
    idx = torch.arange(t, device=device).unsqueeze(1) * k + torch.arange(k, device=device)
    assignment = (idx % e).long()
    flat = assignment.reshape(-1)
    order = torch.argsort(flat, stable=True)
    counts = torch.bincount(flat, minlength=e)
    x = torch.randn(t, m["hidden"], device=device, dtype=dtype, requires_grad=True)
    grad = torch.randn_like(x)

    def step():
        layer.zero_grad(set_to_none=True)
        x.grad = None
        y = layer(x, docs, length, assignment, order, counts)
        y.backward(grad)

    def sync():
        if device == "cuda":
            torch.cuda.synchronize()

    fallback = None
    try:
        step()
    except RuntimeError as e:  # torch._grouped_mm refused the shapes: one GEMM per expert
        if not layer.grouped:
            raise
        layer.grouped, fallback = False, str(e).splitlines()[0]
        step()
    for _ in range(2):
        step()
    sync()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        step()
        sync()
        times.append(time.perf_counter() - start)
    grouped = f"no: {fallback}" if fallback else layer.grouped
    return t, docs, statistics.median(times), (max(times) / min(times) - 1), grouped


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("match_json", help="`smelt match BUDGET --format json` output")
    p.add_argument("--tokens", type=int, default=16384)
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--rounds", type=int, default=20)
    a = p.parse_args()
    dtype = torch.bfloat16 if a.device == "cuda" else torch.float32
    r = json.load(open(a.match_json))
    torch.manual_seed(0)
    out = {"device": torch.cuda.get_device_name() if a.device == "cuda" else "cpu",
           "dtype": str(dtype), "torch": torch.__version__}
    per_token = {}
    for role in ("baseline", "looped"):
        spec = r[role]
        m = spec["model"]
        t, docs, sec, spread, grouped = time_layer(
            m, spec["workload"], a.tokens, a.device, dtype, a.rounds
        )
        x = executions(m)
        per_token[role] = sec * x / t
        out[role] = {"name": spec.get("name"), "tokens": t, "documents": docs,
                     "layer_seconds": sec, "layer_executions": x,
                     "seconds_per_token": sec * x / t, "rounds_spread": spread,
                     "grouped_mm": grouped}
    out["time_ratio"] = per_token["looped"] / per_token["baseline"]
    json.dump(out, sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    main()
