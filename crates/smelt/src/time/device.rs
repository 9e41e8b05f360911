//! Devices: the kind a kernel is timed on ([`Backend`]), the device a prediction is for
//! ([`Device`]: a card of the table, a given peak, or a calibration's own), and the peak a
//! model FLOP utilisation divides by ([`Peak`]). Cards are resolved by name in one place,
//! [`Card`]'s parser (`card.rs`).

use serde::{Deserialize, Serialize};

use super::card::Card;
use crate::error::{Error, Result};
use crate::names::named_enum;

named_enum! {
    /// Where kernels are timed: the benchmark's backends, and so what a calibration
    /// measured.
    pub enum Backend: "backend" {
        /// f32 on one CPU thread.
        Cpu = "cpu",
        /// bf16 cuBLAS on the first GPU (needs the `cuda` feature and a driver).
        Cuda = "cuda",
    }
}

impl Backend {
    /// The default batch: 1024 tokens on the CPU, 16384 on a GPU.
    pub fn default_tokens(self) -> u64 {
        match self {
            Backend::Cpu => 1024,
            Backend::Cuda => 16384,
        }
    }
}

/// The peaks a device may be given, FLOP/s: 1 MFLOP/s to 1 EFLOP/s, so that the share of
/// it a measured rate reaches is always a finite number (no `inf%` from a subnormal peak).
pub const PEAK_FLOPS: std::ops::RangeInclusive<f64> = 1e6..=1e18;

/// An error naming `peak` unless `flops` (FLOP/s) is in [`PEAK_FLOPS`].
pub fn check_peak(flops: f64) -> Result<()> {
    if PEAK_FLOPS.contains(&flops) {
        return Ok(());
    }
    Err(Error::invalid(
        "peak",
        format!(
            "must be between {:e} and {:e} FLOP/s (1 MFLOP/s to 1 EFLOP/s); got {flops:e}",
            PEAK_FLOPS.start(),
            PEAK_FLOPS.end()
        ),
    ))
}

/// The dense peak per GPU a model FLOP utilisation divides by.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Peak {
    /// A card of the table.
    Card(Card),
    /// A dense peak in FLOP/s per GPU, for a card the table does not have.
    Given(f64),
}

impl Peak {
    /// The peak in FLOP/s and where it comes from (the table's source, or `--peak`); a
    /// given peak outside [`PEAK_FLOPS`] is an error naming `peak`.
    pub fn resolve(self) -> Result<(f64, String)> {
        match self {
            Peak::Card(c) => {
                let s = c.spec();
                Ok((s.peak_flops_per_second, s.source.to_owned()))
            }
            Peak::Given(p) => check_peak(p).map(|()| (p, "--peak".to_owned())),
        }
    }

    /// The card, when the peak is the table's.
    pub fn card(self) -> Option<Card> {
        match self {
            Peak::Card(c) => Some(c),
            Peak::Given(_) => None,
        }
    }
}

/// The launch overhead of a kernel when no calibration gives one: 4 µs (Volkov and Demmel,
/// SC 2008, measured 3 to 7 µs).
pub const DEFAULT_LAUNCH_SECONDS: f64 = 4e-6;

/// Bytes per element on a card: bf16.
pub const CARD_ELEMENT_BYTES: u64 = 2;

/// The bandwidths a device may be given, bytes/s: 1 MB/s to 1 EB/s.
pub const BANDWIDTH: std::ops::RangeInclusive<f64> = 1e6..=1e18;

/// The device a prediction is for.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Device {
    /// The device, in words.
    pub name: String,
    /// Dense peak, FLOP/s.
    pub peak_flops_per_second: f64,
    /// Memory bandwidth, bytes/s (`None`: no memory roof).
    pub memory_bytes_per_second: Option<f64>,
    /// Seconds per kernel launch.
    pub launch_seconds: f64,
    /// Bytes per element (2 for bf16, 4 for f32).
    pub element_bytes: u64,
    /// Where the figures come from.
    pub source: String,
}

impl Device {
    /// A card of the table: its dense bf16 peak and bandwidth, bf16 elements, the default
    /// launch overhead.
    pub fn card(card: Card) -> Self {
        let s = card.spec();
        Device {
            name: s.name.to_owned(),
            peak_flops_per_second: s.peak_flops_per_second,
            memory_bytes_per_second: Some(s.memory_bytes_per_second),
            launch_seconds: DEFAULT_LAUNCH_SECONDS,
            element_bytes: CARD_ELEMENT_BYTES,
            source: s.source.to_owned(),
        }
    }

    /// An error unless the figures are in range.
    pub fn validate(&self) -> Result<()> {
        // Printed in every report: a control character would reach a terminal raw.
        for (field, text) in [("device.name", &self.name), ("device.source", &self.source)] {
            if text.chars().any(char::is_control) {
                return Err(Error::invalid(
                    field,
                    format!("must not contain control characters (got {text:?})"),
                ));
            }
        }
        if !PEAK_FLOPS.contains(&self.peak_flops_per_second) {
            return Err(Error::invalid(
                "peak",
                format!(
                    "must be between 1e6 and 1e18 FLOP/s; got {:e}",
                    self.peak_flops_per_second
                ),
            ));
        }
        if let Some(w) = self.memory_bytes_per_second
            && !BANDWIDTH.contains(&w)
        {
            return Err(Error::invalid(
                "bandwidth",
                format!("must be between 1e6 and 1e18 bytes/s; got {w:e}"),
            ));
        }
        if !(self.launch_seconds.is_finite() && (0.0..=1.0).contains(&self.launch_seconds)) {
            return Err(Error::invalid(
                "launch_seconds",
                format!("must be between 0 and 1 s; got {}", self.launch_seconds),
            ));
        }
        if !matches!(self.element_bytes, 1 | 2 | 4 | 8) {
            return Err(Error::invalid(
                "element_bytes",
                format!("must be 1, 2, 4 or 8; got {}", self.element_bytes),
            ));
        }
        Ok(())
    }
}

/// A device of peak 1 TFLOP/s named "test", bf16, for the tests of this module's files.
#[cfg(test)]
pub(super) fn test_device(bandwidth: Option<f64>, launch: f64) -> Device {
    Device {
        name: "test".into(),
        peak_flops_per_second: 1e12,
        memory_bytes_per_second: bandwidth,
        launch_seconds: launch,
        element_bytes: 2,
        source: "a test".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_devices_are_refused_by_field() {
        let mut d = test_device(Some(-1.0), 0.0);
        assert!(d.validate().unwrap_err().to_string().contains("bandwidth"));
        d.memory_bytes_per_second = None;
        d.peak_flops_per_second = 0.0;
        assert!(d.validate().unwrap_err().to_string().contains("peak"));
    }

    #[test]
    fn a_peak_is_the_cards_or_one_given_in_range() {
        let (p, source) = Peak::Card(Card::H100Sxm).resolve().unwrap();
        assert_eq!(
            (p, source.as_str()),
            (989.4e12, Card::H100Sxm.spec().source)
        );
        assert_eq!(
            Peak::Given(9e14).resolve().unwrap(),
            (9e14, "--peak".to_owned())
        );
        for bad in [0.0, -1.0, 1e300, f64::NAN, f64::INFINITY, 1e-320] {
            let e = Peak::Given(bad).resolve().unwrap_err().to_string();
            assert!(e.starts_with("peak: must be between"), "{bad}: {e}");
        }
        assert_eq!(Peak::Given(1e15).card(), None);
        assert_eq!(Peak::Card(Card::B200).card(), Some(Card::B200));
    }
}
