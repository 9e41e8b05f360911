//! Human-readable tables (comfy-table, UTF-8 borders, no colours).

use comfy_table::{Cell, CellAlignment, Table as Comfy, presets::UTF8_FULL_CONDENSED};

use super::{Block, Document, Table};

fn comfy(t: &Table) -> Comfy {
    let mut c = Comfy::new();
    c.load_style(UTF8_FULL_CONDENSED);
    c.set_header(t.header.iter().map(Cell::new));
    for row in &t.rows {
        c.add_row(row.iter().map(|f| f.display.as_str()));
    }
    if !t.summary.is_empty() {
        c.add_row(vec![String::new(); t.header.len()]);
        for row in &t.summary {
            c.add_row(row.iter().map(|f| f.display.as_str()));
        }
    }
    if let Some(from) = t.right_from {
        for i in from..c.column_count() {
            if let Some(col) = c.column_mut(i) {
                col.set_cell_alignment(CellAlignment::Right);
            }
        }
    }
    c
}

/// `doc` as text: each title and line on its own line, each table followed by a newline.
pub(crate) fn export(doc: &Document) -> String {
    let mut out = String::new();
    for block in &doc.blocks {
        match block {
            Block::Title(s) | Block::Line(s) => out.push_str(s),
            Block::Table(t) => out.push_str(&comfy(t).to_string()),
        }
        out.push('\n');
    }
    out
}
