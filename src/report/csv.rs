//! CSV: the header and the rows at full precision (summary rows are left out).

use super::Tabular;

fn quote(s: &str) -> String {
    if s.contains([',', '"', '\n']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_owned()
    }
}

/// `t` as CSV.
pub fn csv(t: &dyn Tabular) -> String {
    let mut out = String::new();
    let header: Vec<String> = t.header().iter().map(|h| quote(h)).collect();
    out.push_str(&header.join(","));
    out.push('\n');
    for row in t.rows() {
        let cells: Vec<String> = row.iter().map(|f| quote(&f.raw)).collect();
        out.push_str(&cells.join(","));
        out.push('\n');
    }
    out
}
