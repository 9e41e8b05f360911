//! A deterministic backend, so that the bench's bookkeeping (rounds, medians, per-shape and
//! per-component sums, ratios, deadlines, progress) is tested without timing anything.
//!
//! A launch of a kernel shape takes its FLOPs per launch at [`RATE`] FLOP/s, times the
//! round's factor ([`FACTORS`], cycling): every round is a power of two slower or faster, so
//! every sum and median below is exact in floats. Each call advances a simulated clock by
//! one second (a deadline on that clock stops a run after a known number of calls), and is
//! logged.

use std::cell::Cell;
use std::rc::Rc;
use std::sync::Mutex;

use super::{
    Backend, BenchOptions, BenchReport, Deadline, TimingBackend, backend::shape, bench_on,
};
use crate::error::{Error, Result};
use crate::model::ModelSpec;
use crate::plan::{Component, Kernel, Pass, Plan};
use crate::progress::Progress;

/// FLOP/s of a launch in a round of factor 1.
const RATE: f64 = (1u64 << 30) as f64;
/// Each round's slowdown, cycling: the median of three rounds is the factor 2.
const FACTORS: [f64; 3] = [1.0, 4.0, 2.0];

/// One call the bookkeeping made.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Call {
    Ceiling {
        warm: bool,
    },
    Kernel {
        plan: usize,
        index: usize,
        warm: bool,
    },
}

struct Mock {
    kernels: Vec<Vec<Kernel>>,
    /// Ceiling calls so far: the round under way, plus one.
    rounds: usize,
    /// What [`TimingBackend::estimate`] says.
    estimate: f64,
    clock: Rc<Cell<f64>>,
    log: Rc<Mutex<Vec<Call>>>,
}

/// Seconds per launch of `k` in a round of `factor`.
fn per_launch(k: &Kernel, factor: f64) -> f64 {
    (k.flops() / u128::from(k.count)) as f64 / RATE * factor
}

fn ceiling_kernel() -> Kernel {
    Kernel::gemm(Component::Projections, Pass::Forward, [1024, 1024, 1024], 1)
}

impl Mock {
    fn record(&mut self, call: Call) {
        self.clock.set(self.clock.get() + 1.0);
        self.log.lock().unwrap().push(call);
    }

    fn factor(&self) -> f64 {
        FACTORS[(self.rounds.max(1) - 1) % FACTORS.len()]
    }
}

impl TimingBackend for Mock {
    fn ceiling(&self) -> Kernel {
        ceiling_kernel()
    }

    fn time_ceiling(&mut self, warm: bool) -> Result<f64> {
        self.record(Call::Ceiling { warm });
        self.rounds += 1;
        Ok(per_launch(&ceiling_kernel(), self.factor()))
    }

    fn time(&mut self, plan: usize, index: usize, warm: bool) -> Result<f64> {
        let k = shape(&self.kernels, plan, index)?;
        self.record(Call::Kernel { plan, index, warm });
        Ok(per_launch(&k, self.factor()))
    }

    fn estimate(&self, _first: f64, _rounds: usize) -> f64 {
        self.estimate
    }

    fn device(&self) -> String {
        "mock".to_owned()
    }
}

/// What a progress heard.
#[derive(Default)]
struct Heard {
    begun: Mutex<Vec<(String, u64)>>,
    advanced: Mutex<u64>,
    ended: Mutex<usize>,
}

impl Progress for Heard {
    fn begin(&self, task: &str, total: u64) {
        self.begun.lock().unwrap().push((task.to_owned(), total));
    }
    fn advance(&self, n: u64) {
        *self.advanced.lock().unwrap() += n;
    }
    fn end(&self) {
        *self.ended.lock().unwrap() += 1;
    }
}

/// A small MoE model; `looped`: its second layer run twice.
fn model(looped: bool) -> ModelSpec {
    let mut text = String::from(
        r#"
        [model]
        layers = 2
        hidden = 64
        heads = 4
        kv_heads = 2
        head_dim = 16
        [model.moe]
        experts = 4
        top_k = 2
        expert_ffn = 32
        [workload]
        context = 256
        mean_doc_len = 64
        "#,
    );
    if looped {
        text.push_str("[model.loop]\nfirst = 2\nspan = 1\nrepeats = 2\n");
    }
    ModelSpec::from_toml_str(&text).unwrap()
}

fn options(rounds: usize) -> BenchOptions {
    BenchOptions {
        tokens: 128,
        rounds,
        ..BenchOptions::new(Backend::Cpu)
    }
}

