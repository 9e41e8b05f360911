//! Systems: the nodes (or racks) a card is trained in, as the training-step model sees them:
//! how many GPUs share one NVLink domain, the NVLink bandwidth of each GPU inside it, and the
//! network bandwidth of each GPU to GPUs outside it, with the public source of every figure.
//!
//! # Conventions
//!
//! * **NVLink**: the datasheet's figure per GPU, both directions together (NVIDIA quotes
//!   "900 GB/s" for a Hopper GPU's NVLink 4: 450 GB/s each way). A collective moving bytes
//!   one way runs at half of it ([`SystemSpec::nvlink_bytes_per_second_each_way`]).
//! * **Network**: the scale-out NIC per GPU, one direction, in bytes per second (a
//!   400 Gb/s ConnectX-7 is 50 GB/s). A ring collective (all-gather, reduce-scatter,
//!   all-reduce) over a group with `g` GPUs in each NVLink domain runs NCCL's rings one per
//!   NIC, so the group gets `g` NICs per domain ([`SystemSpec::ring_bytes_per_second`]); an
//!   all-to-all or a point-to-point transfer gets one NIC port per GPU
//!   ([`SystemSpec::network_port_bytes_per_second`]): "Alltoall cannot aggregate the
//!   bandwidth of multiple NICs" (NCCL's maintainer, <https://github.com/NVIDIA/nccl-tests/issues/267>).
//!   A ConnectX-8 carries its 800 Gb/s as two 400 Gb/s ports ("800GbE link speed is not
//!   supported on a single port"; planarized topology: ConnectX-8 SuperNIC firmware release
//!   notes, <https://docs.nvidia.com/networking/display/connectx8firmwarev40441036/changes+and+new+feature+history>),
//!   so a B300 or GB300 GPU's all-to-all runs at one port's 50 GB/s. The published B300 rows
//!   agree: with EP 64 across eight nodes a DGX B300 loses as much time to the all-to-all as
//!   a DGX B200 with 400 Gb/s NICs (`smelt validate-time`, R157 and R158).
//! * **Names**: a system is named by its id (`dgx-h100`, case ignored) or by its card's name:
//!   [`System::of_card`] is the system the card is sold in (an H100 SXM in a DGX H100, a
//!   GB200 in a GB200 NVL72).

use serde::Serialize;

use super::card::Card;
use crate::error::{Error, Result};

/// A system in the table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum System {
    /// NVIDIA DGX H100: eight H100 SXM on NVLink 4 with NVSwitch.
    DgxH100,
    /// NVIDIA DGX H200: eight H200 SXM on NVLink 4 with NVSwitch.
    DgxH200,
    /// An eight-GPU H800 node (NVLink cut to 400 GB/s).
    HgxH800,
    /// NVIDIA DGX B200: eight B200 on NVLink 5.
    DgxB200,
    /// NVIDIA DGX B300: eight B300 on NVLink 5.
    DgxB300,
    /// NVIDIA GB200 NVL72: 72 Blackwell GPUs in one NVLink domain.
    Gb200Nvl72,
    /// NVIDIA GB300 NVL72: 72 Blackwell Ultra GPUs in one NVLink domain.
    Gb300Nvl72,
    /// NVIDIA DGX A100: eight A100 SXM4 80 GB on NVLink 3.
    DgxA100,
}

/// What the table says of one system.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct SystemSpec {
    /// The system's id.
    pub id: System,
    /// Its name, as a person writes it.
    pub name: &'static str,
    /// Its card.
    pub card: Card,
    /// GPUs in one NVLink domain.
    pub gpus_per_nvlink_domain: u64,
    /// NVLink bandwidth per GPU, both directions together, bytes per second.
    pub nvlink_bytes_per_second: f64,
    /// Scale-out network bandwidth per GPU, one direction, bytes per second.
    pub network_bytes_per_second: f64,
    /// The share of it one NIC port carries, bytes per second: what an all-to-all or a
    /// point-to-point transfer gets (module docs).
    pub network_port_bytes_per_second: f64,
    /// Where the figures come from.
    pub source: &'static str,
}

