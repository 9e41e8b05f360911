//! Endpoints: the final losses of trained runs, read from CSV.
//!
//! Columns (header names, any order, extra columns ignored): `F` (training FLOPs per token,
//! or parameters `N` for the Chinchilla form), `S` (compute-equivalent sparsity in
//! `[0, 1)`), `D` (training tokens), `loss` (nats), optionally `cell` (the grid cell an
//! endpoint belongs to, which the bootstrap resamples) and a grouping column named with
//! `--group` (one fit per distinct value, e.g. the architecture).

use std::collections::BTreeMap;
use std::path::Path;

use serde::Serialize;

use crate::error::{Error, Result};

/// One trained run's endpoint.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Endpoint {
    /// Training FLOPs per token (or parameters, for the Chinchilla form).
    pub f: f64,
    /// Compute-equivalent sparsity.
    pub s: f64,
    /// Training tokens.
    pub d: f64,
    /// Final loss in nats.
    pub loss: f64,
    /// The grid cell it belongs to (each endpoint is its own cell if absent).
    pub cell: String,
}

/// Endpoints grouped by the `--group` column (one group `""` without it), in sorted order.
pub type Groups = BTreeMap<String, Vec<Endpoint>>;

fn csv_error(path: &str, e: impl std::fmt::Display) -> Error {
    Error::parse(format!("{path}: {e}"))
}

/// Reads endpoints from CSV text; `source` names it in errors.
pub fn parse(text: &str, source: &str, group: Option<&str>) -> Result<Groups> {
    let mut reader = csv::ReaderBuilder::new()
        .trim(csv::Trim::All)
        .from_reader(text.as_bytes());
    let headers = reader.headers().map_err(|e| csv_error(source, e))?.clone();
    let columns = Columns::of(&headers, source, group)?;
    let mut groups = Groups::new();
    for (i, record) in reader.records().enumerate() {
        let row = i + 2; // 1-based, after the header
        let record = record.map_err(|e| csv_error(source, e))?;
        let (key, endpoint) = columns.endpoint(&record, row, source)?;
        groups.entry(key).or_default().push(endpoint);
    }
    if groups.is_empty() {
        return Err(Error::invalid(source, "has no data rows"));
    }
    Ok(groups)
}

/// Where the columns [`parse`] reads are.
struct Columns {
    f: usize,
    s: usize,
    d: usize,
    loss: usize,
    cell: Option<usize>,
    group: Option<usize>,
}

impl Columns {
    /// The columns of `headers`: an error if one is named twice, a required one is missing,
    /// or the `group` column is not there.
    fn of(headers: &csv::StringRecord, source: &str, group: Option<&str>) -> Result<Self> {
        let col = |name: &str| headers.iter().position(|h| h == name);
        for name in ["F", "S", "D", "loss", "cell"].into_iter().chain(group) {
            let at: Vec<usize> = (0..headers.len())
                .filter(|&i| &headers[i] == name)
                .collect();
            if at.len() > 1 {
                return Err(Error::invalid(
                    format!("{source}: header"),
                    format!(
                        "column '{name}' appears {} times (columns {}); name each column once",
                        at.len(),
                        at.iter()
                            .map(|i| (i + 1).to_string())
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                ));
            }
        }
        let mut missing = Vec::new();
        let mut need = |name: &'static str| {
            let c = col(name);
            if c.is_none() {
                missing.push(name);
            }
            c.unwrap_or(0)
        };
        let (f, s, d, loss) = (need("F"), need("S"), need("D"), need("loss"));
        if !missing.is_empty() {
            return Err(Error::invalid(
                format!("{source}: header"),
                format!(
                    "missing column(s) {}; the header needs F, S, D and loss (found: {})",
                    missing.join(", "),
                    headers.iter().collect::<Vec<_>>().join(", ")
                ),
            ));
        }
        let group = match group {
            None => None,
            Some(g) => Some(col(g).ok_or_else(|| {
                Error::invalid(
                    format!("{source}: header"),
                    format!("no column named '{g}' to group by"),
                )
            })?),
        };
        Ok(Self {
            f,
            s,
            d,
            loss,
            cell: col("cell"),
            group,
        })
    }

