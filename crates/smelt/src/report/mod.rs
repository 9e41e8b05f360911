//! Rendering results, the one way: every result type implements [`Report`], which lays it
//! out once as a [`Document`] (titles, lines and tables of [`Field`]s), and one exporter
//! per [`Format`] writes it (hyperfine's `src/export/` is the model):
//!
//! * [`Format::Table`] (`table.rs`): the human tables (comfy-table), fitted to a
//!   [`Layout`]'s width when it has one;
//! * [`Format::Markdown`] (`markdown.rs`): the same as GitHub-flavoured Markdown;
//! * [`Format::Csv`] (`csv.rs`): the report's data table at full precision, through the
//!   `csv` crate's writer (reports without one refuse);
//! * [`Format::Json`] and [`Format::Toml`] (`json.rs`, `toml.rs`): the result structs
//!   serialised as they are. They derive `Serialize` and *are* the contract.
//!
//! The layouts of the result types live beside the exporters: `cost.rs`, `matching.rs`,
//! `rows.rs` (grid, sweep), `fit.rs` (fit, gain) and `bench.rs`; how each budget is named
//! in them, in `label.rs` (the one place a new budget is named). A report has two layouts
//! for people ([`Columns`]): every column ([`Report::document`], what `--wide` prints and
//! what CSV reads) and a compact one ([`Report::compact`], the command line's default) that
//! keeps what a first look needs within a terminal's width. The machine formats (CSV,
//! JSON, TOML) do not depend on the layout.

mod bench;
mod cost;
mod csv;
mod fit;
mod isoflop;
mod json;
mod kernel_check;
mod label;
mod launcher;
mod markdown;
mod matching;
pub mod plot;
mod predict;
mod rows;
mod step_grid;
mod table;
mod time_validation;
mod toml;
mod wall_clock;

use serde::Serialize;

pub use crate::units::percent;
pub use launcher::WithConventions;
pub use matching::{commented_model_file, imported_model_file, match_comment, model_file};
pub use step_grid::WithStepTimes;
pub use wall_clock::WithWallClock;

use crate::error::{Error, Result};
use crate::names::named_enum;

pub(crate) use label::{cost_row, exact, label, term_label};

/// A verdict column's entry for a row whose budget sets no `[tolerance]`: nothing was
/// checked, so nothing reads as passed.
pub(crate) const NOT_CHECKED: &str = "not checked";

named_enum! {
    /// An output format.
    pub enum Format: "format" {
        /// Human tables.
        Table = "table",
        /// JSON, the stable contract.
        Json = "json",
        /// CSV of the data table, full precision.
        Csv = "csv",
        /// Markdown tables for notes.
        Markdown = "markdown",
        /// TOML.
        Toml = "toml",
    }
}

impl Format {
    /// What the format gives, in a few words (for a command line's `--help`).
    pub fn help(self) -> &'static str {
        match self {
            Format::Table => "human tables",
            Format::Json => "JSON, the stable contract (docs/guide.md, \"JSON output\")",
            Format::Csv => "the data table as CSV, full precision, no summary rows",
            Format::Markdown => "Markdown tables, for notes",
            Format::Toml => "the JSON contract's structure as TOML",
        }
    }
}

named_enum! {
    /// Which columns the human formats (table, Markdown) show.
    pub enum Columns: "columns" {
        /// What a first look needs: the cells, the knobs that changed, the ratios, the
        /// verdict (the command line's default).
        Compact = "compact",
        /// Every column (`--wide`).
        Wide = "wide",
    }
}

/// How the human formats lay a report out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Layout {
    /// Which columns.
    pub columns: Columns,
    /// The widest line the table format may write, in characters (`None`: no limit). Wider
    /// tables wrap their cells and longer lines wrap at spaces.
    pub width: Option<usize>,
}

impl Layout {
    /// Every column, no width limit: what [`render`] writes.
    pub const WIDE: Layout = Layout {
        columns: Columns::Wide,
        width: None,
    };