/// A run of `models` on the mock, with a deadline of `limit` seconds on its clock and the
/// mock's `estimate`: the report, the calls made and what the progress heard.
fn run(
    models: &[&ModelSpec],
    rounds: usize,
    limit: f64,
    estimate: f64,
) -> (Result<BenchReport>, Vec<Call>, Heard) {
    let clock = Rc::new(Cell::new(0.0));
    let log = Rc::new(Mutex::new(Vec::new()));
    let heard = Heard::default();
    let (c, l) = (clock.clone(), log.clone());
    let report = bench_on(
        models,
        &options(rounds),
        &heard,
        || Deadline::with_clock(limit, "cpu", move || c.get()),
        |plans: &[&Plan]| {
            Ok(Box::new(Mock {
                kernels: plans.iter().map(|p| p.kernels.clone()).collect(),
                rounds: 0,
                estimate,
                clock,
                log: l,
            }) as Box<dyn TimingBackend>)
        },
    );
    let calls = log.lock().unwrap().clone();
    (report, calls, heard)
}

/// The rounds interleave the ceiling and every shape of every plan, in order, cold only in
/// the first round; the progress hears one task of `rounds × (shapes + 1)` steps, all done.
#[test]
fn rounds_interleave_the_ceiling_and_every_shape() {
    let (base, looped) = (model(false), model(true));
    let (report, calls, heard) = run(&[&base, &looped], 3, 1e9, 0.0);
    let report = report.unwrap();
    let shapes = [
        report.models[0].kernel_shapes,
        report.models[1].kernel_shapes,
    ];
    let mut want = Vec::new();
    for round in 0..3 {
        want.push(Call::Ceiling { warm: round > 0 });
        for (plan, &n) in shapes.iter().enumerate() {
            for index in 0..n {
                want.push(Call::Kernel {
                    plan,
                    index,
                    warm: round > 0,
                });
            }
        }
    }
    assert_eq!(calls, want);
    let total = (3 * (shapes[0] + shapes[1] + 1)) as u64;
    assert_eq!(
        *heard.begun.lock().unwrap(),
        [(
            format!(
                "timing {} kernel shapes and the ceiling, 3 rounds",
                shapes[0] + shapes[1]
            ),
            total
        )]
    );
    assert_eq!(*heard.advanced.lock().unwrap(), total);
    assert_eq!(*heard.ended.lock().unwrap(), 1);
}

/// Per shape the median round times its launches; per component the sum of its shapes over
/// the executions; the ceiling is the median round; spreads are `max / min - 1` over rounds;
/// two models give the ratios of the second to the first. The mock's rounds are 1, 4 and 2
/// times [`RATE`]'s time, so every figure is exact.
#[test]
fn medians_sums_spreads_and_ratios_are_exact() {
    let (base, looped) = (model(false), model(true));
    let (report, _, _) = run(&[&base, &looped], 3, 1e9, 0.0);
    let r = report.unwrap();
    assert_eq!(r.device, "mock");
    assert_eq!(r.ceiling_rounds, [RATE, RATE / 4.0, RATE / 2.0]);
    assert_eq!(r.ceiling_flops_per_second, RATE / 2.0);
    assert_eq!(r.ceiling_spread, 3.0);
    for (m, spec) in r.models.iter().zip([&base, &looped]) {
        let docs = crate::plan::documents(&spec.workload, 128).unwrap();
        let p = crate::plan::plan(
            &spec.model,
            &docs,
            spec.workload.attention,
            options(3).routing,
        )
        .unwrap();
        let x = spec.model.executions();
        assert_eq!(m.layer_executions, x);
        assert_eq!(m.kernel_shapes, p.kernels.len());
        assert_eq!(m.executed_flops, p.executed_flops());
        assert!(
            m.executed_flops > p.flops(),
            "the tiles execute more than the pairs"
        );
        assert!(m.flops_exact);
        // The median round (factor 2) of each shape: its FLOPs at half the rate.
        let stack = p.executed_flops() as f64 / (RATE / 2.0);
        assert_eq!(m.seconds_per_token, stack / m.tokens as f64);
        assert_eq!(m.seconds_per_layer_execution, stack / x as f64);
        assert_eq!(m.rounds_spread, 3.0);
        let mut shares = 0.0;
        for c in &m.components {
            assert_eq!(c.flops_per_second, RATE / 2.0, "{:?}", c.component);
            assert_eq!(c.of_ceiling, 1.0, "{:?}", c.component);
            let flops = p.component_flops(c.component);
            let executed = p.component_executed_flops(c.component);
            assert_eq!(c.seconds, executed as f64 / (RATE / 2.0) / x as f64);
            assert_eq!(c.flop_share, flops as f64 / p.flops() as f64);
            shares += c.time_share;
        }
        assert!((shares - 1.0).abs() < 1e-12, "{shares}");
    }
    // Time proportional to FLOPs: the measured ratio is the FLOP ratio.
    let (t, f) = (r.time_ratio.unwrap(), r.flop_ratio.unwrap());
    assert!(t > 1.0 && (t / f - 1.0).abs() < 1e-12, "{t} {f}");
    // Each round slows both models alike: every round's ratio is the same, so the interval
    // is the ratio itself and it is quoted.
    let stats = r.time_ratio_stats.unwrap();
    assert_eq!((stats.median, stats.rounds, stats.noisy), (t, 3, false));
    assert!((stats.interval[1] / stats.interval[0] - 1.0).abs() < 1e-12);
    // One model: no ratios.
    let (one, _, _) = run(&[&base], 3, 1e9, 0.0);
    let one = one.unwrap();
    assert_eq!((one.time_ratio, one.flop_ratio), (None, None));
    assert_eq!(one.models[0], r.models[0]);
}

