//! Predictions: a model's training step walked on a roofline, component by component, and
//! the report of one model or of a looped model against its Baseline (`smelt predict`).

use serde::Serialize;

use super::calibration::{Calibration, Traffic};
use super::device::{Backend, Device};
use super::efficiency::ShapeClass;
use super::roofline::{AttentionData, Bounds, ExpertLaunch, Roofline};
use crate::error::{Error, Result};
use crate::model::ModelSpec;
use crate::plan::{self, Component, MAX_TOKENS, Routing};

/// One component's predicted time.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct ComponentPrediction {
    /// Component.
    pub component: Component,
    /// Seconds of the training step (the whole stack), split by what bounds them.
    pub bounds: Bounds,
    /// Seconds of the training step.
    pub seconds: f64,
    /// Share of the model's time.
    pub time_share: f64,
}

/// One model's prediction.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ModelPrediction {
    /// The model's name.
    pub name: String,
    /// Tokens in the batch (whole documents of the workload).
    pub tokens: u64,
    /// Layer executions per forward pass.
    pub layer_executions: u64,
    /// Kernel launches of the training step ([`Roofline::launches`]).
    pub launches: u64,
    /// Training FLOPs per token of the layer stack (the cost model's).
    pub flops_per_token: f64,
    /// Predicted seconds of one training step of the layer stack on the batch.
    pub seconds: f64,
    /// Predicted seconds per token.
    pub seconds_per_token: f64,
    /// The cost model's training FLOPs per token over the predicted seconds per token, as a
    /// share of the device's peak. Not an MFU under any launcher's FLOP convention (see
    /// `smelt mfu --conventions`); uncalibrated, the seconds are a lower bound and this share
    /// an upper bound.
    pub cost_flops_share_of_peak: f64,
    /// Whether `seconds` is a lower bound (an uncalibrated roofline: every kernel at the
    /// datasheet peak or bandwidth) rather than an estimate.
    pub lower_bound: bool,
    /// What bounds the time, over the whole step.
    pub bounds: Bounds,
    /// Per component.
    pub components: Vec<ComponentPrediction>,
}

/// How a prediction is made: the batch and the routing, as for the bench.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct PredictOptions {
    /// Tokens per batch (rounded to whole documents).
    pub tokens: u64,
    /// Expert assignment.
    pub routing: Routing,
}

impl Default for PredictOptions {
    /// A GPU bench's batch (16384 tokens), balanced routing.
    fn default() -> Self {
        Self {
            tokens: Backend::Cuda.default_tokens(),
            routing: Routing::Balanced,
        }
    }
}

/// The prediction of `spec` on `roof`.
pub fn predict_model(
    spec: &ModelSpec,
    roof: &Roofline,
    opts: &PredictOptions,
) -> Result<ModelPrediction> {
    spec.validate()?;
    // A model the cost model cannot count (its counts past 64 bits) is refused as `smelt
    // cost` refuses it, before its plan is walked.
    crate::cost::budgets(spec)?;
    if !(1..=MAX_TOKENS).contains(&opts.tokens) {
        return Err(Error::invalid(
            "tokens",
            format!("must be between 1 and {} (got {})", MAX_TOKENS, opts.tokens),
        ));
    }
    let docs = plan::documents(&spec.workload, opts.tokens)?;
    let p = plan::plan(&spec.model, &docs, spec.workload.attention, opts.routing)?;
    let by = roof.plan(&spec.model, &p);
    let mut bounds = Bounds::default();
    for b in by.values() {
        bounds.add(*b);
    }
    let seconds = bounds.total();
    let flops_per_token = p.flops() as f64 / p.tokens as f64;
    let seconds_per_token = seconds / p.tokens as f64;
    Ok(ModelPrediction {
        name: spec.name.clone().unwrap_or_else(|| "model".to_owned()),
        tokens: p.tokens,
        layer_executions: p.executions,
        launches: roof.launches(&spec.model, &p),
        flops_per_token,
        seconds,
        seconds_per_token,
        cost_flops_share_of_peak: flops_per_token
            / seconds_per_token
            / roof.device.peak_flops_per_second,
        lower_bound: roof.calibration.is_none(),
        bounds,
        components: by
            .into_iter()
            .map(|(component, b)| ComponentPrediction {
                component,
                bounds: b,
                seconds: b.total(),
                time_share: b.total() / seconds,
            })
            .collect(),
    })
}

