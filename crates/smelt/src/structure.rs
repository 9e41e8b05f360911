//! Named keys, never positions: where a file's schema has a table, anything else is an
//! error naming the key. (serde reads a struct from an array field by field, so without
//! this `hidden = [32, 640, 1280]` would be a lattice range, and a JSON array a model.)

use serde_json::Value;

use crate::error::{Error, Result};

/// The tables of a model file.
pub(crate) const MODEL_TABLES: &[&str] = &[
    "model",
    "model.moe",
    "model.dense",
    "model.loop",
    "workload",
    "counting",
];

/// The tables of a budget or grid file (besides an inline Baseline's).
pub(crate) const PLAN_TABLES: &[&str] = &[
    "recipe",
    "lattice",
    "lattice.hidden",
    "lattice.experts",
    "lattice.expert_ffn",
    "lattice.head_dim",
    "lattice.heads",
    "lattice.kv_heads",
    "lattice.gqa",
    "lattice.q_width",
    "objective",
    "objective.weights",
    "tolerance",
    "workload",
    "counting",
];

/// What kind of value `v` is, in words; a map is `object` ("a table" in a TOML file,
/// "an object" in JSON).
pub(crate) fn kind_of(v: &Value, object: &'static str) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => object,
    }
}

fn kind(v: &Value) -> &'static str {
    kind_of(v, "a table")
}

fn not_a_table(path: &str, v: &Value) -> Error {
    Error::invalid(
        if path.is_empty() { "file" } else { path },
        format!(
            "must be a table with named keys (got {}); positional forms are not read",
            kind(v)
        ),
    )
}

/// Every path of `tables` present under `root` (itself a table) is a table.
pub(crate) fn require_tables(root: &Value, prefix: &str, tables: &[&str]) -> Result<()> {
    if !root.is_object() {
        return Err(not_a_table(prefix.trim_end_matches('.'), root));
    }
    for path in tables {
        let mut v = root;
        for key in path.split('.') {
            match v.get(key) {
                Some(next) => v = next,
                None => {
                    v = &Value::Null;
                    break;
                }
            }
        }
        if !v.is_null() && !v.is_object() {
            return Err(not_a_table(&format!("{prefix}{path}"), v));
        }
    }
    Ok(())
}

/// A budget or grid file's tables, and those of its inline Baselines.
pub(crate) fn require_plan_tables(root: &Value) -> Result<()> {
    require_tables(root, "", PLAN_TABLES)?;
    if let Some(b) = root.get("baseline").filter(|b| !b.is_string()) {
        require_tables(b, "baseline.", MODEL_TABLES)?;
    }
    match root.get("cells") {
        None => {}
        Some(Value::Array(cells)) => {
            for (i, cell) in cells.iter().enumerate() {
                require_tables(cell, &format!("cells[{i}]."), &[])?;
                if let Some(b) = cell.get("baseline").filter(|b| !b.is_string()) {
                    require_tables(b, &format!("cells[{i}].baseline."), MODEL_TABLES)?;
                }
            }
        }
        Some(other) => {
            return Err(Error::invalid(
                "cells",
                format!(
                    "must be an array of tables ([[cells]]); got {}",
                    kind(other)
                ),
            ));
        }
    }
    Ok(())
}

/// The value tree of TOML or JSON text (syntax errors reported by the parser).
pub(crate) fn tree(text: &str, json: bool) -> Result<Value> {
    if json {
        return serde_json::from_str(text).map_err(|e| Error::parse(format!("JSON: {e}")));
    }
    let t: toml::Value = toml::from_str(text).map_err(Error::parse)?;
    serde_json::to_value(t).map_err(|e| Error::serialize("JSON", e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arrays_where_tables_belong_are_refused() {
        let t = tree("[model]\nlayers = 1\n[workload]\ncontext = 8", false).unwrap();
        assert!(require_tables(&t, "", MODEL_TABLES).is_ok());
        let t = tree("model = [1, 2]", false).unwrap();
        let e = require_tables(&t, "", MODEL_TABLES)
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("model: must be a table") && e.contains("an array"),
            "{e}"
        );
        let t = tree("[lattice]\nhidden = [32, 640, 1280]", false).unwrap();
        let e = require_plan_tables(&t).unwrap_err().to_string();
        assert!(e.starts_with("lattice.hidden: "), "{e}");
        let t = tree("[1, 2]", true).unwrap();
        assert!(require_tables(&t, "", MODEL_TABLES).is_err());
        let t = tree("[[cells]]\nbaseline = { model = [] }", false).unwrap();
        let e = require_plan_tables(&t).unwrap_err().to_string();
        assert!(e.starts_with("cells[0].baseline.model: "), "{e}");
    }
}
