//! Ties the solver must break as its module docs say, on real instances, against brute
//! force over every lattice point.

use smelt::budget::Budget;
use smelt::search;
use smelt::{Dense, ModelSpec};

use crate::common::budget as budget_file;
use crate::search::{brute_force, same};

/// The small 200M/S95 instance with the Baseline's expert count set to `experts` and, if
/// `dense`, every layer a dense FFN.
fn small(experts: u64, dense: bool) -> Budget {
    let b = Budget::load(budget_file("match-200m-s95-small.toml")).expect("budget");
    let mut baseline: ModelSpec = b.baseline().clone();
    baseline.model.moe.experts = experts;
    if dense {
        baseline.model.dense = Some(Dense {
            layers: (1..=baseline.model.layers).collect(),
            ffn: 3 * baseline.model.moe.expert_ffn,
        });
    }
    Budget::new(baseline, *b.recipe(), b.lattice().clone(), *b.weights()).expect("valid")
}

/// With every layer dense no budget depends on the expert count, so every count ties and
/// the tie-break ranks them by distance to the Baseline's (61 on a lattice of multiples of
/// 8: 64, then 56, then 72). The solver once scored only the counts next to the ends of
/// the range and to the breakpoints of the residuals, none of which exists here, and
/// returned 40, 32 and 24 (the nearest of the ends' neighbours).
#[test]
fn with_no_moe_layer_the_expert_counts_nearest_the_baseline_win() {
    let b = small(61, true);
    let sol = search::solve(&b, 3).expect("solvable");
    let experts: Vec<u64> = sol.ranked.iter().map(|c| c.model.moe.experts).collect();
    assert_eq!(experts, [64, 56, 72]);
    assert!(sol.ranked.iter().all(|c| c.score == sol.ranked[0].score));
    let brute = brute_force(&b);
    for (c, (m, s, _)) in sol.ranked.iter().zip(&brute) {
        assert!(same(c, m, s), "solver {:?}, brute force {:?}", c.model, m);
    }
}

/// The same instance with its MoE layers: the solver's top 3 are brute force's.
#[test]
fn with_moe_layers_the_solver_is_brute_force() {
    let b = small(61, false);
    let sol = search::solve(&b, 3).expect("solvable");
    let brute = brute_force(&b);
    assert_eq!(sol.ranked.len(), 3);
    for (c, (m, s, _)) in sol.ranked.iter().zip(&brute) {
        assert!(same(c, m, s), "solver {:?}, brute force {:?}", c.model, m);
    }
}
