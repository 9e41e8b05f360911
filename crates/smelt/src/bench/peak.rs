//! The device's dense peak, for the ceiling's share of it: the shared table of cards
//! ([`crate::card`]) read by the driver's device name. A card not listed has none unless
//! `--peak` gives it; no card stands in for another.

use crate::card::Card;

/// The datasheet peak (dense bf16, FLOP/s) of the device named `name`, with its source.
pub fn peak_of(name: &str) -> Option<(f64, &'static str)> {
    Card::of_device(name).map(|c| {
        let spec = c.spec();
        (spec.peak_flops_per_second, spec.source)
    })
}

#[cfg(test)]
mod tests {
    use super::peak_of;

    #[test]
    fn cards_are_recognised_by_name() {
        assert_eq!(peak_of("NVIDIA H200").map(|p| p.0), Some(989.4e12));
        assert_eq!(peak_of("NVIDIA H100 PCIe").map(|p| p.0), Some(756.0e12));
        assert_eq!(
            peak_of("NVIDIA H100 80GB HBM3").map(|p| p.0),
            Some(989.4e12)
        );
        assert_eq!(peak_of("CPU, 1 thread"), None);
    }

    #[test]
    fn sxm_and_nvl_are_told_apart() {
        assert_eq!(peak_of("NVIDIA H200 NVL").map(|p| p.0), Some(835.5e12));
        assert_eq!(peak_of("NVIDIA H100 NVL").map(|p| p.0), Some(835.5e12));
        assert_eq!(peak_of("NVIDIA GH200 480GB").map(|p| p.0), Some(989.4e12));
        assert_eq!(peak_of("NVIDIA L40"), None);
    }
}