/// What a prediction was made with, for a report's reader.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PredictionBasis {
    /// The device.
    pub device: Device,
    /// How the attention core was costed.
    pub attention: AttentionData,
    /// How the routed experts' GEMMs were launched.
    pub experts: ExpertLaunch,
    /// Whether efficiencies come from measurements.
    pub calibrated: bool,
    /// The calibration's bench file, when calibrated.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub calibration: Option<String>,
    /// The device the calibration measured, when calibrated.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub calibrated_on: Option<String>,
    /// The shape classes with a fitted curve, when calibrated.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub calibrated_classes: Vec<ShapeClass>,
    /// The GEMMs' operand-traffic fit, when it applied (the calibration's own device).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub traffic: Option<Traffic>,
    /// The batch and routing.
    pub options: PredictOptions,
}

impl PredictionBasis {
    /// The basis of predictions on `roof` with `opts`.
    pub fn of(roof: &Roofline, opts: &PredictOptions) -> Self {
        let c = roof.calibration.as_ref();
        PredictionBasis {
            device: roof.device.clone(),
            attention: roof.attention,
            experts: roof.experts,
            calibrated: c.is_some(),
            calibration: c.map(|c| c.source.clone()),
            calibrated_on: c.map(|c| c.device.name.clone()),
            calibrated_classes: c.map(Calibration::classes).unwrap_or_default(),
            traffic: roof.traffic().copied(),
            options: *opts,
        }
    }

