//! `smelt merge`: the shards of a grid's benchmark ([`Shard`](crate::study::Shard)) joined into the grid's
//! JSON, each cell timed by its shard and the summary recomputed.

use serde_json::Value;

use super::grid::{predicted_stats, time_summary_of};
use super::shard::Shard;
use crate::error::{Error, Result};
use crate::time::{Backend, TimeRatio};

/// The keys of a cell that its shard's benchmark writes; everything else in a cell is the
/// match, which every shard computes alike.
const TIMED: [&str; 2] = ["time", "time_failed"];

/// `value` without what differs from shard to shard: the cells' times, the summary's time
/// ratio and the shard's own number.
fn untimed(value: &Value) -> Value {
    let mut v = value.clone();
    if let Some(cells) = v.get_mut("cells").and_then(Value::as_array_mut) {
        for cell in cells.iter_mut().filter_map(Value::as_object_mut) {
            TIMED.iter().for_each(|k| {
                cell.remove(*k);
            });
        }
    }
    if let Some(summary) = v.get_mut("summary").and_then(Value::as_object_mut) {
        summary.remove("time_ratio");
    }
    if let Some(shard) = v.get_mut("shard").and_then(Value::as_object_mut) {
        shard.remove("index");
    }
    v
}

/// The `(K, N, digest)` of `parts[i]`, or an error when it is not a shard's JSON.
fn shard_info(v: &Value, i: usize) -> Result<(u64, u64, String)> {
    let s = &v["shard"];
    match (s["index"].as_u64(), s["of"].as_u64(), s["digest"].as_str()) {
        (Some(k), Some(n), Some(d)) => Ok((k, n, d.to_owned())),
        _ => Err(Error::invalid(
            format!("shards[{i}]"),
            "is not the JSON of a grid shard (smelt grid --format json --shard K/N)",
        )),
    }
}

/// An error if `shard` has a time on a cell it does not time (`owns`), or a cell it times
/// without exactly one of a time and the reason it has none (`time_failed`).
fn check_owned(shard: &Value, owns: Shard) -> Result<()> {
    let cells = shard["cells"].as_array().into_iter().flatten();
    for (i, cell) in cells.enumerate() {
        let at = || format!("shard {}/{}: cells[{i}]", owns.index, owns.of);
        let [time, failed] = TIMED.map(|key| cell.get(key).is_some());
        if !owns.has(i) && (time || failed) {
            return Err(Error::invalid(
                at(),
                "has a time, but that shard does not time this cell (an edited file?)",
            ));
        }
        if owns.has(i) && time == failed {
            return Err(Error::invalid(
                at(),
                format!(
                    "{}: smelt grid --bench --shard gives every cell it times one of `time` \
                     and `time_failed` (an edited file? rerun that shard)",
                    if time {
                        "has both a time and a failure"
                    } else {
                        "is timed by this shard but has neither a time nor a failure"
                    }
                ),
            ));
        }
    }
    Ok(())
}

/// The backend of `shard`'s summary (`summary.time_ratio.backend`), which every shard has:
/// it times at least one cell.
fn shard_backend(shard: &Value, at: &str) -> Result<Backend> {
    serde_json::from_value(shard["summary"]["time_ratio"]["backend"].clone()).map_err(|_| {
        Error::invalid(
            format!("{at}: summary.time_ratio.backend"),
            "missing or not a backend: a shard of smelt grid --bench --shard K/N states the \
             backend it timed on (an edited file?)",
        )
    })
}

/// A cell's `time` read back from a shard ([`check_time`]).
fn read_time(t: &Value, field: &str) -> Result<TimeRatio> {
    let t = serde_json::from_value::<TimeRatio>(t.clone())
        .map_err(|e| Error::invalid(field, e.to_string()))?;
    check_time(&t, field)?;
    Ok(t)
}

/// How far apart a measured ratio (the median of the rounds' ratios) and the ratio of its
/// own seconds per token (the rounds' kernel times summed) may be: both come from the same
/// rounds, and differ by a few percent on a quiet machine and by tens of percent on a busy
/// one (a noisy cell of 3 rounds on a loaded 2-core machine: 0.68 against 1.01); a factor of
/// 10 between them is not a measurement.
const SECONDS_AGREEMENT: f64 = 10.0;

/// How far apart a predicted ratio and the ratio of its own predicted seconds may be: the
/// one is the other's quotient, written to JSON and read back (a unit in the last place).
const PREDICTED_AGREEMENT: f64 = 1e-12;

