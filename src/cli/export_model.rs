//! `smelt export`: one model (a model file, or a `config.json` smelt reads) written as a
//! folder Hugging Face Transformers builds, without matching anything.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use smelt::export::{self, ExportFormat, ExportOptions, Item};
use smelt::hf::Family;

/// Write a model as a folder Hugging Face Transformers builds, without matching it.
///
/// MODEL is a smelt model file or a config.json of a family smelt reads. The folder holds
/// the family's config.json (a model without a loop) or, for a looped model, a model
/// directory Transformers loads with trust_remote_code=True; in both it builds the model
/// smelt costs. A config.json's other keys (rope, norms, token ids, soft-capping) are
/// carried into the export; a family that cannot hold the model, or a looped model of a
/// family whose loop is not written yet, is refused with the reason.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The model file (.toml) or config.json.
    model: PathBuf,
    /// The folder to write (created if missing; never over MODEL).
    #[arg(short, long, value_name = "DIR")]
    output: PathBuf,
    /// The Hugging Face family (default: a config.json's own; for a model file, the one
    /// whose conventions the model follows).
    #[arg(long, value_name = "MODEL_TYPE", value_parser = super::import::families())]
    hf_family: Option<Family>,
    /// The vocabulary written when the model has none.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..=1 << 24))]
    vocab: Option<u64>,
}

/// Runs `smelt export`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let spec = super::cost::load(&args.model)?;
    let config: Option<serde_json::Value> =
        match args.model.extension().is_some_and(|e| e == "json") {
            true => {
                let text = smelt::io::read_to_string(&args.model)
                    .with_context(|| format!("config '{}'", args.model.display()))?;
                let text = text.strip_prefix('\u{feff}').unwrap_or(&text);
                Some(
                    serde_json::from_str(text)
                        .with_context(|| format!("config '{}'", args.model.display()))?,
                )
            }
            false => None,
        };
    let item = Item {
        name: "model".to_owned(),
        looped: &spec,
        baseline_config: config.as_ref(),
        comment: format!(
            "exported by smelt from {}",
            args.model.file_name().map_or_else(
                || args.model.display().to_string(),
                |n| n.to_string_lossy().into_owned()
            )
        ),
    };
    let options = ExportOptions {
        format: ExportFormat::Hf,
        family: args.hf_family,
        vocab: args.vocab,
    };
    let written = export::write_one(
        &item,
        &options,
        &args.output,
        std::slice::from_ref(&args.model),
    )
    .with_context(|| format!("exporting '{}'", args.model.display()))?;
    let what = match written.looped {
        true => "a looped model directory (built with trust_remote_code=True)",
        false => "config.json",
    };
    super::note(&format!(
        "smelt: wrote {what} into '{}'",
        args.output.display()
    ));
    Ok(ExitCode::SUCCESS)
}
