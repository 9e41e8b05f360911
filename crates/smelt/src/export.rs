//! Exports of matched models: what a trainer is handed, one model or a folder of them.
//!
//! A match is written in one of two formats ([`ExportFormat`]):
//!
//! * `hf`: the model for Hugging Face Transformers. A looped model is a model directory
//!   ([`crate::hf::looped`]: `config.json` of `model_type = "smelt_looped"` and the code that
//!   builds it looped, loaded with `trust_remote_code=True`); a model without a loop is its
//!   family's plain `config.json`. Both build, in Transformers, exactly the model smelt
//!   costed.
//! * `model`: smelt's own model file (TOML), valid input to `smelt cost`.
//!
//! A grid or a sweep is a folder with one entry per cell or value, named from its labels
//! ([`entry_name`]: `200M-S95`, `span-8`): a sub-folder per model for `hf`, a
//! `NAME.toml` per model for `model`. A folder is written all or nothing, never over a file
//! the run read, and over a file smelt did not write only when [`ExportOptions::overwrite`]
//! says so ([`crate::io::write_tree`]); two entries that would share a name are refused
//! before anything is written.

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::budget::{Budget, GridSpec, Mode};
use crate::cost::Residuals;
use crate::error::{Error, Result};
use crate::hf::looped::ModelDir;
use crate::hf::{self, Family};
use crate::io::Overwrite;
use crate::model::ModelSpec;
use crate::search::MatchReport;
use crate::study::{GridReport, Knob, SweepReport};

crate::names::named_enum! {
    /// What an export writes.
    pub enum ExportFormat: "export format" {
        /// The model for Hugging Face Transformers: a looped one as a model directory.
        Hf = "hf",
        /// smelt's model file (TOML), valid input to `smelt cost`.
        Model = "model",
    }
}

/// How to export: the format, for `hf` the family and vocabulary, and what it may replace.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExportOptions {
    /// The format written.
    pub format: ExportFormat,
    /// The Hugging Face family (`hf`; default: the Baseline config's, else the one whose
    /// conventions the model follows, [`hf::export_match`]).
    pub family: Option<Family>,
    /// The vocabulary written when the Baseline has none (`hf`).
    pub vocab: Option<u64>,
    /// What a folder export may replace besides smelt's own files: never an input.
    pub overwrite: Overwrite,
}

impl ExportOptions {
    /// `format`, with the family and vocabulary left to the Baseline.
    pub fn new(format: ExportFormat) -> Self {
        Self {
            format,
            family: None,
            vocab: None,
            overwrite: Overwrite::Own,
        }
    }
}

/// Whether an export in `format` may write a file of `file`'s name into its folder or an
/// entry of it: `hf`, a `config.json`, a model directory's Python code or the export's
/// manifest; `model`, a `.toml` model file or the manifest.
pub fn may_write(format: ExportFormat, file: &Path) -> bool {
    let name = file
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or_default();
    let ext = file
        .extension()
        .and_then(|e| e.to_str())
        .unwrap_or_default();
    name == crate::io::MANIFEST
        || match format {
            ExportFormat::Hf => name == "config.json" || ext == "py",
            ExportFormat::Model => ext == "toml",
        }
}

/// One matched model to export.
#[derive(Debug, Clone)]
pub struct Item<'a> {
    /// Its entry's name in a folder of exports ([`entry_name`]); unused for one model.
    pub name: String,
    /// The matched (looped) model.
    pub looped: &'a ModelSpec,
    /// The Baseline's Hugging Face config, when it was read from one: its other keys
    /// (rope, norms, token ids) are carried into the `hf` export.
    pub baseline_config: Option<&'a Value>,
    /// The model file's first line (`model`): what the model was matched to, and how well.
    pub comment: String,
}

/// What one export wrote.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Exported {
    /// The entry's name ([`Item::name`]).
    pub name: String,
    /// The model directory, or the model file.
    pub path: PathBuf,
    /// Every file written, in order.
    pub files: Vec<PathBuf>,
    /// Whether the model loops (an `hf` export is then a model directory).
    pub looped: bool,
}

pub use crate::names::entry_name;

/// The model a match found, to export as one item.
pub fn item_of_match<'a>(report: &'a MatchReport, budget: Option<&'a Budget>) -> Item<'a> {
    match_item(
        report.name.as_deref(),
        &report.looped,
        report.baseline.name.as_deref(),
        report.mode,
        &report.residuals,
        budget.and_then(Budget::baseline_config),
    )
}

