//! Device resolution: what a prediction is asked to run on (a card, a peak, a calibration's
//! own device, with the figures a caller replaces) turned into a [`Roofline`], the same way
//! for `smelt predict`'s flags, a budget's `[objective.time]` and a library or Python call.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::calibration::Calibration;
use super::card::Card;
use super::device::{Backend, CARD_ELEMENT_BYTES, DEFAULT_LAUNCH_SECONDS, Device};
use super::predict::PredictOptions;
use super::roofline::{AttentionData, ExpertLaunch, Roofline};
use crate::error::{Error, Result};
use crate::plan::{MAX_TOKENS, Routing};

/// What a prediction is asked to run on: a card, a peak (with a bandwidth), or a
/// calibration's own device, with the figures a caller replaces.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DeviceRequest {
    /// A card of the table.
    pub card: Option<Card>,
    /// A dense peak in FLOP/s, for a device the table lacks.
    pub peak: Option<f64>,
    /// A memory bandwidth in bytes/s (replacing the card's or the calibration's).
    pub bandwidth: Option<f64>,
    /// Seconds per kernel launch (replacing the default or the calibration's).
    pub launch_seconds: Option<f64>,
    /// The efficiencies.
    pub calibration: Option<Calibration>,
    /// How the attention core is costed (default: fused, or unfused on the calibration's own
    /// device).
    pub attention: Option<AttentionData>,
    /// How the experts are launched (default: grouped, or per-expert on the calibration's own
    /// device).
    pub experts: Option<ExpertLaunch>,
}

/// Where a [`DeviceRequest`]'s values were given, so that the device's name and the errors
/// name them as their reader gave them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Given {
    /// As arguments of a function (the library, Python): `card`, `peak`, `bandwidth`.
    #[default]
    Arguments,
    /// As `smelt predict`'s flags: `--card`, `--peak`, `--bandwidth`.
    Flags,
    /// As a budget file's keys: `[objective.time] card`, `peak`, `bandwidth`.
    TimeKeys,
}

impl Given {
    /// The field an error about `key` names: `peak`, `--peak`, `objective.time.peak`.
    fn field(self, key: &str) -> String {
        match self {
            Given::Arguments => key.to_owned(),
            Given::Flags => format!("--{key}"),
            Given::TimeKeys => format!("objective.time.{key}"),
        }
    }

    /// How `key` (`card`, `peak`, `bandwidth`) was given.
    fn name(self, key: &str) -> String {
        match self {
            Given::Arguments => key.to_owned(),
            Given::Flags => format!("--{key}"),
            Given::TimeKeys => format!("[objective.time] {key}"),
        }
    }
}

impl DeviceRequest {
    /// The roofline asked for, and a warning when a calibration measured on a CPU is applied
    /// to a card. A card and a peak together, or neither with no calibration, are errors.
    /// The values are named as a function's arguments ([`Given::Arguments`]).
    pub fn roofline(self) -> Result<(Roofline, Option<String>)> {
        self.roofline_given(Given::Arguments)
    }

    /// [`DeviceRequest::roofline`], with a peak's device and the errors naming the values
    /// as `given` (a flag, a budget file's key).
    pub fn roofline_given(self, given: Given) -> Result<(Roofline, Option<String>)> {
        let calibration = self.calibration;
        if let Some(c) = &calibration {
            c.validate()?;
        }
        let cuda_floor = calibration
            .as_ref()
            .filter(|c| c.backend == Backend::Cuda)
            .map(|c| c.device.launch_seconds);
        let mut warning = None;
        let (mut device, own) = match (self.card, self.peak, &calibration) {
            (Some(_), Some(_), _) => {
                return Err(Error::invalid("peak", "give a card or a peak, not both"));
            }
            (Some(card), None, _) => {
                if let Some(c) = calibration.as_ref().filter(|c| c.backend != Backend::Cuda) {
                    warning = Some(format!(
                        "the calibration was measured on {} ({} backend): its efficiencies \
                         are applied to {} as they are, not measured on it",
                        c.device.name,
                        c.backend,
                        card.spec().name
                    ));
                }
                let mut d = Device::card(card);
                if let Some(l) = cuda_floor {
                    d.launch_seconds = l;
                    d.source
                        .push_str("; launch: the calibration's measured floor");
                }
                (d, false)
            }
            (None, Some(peak), _) => (
                Device {
                    name: format!(
                        "a device of {} TFLOP/s ({})",
                        peak / 1e12,
                        given.name("peak")
                    ),
                    peak_flops_per_second: peak,
                    memory_bytes_per_second: None,
                    launch_seconds: cuda_floor.unwrap_or(DEFAULT_LAUNCH_SECONDS),
                    element_bytes: CARD_ELEMENT_BYTES,
                    source: format!("{}, {}", given.name("peak"), given.name("bandwidth")),
                },
                false,
            ),
            (None, None, Some(c)) => (c.device.clone(), true),
            (None, None, None) => {
                return Err(Error::invalid(
                    "card",
                    format!(
                        "give a card ({}), a peak ({}) or a calibration to predict with",
                        given.name("card"),
                        given.name("peak")
                    ),
                ));
            }
        };
        if let Some(w) = self.bandwidth {
            device.memory_bytes_per_second = Some(w);
        }
        if let Some(l) = self.launch_seconds {
            device.launch_seconds = l;
        }
        device.validate()?;
        let roof = Roofline {
            device,
            calibration,
            attention: self.attention.unwrap_or(match own {
                true => AttentionData::Unfused,
                false => AttentionData::Fused,
            }),
            experts: self.experts.unwrap_or(match own {
                true => ExpertLaunch::PerExpert,
                false => ExpertLaunch::Grouped,
            }),
        };
        Ok((roof, warning))
    }
}

