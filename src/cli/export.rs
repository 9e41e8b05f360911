//! `--export DIR` of `smelt grid` and `smelt sweep`: every matched model written into one
//! folder, in the format a trainer reads.

use std::path::{Path, PathBuf};

use anyhow::Context;
use smelt::export::{self, ExportFormat, ExportOptions, Item};
use smelt::hf::Family;
use smelt::io::Overwrite;

/// The export flags.
#[derive(Debug, clap::Args)]
pub struct ExportArgs {
    /// Also write every matched model into this folder (created if missing), one entry per
    /// cell or value named from its labels (200M-S95, span-8): for --export-format hf a
    /// folder Transformers builds exactly as matched (a looped model's directory, loaded with
    /// trust_remote_code=True; a model without a loop, its family's config.json); for
    /// model, smelt's model file NAME.toml. Written all or nothing; never over an input, nor
    /// over a file smelt did not write without --overwrite.
    #[arg(long, value_name = "DIR")]
    export: Option<PathBuf>,
    /// What --export writes: hf (models for Hugging Face Transformers) or model (smelt's
    /// model files, valid input to `smelt cost`).
    #[arg(long, value_name = "FORMAT", default_value = "hf", requires = "export",
          value_parser = super::named::<ExportFormat>())]
    export_format: ExportFormat,
    #[command(flatten)]
    hf: HfExportArgs,
}

/// The flags of an `--export DIR` written for Hugging Face Transformers (`grid`, `sweep`,
/// `plan`): its family, its vocabulary, and what it may replace.
#[derive(Debug, clap::Args)]
pub struct HfExportArgs {
    /// The Hugging Face family of the models --export writes for Transformers (default: the
    /// Baseline's, when it is a config.json smelt reads; else the one whose conventions the
    /// model follows).
    #[arg(long, value_name = "MODEL_TYPE", requires = "export",
          value_parser = super::import::families())]
    hf_family: Option<Family>,
    /// The vocabulary --export writes for Transformers when the Baseline has none.
    #[arg(long, value_name = "N", requires = "export",
          value_parser = clap::value_parser!(u64).range(1..=1 << 24))]
    vocab: Option<u64>,
    /// Let --export replace files smelt did not write (or that changed since it did), such
    /// as a model directory's own config.json; never an input of the run.
    #[arg(long, requires = "export")]
    overwrite: bool,
}

impl HfExportArgs {
    /// The options of an export in `format` with these flags.
    pub fn options(&self, format: ExportFormat) -> ExportOptions {
        ExportOptions {
            format,
            family: self.hf_family,
            vocab: self.vocab,
            overwrite: overwrite(self.overwrite),
        }
    }
}

/// What `--overwrite` lets an export replace.
pub fn overwrite(given: bool) -> Overwrite {
    match given {
        true => Overwrite::Any,
        false => Overwrite::Own,
    }
}

impl ExportArgs {
    /// Refuses, before any work, an `--export` folder that holds one of `inputs` where the
    /// export writes ([`smelt::io::refuse_inputs`]).
    pub fn refuse_inputs(&self, inputs: &[PathBuf]) -> anyhow::Result<()> {
        if let Some(dir) = &self.export {
            let format = self.export_format;
            let writes = |f: &Path| export::may_write(format, f);
            smelt::io::refuse_inputs(dir, inputs, Some(&writes))
                .with_context(|| format!("--export '{}'", dir.display()))?;
        }
        Ok(())
    }

    /// Writes `items` into the `--export` folder, if one is given, never over one of
    /// `inputs`, and says so on standard error.
    pub fn write(&self, items: &[Item<'_>], inputs: &[PathBuf]) -> anyhow::Result<()> {
        let Some(dir) = &self.export else {
            return Ok(());
        };
        let options = self.hf.options(self.export_format);
        let written = export::write_all(items, &options, dir, inputs)
            .with_context(|| format!("--export '{}'", dir.display()))?;
        say(dir, options.format, &written);
        Ok(())
    }
}

/// The note on standard error after an export.
fn say(dir: &Path, format: ExportFormat, written: &[export::Exported]) {
    let n = written.len();
    let looped = written.iter().filter(|w| w.looped).count();
    let what = match format {
        ExportFormat::Hf if looped > 0 => format!(
            "{n} models for Transformers ({looped} looped: model directories, built with \
             trust_remote_code=True)"
        ),
        ExportFormat::Hf => format!("{n} models for Transformers (config.json each)"),
        ExportFormat::Model => format!("{n} model files"),
    };
    super::note(&format!("smelt: wrote {what} into '{}'", dir.display()));
}
