//! CSV: the header and rows of the report's data table at full precision (summary rows are
//! left out), written by the `csv` crate.

use super::{Block, Document};
use crate::error::{Error, Result};

/// `doc`'s data table as CSV.
pub(crate) fn export(doc: &Document) -> Result<String> {
    let table = doc
        .blocks
        .iter()
        .find_map(|b| match b {
            Block::Table(t) if t.data => Some(t),
            _ => None,
        })
        .ok_or_else(|| Error::invalid("format", "this report has no table to write as CSV"))?;
    let mut w = csv::WriterBuilder::new().from_writer(Vec::new());
    let fail = |e: csv::Error| Error::serialize("CSV", e);
    w.write_record(&table.header).map_err(fail)?;
    for row in &table.rows {
        w.write_record(row.iter().map(|f| f.raw.as_str()))
            .map_err(fail)?;
    }
    let bytes = w
        .into_inner()
        .map_err(|e| Error::serialize("CSV", e.error()))?;
    String::from_utf8(bytes).map_err(|e| Error::serialize("CSV", e))
}
