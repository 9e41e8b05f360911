//! Datasheet dense peaks of known GPUs (bf16 inputs, fp32 accumulation, no sparsity), for
//! the ceiling's share of the peak. A card not listed has none unless `--peak` gives it.

/// `(name fragment, FLOP/s, source)`, most specific first: the device name reported by the
/// driver is matched by its fragments, case-insensitively.
const PEAKS: &[(&[&str], f64, &str)] = &[
    (&["h200"], 989.4e12, "NVIDIA H200 SXM datasheet, bf16 dense"),
    (&["gh200"], 989.4e12, "NVIDIA GH200 datasheet, bf16 dense"),
    (
        &["h100", "pcie"],
        756.0e12,
        "NVIDIA H100 PCIe datasheet, bf16 dense",
    ),
    (
        &["h100", "nvl"],
        835.0e12,
        "NVIDIA H100 NVL datasheet, bf16 dense",
    ),
    (&["h100"], 989.4e12, "NVIDIA H100 SXM datasheet, bf16 dense"),
    (&["b200"], 2250.0e12, "NVIDIA B200 datasheet, bf16 dense"),
    (&["a100"], 312.0e12, "NVIDIA A100 datasheet, bf16 dense"),
    (&["l40s"], 362.05e12, "NVIDIA L40S datasheet, bf16 dense"),
    (&["l4"], 121.0e12, "NVIDIA L4 datasheet, bf16 dense"),
    (
        &["4090"],
        165.2e12,
        "NVIDIA RTX 4090 datasheet, bf16 dense, fp32 accumulate",
    ),
];

/// The datasheet peak of the device named `name`, with its source.
pub fn peak_of(name: &str) -> Option<(f64, &'static str)> {
    let name = name.to_lowercase();
    PEAKS
        .iter()
        .find(|(parts, _, _)| parts.iter().all(|p| name.contains(p)))
        .map(|&(_, flops, source)| (flops, source))
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
}