const SYSTEMS: &[SystemSpec] = &[
    SystemSpec {
        id: System::DgxH100,
        name: "NVIDIA DGX H100",
        card: Card::H100Sxm,
        gpus_per_nvlink_domain: 8,
        nvlink_bytes_per_second: 900e9,
        network_bytes_per_second: 50e9,
        network_port_bytes_per_second: 50e9,
        source: "https://docs.nvidia.com/dgx/dgxh100-user-guide/introduction-to-dgxh100.html \
                 (8 H100 SXM, 900 GB/s NVLink per GPU, 8 single-port ConnectX-7 400 Gb/s \
                 for the compute fabric)",
    },
    SystemSpec {
        id: System::DgxH200,
        name: "NVIDIA DGX H200",
        card: Card::H200Sxm,
        gpus_per_nvlink_domain: 8,
        nvlink_bytes_per_second: 900e9,
        network_bytes_per_second: 50e9,
        network_port_bytes_per_second: 50e9,
        source: "https://www.nvidia.com/en-us/data-center/dgx-h200/ (8 H200 SXM, 900 GB/s \
                 NVLink per GPU, 8 ConnectX-7 400 Gb/s)",
    },
    SystemSpec {
        id: System::HgxH800,
        name: "H800 node (8 GPUs)",
        card: Card::H800,
        gpus_per_nvlink_domain: 8,
        nvlink_bytes_per_second: 400e9,
        network_bytes_per_second: 50e9,
        network_port_bytes_per_second: 50e9,
        source: "DeepSeek-V3 technical report, arXiv:2412.19437, section 3.2.2 (8 H800 per \
                 node on NVLink and NVSwitch, 400 Gb/s InfiniBand per GPU, about 50 GB/s)",
    },
    SystemSpec {
        id: System::DgxB200,
        name: "NVIDIA DGX B200",
        card: Card::B200,
        gpus_per_nvlink_domain: 8,
        nvlink_bytes_per_second: 1.8e12,
        network_bytes_per_second: 50e9,
        network_port_bytes_per_second: 50e9,
        source: "https://www.nvidia.com/en-us/data-center/dgx-b200/ (8 B200, 14.4 TB/s \
                 NVLink in all, 8 single-port ConnectX-7 400 Gb/s)",
    },
    SystemSpec {
        id: System::DgxB300,
        name: "NVIDIA DGX B300",
        card: Card::B300,
        gpus_per_nvlink_domain: 8,
        nvlink_bytes_per_second: 1.8e12,
        network_bytes_per_second: 100e9,
        network_port_bytes_per_second: 50e9,
        source: "https://www.nvidia.com/en-us/data-center/dgx-b300/ (8 B300, 14.4 TB/s \
                 NVLink in all, 8 ConnectX-8 up to 800 Gb/s, two 400 Gb/s ports each)",
    },
    SystemSpec {
        id: System::Gb200Nvl72,
        name: "NVIDIA GB200 NVL72",
        card: Card::Gb200,
        gpus_per_nvlink_domain: 72,
        nvlink_bytes_per_second: 1.8e12,
        network_bytes_per_second: 50e9,
        network_port_bytes_per_second: 50e9,
        source: "https://www.nvidia.com/en-us/data-center/gb200-nvl72/ (72 GPUs in one \
                 NVLink domain, 130 TB/s in all; ConnectX-7 400 Gb/s per GPU)",
    },
    SystemSpec {
        id: System::Gb300Nvl72,
        name: "NVIDIA GB300 NVL72",
        card: Card::Gb300,
        gpus_per_nvlink_domain: 72,
        nvlink_bytes_per_second: 1.8e12,
        network_bytes_per_second: 100e9,
        network_port_bytes_per_second: 50e9,
        source: "https://www.nvidia.com/en-us/data-center/gb300-nvl72/ (72 GPUs in one \
                 NVLink domain, 130 TB/s in all; ConnectX-8 800 Gb/s per GPU, two 400 Gb/s \
                 ports)",
    },
    SystemSpec {
        id: System::DgxA100,
        name: "NVIDIA DGX A100",
        card: Card::A100,
        gpus_per_nvlink_domain: 8,
        nvlink_bytes_per_second: 600e9,
        network_bytes_per_second: 25e9,
        network_port_bytes_per_second: 25e9,
        source: "https://www.nvidia.com/en-us/data-center/dgx-a100/ (8 A100 80 GB, 600 GB/s \
                 NVLink per GPU, 8 single-port ConnectX-6 200 Gb/s)",
    },
];

impl System {
    /// Every system, in the table's order.
    pub fn table() -> &'static [SystemSpec] {
        SYSTEMS
    }

    /// The table's entry for this system.
    pub fn spec(self) -> &'static SystemSpec {
        // One entry per id (a test checks it); the first entry satisfies the type checker.
        SYSTEMS.iter().find(|s| s.id == self).unwrap_or(&SYSTEMS[0])
    }

    /// The system's id.
    pub fn as_str(self) -> &'static str {
        match self {
            System::DgxH100 => "dgx-h100",
            System::DgxH200 => "dgx-h200",
            System::HgxH800 => "hgx-h800",
            System::DgxB200 => "dgx-b200",
            System::DgxB300 => "dgx-b300",
            System::Gb200Nvl72 => "gb200-nvl72",
            System::Gb300Nvl72 => "gb300-nvl72",
            System::DgxA100 => "dgx-a100",
        }
    }

    /// The system `card` is trained in (module docs), if the table has one.
    pub fn of_card(card: Card) -> Option<System> {
        SYSTEMS.iter().find(|s| s.card == card).map(|s| s.id)
    }

    /// The system `text` names: an id (case ignored), else a card's name (the system of
    /// that card). Anything else is an error, field `system`, listing the ids.
    pub fn parse(text: &str) -> Result<System> {
        let t = text.trim();
        if let Some(s) = SYSTEMS
            .iter()
            .find(|s| s.id.as_str().eq_ignore_ascii_case(t))
        {
            return Ok(s.id);
        }
        let ids: Vec<&str> = SYSTEMS.iter().map(|s| s.id.as_str()).collect();
        let none = || {
            Error::invalid(
                "system",
                format!(
                    "'{}' is no system of the table: give one of {}, or a card one of them \
                     holds",
                    t.escape_debug(),
                    ids.join(", ")
                ),
            )
        };
        let card = Card::parse(t).map_err(|_| none())?;
        System::of_card(card).ok_or_else(none)
    }
}