    /// One line saying what the prediction assumes.
    pub fn summary(&self) -> String {
        let roof = match self.device.memory_bytes_per_second {
            Some(w) => format!(
                "{:.1} TFLOP/s, {:.2} TB/s",
                self.device.peak_flops_per_second / 1e12,
                w / 1e12
            ),
            None if self.traffic.is_some() => format!(
                "{:.1} GFLOP/s, memory as the GEMMs' fitted operand traffic",
                self.device.peak_flops_per_second / 1e9
            ),
            None => format!(
                "{:.1} GFLOP/s, no memory roof",
                self.device.peak_flops_per_second / 1e9
            ),
        };
        let how = match (&self.calibration, &self.calibrated_on) {
            (Some(file), Some(on)) => format!(
                "calibrated by {file} (measured on {on}; classes {})",
                self.calibrated_classes
                    .iter()
                    .map(|c| c.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            _ => "uncalibrated roofline (efficiency 1): the times are lower bounds".to_owned(),
        };
        let how = match &self.traffic {
            Some(t) => format!(
                "{how}; GEMMs as arithmetic at {:.3} of the peak plus operand traffic at \
                 {:.1} GB/s (fitted to {} shapes, rms error {:.1}%)",
                t.peak_share(self.device.peak_flops_per_second),
                t.bandwidth() / 1e9,
                t.shapes,
                100.0 * t.rms_relative_error
            ),
            None => how,
        };
        format!(
            "predicted on {} ({roof}, launch {:.2} µs, {} attention, {} experts, {} tokens): \
             {how}",
            self.device.name,
            self.device.launch_seconds * 1e6,
            self.attention.as_str(),
            self.experts.as_str(),
            self.options.tokens
        )
    }
}

/// A prediction of one model, or of a model against its Baseline: `smelt predict --format
/// json`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PredictReport {
    /// What the prediction assumes.
    pub basis: PredictionBasis,
    /// The models, the Baseline first when there are two.
    pub models: Vec<ModelPrediction>,
    /// Predicted seconds per token, second model over first.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub time_ratio: Option<f64>,
    /// Training FLOPs per token, second model over first.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub flop_ratio: Option<f64>,
}

/// Predicts `models` (the Baseline first) on `roof`.
pub fn predict(
    models: &[&ModelSpec],
    roof: &Roofline,
    opts: &PredictOptions,
) -> Result<PredictReport> {
    roof.device.validate()?;
    if let Some(c) = &roof.calibration {
        c.validate()?;
    }
    let out = models
        .iter()
        .map(|m| predict_model(m, roof, opts))
        .collect::<Result<Vec<_>>>()?;
    let ratio = |f: fn(&ModelPrediction) -> f64| (out.len() == 2).then(|| f(&out[1]) / f(&out[0]));
    Ok(PredictReport {
        basis: PredictionBasis::of(roof, opts),
        time_ratio: ratio(|m| m.seconds_per_token),
        flop_ratio: ratio(|m| m.flops_per_token),
        models: out,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::time::roofline::{fused_io_bytes, test_roofline};

    #[test]
    fn a_models_prediction_is_the_sum_over_its_plan() {
        let spec = crate::model::ModelSpec::load(std::path::Path::new(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../budgets/base-200m-s95.toml"
        )))
        .unwrap();
        for attention in [AttentionData::Unfused, AttentionData::Fused] {
            let r = Roofline {
                attention,
                ..test_roofline(Some(2e12), 4e-6)
            };
            let opts = PredictOptions {
                tokens: 2048,
                routing: Routing::Balanced,
            };
            let p = predict_model(&spec, &r, &opts).unwrap();
            let docs = plan::documents(&spec.workload, 2048).unwrap();
            let plan =
                plan::plan(&spec.model, &docs, spec.workload.attention, opts.routing).unwrap();
            let mut sum = 0.0;
            for k in &plan.kernels {
                if attention == AttentionData::Fused && k.component == Component::AttentionCore {
                    continue;
                }
                sum += r.kernel(k).total();
            }
            if attention == AttentionData::Fused {
                let tiles: f64 = (plan.kernels.iter())
                    .filter(|k| k.component == Component::AttentionCore)
                    .map(|k| r.compute_seconds(k) * k.count as f64)
                    .sum();
                let io = fused_io_bytes(&spec.model, plan.tokens, plan.executions, 2) / 2e12;
                sum += tiles.max(io) + 2.0 * plan.executions as f64 * 4e-6;
            }
            assert!(
                (p.seconds - sum).abs() <= 1e-12 * sum,
                "{attention}: {p:?} {sum}"
            );
            let parts: f64 = p.components.iter().map(|c| c.seconds).sum();
            assert!((parts - p.seconds).abs() <= 1e-12 * sum);
            let all: u64 = plan.kernels.iter().map(|k| k.count).sum();
            let tiles: u64 = (plan.kernels.iter())
                .filter(|k| k.component == Component::AttentionCore)
                .map(|k| k.count)
                .sum();
            let expected = match attention {
                AttentionData::Unfused => all,
                AttentionData::Fused => all - tiles + 2 * plan.executions,
            };
            assert_eq!(p.launches, expected);
            // Grouped experts: the experts' launch overhead is nine launches per execution.
            let g = Roofline {
                experts: ExpertLaunch::Grouped,
                ..r.clone()
            };
            let pg = predict_model(&spec, &g, &opts).unwrap();
            let experts = |p: &ModelPrediction| {
                let c = p
                    .components
                    .iter()
                    .find(|c| c.component == Component::Experts);
                c.unwrap().bounds
            };
            let (a, b) = (experts(&p), experts(&pg));
            assert_eq!(a.compute + a.memory, b.compute + b.memory);
            assert!((b.launch - 9.0 * plan.executions as f64 * 4e-6).abs() < 1e-15);
        }
    }
}
