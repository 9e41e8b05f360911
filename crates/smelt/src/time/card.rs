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
//! * **Names**: one parser reads a card's name, for every command, a budget's
//!   `[objective.time]` and Python alike ([`Card::parse`], which `FromStr` and serde use):
//!   an id of the table (`h200-sxm`, case ignored), or a name a driver reports for the card
//!   (`nvidia-smi --query-gpu=name`, `cuDeviceGetName`, `torch.cuda.get_device_name`). A
//!   name is split into words (letters and digits, case ignored), and a card matches when
//!   every one of its fragments is one of those words; the table is ordered most specific
//!   first (`h100 pcie` before `h100`). So a card's fragments are its short name, accepted
//!   everywhere ([`CardSpec::alias`]: `h100` is the H100 SXM, `h200` the H200 SXM, as their
//!   drivers name them). Whole words keep `GH200` from reading as an H200 and an L40 from
//!   reading as an L4 (the L40 is not listed: it has no card).
//! * **Unknown cards** are errors that list the known ids and short names; a device name
//!   matching no entry has no card ([`Card::of_device`] is `None`). No card ever stands in
//!   for another, and none is suggested for a name that is not its own: a wrong peak turns
//!   an MFU into nonsense (an unknown card read as another's peak is how a 563% MFU gets
//!   logged).

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// Declares [`Card`] with its ids: the enum, [`Card::ALL`] and [`Card::as_str`].
macro_rules! cards {
    ($( $(#[$meta:meta])* $variant:ident = $id:literal ),+ $(,)?) => {
        /// A card in the table, by id; read from a name by [`Card::parse`].
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
        pub enum Card {
            $( $(#[$meta])* #[serde(rename = $id)] $variant ),+
        }

        impl Card {
            /// Every card, in documentation order.
            pub const ALL: &'static [Card] = &[$(Card::$variant),+];

            /// The card's id.
            pub fn as_str(self) -> &'static str {
                match self {
                    $(Card::$variant => $id),+
                }
            }
        }
    };
}

cards! {
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
    /// NVIDIA H800 SXM5 80 GB (the H100 SXM's compute and memory, NVLink cut to 400 GB/s).
    H800 = "h800",
    /// NVIDIA B200 (HGX B200).
    B200 = "b200",
    /// NVIDIA B300 (Blackwell Ultra, HGX B300).
    B300 = "b300",
    /// NVIDIA GB200 Grace Blackwell superchip, per Blackwell GPU.
    Gb200 = "gb200",
    /// NVIDIA GB300 Grace Blackwell Ultra superchip, per Blackwell Ultra GPU.
    Gb300 = "gb300",
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

/// What the table says of one card.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct CardSpec {
    /// The card's id.
    pub id: Card,
    /// Its name, as a person writes it.
    pub name: &'static str,
    /// Words of a name that identify it (all must be present); joined by spaces, its short
    /// name ([`CardSpec::alias`]).
    pub fragments: &'static [&'static str],
    /// Dense bf16 peak (fp32 accumulation, no sparsity), FLOP/s.
    pub peak_flops_per_second: f64,
    /// Memory bandwidth, bytes per second.
    pub memory_bytes_per_second: f64,
    /// Dense fp8 peak (no sparsity), FLOP/s, where the card has fp8 tensor cores and the
    /// table has its figure.
    pub fp8_peak_flops_per_second: Option<f64>,
    /// Memory (HBM) per GPU, bytes, where the table has it.
    pub memory_capacity_bytes: Option<f64>,
    /// Where the figures come from.
    pub source: &'static str,
}

const H100_SOURCE: &str = "NVIDIA H100 Tensor Core GPU Architecture whitepaper (2022), \
     table 3 (dense bf16 and fp8); https://www.nvidia.com/en-us/data-center/h100/ (bandwidth, \
     memory: SXM 80 GB, PCIe 80 GB)";

/// The table, most specific entry first (the order [`Card::of_device`] tries them in).
const CARDS: &[CardSpec] = &[
    CardSpec {
        id: Card::H100Pcie,
        name: "NVIDIA H100 PCIe",
        fragments: &["h100", "pcie"],
        peak_flops_per_second: 756.0e12,
        memory_bytes_per_second: 2.0e12,
        fp8_peak_flops_per_second: Some(1.5130e15),
        memory_capacity_bytes: Some(80.0e9),
        source: H100_SOURCE,
    },
    CardSpec {
        id: Card::H100Nvl,
        name: "NVIDIA H100 NVL",
        fragments: &["h100", "nvl"],
        peak_flops_per_second: 835.5e12,
        memory_bytes_per_second: 3.9e12,
        fp8_peak_flops_per_second: Some(1.6705e15),
        memory_capacity_bytes: Some(94.0e9),
        source: "https://www.nvidia.com/en-us/data-center/h100/ (H100 NVL: bf16 1,671 and \
                 fp8 3,341 TFLOPS with sparsity, halved; 94 GB at 3.9 TB/s)",
    },
    CardSpec {
        id: Card::H100Sxm,
        name: "NVIDIA H100 SXM",
        fragments: &["h100"],
        peak_flops_per_second: 989.4e12,
        memory_bytes_per_second: 3.35e12,
        fp8_peak_flops_per_second: Some(1.9789e15),
        memory_capacity_bytes: Some(80.0e9),
        source: H100_SOURCE,
    },
    CardSpec {
        id: Card::H800,
        name: "NVIDIA H800 SXM",
        fragments: &["h800"],
        peak_flops_per_second: 989.4e12,
        memory_bytes_per_second: 3.35e12,
        fp8_peak_flops_per_second: Some(1.9789e15),
        memory_capacity_bytes: Some(80.0e9),
        source: "the H100 SXM's GH100 die, compute and 80 GB HBM3 (NVIDIA H100 Tensor Core \
                 GPU Architecture whitepaper, table 3), NVLink cut to 400 GB/s; DeepSeek-V3 \
                 technical report, arXiv:2412.19437, section 3.2.2 (H800 nodes)",
    },
    CardSpec {
        id: Card::H200Nvl,
        name: "NVIDIA H200 NVL",
        fragments: &["h200", "nvl"],
        peak_flops_per_second: 835.5e12,
        memory_bytes_per_second: 4.8e12,
        fp8_peak_flops_per_second: Some(1.6705e15),
        memory_capacity_bytes: Some(141.0e9),
        source: "https://www.nvidia.com/en-us/data-center/h200/ (H200 NVL: bf16 1,671 and \
                 fp8 3,341 TFLOPS with sparsity, halved; 141 GB at 4.8 TB/s)",
    },
    CardSpec {
        id: Card::H200Sxm,
        name: "NVIDIA H200 SXM",
        fragments: &["h200"],
        peak_flops_per_second: 989.4e12,
        memory_bytes_per_second: 4.8e12,
        fp8_peak_flops_per_second: Some(1.9789e15),
        memory_capacity_bytes: Some(141.0e9),
        source: "https://www.nvidia.com/en-us/data-center/h200/ (H200 SXM: bf16 1,979 and \
                 fp8 3,958 TFLOPS with sparsity, the H100 SXM's dense 989.4 and 1,978.9; \
                 141 GB at 4.8 TB/s)",
    },
    CardSpec {
        id: Card::Gh200,
        name: "NVIDIA GH200",
        fragments: &["gh200"],
        peak_flops_per_second: 989.4e12,
        memory_bytes_per_second: 4.0e12,
        fp8_peak_flops_per_second: Some(1.9789e15),
        memory_capacity_bytes: Some(96.0e9),
        source: "https://www.nvidia.com/en-us/data-center/grace-hopper-superchip/ (bf16 \
                 1,979 and fp8 3,958 TFLOPS with sparsity, halved; 96 GB HBM3 at 4 TB/s)",
    },
    CardSpec {
        id: Card::Gb300,
        name: "NVIDIA GB300 (per GPU)",
        fragments: &["gb300"],
        peak_flops_per_second: 2.5e15,
        memory_bytes_per_second: 8.0e12,
        fp8_peak_flops_per_second: Some(5.0e15),
        memory_capacity_bytes: Some(288.0e9),
        source: "https://www.nvidia.com/en-us/data-center/gb300-nvl72/ (NVL72: bf16 360 and \
                 fp8 720 PFLOPS with sparsity, 576 TB/s over 72 GPUs, halved, per GPU; 288 \
                 GB HBM3e per Blackwell Ultra GPU)",
    },
    CardSpec {
        id: Card::B300,
        name: "NVIDIA B300",
        fragments: &["b300"],
        peak_flops_per_second: 2.25e15,
        memory_bytes_per_second: 8.0e12,
        fp8_peak_flops_per_second: Some(4.5e15),
        memory_capacity_bytes: Some(288.0e9),
        source: "https://www.nvidia.com/en-us/data-center/hgx/ (HGX B300: bf16 36 and fp8 \
                 72 PFLOPS with sparsity, 64 TB/s over 8 GPUs; halved, per GPU); \
                 https://www.nvidia.com/en-us/data-center/dgx-b300/ (2.3 TB over 8 GPUs)",
    },
    CardSpec {
        id: Card::Gb200,
        name: "NVIDIA GB200 (per GPU)",
        fragments: &["gb200"],
        peak_flops_per_second: 2.5e15,
        memory_bytes_per_second: 8.0e12,
        fp8_peak_flops_per_second: Some(5.0000e15),
        memory_capacity_bytes: Some(186.0e9),
        source: "https://www.nvidia.com/en-us/data-center/gb200-nvl72/ (NVL72: bf16 360 \
                 and fp8 720 PFLOPS with sparsity, 13.4 TB HBM3e and 576 TB/s over 72 GPUs; \
                 halved, per GPU)",
    },
    CardSpec {
        id: Card::B200,
        name: "NVIDIA B200",
        fragments: &["b200"],
        peak_flops_per_second: 2.25e15,
        memory_bytes_per_second: 8.0e12,
        fp8_peak_flops_per_second: Some(4.5000e15),
        memory_capacity_bytes: Some(180.0e9),
        source: "https://www.nvidia.com/en-us/data-center/hgx/ (HGX B200: bf16 36 and fp8 \
                 72 PFLOPS with sparsity, 1.4 TB and 64 TB/s over 8 GPUs; halved, per GPU)",
    },
    CardSpec {
        id: Card::Mi300x,
        name: "AMD Instinct MI300X",
        fragments: &["mi300x"],
        peak_flops_per_second: 1307.4e12,
        memory_bytes_per_second: 5.3e12,
        fp8_peak_flops_per_second: Some(2.6149e15),
        memory_capacity_bytes: Some(192.0e9),
        source: "https://www.amd.com/en/products/accelerators/instinct/mi300/mi300x.html \
                 (bf16 1,307.4 and fp8 2,614.9 TFLOPS dense; 192 GB at 5.3 TB/s)",
    },
    CardSpec {
        id: Card::A100Pcie,
        name: "NVIDIA A100 PCIe 80GB",
        fragments: &["a100", "pcie"],
        peak_flops_per_second: 312.0e12,
        memory_bytes_per_second: 1.935e12,
        fp8_peak_flops_per_second: None,
        memory_capacity_bytes: Some(80.0e9),
        source: "https://www.nvidia.com/en-us/data-center/a100/ (bf16 312 TFLOPS dense, no \
                 fp8; 80GB PCIe 1,935 GB/s)",
    },
    CardSpec {
        id: Card::A100,
        name: "NVIDIA A100 SXM4 80GB",
        fragments: &["a100"],
        peak_flops_per_second: 312.0e12,
        memory_bytes_per_second: 2.039e12,
        fp8_peak_flops_per_second: None,
        memory_capacity_bytes: Some(80.0e9),
        source: "https://www.nvidia.com/en-us/data-center/a100/ (bf16 312 TFLOPS dense, no \
                 fp8; 80GB SXM 2,039 GB/s)",
    },
    CardSpec {
        id: Card::L40s,
        name: "NVIDIA L40S",
        fragments: &["l40s"],
        peak_flops_per_second: 362.05e12,
        memory_bytes_per_second: 864.0e9,
        fp8_peak_flops_per_second: Some(7.3300e14),
        memory_capacity_bytes: Some(48.0e9),
        source: "https://www.nvidia.com/en-us/data-center/l40s/ (bf16 733 and fp8 1,466 \
                 TFLOPS with sparsity; dense 362.05 and 733 in the Ada Lovelace whitepaper; \
                 48 GB at 864 GB/s)",
    },
    CardSpec {
        id: Card::L4,
        name: "NVIDIA L4",
        fragments: &["l4"],
        peak_flops_per_second: 121.0e12,
        memory_bytes_per_second: 300.0e9,
        fp8_peak_flops_per_second: Some(2.4250e14),
        memory_capacity_bytes: Some(24.0e9),
        source: "https://www.nvidia.com/en-us/data-center/l4/ (bf16 242 and fp8 485 \
                 TFLOPS with sparsity, halved; 24 GB at 300 GB/s)",
    },
    CardSpec {
        id: Card::Rtx4090,
        name: "NVIDIA GeForce RTX 4090",
        fragments: &["4090"],
        peak_flops_per_second: 165.2e12,
        memory_bytes_per_second: 1008.0e9,
        fp8_peak_flops_per_second: Some(3.3030e14),
        memory_capacity_bytes: Some(24.0e9),
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

    /// The card `text` names (module docs): an id of the table (`h200-sxm`), else the card a
    /// driver reporting `text` as its device name would be (`h200`, `"NVIDIA H200 NVL"`).
    /// Any other name is an error, field `card`, listing the ids and short names.
    pub fn parse(text: &str) -> Result<Card> {
        let trimmed = text.trim();
        Card::ALL
            .iter()
            .copied()
            .find(|c| c.as_str().eq_ignore_ascii_case(trimmed))
            .or_else(|| Card::of_device(trimmed))
            .ok_or_else(|| Error::invalid("card", unknown(text)))
    }

    /// The card a driver reports as `device` (e.g. `"NVIDIA H200 NVL"`), if the table has
    /// it.
    pub fn of_device(device: &str) -> Option<Card> {
        let words = words(device);
        CARDS
            .iter()
            .find(|c| c.fragments.iter().all(|f| words.iter().any(|w| w == f)))
            .map(|c| c.id)
    }
}

/// The table of cards as the guide shows it (docs/guide.md, "Predicted step time"), in
/// Markdown: a row per card in [`Card::ALL`]'s order, its id, name, short name (where its
/// words are not the id's), dense bf16 peak in TFLOP/s and bandwidth in TB/s. A test checks
/// that the guide shows exactly this between its `cards` markers.
pub fn cards_markdown() -> String {
    let figure = |x: f64| {
        let text = format!("{x:.3}");
        text.trim_end_matches('0').trim_end_matches('.').to_owned()
    };
    let mut out = String::from(
        "| card | name | short name | dense bf16, TFLOP/s | memory, TB/s |\n|---|---|---|---:|---:|\n",
    );
    for &card in Card::ALL {
        let spec = card.spec();
        let alias = spec.alias();
        let short = match words(&alias) == words(card.as_str()) {
            true => String::new(),
            false => format!("`{alias}`"),
        };
        out.push_str(&format!(
            "| `{card}` | {} | {short} | {} | {} |\n",
            spec.name,
            figure(spec.peak_flops_per_second / 1e12),
            figure(spec.memory_bytes_per_second / 1e12)
        ));
    }
    out
}

impl CardSpec {
    /// Its short name: its fragments joined by spaces (`h100` for the H100 SXM, `h200 nvl`
    /// for the H200 NVL), which [`Card::parse`] reads as this card.
    pub fn alias(&self) -> String {
        self.fragments.join(" ")
    }
}

/// The words of a name, lowercase (module docs).
fn words(name: &str) -> Vec<String> {
    name.to_lowercase()
        .split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_owned)
        .collect()
}

/// The rule an unknown card name breaks: the ids, and the short names that are not an id's
/// own words.
fn unknown(text: &str) -> String {
    let ids: Vec<&str> = Card::ALL.iter().map(|c| c.as_str()).collect();
    let short: Vec<String> = CARDS
        .iter()
        .filter(|c| words(&c.alias()) != words(c.id.as_str()))
        .map(|c| format!("{} is {}", c.alias(), c.id))
        .collect();
    format!(
        "'{}' is no card of the table: give an id ({}) or a name its driver reports (a \
         short name: {}); for another card, give its peak",
        text.escape_debug(),
        ids.join(", "),
        short.join(", ")
    )
}

impl std::str::FromStr for Card {
    type Err = Error;

    /// [`Card::parse`].
    fn from_str(text: &str) -> Result<Card> {
        Card::parse(text)
    }
}

impl std::fmt::Display for Card {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for Card {
    /// A card's name, read by [`Card::parse`].
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Card, D::Error> {
        let text = String::deserialize(d)?;
        Card::parse(&text).map_err(serde::de::Error::custom)
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
            ("NVIDIA B300 SXM6 AC", Some(Card::B300)),
            ("NVIDIA GB300", Some(Card::Gb300)),
            ("NVIDIA H800", Some(Card::H800)),
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
            if let Some(f8) = c.fp8_peak_flops_per_second {
                assert!(f8 >= c.peak_flops_per_second, "{}", c.name);
            }
            assert!(
                c.memory_capacity_bytes.is_some_and(|m| m >= 16e9),
                "{}",
                c.name
            );
        }
    }

    #[test]
    fn ids_short_names_and_driver_names_parse_alike() {
        for spec in CARDS {
            let id = spec.id.as_str();
            for name in [
                id.to_owned(),
                id.to_uppercase(),
                spec.alias(),
                spec.alias().to_uppercase(),
                spec.name.to_owned(),
                format!(" {id} "),
            ] {
                assert_eq!(Card::parse(&name).ok(), Some(spec.id), "{name}");
                assert_eq!(name.parse::<Card>().ok(), Some(spec.id), "{name}");
                let json = serde_json::to_string(&name).unwrap();
                assert_eq!(serde_json::from_str::<Card>(&json).ok(), Some(spec.id));
            }
            assert_eq!(
                serde_json::to_string(&spec.id).unwrap(),
                format!("\"{id}\"")
            );
        }
        assert_eq!(Card::parse("h100").unwrap(), Card::H100Sxm);
        assert_eq!(Card::parse("h200").unwrap(), Card::H200Sxm);
    }

    #[test]
    fn an_unknown_name_lists_the_known_ones_and_suggests_none() {
        for bad in [
            "h20",
            "l40",
            "a10",
            "",
            "gh100",
            "h100x",
            "nvidia",
            "h\u{1b}[0m",
        ] {
            let e = Card::parse(bad).unwrap_err();
            let text = e.to_string();
            assert!(text.starts_with("card: '"), "{text}");
            for card in Card::ALL {
                assert!(text.contains(card.as_str()), "{text}");
            }
            assert!(text.contains("h100 is h100-sxm") && text.contains("4090 is rtx-4090"));
            assert!(!text.contains('\u{1b}'), "{text}");
            let json = serde_json::to_string(bad).unwrap();
            assert!(serde_json::from_str::<Card>(&json).is_err());
        }
    }
}