impl SystemSpec {
    /// NVLink bandwidth per GPU, one direction, bytes per second.
    pub fn nvlink_bytes_per_second_each_way(&self) -> f64 {
        self.nvlink_bytes_per_second / 2.0
    }

    /// The bandwidth, one direction, of a collective over `group` GPUs placed `stride` GPUs
    /// apart (ranks of one group `stride` apart in the launch order): NVLink when the group
    /// fits one NVLink domain, else the network (each GPU's share of the slowest link).
    pub fn group_bytes_per_second(&self, group: u64, stride: u64) -> f64 {
        let span = group.saturating_mul(stride.max(1));
        if span <= self.gpus_per_nvlink_domain {
            self.nvlink_bytes_per_second_each_way()
        } else {
            self.network_bytes_per_second
        }
    }

    /// Whether a group of `group` GPUs `stride` apart fits one NVLink domain.
    pub fn fits_domain(&self, group: u64, stride: u64) -> bool {
        group.saturating_mul(stride.max(1)) <= self.gpus_per_nvlink_domain
    }

    /// The bus bandwidth per GPU, one direction, of a ring collective (all-gather,
    /// reduce-scatter) over `group` GPUs `stride` apart: NVLink inside one domain; across
    /// domains, one ring per NIC of the group's `g = domain / stride` GPUs in each domain
    /// (at most `group`), so `g` NICs' bandwidth, at most NVLink's (module docs).
    pub fn ring_bytes_per_second(&self, group: u64, stride: u64) -> f64 {
        let nvlink = self.nvlink_bytes_per_second_each_way();
        if self.fits_domain(group, stride) {
            return nvlink;
        }
        let per_domain = (self.gpus_per_nvlink_domain / stride.max(1)).clamp(1, group.max(1));
        (per_domain as f64 * self.network_bytes_per_second).min(nvlink)
    }
}

impl std::fmt::Display for System {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_system_has_one_entry_and_a_source() {
        for s in SYSTEMS {
            assert_eq!(SYSTEMS.iter().filter(|o| o.id == s.id).count(), 1);
            assert_eq!(s.id.spec().id, s.id);
            assert!(s.nvlink_bytes_per_second > 2.0 * s.network_bytes_per_second);
            assert!(s.network_port_bytes_per_second <= s.network_bytes_per_second);
            assert!(s.network_port_bytes_per_second > 0.0);
            assert!(s.gpus_per_nvlink_domain >= 8);
            assert!(s.source.contains("https://") || s.source.contains("arXiv"));
            assert_eq!(System::parse(s.id.as_str()).unwrap(), s.id);
            assert_eq!(System::parse(&s.id.as_str().to_uppercase()).unwrap(), s.id);
            assert_eq!(System::of_card(s.card), Some(s.id));
        }
    }

    #[test]
    fn cards_name_their_systems_and_strangers_are_refused() {
        assert_eq!(System::parse("h100").unwrap(), System::DgxH100);
        assert_eq!(System::parse("NVIDIA GB200").unwrap(), System::Gb200Nvl72);
        assert_eq!(System::parse("b300").unwrap(), System::DgxB300);
        for bad in ["", "dgx", "l4", "mi300x", "h20"] {
            let e = System::parse(bad).unwrap_err().to_string();
            assert!(e.starts_with("system: ") && e.contains("dgx-h100"), "{e}");
        }
    }

    #[test]
    fn a_group_inside_the_domain_runs_on_nvlink() {
        let h = System::DgxH100.spec();
        assert_eq!(h.group_bytes_per_second(8, 1), 450e9);
        assert_eq!(h.group_bytes_per_second(8, 2), 50e9);
        assert_eq!(
            System::Gb200Nvl72.spec().group_bytes_per_second(64, 1),
            900e9
        );
    }

    #[test]
    fn rings_across_nodes_use_one_nic_per_member_and_all_to_all_one_port() {
        let h = System::DgxH100.spec();
        // Eight GPUs of the group in each node: eight rings, eight NICs.
        assert_eq!(h.ring_bytes_per_second(64, 1), 400e9);
        // Four per node (ranks two apart): four NICs.
        assert_eq!(h.ring_bytes_per_second(128, 2), 200e9);
        // One per node: one NIC.
        assert_eq!(h.ring_bytes_per_second(32, 8), 50e9);
        assert_eq!(h.ring_bytes_per_second(8, 1), 450e9);
        let b300 = System::DgxB300.spec();
        assert_eq!(b300.network_port_bytes_per_second, 50e9);
        assert_eq!(b300.network_bytes_per_second, 100e9);
        assert_eq!(
            System::DgxB200.spec().network_port_bytes_per_second,
            System::DgxB200.spec().network_bytes_per_second
        );
    }
}
