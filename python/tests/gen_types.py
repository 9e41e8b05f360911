"""Writes the TypedDicts of `python/smelt/types.py` from the results of `samples.py`:
run `python gen_types.py > ../smelt/types.py` after a result's JSON changes (and
`test_types.py` fails). A class is named by its top-level name and the key path to it,
except the shared ones of `NAMES`; a dict keyed by budget ("flops", "params", ...) is a
mapping."""

import keyword
import pathlib
import sys
import tempfile

import samples

BUDGET_KEYS = {"flops", "params", "kv", "activations", "time"}

#: (parent class, key) -> class name, for the classes shared between results.
NAMES = {
    ("ModelDict", "model"): "Model", ("Model", "moe"): "Moe", ("Model", "loop"): "Loop",
    ("ModelDict", "workload"): "Workload", ("ModelDict", "counting"): "Counting",
    ("ModelDict", "training"): "Training", ("GridResult", "cells"): "GridCell",
    ("SweepResult", "rows"): "SweepRow", ("ExportResult", "models"): "ExportedModel",
    ("CompareResult", "baseline"): "CostResult", ("CompareResult", "model"): "CostResult",
    ("GainResult", "reference"): "GainFit", ("GainResult", "target"): "GainFit",
    ("MatchResultRanked", "model"): "Model",
}

#: The item type of lists every sample has empty.
EMPTY = {"broken": "List[str]"}

HEADER = '''"""The shapes of what smelt's functions return: the JSON contracts of the command line
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
'''


def camel(key):
    return "".join(p[:1].upper() + p[1:] for p in key.split("_"))


class Gen:
    def __init__(self):
        self.classes = {}  # name -> {key: set of type exprs}
        self.order = []

    def cls(self, name, value):
        fields = self.classes.setdefault(name, {})
        if name not in self.order:
            self.order.append(name)
        for k, v in value.items():
            fields.setdefault(k, set()).add(self.expr(name, k, v))
        return name

    def expr(self, parent, key, v):
        if v is None:
            return "None"
        if isinstance(v, bool):
            return "bool"
        if isinstance(v, int):
            return "int"
        if isinstance(v, float):
            return "float"
        if isinstance(v, str):
            return "str"
        if isinstance(v, list):
            inner = {self.expr(parent, key, x) for x in v}
            return f"List[{join(inner)}]" if inner else "List[None]"
        if isinstance(v, dict):
            if not v and key in ("tolerance", "residuals", "ratios"):
                return "Dict[str, None]"
            if v and set(v) <= BUDGET_KEYS:
                inner = {self.expr(parent, key, x) for x in v.values()}
                return f"Dict[str, {join(inner)}]"
            if "model" in v and "workload" in v:
                return self.cls("ModelDict", v)
            return self.cls(NAMES.get((parent, key), parent + camel(key)), v)
        raise TypeError(type(v))


def join(types):
    """One type of several observed: int widened to float, None to Optional, lists merged."""
    types = set(types)
    if "Dict[str, None]" in types:
        types.discard("Dict[str, None]")
        if not any(t.startswith("Dict[") for t in types):
            types.add("Dict[str, Any]")
    if {"int", "float"} <= types:
        types.discard("int")
    lists = sorted(t for t in types if t.startswith("List["))
    if len(lists) > 1:
        inner = set()
        for t in lists:
            if t != "List[None]":
                inner.update(split(t[5:-1]))
        types -= set(lists)
        types.add(f"List[{join(inner)}]" if inner else "List[None]")
    elif len(lists) == 1 and lists[0] == "List[None]" and len(types) == 1:
        return "List[Any]"
    types.discard("List[None]") if any(t.startswith("List[") and t != "List[None]" for t in types) else None
    optional = "None" in types
    types.discard("None")
    body = sorted(types)
    t = body[0] if len(body) == 1 else f"Union[{', '.join(body)}]" if body else "None"
    t = t.replace("List[None]", "List[Any]")
    return f"Optional[{t}]" if optional and body else t


def split(t):
    """The members of a Union or Optional type expression."""
    if t.startswith("Optional["):
        return split(t[9:-1]) | {"None"}
    if t.startswith("Union["):
        parts, depth, cur = [], 0, ""
        for ch in t[6:-1]:
            if ch == "," and depth == 0:
                parts.append(cur.strip())
                cur = ""
                continue
            depth += ch == "["
            depth -= ch == "]"
            cur += ch
        parts.append(cur.strip())
        return set(parts)
    return {t}


def main():
    g = Gen()
    for name, value in samples.samples(pathlib.Path(tempfile.mkdtemp())):
        g.cls(name, value)
    print(HEADER)
    for name in reversed(g.order):
        fields = []
        for k, types in sorted(g.classes[name].items()):
            t = join(types)
            # An empty list in every sample: the type its non-empty one has.
            fields.append((k, {"List[Any]": EMPTY.get(k, t)}.get(t, t)))
        if all(k.isidentifier() and not keyword.iskeyword(k) for k, _ in fields):
            print(f"\nclass {name}(TypedDict, total=False):")
            for k, t in fields:
                print(f"    {k}: {t}")
        else:  # a key Python reserves (`pass`): the functional form
            print(f"\n{name} = TypedDict(\"{name}\", {{")
            for k, t in fields:
                print(f"    \"{k}\": \"{t}\",")
            print("}, total=False)")
        print()
    print('\nPerBudget = Dict[str, float]\n"""One number per budget, by name."""')
    print('\nResult = Union[MatchResult, GridResult, SweepResult]\n'
          '"""A result `export_hf` and `export_toml` accept."""')


if __name__ == "__main__":
    sys.exit(main())
