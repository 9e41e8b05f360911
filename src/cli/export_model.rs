//! `smelt export`: one model (a model file, or a `config.json` smelt reads) written as a
//! folder Hugging Face Transformers builds, without matching anything.

use std::path::{Path, PathBuf};
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
/// carried into the export; a model file holds only what smelt costs, so the keys it does
/// not describe (RoPE, norm epsilon, token ids) take Transformers' defaults, named on
/// standard error. A family that cannot hold the model is refused with the reason.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The model file (.toml) or config.json.
    model: PathBuf,
    /// The folder to write (created if missing), all or nothing: never over MODEL (or the
    /// config.json read from it), nor over a file smelt did not write without --overwrite.
    #[arg(short, long, value_name = "DIR")]
    output: PathBuf,
    /// Replace files in DIR that smelt did not write (or that changed since it did), such as
    /// a model directory's own config.json; never the file read.
    #[arg(long)]
    overwrite: bool,
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
    // The file read: MODEL, or a model directory's config.json; refused as an output
    // before it is read.
    let file = match args.model.is_dir() {
        true => args.model.join("config.json"),
        false => args.model.clone(),
    };
    let writes = |f: &Path| export::may_write(ExportFormat::Hf, f);
    smelt::io::refuse_inputs(&args.output, std::slice::from_ref(&file), Some(&writes))
        .context("-o")?;
    let spec = super::cost::load(&args.model)?;
    let config: Option<serde_json::Value> = match file.extension().is_some_and(|e| e == "json") {
        true => {
            let what = || format!("config '{}'", file.display());
            let text = smelt::io::read_to_string(&file).with_context(what)?;
            let text = text.strip_prefix('\u{feff}').unwrap_or(&text);
            let value = serde_json::from_str(text).with_context(what)?;
            Some(smelt::hf::looped::family_config(&value).with_context(what)?)
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
        overwrite: super::export::overwrite(args.overwrite),
    };
    let written = export::write_one(&item, &options, &args.output, &[file])
        .with_context(|| format!("exporting '{}'", args.model.display()))?;
    let what = match written.looped {
        true => "a looped model directory (built with trust_remote_code=True)",
        false => "config.json",
    };
    super::note(&format!(
        "smelt: wrote {what} into '{}'",
        args.output.display()
    ));
    if config.is_none() {
        let family = args
            .hf_family
            .unwrap_or_else(|| smelt::hf::family_of(&spec));
        super::note(&format!(
            "smelt: note: a model file holds only what smelt costs, so the keys of {family}'s \
             config the export does not write take Transformers' defaults: {}; export the \
             config.json the model was read from to carry them",
            defaulted_keys(family)
        ));
        if args.hf_family.is_none() {
            // A model file does not say which family it was read from: Qwen3.5's MoE text
            // decoder and Qwen3-Next build the same Gated DeltaNet hybrid.
            let also = match family {
                smelt::hf::Family::Qwen3Next => " (qwen3_5_moe_text for a Qwen3.5 model)",
                _ => "",
            };
            super::note(&format!(
                "smelt: note: written as {family}, the family whose conventions the model \
                 follows; --hf-family names another that can hold it{also}"
            ));
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// The keys of `family`'s config that change the model Transformers builds (not its costs)
/// and that a model file does not hold, so that an export of one leaves them to the config
/// class's defaults.
fn defaulted_keys(family: Family) -> &'static str {
    match family {
        Family::Gemma4Text => {
            "rope_parameters, rms_norm_eps, final_logit_softcapping and the token ids, among others"
        }
        // NemotronHConfig's norms read layer_norm_epsilon; its attention has no RoPE.
        Family::NemotronH => "layer_norm_epsilon and the token ids, among others",
        _ => "rope_parameters, rms_norm_eps and the token ids, among others",
    }
}
