//! Human-readable tables (comfy-table, UTF-8 borders, no colours). With a width, a table
//! wider than it first leaves out its droppable columns, one by one, until it fits (a line
//! under it names them), then wraps its cells (comfy-table's dynamic arrangement; a table
//! that fits is laid out as without one); longer titles and lines wrap at spaces,
//! continued two spaces in. Without a width, nothing is left out or wrapped.

use comfy_table::{
    Cell, CellAlignment, ContentArrangement, Table as Comfy, presets::UTF8_FULL_CONDENSED,
};

use super::{Block, Document, Table};

/// The narrowest width a table is fitted to (narrower terminals get lines this wide).
const MIN_WIDTH: usize = 40;

fn comfy(t: &Table, width: Option<usize>) -> Comfy {
    let mut c = Comfy::new();
    c.load_style(UTF8_FULL_CONDENSED);
    if let Some(w) = width {
        let w = u16::try_from(w.max(MIN_WIDTH)).unwrap_or(u16::MAX);
        c.set_content_arrangement(ContentArrangement::Dynamic)
            .set_width(w);
    }
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

/// The widest line of `text`, in characters.
fn widest(text: &str) -> usize {
    text.lines().map(|l| l.chars().count()).max().unwrap_or(0)
}

/// `t` within `width`: its droppable columns left out until it fits, then its cells
/// wrapped; the names of the columns left out follow it.
fn fitted(t: &Table, width: usize) -> String {
    let mut t = t.clone();
    let mut left_out = Vec::new();
    while widest(&comfy(&t, None).to_string()) > width.max(MIN_WIDTH) {
        let Some(&i) = t.droppable.first() else {
            break;
        };
        left_out.push(t.header.get(i).cloned().unwrap_or_default());
        t = t.without(i);
    }
    let mut out = comfy(&t, Some(width)).to_string();
    if !left_out.is_empty() {
        let line = format!("not shown, to fit {width} columns: {}", left_out.join(", "));
        out.push('\n');
        out.push_str(&wrap(&line, width));
    }
    out
}

/// `text` in lines of at most `width` characters, broken at spaces (a word longer than
/// the width stays whole); continuation lines start with two spaces.
fn wrap(text: &str, width: usize) -> String {
    let width = width.max(MIN_WIDTH);
    if text.chars().count() <= width {
        return text.to_owned();
    }
    let mut lines: Vec<String> = Vec::new();
    let mut line = String::new();
    let mut len = 0;
    for word in text.split(' ') {
        let n = word.chars().count();
        if len > 0 && len + 1 + n > width {
            lines.push(std::mem::take(&mut line));
            line.push_str("  ");
            len = 2;
        } else if len > 0 {
            line.push(' ');
            len += 1;
        }
        line.push_str(word);
        len += n;
    }
    lines.push(line);
    lines.join("\n")
}

/// `doc` as text: each title and line on its own line, each table followed by a newline;
/// with a `width`, fitted to it (see the module docs).
pub(crate) fn export(doc: &Document, width: Option<usize>) -> String {
    let mut out = String::new();
    for block in &doc.blocks {
        match (block, width) {
            (Block::Title(s) | Block::Line(s), Some(w)) => out.push_str(&wrap(s, w)),
            (Block::Title(s) | Block::Line(s), None) => out.push_str(s),
            (Block::Table(t), Some(w)) => out.push_str(&fitted(t, w)),
            (Block::Table(t), None) => out.push_str(&comfy(t, None).to_string()),
        }
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_lines_wrap_at_spaces() {
        let text = "floor: kv binds: the KV cache depends on the key width kv_heads x head_dim \
                    alone; the lattice's nearest is 104";
        let wrapped = wrap(text, 40);
        assert!(
            wrapped.lines().all(|l| l.chars().count() <= 40),
            "{wrapped}"
        );
        assert!(wrapped.lines().skip(1).all(|l| l.starts_with("  ")));
        let words = |s: &str| s.split_whitespace().collect::<Vec<_>>().join(" ");
        assert_eq!(words(&wrapped), words(text));
        assert_eq!(wrap("short", 40), "short");
    }

    #[test]
    fn wide_tables_wrap_their_cells() {
        let mut t = Table::new(["name", "text"]);
        t.push_texts(["a", &"word ".repeat(40)]);
        let doc = Document {
            blocks: vec![Block::Table(t)],
        };
        let fitted = export(&doc, Some(60));
        assert!(fitted.lines().all(|l| l.chars().count() <= 60), "{fitted}");
        assert!(export(&doc, None).lines().any(|l| l.chars().count() > 60));
    }

    #[test]
    fn droppable_columns_go_first() {
        let mut t = Table::new(["a", "bbbbbbbbbbbbbbbbbbbb", "cccccccccccccccccccc", "d"])
            .right_from(2)
            .droppable([2, 1]);
        t.push_texts(["1", "2", "3", "4"]);
        let doc = Document {
            blocks: vec![Block::Table(t)],
        };
        let fitted = export(&doc, Some(45));
        assert!(fitted.lines().all(|l| l.chars().count() <= 45), "{fitted}");
        let (table, note) = fitted.split_once("not shown").unwrap();
        assert!(!table.contains("ccc") && table.contains("bbb"), "{fitted}");
        assert!(note.contains("cccc"), "{fitted}");
        assert!(fitted.contains("not shown, to fit 45 columns:"), "{fitted}");
        assert!(export(&doc, Some(200)).contains("ccc"));
    }
}