    /// Data row `row` (1-based, the header being row 1): its group and its endpoint, or an
    /// error naming the row and column of a value that is not a number or out of range.
    fn endpoint(
        &self,
        record: &csv::StringRecord,
        row: usize,
        source: &str,
    ) -> Result<(String, Endpoint)> {
        let num = |c: usize, name: &str| -> Result<f64> {
            let raw = record.get(c).unwrap_or("");
            raw.parse::<f64>().map_err(|_| {
                Error::invalid(
                    format!("{source}: row {row}, column {name}"),
                    format!("'{raw}' is not a number"),
                )
            })
        };
        let (f, s, d, loss) = (
            num(self.f, "F")?,
            num(self.s, "S")?,
            num(self.d, "D")?,
            num(self.loss, "loss")?,
        );
        for (name, v) in [("F", f), ("D", d), ("loss", loss)] {
            if !(v.is_finite() && v > 0.0) {
                return Err(Error::invalid(
                    format!("{source}: row {row}, column {name}"),
                    format!("must be a positive number (got {v})"),
                ));
            }
        }
        if !(s.is_finite() && (0.0..1.0).contains(&s)) {
            return Err(Error::invalid(
                format!("{source}: row {row}, column S"),
                format!("must be in [0, 1) (got {s})"),
            ));
        }
        let cell = match self.cell {
            Some(c) => record.get(c).unwrap_or("").to_owned(),
            None => format!("row {row}"),
        };
        let key = self
            .group
            .map(|c| record.get(c).unwrap_or("").to_owned())
            .unwrap_or_default();
        Ok((
            key,
            Endpoint {
                f,
                s,
                d,
                loss,
                cell,
            },
        ))
    }
}

/// The endpoints of `name` in column `column`, or an error listing the values there.
pub fn group<'a>(groups: &'a Groups, column: &str, name: &str) -> Result<&'a [Endpoint]> {
    groups.get(name).map(Vec::as_slice).ok_or_else(|| {
        Error::invalid(
            column,
            format!(
                "no endpoints with '{name}' in this column (found: {})",
                groups.keys().cloned().collect::<Vec<_>>().join(", ")
            ),
        )
    })
}

/// Reads endpoints from a CSV file.
pub fn load(path: impl AsRef<Path>, group: Option<&str>) -> Result<Groups> {
    let path = path.as_ref();
    let text = crate::io::read_to_string(path)?;
    parse(&text, &path.display().to_string(), group)
}

/// Epoch AI's refit of Chinchilla's Approach 3 (Besiroglu et al. 2024, arXiv 2404.10102):
/// `E + A/N^α + B/D^β` with `b = 0`, `K = B`.
pub const CHINCHILLA_EPOCH_REFIT: super::Surface = super::Surface {
    E: 1.81724,
    A: 477.84,
    a: 0.34731,
    b: 0.0,
    K: 2143.86,
    c: 0.36718,
};

/// Hoffmann et al. 2022's published Approach 3 fit (arXiv 2203.15556, Eq. 10).
pub const CHINCHILLA_HOFFMANN_2022: super::Surface = super::Surface {
    E: 1.69,
    A: 406.4,
    a: 0.34,
    b: 0.0,
    K: 410.7,
    c: 0.28,
};

/// Endpoints from Epoch AI's extraction of Chinchilla's Figure 4
/// (`svg_extracted_data.csv`, columns `Model Size`, `Training FLOP`, `loss`), prepared as in
/// their replication: `D = C / (6N)`, `F` read as `N`, `S = 0`, each row its own cell, and
/// the 5 highest-loss rows dropped (`losses[i] < sorted_losses[-5]`, which also drops any
/// row tied with the fifth highest).
pub fn epoch_chinchilla(text: &str, source: &str) -> Result<Vec<Endpoint>> {
    let mut reader = csv::Reader::from_reader(text.as_bytes());
    let headers = reader.headers().map_err(|e| csv_error(source, e))?.clone();
    let col = |name: &str| {
        headers.iter().position(|h| h == name).ok_or_else(|| {
            Error::invalid(
                format!("{source}: header"),
                format!("missing column '{name}'"),
            )
        })
    };
    let (nc, cc, lc) = (col("Model Size")?, col("Training FLOP")?, col("loss")?);
    let mut rows = Vec::new();
    for (i, record) in reader.records().enumerate() {
        let record = record.map_err(|e| csv_error(source, e))?;
        let num = |c: usize| -> Result<f64> {
            let raw = record.get(c).unwrap_or("");
            raw.parse::<f64>()
                .ok()
                .filter(|v| v.is_finite() && *v > 0.0)
                .ok_or_else(|| {
                    Error::invalid(
                        format!("{source}: row {}", i + 2),
                        format!("'{raw}' is not a positive number"),
                    )
                })
        };
        let (n, c, loss) = (num(nc)?, num(cc)?, num(lc)?);
        rows.push(Endpoint {
            f: n,
            s: 0.0,
            d: c / (6.0 * n),
            loss,
            cell: format!("row {}", i + 2),
        });
    }
    if rows.len() < 6 {
        return Err(Error::invalid(source, "has fewer than 6 rows"));
    }
    let mut losses: Vec<f64> = rows.iter().map(|r| r.loss).collect();
    losses.sort_by(f64::total_cmp);
    let cut = losses[losses.len() - 5];
    rows.retain(|r| r.loss < cut);
    Ok(rows)
}

