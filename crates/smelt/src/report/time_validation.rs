//! The layout of `smelt validate-time`: the step model and the kernel constants against the
//! published rows.

use super::{Document, Field, Report, Table};
use crate::time::step::published::TimeValidation;

fn pct(x: f64) -> Field {
    Field::shown(format!("{:+.1}%", x * 100.0), x)
}

fn abs_pct(x: f64) -> String {
    format!("{:.1}%", x * 100.0)
}

impl TimeValidation {
    /// The summary of the three predictors and what is fitted, as lines of `doc`.
    fn summary_lines(&self, doc: &mut Document) {
        let names = [
            "step model",
            "constant MFU per card",
            "FLOP-proportional time",
        ];
        for (name, (med, mean, max)) in names.iter().zip(self.summary) {
            doc.line(format!(
                "{name}: median |error| {}, mean {}, max {}",
                abs_pct(med),
                abs_pct(mean),
                abs_pct(max)
            ));
        }
        doc.line(format!(
            "fitted on these rows: host seconds per layer execution (a token mixer and an FFN; \
             a one-block layer counts half) per micro-batch {} (Megatron-Core) and {} \
             (PyTorch FSDP2); the trivial predictors are fitted on the same rows; nothing else \
             of the step model is fitted on them",
            super::predict::seconds_text(self.host_seconds[0].1),
            super::predict::seconds_text(self.host_seconds[1].1),
        ));
        doc.line(
            "not in the rows, from public sources (crates/smelt/data/published/supplement.toml): \
             Llama-3.1-70B's and Nemotron 3 Super's models (their Hugging Face configs), NeMo \
             AutoModel cells the table leaves out (EP, dispatcher, activation checkpointing) \
             as the benchmark's recipe sets them, and the MTP module R226's recipe trains \
             (Megatron-MoE-ModelZoo's Qwen3-Next config, --mtp-num-layers 1)",
        );
    }
}

impl Report for TimeValidation {
    fn document(&self) -> Document {
        let mut doc = Document::titled(
            "step model vs published runs (tokens/s/GPU; error = predicted / published - 1)",
        );
        let mut t = Table::new([
            "row",
            "model",
            "gpu",
            "gpus",
            "published",
            "predicted",
            "error",
            "per-card MFU",
            "FLOP-prop.",
            "bound / refused",
        ])
        .right_from(3);
        t.data = true;
        let mut trivial = self
            .per_card_mfu_errors
            .iter()
            .zip(&self.flop_proportional_errors);
        for r in &self.runs {
            let (a, b) = match r.predicted {
                Some(_) => trivial
                    .next()
                    .map_or((Field::blank(), Field::blank()), |(a, b)| {
                        (pct(*a), pct(*b))
                    }),
                None => (Field::blank(), Field::blank()),
            };
            let why = match (&r.refused, &r.step) {
                (Some(e), _) => format!(
                    "refused: {}",
                    e.split(['(', ';']).next().unwrap_or(e).trim()
                ),
                (None, Some(s)) if s.host_bound => "host".to_owned(),
                (None, Some(_)) => "gpu".to_owned(),
                _ => String::new(),
            };
            t.rows.push(vec![
                Field::text(&r.id),
                Field::text(&r.model),
                Field::text(&r.gpu),
                Field::shown(r.gpus.to_string(), r.gpus),
                Field::shown(format!("{:.0}", r.published), r.published),
                r.predicted
                    .map_or(Field::blank(), |p| Field::shown(format!("{p:.0}"), p)),
                r.error.map_or(Field::blank(), pct),
                a,
                b,
                Field::text(why),
            ]);
        }
        doc.table(t);
        self.summary_lines(&mut doc);
        let mut k =
            Table::new(["kernel class", "rows", "median |error|", "max |error|"]).right_from(1);
        for (class, n, med, max) in &self.kernel_summary {
            k.push_texts([class.clone(), n.to_string(), abs_pct(*med), abs_pct(*max)]);
        }
        doc.line("kernel rows predicted by the constants fitted on them (in-sample):");
        doc.table(k);
        doc
    }
}

