//! The pictures: well-formed SVG with the expected content, the same bytes for the same
//! input, and the README's picture up to date.

use smelt::fit::{self, FitOptions, Form, StartGrid, data};
use smelt::report::plot;

fn grid_report() -> smelt::study::GridReport {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/budgets/smelt-grid.toml");
    smelt::study::match_grid(&smelt::GridSpec::load(path).unwrap()).unwrap()
}

/// Every opened element is closed, in order (a small well-formedness check).
fn balanced(svg: &str) -> bool {
    let mut stack = Vec::new();
    for part in svg.split('<').skip(1) {
        let tag = part
            .split(|c: char| c.is_whitespace() || c == '>' || c == '/')
            .next()
            .unwrap_or("");
        if part.starts_with('?') || part.starts_with('!') {
            continue;
        }
        let head = part.split('>').next().unwrap_or("");
        if let Some(name) = part.strip_prefix('/') {
            let name = name.split('>').next().unwrap_or("").trim();
            if stack.pop().as_deref() != Some(name) {
                return false;
            }
        } else if !head.ends_with('/') {
            stack.push(tag.to_owned());
        }
    }
    stack.is_empty()
}

#[test]
fn residual_heatmap_has_every_cell() {
    let r = grid_report();
    let svg = plot::residual_heatmap(&r).unwrap();
    assert!(svg.starts_with("<svg") && balanced(&svg));
    // 3 panels x 16 cells, each a filled rectangle and a white border.
    assert_eq!(
        svg.matches("<rect").count(),
        1 + 2 * 48,
        "background + cells"
    );
    let text = |t: &str| svg.lines().any(|l| l.trim() == t);
    for label in [
        "100m",
        "1.6b",
        "s0",
        "s97",
        "FLOPs",
        "parameters",
        "KV cache",
    ] {
        assert!(text(label), "{label}");
    }
    let c = r
        .cells
        .iter()
        .find(|c| c.scale == "200m" && c.sparsity_label == "s95")
        .unwrap();
    assert!(text(&format!("{:+.2}%", c.residuals.kv * 100.0)));
    assert_eq!(
        svg,
        plot::residual_heatmap(&r).unwrap(),
        "same input, same bytes"
    );
}

/// With predicted times (`grid --predict`), a fourth panel: each cell's predicted ratio
/// less 1 on its own scale, the footnote naming the card; the same bytes for the same input.
#[test]
fn a_predicted_grid_gets_a_time_panel() {
    use smelt::time::{DeviceRequest, PredictOptions};
    let mut r = grid_report();
    let plain = plot::residual_heatmap(&r).unwrap();
    let (roof, _) = DeviceRequest {
        card: Some(smelt::time::Card::H200Sxm),
        ..DeviceRequest::default()
    }
    .roofline()
    .unwrap();
    smelt::study::predict_cells(&mut r, &roof, &PredictOptions::default()).unwrap();
    let svg = plot::residual_heatmap(&r).unwrap();
    assert!(svg.starts_with("<svg") && balanced(&svg));
    assert_eq!(
        svg.matches("<rect").count(),
        1 + 2 * 64,
        "background + 4 x 16 cells"
    );
    let text = |t: &str| svg.lines().any(|l| l.trim() == t);
    let ratios: Vec<f64> = r.cells.iter().map(|c| c.predicted.unwrap().ratio).collect();
    let max = ratios.iter().fold(0.005f64, |m, x| m.max((x - 1.0).abs()));
    assert!(
        text(&format!("predicted time (±{:.1}%)", max * 100.0)),
        "{svg}"
    );
    for x in &ratios {
        assert!(text(&format!("{:+.2}%", (x - 1.0) * 100.0)), "{x}");
    }
    assert!(svg.contains("predicted time ratio on NVIDIA H200 SXM (uncalibrated roofline)"));
    assert_eq!(
        svg,
        plot::residual_heatmap(&r).unwrap(),
        "same input, same bytes"
    );
    assert_ne!(svg, plain);
}

#[test]
fn readme_picture_is_current() {
    let svg = plot::residual_heatmap(&grid_report()).unwrap();
    let committed =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/residuals.svg"))
            .unwrap();
    assert_eq!(
        committed, svg,
        "regenerate: smelt grid budgets/smelt-grid.toml --plot docs/residuals.svg"
    );
}

#[test]
fn frontier_plot_draws_both_architectures_per_sparsity() {
    let (bp, sp) = data::paper_like_endpoints(&[0.85, 0.95], 0.0);
    let opts = FitOptions {
        starts: StartGrid::small(Form::Surface),
        ..FitOptions::standard(Form::Surface)
    };
    let gain = fit::GainOptions {
        computes: vec![1e20, 1e21],
        sparsities: vec![0.85, 0.95],
        fit: opts,
        bootstrap: None,
    };
    let t = fit::gain_table(("baseline", &bp), ("smelt", &sp), &gain).unwrap();
    let svg = plot::frontiers(&t).unwrap();
    assert!(svg.starts_with("<svg") && balanced(&svg));
    assert!(svg.contains("S = 0.85") && svg.contains("S = 0.95"));
    assert!(svg.contains("baseline (dashed) vs smelt (solid)"));
    assert!(
        svg.matches("<polyline").count() >= 4,
        "two curves per sparsity"
    );
}