/// A prediction's device and options as a caller writes them: `smelt predict`'s flags, a
/// budget's `[objective.time]` table, Python's `predict` keywords. Figures are in the units
/// written (TFLOP/s, TB/s, µs); [`PredictSpec::resolve`] checks them and reads the card name
/// ([`Card::parse`], one parser for every command) and the calibration file.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PredictSpec {
    /// A card: an id of the table or a driver's name for it.
    #[serde(default)]
    pub card: Option<String>,
    /// A dense peak, TFLOP/s, instead of a card.
    #[serde(default)]
    pub peak: Option<f64>,
    /// A memory bandwidth, TB/s (replaces the card's or the calibration's).
    #[serde(default)]
    pub bandwidth: Option<f64>,
    /// Seconds per kernel launch, µs.
    #[serde(default)]
    pub launch_us: Option<f64>,
    /// A calibration file (`smelt calibrate`), relative to the folder given to `resolve`.
    #[serde(default)]
    pub calibration: Option<PathBuf>,
    /// How the attention core is costed.
    #[serde(default)]
    pub attention: Option<AttentionData>,
    /// How the routed experts are launched.
    #[serde(default)]
    pub experts: Option<ExpertLaunch>,
    /// Tokens per batch (default [`PredictOptions::default`]'s).
    #[serde(default)]
    pub tokens: Option<u64>,
    /// Token-to-expert assignment: `balanced` (the default) or `skew=S`.
    #[serde(default)]
    pub routing: Option<String>,
}

/// A [`PredictSpec`] resolved: the roofline and options to predict with.
#[derive(Debug, Clone, PartialEq)]
pub struct Prediction {
    /// The roofline.
    pub roofline: Roofline,
    /// The batch and routing.
    pub options: PredictOptions,
    /// A warning about the device (a CPU calibration applied to a card), if any.
    pub warning: Option<String>,
    /// The calibration file read, if any (an input, never written over).
    pub calibration_file: Option<PathBuf>,
}

impl PredictSpec {
    /// The roofline and options asked for, relative paths taken from `dir`, errors naming
    /// each value as `given`.
    pub fn resolve(&self, dir: &Path, given: Given) -> Result<Prediction> {
        let positive = |key: &str, v: Option<f64>, unit: f64| match v {
            Some(x) if !(x.is_finite() && x > 0.0) => Err(Error::invalid(
                given.field(key),
                format!("must be a positive finite number (got {x})"),
            )),
            other => Ok(other.map(|x| x * unit)),
        };
        let card = self.card.as_deref().map(Card::parse).transpose()?;
        let launch_seconds = match self.launch_us {
            Some(us) if !(us.is_finite() && (0.0..=1e6).contains(&us)) => {
                return Err(Error::invalid(
                    given.field("launch_us"),
                    format!("must be a number of microseconds from 0 to 1e6 (got {us})"),
                ));
            }
            other => other.map(|us| us * 1e-6),
        };
        let calibration_file = self.calibration.as_ref().map(|p| dir.join(p));
        let calibration = match &calibration_file {
            None => None,
            Some(p) => Some(load_calibration(p, &given.field("calibration"))?),
        };
        let (roofline, warning) = DeviceRequest {
            card,
            peak: positive("peak", self.peak, 1e12)?,
            bandwidth: positive("bandwidth", self.bandwidth, 1e12)?,
            launch_seconds,
            calibration,
            attention: self.attention,
            experts: self.experts,
        }
        .roofline_given(given)?;
        let routing = match &self.routing {
            None => Routing::Balanced,
            Some(r) => r.parse::<Routing>()?,
        };
        let tokens = self.tokens.unwrap_or(PredictOptions::default().tokens);
        if !(1..=MAX_TOKENS).contains(&tokens) {
            return Err(Error::invalid(
                given.field("tokens"),
                format!("must be between 1 and {MAX_TOKENS} (got {tokens})"),
            ));
        }
        Ok(Prediction {
            roofline,
            options: PredictOptions { tokens, routing },
            warning,
            calibration_file,
        })
    }
}

/// Reads a calibration (`smelt calibrate`'s file), naming it and `field` in errors.
fn load_calibration(path: &Path, field: &str) -> Result<Calibration> {
    let text = crate::io::read_to_string(path).map_err(|e| {
        Error::invalid(
            field,
            format!("cannot read calibration '{}': {e}", path.display()),
        )
    })?;
    Calibration::from_json(&text)
        .map_err(|e| Error::invalid(field, format!("calibration '{}': {e}", path.display())))
}
