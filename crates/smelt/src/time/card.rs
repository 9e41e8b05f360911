//! Accelerator cards: one table of the dense bf16 peak and the memory bandwidth of each card
//! smelt knows, with the public source of every figure. The kernel benchmark reads its
//! ceiling's share of the peak from it ([`mod@crate::bench`]), and model FLOP utilisation
//! ([`crate::launcher_flops::mfu`]) divides by it.
//!
//! # Conventions
//!
//! * **Peak**: dense tensor-core throughput with bf16 inputs and fp32 accumulation, no
//!   structured sparsity, per GPU (a Grace superchip's GPU alone). Datasheets quote the
//!   sparse figure with an asterisk; the dense one is half of it, and where the
//!   architecture whitepaper gives the dense figure itself (H100 SXM and PCIe, RTX 4090,
//!   L40S) that one is used.
//! * **Bandwidth**: the card's memory bandwidth in bytes per second, as its datasheet
//!   gives it (one GPU of a multi-GPU board or rack).
//! * **Names**: the driver's device name (`nvidia-smi --query-gpu=name`, `cuDeviceGetName`,
//!   `torch.cuda.get_device_name`) is split into words (letters and digits), and a card
//!   matches when every one of its fragments is one of those words; the table is ordered
//!   most specific first (`h100 pcie` before `h100`). Whole words keep `GH200` from reading
//!   as an H200 and an L40 from reading as an L4 (the L40 is not listed: it has no card).
//! * **Unknown cards** are errors that list the known ids ([`Card::from_str`]); a device name
//!   matching no entry has no card ([`Card::of_device`] is `None`). No card ever stands in
//!   for another: a wrong peak turns an MFU into nonsense (an unknown card read as another's
//!   peak is how a 563% MFU gets logged).
//!
//! [`Card::from_str`]: std::str::FromStr::from_str

use serde::Serialize;

use crate::names::named_enum;

named_enum! {
    /// A card in the table, by id.
    pub enum Card: "card" {
        /// NVIDIA H100 SXM5 80 GB.
        H100Sxm = "h100-sxm",
        /// NVIDIA H100 PCIe 80 GB.
        H100Pcie = "h100-pcie",
        /// NVIDIA H100 NVL 94 GB.
        H100Nvl = "h100-nvl",
        /// NVIDIA H200 SXM 141 GB (the driver names it "NVIDIA H200").
        H200Sxm = "h200-sxm",
        /// NVIDIA H200 NVL 141 GB.
        H200Nvl = "h200-nvl",
        /// NVIDIA GH200 Grace Hopper superchip, its H100 GPU with 96 GB HBM3.
        Gh200 = "gh200",
        /// NVIDIA B200 (HGX B200).
        B200 = "b200",
        /// NVIDIA GB200 Grace Blackwell superchip, per Blackwell GPU.
        Gb200 = "gb200",
        /// AMD Instinct MI300X.
        Mi300x = "mi300x",
        /// NVIDIA A100 SXM4 80 GB.
        A100 = "a100",
        /// NVIDIA A100 PCIe 80 GB.
        A100Pcie = "a100-pcie",
        /// NVIDIA L40S.
        L40s = "l40s",
        /// NVIDIA L4.
        L4 = "l4",
        /// NVIDIA GeForce RTX 4090.
        Rtx4090 = "rtx-4090",
    }
}

/// What the table says of one card.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct CardSpec {
    /// The card's id.
    pub id: Card,
    /// Its name, as a person writes it.
    pub name: &'static str,
    /// Words of the driver's device name that identify it (all must be present).
    #[serde(skip)]
    pub fragments: &'static [&'static str],
    /// Dense bf16 peak (fp32 accumulation, no sparsity), FLOP/s.
    pub peak_flops_per_second: f64,
    /// Memory bandwidth, bytes per second.
    pub memory_bytes_per_second: f64,
    /// Where both figures come from.
    pub source: &'static str,
}

const H100_SOURCE: &str = "NVIDIA H100 Tensor Core GPU Architecture whitepaper (2022), \
     table 3 (dense bf16); https://www.nvidia.com/en-us/data-center/h100/ (bandwidth)";