/// Test and demonstration support, not part of the API: synthetic endpoints drawn from a
/// known surface, for testing a fitter: one cell per
/// `(F, S)` pair, one endpoint per token count `D` in it, and multiplicative log-normal
/// noise of standard deviation `noise` (in nats of log-loss), from a seeded SplitMix64 and
/// Box-Muller, so the same arguments give the same endpoints.
#[doc(hidden)]
pub fn synthetic(
    surface: &super::Surface,
    flops: &[f64],
    sparsities: &[f64],
    tokens: &[f64],
    noise: f64,
    seed: u64,
) -> Vec<Endpoint> {
    let mut rng = crate::rng::SplitMix64::new(seed);
    let mut uniform = || rng.unit();
    let mut out = Vec::new();
    for (i, &f) in flops.iter().enumerate() {
        for (j, &s) in sparsities.iter().enumerate() {
            for &d in tokens {
                let (u1, u2) = (uniform().max(f64::MIN_POSITIVE), uniform());
                let z = (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos();
                out.push(Endpoint {
                    f,
                    s,
                    d,
                    loss: surface.loss(f, s, d) * (noise * z).exp(),
                    cell: format!("f{i}-s{j}"),
                });
            }
        }
    }
    out
}

/// Two surfaces shaped like SMELT's (§4): the published `E`, `a`, `K`, `c` of the Baseline
/// and of SMELT, with `A` and `b` (not published) chosen by us so that the gains have the
/// paper's shape (SMELT ahead, more at 1e21 than at 1e20, most at S = 0.85). For synthetic
/// tests and demonstrations only: `(baseline, smelt)`.
#[doc(hidden)]
pub fn paper_like_surfaces() -> (super::Surface, super::Surface) {
    (
        super::Surface {
            E: 1.4439,
            A: 2.0e3,
            a: 0.3703,
            b: 0.153,
            K: 1.975e6,
            c: 0.6594,
        },
        super::Surface {
            E: 1.4493,
            A: 2.9e3,
            a: 0.3892,
            b: 0.146,
            K: 5.264e6,
            c: 0.7011,
        },
    )
}

/// Per-token FLOPs of the synthetic grid's four scales (about the paper's 100M to 1.6B).
#[doc(hidden)]
pub const SYNTHETIC_FLOPS: [f64; 4] = [6.0e8, 1.33e9, 4.0e9, 1.0e10];
/// Training tokens of the synthetic endpoints of each cell.
#[doc(hidden)]
pub const SYNTHETIC_TOKENS: [f64; 4] = [2.5e9, 1.0e10, 4.0e10, 1.6e11];

/// Synthetic endpoints of both [`paper_like_surfaces`] on the paper's sparse grid shape: 4
/// scales ([`SYNTHETIC_FLOPS`]) x `sparsities` (12 cells for the paper's 0.85, 0.95, 0.97)
/// x 4 token counts ([`SYNTHETIC_TOKENS`]), with log-normal noise `noise`; seeds 1 and 2.
/// Returns `(baseline, smelt)`.
#[doc(hidden)]
pub fn paper_like_endpoints(sparsities: &[f64], noise: f64) -> (Vec<Endpoint>, Vec<Endpoint>) {
    let (b, s) = paper_like_surfaces();
    (
        synthetic(
            &b,
            &SYNTHETIC_FLOPS,
            sparsities,
            &SYNTHETIC_TOKENS,
            noise,
            1,
        ),
        synthetic(
            &s,
            &SYNTHETIC_FLOPS,
            sparsities,
            &SYNTHETIC_TOKENS,
            noise,
            2,
        ),
    )
}

/// Endpoints as CSV (`group,cell,F,S,D,loss`), the format [`parse`] reads.
pub fn to_csv(groups: &[(&str, &[Endpoint])]) -> String {
    let mut out = String::from("arch,cell,F,S,D,loss\n");
    for (g, pts) in groups {
        for p in *pts {
            out.push_str(&format!(
                "{g},{},{:e},{},{:e},{}\n",
                p.cell, p.f, p.s, p.d, p.loss
            ));
        }
    }
    out
}
