//! GitHub-flavoured Markdown tables.

use super::Tabular;

fn escape(s: &str) -> String {
    s.replace('|', "\\|")
}

/// `t` as a Markdown table, summary rows in bold after the rows.
pub fn markdown(t: &dyn Tabular) -> String {
    let header = t.header();
    let mut out = format!("**{}**\n\n", escape(&t.title()));
    out.push_str(&format!(
        "| {} |\n",
        header
            .iter()
            .map(|h| escape(h))
            .collect::<Vec<_>>()
            .join(" | ")
    ));
    out.push_str(&format!("|{}\n", "---|".repeat(header.len())));
    for row in t.rows() {
        let cells: Vec<String> = row.iter().map(|f| escape(&f.display)).collect();
        out.push_str(&format!("| {} |\n", cells.join(" | ")));
    }
    for row in t.summary() {
        let cells: Vec<String> = row
            .iter()
            .map(|f| {
                if f.display.is_empty() {
                    String::new()
                } else {
                    format!("**{}**", escape(&f.display))
                }
            })
            .collect();
        out.push_str(&format!("| {} |\n", cells.join(" | ")));
    }
    out
}
