//! The layout of an IsoFLOP study's run matrix (`smelt plan`).

use super::{Document, Field, Report, Table, group_digits, short};
use crate::launcher_flops::Convention;
use crate::study::{ConventionPlan, IsoflopPlan, Run, compute_label};

fn sci(x: f64) -> Field {
    Field::shown(short(x), x)
}

fn count(n: u64) -> Field {
    Field::shown(group_digits(u128::from(n)), n)
}

/// The field `value` gives of `r`'s count under `convention`, or a dash when there is none
/// (the convention cannot count the model).
fn by(r: &Run, convention: Convention, value: impl Fn(&ConventionPlan) -> Option<Field>) -> Field {
    (r.conventions.iter())
        .find(|c| c.convention == convention)
        .and_then(value)
        .unwrap_or_else(|| Field::text("-"))
}

/// The ratio a plan by `convention` reaches, or a dash when it cannot count the model.
fn plan_by(r: &Run, convention: Convention) -> Field {
    by(r, convention, |c| c.reached_over_compute.map(Field::ratio))
}

/// The training FLOPs per token under `convention`, or a dash.
fn per_token(r: &Run, convention: Convention) -> Field {
    by(r, convention, |c| c.training_flops_per_token.map(sci))
}

/// The columns of a run's compute, shared by the wide and the compact table.
const COMPUTE_COLUMNS: [&str; 6] = [
    "C",
    "F/token",
    "tokens",
    "steps",
    "C reached",
    "reached / C",
];

/// A run's fields under [`COMPUTE_COLUMNS`].
fn compute_fields(r: &Run) -> [Field; 6] {
    [
        sci(r.compute),
        sci(r.training_flops_per_token),
        count(r.tokens),
        count(r.steps),
        sci(r.compute_reached),
        Field::shown(
            format!("{:.6}", r.reached_over_compute),
            r.reached_over_compute,
        ),
    ]
}

impl IsoflopPlan {
    fn head(&self) -> Document {
        let mut doc = Document::titled(format!(
            "IsoFLOP plan{}: {} runs ({} models x {} compute levels)",
            self.name
                .as_deref()
                .map_or_else(String::new, |n| format!(" of {n}")),
            self.runs.len(),
            self.models.len(),
            self.computes.len()
        ));
        doc.line(format!(
            "a step: global batch {} x {} tokens = {} tokens; levels {}",
            self.global_batch,
            self.sequence_length,
            group_digits(u128::from(self.tokens_per_step)),
            self.computes
                .iter()
                .map(|&c| compute_label(c))
                .collect::<Vec<_>>()
                .join(", ")
        ));
        doc.line(
            "F/token: exact training FLOPs per token (every layer execution, a loop's second \
             visits included); steps: whole optimizer steps nearest to C / (F x tokens a \
             step), so C reached = tokens x F is within half a step of C",
        );
        doc.line(
            "6N plan: what training for the tokens C / 6N says (whole steps) would really \
             spend, by the exact count, over C",
        );
        let refused: Vec<String> = (self.runs.iter())
            .flat_map(|r| r.conventions.iter().map(move |c| (r, c)))
            .filter_map(|(r, c)| {
                c.refused
                    .as_ref()
                    .map(|w| format!("{} {}: {w}", r.id, c.convention))
            })
            .take(4)
            .collect();
        for line in refused {
            doc.line(format!("not counted: {line}"));
        }
        doc
    }
}

impl Report for IsoflopPlan {
    fn document(&self) -> Document {
        let mut doc = self.head();
        let header = ["run", "cell", "arch", "S"]
            .into_iter()
            .chain(COMPUTE_COLUMNS)
            .chain([
                "6N/token",
                "6N plan / C",
                "6N-attn plan / C",
                "Megatron plan / C",
                "torchtitan plan / C",
            ]);
        let mut t = Table::new(header).right_from(3).data();
        for r in &self.runs {
            let mut row = vec![
                Field::text(&r.id),
                Field::text(&r.cell),
                Field::text(r.arch.as_str()),
                Field::ratio(r.sparsity),
            ];
            row.extend(compute_fields(r));
            row.push(per_token(r, Convention::SixN));
            row.extend(
                [
                    Convention::SixN,
                    Convention::SixNAttn,
                    Convention::Megatron,
                    Convention::Torchtitan,
                ]
                .map(|c| plan_by(r, c)),
            );
            t.rows.push(row);
        }
        doc.table(t);
        doc
    }

    fn compact(&self) -> Document {
        let mut doc = self.head();
        let header = ["run"]
            .into_iter()
            .chain(COMPUTE_COLUMNS)
            .chain(["6N plan / C"]);
        let mut t = Table::new(header).right_from(1).droppable([5]);
        for r in &self.runs {
            let mut row = vec![Field::text(&r.id)];
            row.extend(compute_fields(r));
            row.push(plan_by(r, Convention::SixN));
            t.rows.push(row);
        }
        doc.table(t);
        doc
    }
}