/// `x` as a message shows it: in full between 0.001 and 10^6, in scientific notation
/// otherwise (`1e308`, not 309 digits).
fn shown(x: f64) -> String {
    if (1e-3..1e6).contains(&x.abs()) {
        format!("{x}")
    } else {
        format!("{x:e}")
    }
}

/// Whether `ratio` and `looped / baseline` agree within a factor of `within` (a relative
/// difference for a `within` below 1).
fn agrees(ratio: f64, baseline: f64, looped: f64, within: f64) -> bool {
    let of_seconds = looped / baseline;
    if within >= 1.0 {
        ratio <= of_seconds * within && of_seconds <= ratio * within
    } else {
        (ratio - of_seconds).abs() <= within * of_seconds
    }
}

/// A measured time ratio read back from a shard: positive finite seconds and ratios, an
/// interval around the ratio, at least one round, and a ratio its own seconds per token do
/// not contradict ([`SECONDS_AGREEMENT`]).
fn check_time(t: &TimeRatio, field: &str) -> Result<()> {
    let [lo, hi] = t.interval;
    let positive = |x: f64| x.is_finite() && x > 0.0;
    let rule = if ![t.ratio, lo, hi].into_iter().all(positive) {
        "the ratio and its interval must be positive finite numbers"
    } else if !(lo <= t.ratio && t.ratio <= hi) {
        "the interval must contain the ratio"
    } else if t.rounds == 0 {
        "rounds must be at least 1"
    } else if ![t.baseline_seconds_per_token, t.looped_seconds_per_token]
        .into_iter()
        .all(positive)
    {
        "the seconds per token must be positive finite numbers"
    } else if !agrees(
        t.ratio,
        t.baseline_seconds_per_token,
        t.looped_seconds_per_token,
        SECONDS_AGREEMENT,
    ) {
        return Err(Error::invalid(
            field,
            format!(
                "ratio {} contradicts its own seconds per token (looped {} / Baseline {} = \
                 {}, more than a factor of {SECONDS_AGREEMENT} apart): not what smelt grid \
                 --bench writes (an edited file?)",
                shown(t.ratio),
                shown(t.looped_seconds_per_token),
                shown(t.baseline_seconds_per_token),
                shown(t.looped_seconds_per_token / t.baseline_seconds_per_token)
            ),
        ));
    } else {
        return Ok(());
    };
    Err(Error::invalid(
        field,
        format!("{rule}: not what smelt grid --bench writes (an edited file?)"),
    ))
}