    /// The compact columns within `width` characters.
    pub fn compact(width: usize) -> Self {
        Layout {
            columns: Columns::Compact,
            width: Some(width),
        }
    }
}

/// A cell: what a person reads, and what a CSV reader parses.
#[derive(Debug, Clone, PartialEq)]
pub struct Field {
    /// Formatted for reading (percentages, arrows, digit groups).
    pub display: String,
    /// Full precision for machines.
    pub raw: String,
}

impl Field {
    /// The same text for people and machines.
    pub fn text(s: impl Into<String>) -> Self {
        let s = s.into();
        Self {
            display: s.clone(),
            raw: s,
        }
    }

    /// A ratio: four decimals to read.
    pub fn ratio(x: f64) -> Self {
        Self::shown(format!("{x:.4}"), x)
    }

    /// A signed percentage to read.
    pub fn percent(x: f64) -> Self {
        Self::shown(percent(x), x)
    }

    /// A share in percent with two decimals to read.
    pub fn share(x: f64) -> Self {
        Self::shown(format!("{:.2}%", x * 100.0), x)
    }

    /// `display` to read, `raw` at full precision.
    pub fn shown(display: String, raw: impl std::fmt::Display) -> Self {
        Self {
            display,
            raw: raw.to_string(),
        }
    }

    /// An empty cell.
    pub fn blank() -> Self {
        Self::text("")
    }
}

/// A table of a document.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Table {
    /// Column names.
    pub header: Vec<String>,
    /// One row per item.
    pub rows: Vec<Vec<Field>>,
    /// Summary rows, after a blank row (tables and Markdown print them, CSV does not).
    pub summary: Vec<Vec<Field>>,
    /// Columns from this one on are right-aligned in the table format.
    pub right_from: Option<usize>,
    /// Whether this is the report's data table (what CSV writes).
    pub data: bool,
    /// Columns the table format may leave out to fit its width, the first to go first
    /// (those left out are named in a line under the table).
    pub droppable: Vec<usize>,
}

impl Table {
    /// A table with `header`, no rows yet.
    pub fn new<S: Into<String>>(header: impl IntoIterator<Item = S>) -> Self {
        Self {
            header: header.into_iter().map(Into::into).collect(),
            ..Self::default()
        }
    }

    /// Right-aligns the columns from `from` on.
    pub fn right_from(mut self, from: usize) -> Self {
        self.right_from = Some(from);
        self
    }

    /// Marks this as the report's data table.
    pub fn data(mut self) -> Self {
        self.data = true;
        self
    }

    /// Lets the table format leave out `columns` to fit its width, the first to go first.
    pub fn droppable(mut self, columns: impl IntoIterator<Item = usize>) -> Self {
        self.droppable = columns.into_iter().collect();
        self
    }

    /// The table without column `i`.
    pub(crate) fn without(&self, i: usize) -> Table {
        fn cut<T: Clone>(row: &[T], i: usize) -> Vec<T> {
            let kept = row.iter().enumerate().filter(|(j, _)| *j != i);
            kept.map(|(_, x)| x.clone()).collect()
        }
        let shift = |c: usize| if c > i { c - 1 } else { c };
        Table {
            header: cut(&self.header, i),
            rows: self.rows.iter().map(|r| cut(r, i)).collect(),
            summary: self.summary.iter().map(|r| cut(r, i)).collect(),
            right_from: self.right_from.map(shift),
            data: self.data,
            droppable: self
                .droppable
                .iter()
                .filter(|&&c| c != i)
                .map(|&c| shift(c))
                .collect(),
        }
    }

    /// Adds a row of texts.
    pub fn push_texts<S: Into<String>>(&mut self, row: impl IntoIterator<Item = S>) {
        self.rows.push(row.into_iter().map(Field::text).collect());
    }
}

/// The shape columns of row-shaped reports, Baseline→looped.
pub(crate) const SHAPE_COLUMNS: [&str; 6] = [
    "hidden",
    "experts",
    "expert_ffn",
    "heads",
    "kv_heads",
    "head_dim",
];

