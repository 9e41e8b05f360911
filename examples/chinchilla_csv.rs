//! Writes `tests/data/chinchilla/endpoints.csv`: Epoch AI's extraction prepared as in their
//! replication (tokens from FLOPs, the 5 highest-loss rows dropped), in the endpoints format
//! `smelt fit` reads (`F` is the parameter count N, `S = 0`).
//!
//! Run: `cargo run --example chinchilla_csv > tests/data/chinchilla/endpoints.csv`

fn main() -> Result<(), smelt::Error> {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/data/chinchilla/svg_extracted_data.csv"
    );
    let text = std::fs::read_to_string(path).map_err(|error| smelt::Error::Io {
        path: path.to_owned(),
        error,
    })?;
    let points = smelt::fit::data::epoch_chinchilla(&text, path)?;
    print!("{}", smelt::fit::data::to_csv(&[("chinchilla", &points)]));
    Ok(())
}