/// The table, most specific entry first (the order [`Card::of_device`] tries them in).
const CARDS: &[CardSpec] = &[
    CardSpec {
        id: Card::H100Pcie,
        name: "NVIDIA H100 PCIe",
        fragments: &["h100", "pcie"],
        peak_flops_per_second: 756.0e12,
        memory_bytes_per_second: 2.0e12,
        source: H100_SOURCE,
    },
    CardSpec {
        id: Card::H100Nvl,
        name: "NVIDIA H100 NVL",
        fragments: &["h100", "nvl"],
        peak_flops_per_second: 835.5e12,
        memory_bytes_per_second: 3.9e12,
        source: "https://www.nvidia.com/en-us/data-center/h100/ (H100 NVL: bf16 1,671 \
                 TFLOPS with sparsity, halved; 3.9 TB/s)",
    },
    CardSpec {
        id: Card::H100Sxm,
        name: "NVIDIA H100 SXM",
        fragments: &["h100"],
        peak_flops_per_second: 989.4e12,
        memory_bytes_per_second: 3.35e12,
        source: H100_SOURCE,
    },
    CardSpec {
        id: Card::H200Nvl,
        name: "NVIDIA H200 NVL",
        fragments: &["h200", "nvl"],
        peak_flops_per_second: 835.5e12,
        memory_bytes_per_second: 4.8e12,
        source: "https://www.nvidia.com/en-us/data-center/h200/ (H200 NVL: bf16 1,671 \
                 TFLOPS with sparsity, halved; 4.8 TB/s)",
    },
    CardSpec {
        id: Card::H200Sxm,
        name: "NVIDIA H200 SXM",
        fragments: &["h200"],
        peak_flops_per_second: 989.4e12,
        memory_bytes_per_second: 4.8e12,
        source: "https://www.nvidia.com/en-us/data-center/h200/ (H200 SXM: bf16 1,979 \
                 TFLOPS with sparsity, the H100 SXM's dense 989.4; 4.8 TB/s)",
    },
    CardSpec {
        id: Card::Gh200,
        name: "NVIDIA GH200",
        fragments: &["gh200"],
        peak_flops_per_second: 989.4e12,
        memory_bytes_per_second: 4.0e12,
        source: "https://www.nvidia.com/en-us/data-center/grace-hopper-superchip/ (bf16 \
                 1,979 TFLOPS with sparsity, halved; 96 GB HBM3 at 4 TB/s)",
    },
    CardSpec {
        id: Card::Gb200,
        name: "NVIDIA GB200 (per GPU)",
        fragments: &["gb200"],
        peak_flops_per_second: 2.5e15,
        memory_bytes_per_second: 8.0e12,
        source: "https://www.nvidia.com/en-us/data-center/gb200-nvl72/ (NVL72: bf16 360 \
                 PFLOPS with sparsity and 576 TB/s over 72 GPUs; halved, per GPU)",
    },
    CardSpec {
        id: Card::B200,
        name: "NVIDIA B200",
        fragments: &["b200"],
        peak_flops_per_second: 2.25e15,
        memory_bytes_per_second: 8.0e12,
        source: "https://www.nvidia.com/en-us/data-center/hgx/ (HGX B200: bf16 36 PFLOPS \
                 with sparsity and 64 TB/s over 8 GPUs; halved, per GPU)",
    },
    CardSpec {
        id: Card::Mi300x,
        name: "AMD Instinct MI300X",
        fragments: &["mi300x"],
        peak_flops_per_second: 1307.4e12,
        memory_bytes_per_second: 5.3e12,
        source: "https://www.amd.com/en/products/accelerators/instinct/mi300/mi300x.html \
                 (bf16 1,307.4 TFLOPS dense; 5.3 TB/s)",
    },
    CardSpec {
        id: Card::A100Pcie,
        name: "NVIDIA A100 PCIe 80GB",
        fragments: &["a100", "pcie"],
        peak_flops_per_second: 312.0e12,
        memory_bytes_per_second: 1.935e12,
        source: "https://www.nvidia.com/en-us/data-center/a100/ (bf16 312 TFLOPS dense; \
                 80GB PCIe 1,935 GB/s)",
    },
    CardSpec {
        id: Card::A100,
        name: "NVIDIA A100 SXM4 80GB",
        fragments: &["a100"],
        peak_flops_per_second: 312.0e12,
        memory_bytes_per_second: 2.039e12,
        source: "https://www.nvidia.com/en-us/data-center/a100/ (bf16 312 TFLOPS dense; \
                 80GB SXM 2,039 GB/s)",
    },
    CardSpec {
        id: Card::L40s,
        name: "NVIDIA L40S",
        fragments: &["l40s"],
        peak_flops_per_second: 362.05e12,
        memory_bytes_per_second: 864.0e9,
        source: "https://www.nvidia.com/en-us/data-center/l40s/ (bf16 733 TFLOPS with \
                 sparsity; dense 362.05 in the Ada Lovelace whitepaper; 864 GB/s)",
    },
    CardSpec {
        id: Card::L4,
        name: "NVIDIA L4",
        fragments: &["l4"],
        peak_flops_per_second: 121.0e12,
        memory_bytes_per_second: 300.0e9,
        source: "https://www.nvidia.com/en-us/data-center/l4/ (bf16 242 TFLOPS with \
                 sparsity, halved; 300 GB/s)",
    },
    CardSpec {
        id: Card::Rtx4090,
        name: "NVIDIA GeForce RTX 4090",
        fragments: &["4090"],
        peak_flops_per_second: 165.2e12,
        memory_bytes_per_second: 1008.0e9,
        source: "NVIDIA Ada Lovelace GPU Architecture whitepaper v2.1, appendix A (bf16 \
                 with fp32 accumulate 165.2 TFLOPS dense; 1,008 GB/s)",
    },
];