impl Report for crate::time::step::report::StepReport {
    fn document(&self) -> Document {
        let s = &self.step;
        let r = &s.request;
        let t = &r.training;
        let mut doc = Document::titled(format!(
            "predicted training step of {} on {} x {} ({})",
            self.model, s.gpus, r.card, r.system.name
        ));
        doc.line(layout_line(s));
        if let Some(line) = mtp_line(s) {
            doc.line(line);
        }
        let mb = &s.micro_batch;
        let mut table = Table::new(["per micro-batch", "seconds"]).right_from(1);
        let gemms = gemm_label(s);
        let copies = (mb.fsdp_copies > 0.0)
            .then_some(("FSDP2 parameter and gradient copies", mb.fsdp_copies));
        let rows = [
            Some((gemms, mb.gemm)),
            Some(("routed experts (grouped GEMMs)", mb.experts)),
            Some(("attention", mb.attention)),
            Some(("recurrent mixers (scan, conv, gated norm)", mb.recurrent)),
            Some(("memory-bound kernels", mb.memory_bound)),
            Some(("recompute", mb.recompute)),
            copies,
            Some(("TP collectives", mb.tp_comm)),
            Some(("EP all-to-all", mb.ep_comm)),
            Some(("PP p2p", mb.pp_comm)),
            Some(("GPU total", mb.gpu)),
            Some(("host (launches)", mb.host)),
        ];
        for (name, x) in rows.into_iter().flatten() {
            table.push_texts([name.to_owned(), super::predict::seconds_text(x)]);
        }
        if t.zero >= 3 {
            table.push_texts([
                "ZeRO 3 gathers and reduce-scatters (overlapped)".to_owned(),
                super::predict::seconds_text(mb.fsdp_comm),
            ]);
        }
        doc.table(table);
        doc.line(format!(
            "rows per expert {:.0}; micro-batch {}-bound; bubble {}, optimizer {}, exposed DP \
             communication {}",
            s.rows_per_expert,
            if s.host_bound {
                "host"
            } else if mb.fsdp_comm > mb.gpu {
                "ZeRO-3-traffic"
            } else {
                "GPU"
            },
            super::predict::seconds_text(s.bubble),
            super::predict::seconds_text(s.optimizer),
            super::predict::seconds_text(s.dp_comm)
        ));
        if let Some(p) = &s.pipeline {
            doc.line(pipeline_line(p));
        }
        if let Some(mean) = s.mean_stage_layers {
            doc.line(mean_stage_line(t, mean));
        }
        doc.line(format!(
            "step {}, {:.0} tokens/s/GPU",
            super::predict::seconds_text(self.step_seconds),
            self.tokens_per_second_per_gpu
        ));
        match (self.megatron_tflops_per_gpu, self.megatron_mfu) {
            (Some(tf), Some(mfu)) => doc.line(format!(
                "{tf:.0} model TFLOP/s/GPU under Megatron-LM's FLOP convention (MFU {:.1}% of \
                 the dense bf16 peak)",
                mfu * 100.0
            )),
            _ => doc.line(format!(
                "no Megatron-convention TFLOP/s: {}",
                self.megatron_refused.as_deref().unwrap_or("not counted")
            )),
        }
        doc.line(memory_line(&self.memory));
        doc.line(
            "(the memory verdict is the training-memory model's: under a Megatron activation \
             policy, the default, with the step's recomputation; under another, as that policy \
             counts; --framework does not change it)",
        );
        doc
    }

    fn formats(&self) -> &'static [super::Format] {
        &[super::Format::Table, super::Format::Json]
    }
}

/// The layout line of a step: its degrees, batch and settings as their flags name them.
fn layout_line(s: &crate::time::step::StepPrediction) -> String {
    use super::step_grid::serde_plain;
    let r = &s.request;
    format!(
        "layout: {}, global batch {} ({} micro-batches), recompute {}, framework {}, \
         attention {}, dispatcher {}",
        super::step_grid::layout_text(&r.training),
        r.global_batch,
        s.micro_batches,
        serde_plain(&r.recompute),
        serde_plain(&r.framework),
        serde_plain(&r.attention),
        serde_plain(&r.dispatcher)
    )
}

/// The GEMM row's label: the stage shown runs the LM head (and the MTP modules) unless it
/// is one before the last of a split the layout gives (a looped model's stages are each
/// charged them).
fn gemm_label(s: &crate::time::step::StepPrediction) -> &'static str {
    let head_here = s
        .pipeline
        .as_ref()
        .is_none_or(|p| p.loop_stage.is_some() || p.bottleneck as usize == p.stage_layers.len());
    match (head_here, s.mtp_modules > 0) {
        (true, true) => "GEMMs (LM head and MTP included)",
        (true, false) => "GEMMs (LM head included)",
        (false, _) => "GEMMs",
    }
}