/// With an even number of rounds the median is the upper middle one; with one round there
/// is no spread.
#[test]
fn the_median_of_even_rounds_is_the_upper_middle_one() {
    let base = model(false);
    // Rounds of factors 1, 4, 2, 1: sorted 1, 1, 2, 4, the upper middle 2.
    let (four, _, _) = run(&[&base], 4, 1e9, 0.0);
    let (three, _, _) = run(&[&base], 3, 1e9, 0.0);
    let (four, three) = (four.unwrap(), three.unwrap());
    assert_eq!(
        four.models[0].seconds_per_token,
        three.models[0].seconds_per_token
    );
    assert_eq!(four.ceiling_rounds.len(), 4);
    let (one, _, _) = run(&[&base], 1, 1e9, 0.0);
    let one = one.unwrap();
    assert_eq!(
        (one.ceiling_spread, one.models[0].rounds_spread),
        (0.0, 0.0)
    );
    // The one round (factor 1) is its own median: twice as fast as the median of three.
    assert_eq!(
        one.models[0].seconds_per_token * 2.0,
        three.models[0].seconds_per_token
    );
}

/// A run estimated past the deadline is refused after the first ceiling call, before any
/// shape is timed; one that passes the deadline stops before the next shape.
#[test]
fn deadlines_refuse_and_stop_runs() {
    let base = model(false);
    let (report, calls, heard) = run(&[&base], 3, 10.0, 9.5);
    let Err(Error::Backend { message, .. }) = report else {
        panic!("refused: {report:?}");
    };
    let message = message.to_string();
    assert!(
        message.contains("would take about 9.50 s, over the limit of 10.0 s"),
        "{message}"
    );
    assert_eq!(calls, [Call::Ceiling { warm: false }]);
    assert!(heard.begun.lock().unwrap().is_empty());
    // Each call takes one simulated second: past 4.5 s after five calls, the sixth not made.
    let (report, calls, heard) = run(&[&base], 3, 4.5, 0.0);
    let Err(Error::Backend { message, .. }) = report else {
        panic!("stopped: {report:?}");
    };
    let message = message.to_string();
    assert!(
        message.starts_with("stopped after 5.00 s, past the run's limit of 4.50 s"),
        "{message}"
    );
    assert_eq!(calls.len(), 5);
    assert_eq!(*heard.advanced.lock().unwrap(), 5);
    assert_eq!(*heard.ended.lock().unwrap(), 0);
}

/// Asked for a shape of a plan it was not opened on, a backend says so.
#[test]
fn a_shape_outside_the_plans_is_an_internal_error() {
    let mut m = Mock {
        kernels: vec![vec![ceiling_kernel()]],
        rounds: 0,
        estimate: 0.0,
        clock: Rc::default(),
        log: Rc::default(),
    };
    assert!(m.time(0, 0, false).is_ok());
    for (plan, index) in [(0, 1), (1, 0)] {
        assert!(matches!(
            m.time(plan, index, false),
            Err(Error::Internal { .. })
        ));
    }
}