impl Card {
    /// The table's entry for this card.
    pub fn spec(self) -> &'static CardSpec {
        // Every id has exactly one entry (a test checks it), so the search cannot fail;
        // the first entry is a harmless value for the type checker.
        CARDS.iter().find(|c| c.id == self).unwrap_or(&CARDS[0])
    }

    /// Every entry of the table, most specific first.
    pub fn table() -> &'static [CardSpec] {
        CARDS
    }

    /// The card `text` names: an id of the table (`h200-sxm`), else the card a driver
    /// reporting `text` as its device name would be (`h200`, `"NVIDIA H200 NVL"`).
    pub fn named(text: &str) -> Option<Card> {
        text.parse::<Card>().ok().or_else(|| Card::of_device(text))
    }

    /// The card a driver reports as `device` (e.g. `"NVIDIA H200 NVL"`), if the table has
    /// it.
    pub fn of_device(device: &str) -> Option<Card> {
        let lower = device.to_lowercase();
        let words: Vec<&str> = lower
            .split(|c: char| !c.is_ascii_alphanumeric())
            .filter(|w| !w.is_empty())
            .collect();
        CARDS
            .iter()
            .find(|c| c.fragments.iter().all(|f| words.contains(f)))
            .map(|c| c.id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_card_has_one_entry() {
        for &card in Card::ALL {
            assert_eq!(CARDS.iter().filter(|c| c.id == card).count(), 1, "{card}");
            assert_eq!(card.spec().id, card);
        }
        assert_eq!(CARDS.len(), Card::ALL.len());
    }

    #[test]
    fn driver_names_find_their_card() {
        let cases = [
            ("NVIDIA H100 80GB HBM3", Some(Card::H100Sxm)),
            ("NVIDIA H100 PCIe", Some(Card::H100Pcie)),
            ("NVIDIA H100 NVL", Some(Card::H100Nvl)),
            ("NVIDIA H200", Some(Card::H200Sxm)),
            ("NVIDIA H200 NVL", Some(Card::H200Nvl)),
            ("NVIDIA GH200 480GB", Some(Card::Gh200)),
            ("NVIDIA B200", Some(Card::B200)),
            ("NVIDIA GB200", Some(Card::Gb200)),
            ("AMD Instinct MI300X", Some(Card::Mi300x)),
            ("NVIDIA A100-SXM4-80GB", Some(Card::A100)),
            ("NVIDIA A100 80GB PCIe", Some(Card::A100Pcie)),
            ("NVIDIA A100-PCIE-40GB", Some(Card::A100Pcie)),
            ("NVIDIA L40S", Some(Card::L40s)),
            ("NVIDIA L4", Some(Card::L4)),
            ("NVIDIA GeForce RTX 4090", Some(Card::Rtx4090)),
            ("NVIDIA L40", None),
            ("NVIDIA H20", None),
            ("CPU, 1 thread", None),
        ];
        for (name, card) in cases {
            assert_eq!(Card::of_device(name), card, "{name}");
        }
    }

    #[test]
    fn sxm_and_nvl_differ() {
        let (sxm, nvl) = (Card::H200Sxm.spec(), Card::H200Nvl.spec());
        assert!(sxm.peak_flops_per_second > nvl.peak_flops_per_second);
        assert_eq!(sxm.memory_bytes_per_second, nvl.memory_bytes_per_second);
        for c in CARDS {
            assert!(c.peak_flops_per_second.is_finite() && c.peak_flops_per_second > 0.0);
            assert!(c.memory_bytes_per_second > 0.0 && !c.source.is_empty());
        }
    }

    #[test]
    fn an_unknown_id_lists_the_known_ones() {
        let e = "h100".parse::<Card>().unwrap_err().to_string();
        assert!(
            e.contains("card") && e.contains("h100-sxm, h100-pcie"),
            "{e}"
        );
        assert_eq!("h200-nvl".parse::<Card>().unwrap(), Card::H200Nvl);
    }
}