/// The warning for a layout whose stages cannot split the layers evenly (`mean` layers
/// per stage), with the uneven split smelt times exactly, when one builds.
fn mean_stage_line(t: &crate::model::Training, mean: f64) -> String {
    let layers = (mean * t.pp as f64).round() as u64;
    let flag = |name: &str, n: Option<u64>| n.map(|n| format!(" --{name}-stage-layers {n}"));
    let exact = if layers > crate::model::MAX_SPLIT_SEARCH {
        format!(
            "; splits of over {} layers are not searched (give --first-stage-layers / \
             --last-stage-layers to time one stage by stage)",
            crate::model::MAX_SPLIT_SEARCH
        )
    } else {
        match t.suggested_split(layers) {
            Some(((first, last), fullest)) => {
                format!(
                    "; rerun with{}{} to time the split that builds with the fewest layers on \
                     its fullest stage ({fullest} layers against the mean {mean:.2}), stage by \
                     stage",
                    flag("first", first).unwrap_or_default(),
                    flag("last", last).unwrap_or_default()
                )
            }
            None => format!(
                "; no split by --first/--last-stage-layers builds at vp {} (each stage must \
                 hold a multiple of vp layers)",
                t.vp
            ),
        }
    };
    format!(
        "pipeline: pp {} · vp {} does not divide the {layers} layers ({:.2} per virtual \
         stage); timed as the mean stage ({mean:.2} layers, charged the LM head and any MTP \
         modules): Megatron-Core builds such a run only with an uneven split (its \
         --decoder-first/last-pipeline-num-layers, --pipeline-model-parallel-layout or \
         --account-for-embedding/loss-in-pipeline-split){exact}",
        t.pp,
        t.vp,
        mean / t.vp as f64
    )
}

/// What the step did with the model's MTP modules, when it has any.
fn mtp_line(s: &crate::time::step::StepPrediction) -> Option<String> {
    if s.mtp_modules > 0 {
        return Some(format!(
            "MTP modules: {} timed on the stage with the LM head (Megatron-Core runs them \
             there: each one more layer of full attention and the last layer's FFN, then the \
             LM head and the cross-entropy again); the memory verdict leaves them out (the \
             training-memory model does not place them)",
            s.mtp_modules
        ));
    }
    (s.mtp_modules_not_run > 0).then(|| {
        format!(
            "MTP modules: the model's {} not timed: FSDP2 trains Transformers' modules, \
             which build none",
            s.mtp_modules_not_run
        )
    })
}

/// A looped model's placement in one line: its stages, the loop's, the bottleneck whose
/// micro-batch the table shows, and what the imbalance costs.
fn pipeline_line(p: &crate::time::step::looped::Pipeline) -> String {
    let join = |v: &[u64]| v.iter().map(u64::to_string).collect::<Vec<_>>().join("/");
    let Some(loop_stage) = p.loop_stage else {
        return format!(
            "pipeline split as the layout gives it: physical layers {} per stage; the table is \
             stage {}'s (the slowest); pipeline imbalance {} of the step",
            join(&p.stage_layers),
            p.bottleneck,
            super::predict::seconds_text(p.imbalance)
        );
    };
    if p.stage_layers.len() == 1 {
        return format!(
            "loop on the one pipeline stage: {} layer executions of {} physical layers",
            join(&p.stage_executions),
            join(&p.stage_layers)
        );
    }
    format!(
        "loop on pipeline stage {} of {}: physical layers {}, layer executions {} per stage; \
         the table is stage {}'s (the slowest); pipeline imbalance {} of the step",
        loop_stage,
        p.stage_layers.len(),
        join(&p.stage_layers),
        join(&p.stage_executions),
        p.bottleneck,
        super::predict::seconds_text(p.imbalance)
    )
}

/// The memory verdict of a step report, as a line.
fn memory_line(memory: &crate::time::step::report::MemoryVerdict) -> String {
    use crate::time::step::report::MemoryVerdict;
    let gb = |b: f64| format!("{:.1} GB", b / 1e9);
    match memory {
        MemoryVerdict::Fits {
            peak_bytes,
            card_bytes,
        } => format!(
            "memory: fits ({} peak per GPU of {}, {} spare)",
            gb(*peak_bytes),
            gb(*card_bytes),
            gb(card_bytes - peak_bytes)
        ),
        MemoryVerdict::DoesNotFit {
            peak_bytes,
            card_bytes,
        } => format!(
            "memory: does NOT fit ({} peak per GPU of {}, {} over)",
            gb(*peak_bytes),
            gb(*card_bytes),
            gb(peak_bytes - card_bytes)
        ),
        MemoryVerdict::NotChecked { reason } => format!("memory: not checked ({reason})"),
    }
}
