//! Device resolution: what a prediction is asked to run on (a card, a peak, a calibration's
//! own device, with the figures a caller replaces) turned into a [`Roofline`], the same way
//! for `smelt predict`'s flags, a budget's `[objective.time]` and a library or Python call.

use super::calibration::Calibration;
use super::card::Card;
use super::device::{Backend, CARD_ELEMENT_BYTES, DEFAULT_LAUNCH_SECONDS, Device};
use super::roofline::{AttentionData, ExpertLaunch, Roofline};
use crate::error::{Error, Result};

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