/// One item per cell of a grid, named `SCALE-SPARSITY`; `grid` (the grid file the report
/// was matched from) supplies the Baselines' configs.
pub fn items_of_grid<'a>(report: &'a GridReport, grid: Option<&'a GridSpec>) -> Vec<Item<'a>> {
    report
        .cells
        .iter()
        .enumerate()
        .map(|(i, cell)| {
            let config = grid
                .and_then(|g| g.cells.get(i))
                .and_then(|c| c.budget.baseline_config());
            let labels = [cell.scale.as_str(), &cell.sparsity_label];
            let base = cell.baseline.name.as_deref();
            cell_item(
                labels,
                &cell.looped,
                base,
                report.mode,
                &cell.residuals,
                config,
            )
        })
        .collect()
}

/// One item per value of a sweep, named `KNOB-VALUE`; `budget` (the budget swept)
/// supplies the Baseline's config.
pub fn items_of_sweep<'a>(report: &'a SweepReport, budget: Option<&'a Budget>) -> Vec<Item<'a>> {
    let config = budget.and_then(Budget::baseline_config);
    let base = report.baseline.name.as_deref();
    (report.rows.iter())
        .map(|row| {
            row_item(
                report.knob,
                row.value,
                &row.looped,
                base,
                &row.residuals,
                config,
            )
        })
        .collect()
}

/// The item named `name` of `looped`, its comment naming the Baseline (`baseline`), what
/// the item is (`what`: a match's mode, a cell's labels, a sweep's value) and its residuals.
fn item<'a>(
    name: String,
    what: &str,
    looped: &'a ModelSpec,
    baseline: Option<&str>,
    residuals: &Residuals,
    baseline_config: Option<&'a Value>,
) -> Item<'a> {
    Item {
        name,
        looped,
        baseline_config,
        comment: crate::report::match_comment(baseline, what, residuals),
    }
}

/// The item of a match named `name` (or `match`), its Baseline named `baseline`.
pub(crate) fn match_item<'a>(
    name: Option<&str>,
    looped: &'a ModelSpec,
    baseline: Option<&str>,
    mode: Mode,
    residuals: &Residuals,
    baseline_config: Option<&'a Value>,
) -> Item<'a> {
    item(
        name.map_or("match".into(), |n| entry_name(&[n])),
        &format!("{} mode", mode.as_str()),
        looped,
        baseline,
        residuals,
        baseline_config,
    )
}

/// The item of a grid's cell of `[scale, sparsity]` labels.
pub(crate) fn cell_item<'a>(
    [scale, sparsity]: [&str; 2],
    looped: &'a ModelSpec,
    baseline: Option<&str>,
    mode: Mode,
    residuals: &Residuals,
    baseline_config: Option<&'a Value>,
) -> Item<'a> {
    item(
        entry_name(&[scale, sparsity]),
        &format!("{scale} {sparsity}, {} mode", mode.as_str()),
        looped,
        baseline,
        residuals,
        baseline_config,
    )
}

/// The item of a sweep's value `value` of `knob`.
pub(crate) fn row_item<'a>(
    knob: Knob,
    value: u64,
    looped: &'a ModelSpec,
    baseline: Option<&str>,
    residuals: &Residuals,
    baseline_config: Option<&'a Value>,
) -> Item<'a> {
    let knob = knob.as_str();
    item(
        entry_name(&[knob, &value.to_string()]),
        &format!("{knob} {value}"),
        looped,
        baseline,
        residuals,
        baseline_config,
    )
}

/// The files of one item in `options.format`: `(file name, contents)`, `config.json` first
/// for `hf`.
pub fn files_of(item: &Item<'_>, options: &ExportOptions) -> Result<ModelDir> {
    match options.format {
        ExportFormat::Hf => {
            let config = hf::export_match(
                item.baseline_config,
                item.looped,
                options.family,
                options.vocab,
            )?;
            ModelDir::of(&config)
        }
        ExportFormat::Model => Ok(ModelDir {
            files: vec![(
                "model.toml",
                crate::report::commented_model_file(&item.comment, item.looped)?,
            )],
        }),
    }
}