/// Merges the JSON of every shard of one grid (`smelt grid --format json --shard K/N`) into
/// the grid's JSON, each cell timed by its shard, the summary recomputed.
///
/// Refused, naming the shard: a JSON that is not a grid shard, `K` outside `1..=N`, `N`
/// above the number of cells, shards of another run (their digests, `N` or matched cells
/// differ), a shard given twice or missing, a time on a cell its shard does not time, and
/// a time that is not a measurement (a ratio outside its interval, a non-positive one).
pub fn merge(parts: &[Value]) -> Result<Value> {
    let infos = (parts.iter().enumerate())
        .map(|(i, v)| shard_info(v, i))
        .collect::<Result<Vec<_>>>()?;
    let (Some((_, of, digest)), Some(first)) = (infos.first().cloned(), parts.first()) else {
        return Err(Error::invalid("shards", "none given"));
    };
    let cells = first["cells"]
        .as_array()
        .ok_or_else(|| Error::invalid("shards[0].cells", "is not a list of cells"))?;
    if cells.is_empty() {
        return Err(Error::invalid(
            "shards[0].cells",
            "is empty: a grid has cells",
        ));
    }
    let common = untimed(first);
    let mut by_index = std::collections::BTreeMap::new();
    for (i, ((k, n, d), v)) in infos.iter().zip(parts).enumerate() {
        let name = format!("shard {k}/{n}");
        if !(1..=*n).contains(k) {
            return Err(Error::invalid(
                format!("shards[{i}]"),
                format!("is marked {name}: K must be between 1 and N (an edited file?)"),
            ));
        }
        if *n != of || *d != digest || untimed(v) != common {
            return Err(Error::invalid(
                name,
                "is a shard of another grid, lattice, workload or benchmark setting \
                 (its digest, shard count or matched cells differ): merge the shards of one run",
            ));
        }
        if by_index.insert(*k, v).is_some() {
            return Err(Error::invalid(name, "is given twice"));
        }
    }
    if of > cells.len() as u64 {
        return Err(Error::invalid(
            format!("shard 1/{of}"),
            format!(
                "the grid has {} cells, fewer than its {of} shards: smelt grid --shard \
                 never writes that (an edited file?)",
                cells.len()
            ),
        ));
    }
    if let Some(missing) = (1..=of).find(|k| !by_index.contains_key(k)) {
        return Err(Error::invalid(
            format!("shard {missing}/{of}"),
            "is missing: give every shard's output",
        ));
    }
    let mut backend = None;
    for (&k, shard) in &by_index {
        check_owned(shard, Shard { index: k, of })?;
        let at = format!("shard {k}/{of}");
        let b = shard_backend(shard, &at)?;
        match backend {
            Some(first) if first != b => {
                return Err(Error::invalid(
                    format!("{at}: summary.time_ratio.backend"),
                    format!("is {b}, but shard 1/{of}'s is {first}: merge the shards of one run"),
                ));
            }
            _ => backend = Some(b),
        }
    }
    let backend = backend.ok_or_else(|| Error::invalid("shards", "none given"))?;
    let mut merged = first.clone();
    let mut times: Vec<(Option<TimeRatio>, bool)> = Vec::with_capacity(cells.len());
    let merged_cells = merged["cells"]
        .as_array_mut()
        .ok_or_else(|| Error::invalid("shards[0].cells", "is not a list of cells"))?;
    for (i, cell) in merged_cells.iter_mut().enumerate() {
        let k = i as u64 % of + 1;
        let from = by_index
            .get(&k)
            .map(|v| &v["cells"][i])
            .unwrap_or(&Value::Null);
        let obj = cell
            .as_object_mut()
            .ok_or_else(|| Error::invalid(format!("cells[{i}]"), "is not a cell"))?;
        for key in TIMED {
            obj.remove(key);
            if let Some(v) = from.get(key) {
                obj.insert(key.to_owned(), v.clone());
            }
        }
        let time = match from.get("time") {
            Some(t) => {
                let field = format!("shard {k}/{of}: cells[{i}].time");
                let t = read_time(t, &field)?;
                if t.backend != backend {
                    return Err(Error::invalid(
                        format!("{field}.backend"),
                        format!(
                            "is {}, but the shards' summaries say {backend}: a cell is timed \
                             on its run's backend (an edited file?)",
                            t.backend
                        ),
                    ));
                }
                Some(t)
            }
            None => None,
        };
        times.push((time, from.get("time_failed").is_some()));
    }
    let summary = time_summary_of(&times, backend);
    merged["summary"]["time_ratio"] =
        serde_json::to_value(summary).map_err(|e| Error::serialize("JSON", e))?;
    repredict_summary(&mut merged)?;
    if let Some(m) = merged.as_object_mut() {
        m.remove("shard");
    }
    Ok(merged)
}

/// With `--predict`, the summary's largest and mean predicted ratio recomputed from the
/// cells of `merged` (module docs).
fn repredict_summary(merged: &mut Value) -> Result<()> {
    if merged["summary"].get("predicted").is_none() {
        return Ok(());
    }
    let cells = merged["cells"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default();
    let ratios = (cells.iter().enumerate())
        .map(|(i, c)| predicted(&c["predicted"], &format!("cells[{i}].predicted")))
        .collect::<Result<Vec<f64>>>()?;
    let (max, mean) = predicted_stats(&ratios);
    merged["summary"]["predicted"]["max_ratio"] = serde_json::json!(max);
    merged["summary"]["predicted"]["mean_ratio"] = serde_json::json!(mean);
    Ok(())
}

/// A cell's predicted ratio (`field`, its `predicted`): positive finite seconds per token and
/// their quotient ([`PREDICTED_AGREEMENT`]).
fn predicted(p: &Value, field: &str) -> Result<f64> {
    let get = |key: &str| p[key].as_f64().filter(|x| x.is_finite() && *x > 0.0);
    let (Some(ratio), Some(b), Some(l)) = (
        get("ratio"),
        get("baseline_seconds_per_token"),
        get("looped_seconds_per_token"),
    ) else {
        return Err(Error::invalid(
            field,
            "needs a positive finite ratio, baseline_seconds_per_token and \
             looped_seconds_per_token, as the summary has predicted ratios (an edited file?)",
        ));
    };
    if !agrees(ratio, b, l, PREDICTED_AGREEMENT) {
        return Err(Error::invalid(
            format!("{field}.ratio"),
            format!(
                "{} is not looped_seconds_per_token / baseline_seconds_per_token ({} / {} = \
                 {}): not what smelt grid --predict writes (an edited file?)",
                shown(ratio),
                shown(l),
                shown(b),
                shown(l / b)
            ),
        ));
    }
    Ok(ratio)
}