/// A block of a document.
#[derive(Debug, Clone, PartialEq)]
pub enum Block {
    /// A title (bold in Markdown).
    Title(String),
    /// A line of text (empty: a blank line).
    Line(String),
    /// A table.
    Table(Table),
}

/// A report laid out for people: what the table, Markdown and CSV exporters write.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Document {
    /// The blocks, in order.
    pub blocks: Vec<Block>,
}

impl Document {
    /// A document starting with `title`.
    pub fn titled(title: impl Into<String>) -> Self {
        Self {
            blocks: vec![Block::Title(title.into())],
        }
    }

    /// Appends a title.
    pub fn title(&mut self, s: impl Into<String>) {
        self.blocks.push(Block::Title(s.into()));
    }

    /// Appends a line.
    pub fn line(&mut self, s: impl Into<String>) {
        self.blocks.push(Block::Line(s.into()));
    }

    /// Appends a table.
    pub fn table(&mut self, t: Table) {
        self.blocks.push(Block::Table(t));
    }
}

/// A result that can be written in [`Format`]s.
pub trait Report: Serialize {
    /// The layout for people, every column (`--wide`; CSV writes its data table).
    fn document(&self) -> Document;

    /// The compact layout ([`Columns::Compact`]): the full one unless the report has too
    /// many columns for a terminal.
    fn compact(&self) -> Document {
        self.document()
    }

    /// The formats this report can be written in (all, unless it has no data table).
    fn formats(&self) -> &'static [Format] {
        Format::ALL
    }
}

/// `report` in `format`, every column and no width limit ([`Layout::WIDE`]). A format the
/// report does not offer is an error naming the ones it does.
pub fn render<R: Report + ?Sized>(report: &R, format: Format) -> Result<String> {
    render_with(report, format, Layout::WIDE)
}

/// `report` in `format` laid out as `layout` says (the machine formats ignore it). A format
/// the report does not offer is an error naming the ones it does.
pub fn render_with<R: Report + ?Sized>(
    report: &R,
    format: Format,
    layout: Layout,
) -> Result<String> {
    if !report.formats().contains(&format) {
        return Err(Error::invalid(
            "format",
            format!(
                "this report cannot be written as {format}; it offers {}",
                report
                    .formats()
                    .iter()
                    .map(|f| f.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        ));
    }
    let document = || match layout.columns {
        Columns::Compact => report.compact(),
        Columns::Wide => report.document(),
    };
    match format {
        Format::Table => Ok(table::export(&document(), layout.width)),
        Format::Markdown => Ok(markdown::export(&document())),
        Format::Csv => csv::export(&report.document()),
        Format::Json => json::export(report),
        Format::Toml => toml::export(report),
    }
}

/// `value` as pretty JSON, with a trailing newline.
pub fn to_json<T: Serialize + ?Sized>(value: &T) -> Result<String> {
    json::export(value)
}

/// `value` as TOML.
pub fn to_toml<T: Serialize + ?Sized>(value: &T) -> Result<String> {
    toml::export(value)
}

/// `n` with thousands separators.
pub fn group_digits(n: u128) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// `x` in short scientific notation, e.g. `1.330e9`.
pub fn short(x: f64) -> String {
    if x == 0.0 {
        return "0".to_owned();
    }
    format!("{x:.3e}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn digits_are_grouped() {
        assert_eq!(group_digits(0), "0");
        assert_eq!(group_digits(999), "999");
        assert_eq!(group_digits(1000), "1,000");
        assert_eq!(group_digits(1_330_053_120), "1,330,053,120");
        assert_eq!(short(1_330_053_120.0), "1.330e9");
        assert_eq!(percent(0.029), "+2.90%");
    }

    #[test]
    fn formats_parse_and_name_themselves() {
        for &f in Format::ALL {
            assert_eq!(f.as_str().parse::<Format>().unwrap(), f);
        }
        assert!("yaml".parse::<Format>().is_err());
    }
}