/// Writes one item at `path`: for `hf` a model directory (a looped model) or a folder
/// holding its `config.json`, all or nothing ([`ModelDir::write`]); for `model` the model
/// file `path` ([`crate::io::write_output`]: the file named is replaced, as the shell's `>`
/// would). Never over one of `inputs`.
pub fn write_one(
    item: &Item<'_>,
    options: &ExportOptions,
    path: &Path,
    inputs: &[PathBuf],
) -> Result<Exported> {
    let files = files_of(item, options)?;
    let looped = item.looped.model.executions() > item.looped.model.layers;
    let written = match options.format {
        ExportFormat::Hf => files.write(path, inputs, options.overwrite)?,
        ExportFormat::Model => {
            let (_, text) = &files.files[0];
            crate::io::write_output(path, text.as_bytes(), inputs)?;
            vec![path.to_path_buf()]
        }
    };
    Ok(Exported {
        name: item.name.clone(),
        path: path.to_path_buf(),
        files: written,
        looped,
    })
}

/// Writes every item into the folder `dir` (created if missing), one entry each
/// (`dir/NAME/` for `hf`, `dir/NAME.toml` for `model`), all or nothing
/// ([`crate::io::write_tree`]): every item is exported in memory first, so that a refusal
/// (two entries with one name, a family that cannot hold a model, a file in the way) writes
/// nothing, and a write that fails part way leaves `dir` as it was.
pub fn write_all(
    items: &[Item<'_>],
    options: &ExportOptions,
    dir: &Path,
    inputs: &[PathBuf],
) -> Result<Vec<Exported>> {
    write_all_with(items, options, dir, inputs, |_, _| Ok(Vec::new()))
}

/// The SHA-256 of `bytes`, as lowercase hex.
pub fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::Digest;
    let digest = sha2::Sha256::digest(bytes);
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

/// [`write_all`], with more files written in the same all-or-nothing write: `extra` is
/// given what each item will be written as and the SHA-256 of its first file (its
/// `config.json` for `hf`, its model file for `model`) and returns the files to add
/// (paths relative to `dir`), e.g. a manifest that names the models.
pub fn write_all_with(
    items: &[Item<'_>],
    options: &ExportOptions,
    dir: &Path,
    inputs: &[PathBuf],
    extra: impl FnOnce(&[Exported], &[String]) -> Result<Vec<(PathBuf, Vec<u8>)>>,
) -> Result<Vec<Exported>> {
    let mut digests = Vec::with_capacity(items.len());
    let mut seen = std::collections::BTreeSet::new();
    let mut entries: Vec<(PathBuf, Vec<u8>)> = Vec::new();
    let mut exported = Vec::with_capacity(items.len());
    for item in items {
        if !seen.insert(item.name.as_str()) {
            return Err(Error::invalid(
                "export",
                format!(
                    "two models would be written as '{}' in '{}': give the cells distinct labels",
                    item.name,
                    dir.display()
                ),
            ));
        }
        let files = files_of(item, options).map_err(|e| at(item, e))?;
        digests.push(
            files
                .files
                .first()
                .map_or_else(String::new, |(_, text)| sha256_hex(text.as_bytes())),
        );
        let (rel, listed) = match options.format {
            ExportFormat::Hf => {
                let rel = PathBuf::from(&item.name);
                (rel.clone(), files.entries(&rel))
            }
            ExportFormat::Model => {
                let rel = PathBuf::from(format!("{}.toml", item.name));
                let text = files.files.into_iter().next().map(|(_, t)| t.into_bytes());
                (rel.clone(), vec![(rel, text.unwrap_or_default())])
            }
        };
        exported.push(Exported {
            name: item.name.clone(),
            path: dir.join(&rel),
            files: listed.iter().map(|(p, _)| dir.join(p)).collect(),
            looped: item.looped.model.executions() > item.looped.model.layers,
        });
        entries.extend(listed);
    }
    for (path, bytes) in extra(&exported, &digests)? {
        if entries.iter().any(|(p, _)| *p == path) {
            return Err(Error::invalid(
                "export",
                format!(
                    "'{}' would be written twice in '{}'",
                    path.display(),
                    dir.display()
                ),
            ));
        }
        entries.push((path, bytes));
    }
    crate::io::write_tree(dir, &entries, inputs, options.overwrite)?;
    Ok(exported)
}

/// The name of the manifest [`write_plan`] writes.
pub const MANIFEST: &str = "manifest.jsonl";

/// Writes every model of an IsoFLOP plan into `dir` as `options` says (one entry per model,
/// `CELL-ARCH`), with the manifest [`MANIFEST`] (one line of JSON per run: its directory
/// and its model's first file's SHA-256 set, [`crate::study::manifest_lines`]), all or
/// nothing; sets each run's `directory` and `config_sha256` in `plan`. `configs[i]` is the
/// Hugging Face config of cell `i`'s Baseline when it was read from one (its other keys are
/// carried into both of the cell's models). Never over one of `inputs`.
pub fn write_plan(
    plan: &mut crate::study::IsoflopPlan,
    configs: &[Option<&Value>],
    options: &ExportOptions,
    dir: &Path,
    inputs: &[PathBuf],
) -> Result<Vec<Exported>> {
    let mut cells: Vec<&str> = Vec::new();
    let items: Vec<Item<'_>> = (plan.models.iter())
        .map(|m| {
            if !cells.contains(&m.cell.as_str()) {
                cells.push(&m.cell);
            }
            Item {
                name: m.name.clone(),
                looped: &m.spec,
                baseline_config: configs.get(cells.len() - 1).copied().flatten(),
                comment: format!("the {} of cell {}, exported by smelt plan", m.arch, m.cell),
            }
        })
        .collect();
    let runs = &mut plan.runs;
    write_all_with(&items, options, dir, inputs, |exported, digests| {
        for run in runs.iter_mut() {
            if let Some(i) = exported.iter().position(|e| e.name == run.model) {
                let entry = exported[i]
                    .path
                    .strip_prefix(dir)
                    .unwrap_or(&exported[i].path);
                run.directory = Some(entry.to_string_lossy().into_owned());
                run.config_sha256 = Some(digests[i].clone());
            }
        }
        let lines = crate::study::manifest_lines(runs)?;
        Ok(vec![(PathBuf::from(MANIFEST), lines.into_bytes())])
    })
}

/// `e`, said of `item`.
fn at(item: &Item<'_>, e: Error) -> Error {
    match e {
        Error::InvalidSpec { field, rule } => {
            Error::invalid(format!("export '{}': {field}", item.name), rule)
        }
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entry_names_are_plain_file_names() {
        assert_eq!(entry_name(&["200M", "S95"]), "200M-S95");
        assert_eq!(entry_name(&["span", "8"]), "span-8");
        assert_eq!(entry_name(&["../x", "a b"]), ".._x-a_b");
        assert_eq!(entry_name(&[".."]), "model");
        assert_eq!(entry_name(&["é/"]), "__");
    }

    #[test]
    fn two_entries_with_one_name_are_refused_before_anything_is_written() {
        let spec = ModelSpec::from_toml_str(
            "[model]\nlayers = 2\nhidden = 64\nheads = 4\nkv_heads = 2\nhead_dim = 16\n\
             [model.moe]\nexperts = 4\ntop_k = 2\nexpert_ffn = 32\n\
             [workload]\ncontext = 128\nmean_doc_len = 64\n",
        )
        .unwrap();
        let item = |name: &str| Item {
            name: name.to_owned(),
            looped: &spec,
            baseline_config: None,
            comment: "test".to_owned(),
        };
        let dir = std::env::temp_dir().join(format!("smelt-export-{}", std::process::id()));
        let options = ExportOptions::new(ExportFormat::Model);
        let e = write_all(&[item("a"), item("b"), item("a")], &options, &dir, &[]).unwrap_err();
        assert!(
            e.to_string().contains("two models would be written as 'a'"),
            "{e}"
        );
        assert!(!dir.exists());
        let written = write_all(&[item("a"), item("b")], &options, &dir, &[]).unwrap();
        assert_eq!(written.len(), 2);
        assert!(!written[0].looped);
        let back = ModelSpec::load(&written[1].path).unwrap();
        assert_eq!(back, spec);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn formats_have_names() {
        assert_eq!("hf".parse::<ExportFormat>().unwrap(), ExportFormat::Hf);
        let e = "onnx".parse::<ExportFormat>().unwrap_err().to_string();
        assert!(
            e.contains("export format") && e.contains("hf, model"),
            "{e}"
        );
    }
}
