//! GitHub-flavoured Markdown: titles in bold, tables with their summary rows in bold.

use super::{Block, Document, Table};

fn escape(s: &str) -> String {
    s.replace('|', "\\|")
}

fn row<'a>(cells: impl Iterator<Item = &'a str>, bold: bool) -> String {
    let cells: Vec<String> = cells
        .map(|c| match (bold, c.is_empty()) {
            (true, false) => format!("**{}**", escape(c)),
            _ => escape(c),
        })
        .collect();
    format!("| {} |\n", cells.join(" | "))
}

fn table(t: &Table) -> String {
    let mut out = row(t.header.iter().map(String::as_str), false);
    out.push_str(&format!("|{}\n", "---|".repeat(t.header.len())));
    for r in &t.rows {
        out.push_str(&row(r.iter().map(|f| f.display.as_str()), false));
    }
    for r in &t.summary {
        out.push_str(&row(r.iter().map(|f| f.display.as_str()), true));
    }
    out
}

/// `doc` as Markdown, blocks separated by blank lines.
pub(crate) fn export(doc: &Document) -> String {
    let parts: Vec<String> = doc
        .blocks
        .iter()
        .filter_map(|b| match b {
            Block::Title(s) => Some(format!("**{}**\n", escape(s))),
            Block::Line(s) if s.trim().is_empty() => None,
            Block::Line(s) => Some(format!("{}\n", escape(s))),
            Block::Table(t) => Some(table(t)),
        })
        .collect();
    parts.join("\n")
}
