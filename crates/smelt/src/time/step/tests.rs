//! The step model's physics, one effect at a time.

use super::*;
use crate::model::Workload;
use crate::time::system::System;

fn model(config: &str) -> ModelSpec {
    let workload = Workload {
        context: 4096,
        mean_doc_len: Some(4096),
        ..ModelSpec::default_workload()
    };
    crate::hf::import(config, workload).unwrap()
}

fn qwen3_30b() -> ModelSpec {
    model(include_str!(
        "../../../../../tests/data/hf/qwen3-30b-a3b.json"
    ))
}

fn request(card: Card, training: Training, global_batch: u64) -> StepRequest {
    StepRequest {
        card,
        system: *System::of_card(card).unwrap().spec(),
        training,
        global_batch,
        recompute: Recompute::None,
        framework: Framework::MegatronCore,
        attention: AttentionImpl::Fused,
        dispatcher: Dispatcher::AllToAll,
    }
}

fn layout(tp: u64, ep: u64, dp: u64, zero: u64) -> Training {
    Training {
        tp,
        ep,
        dp,
        zero,
        micro_batch: 1,
        ..Training::default()
    }
}

#[test]
fn an_ep_group_of_consecutive_ranks_stays_on_nvlink_inside_a_node() {
    let spec = qwen3_30b();
    let h100 = Card::H100Sxm;
    // tp 2, ep 8: the eight EP ranks are eight consecutive GPUs, one node.
    let inside = predict_step(&spec, &request(h100, layout(2, 8, 8, 1), 64)).unwrap();
    // ep 16: two nodes.
    let across = predict_step(&spec, &request(h100, layout(2, 16, 8, 1), 64)).unwrap();
    let (a, b) = (inside.micro_batch.ep_comm, across.micro_batch.ep_comm);
    assert!(a > 0.0 && b > 4.0 * a, "inside {a} across {b}");
    // Inside the node: the copies for the other seven ranks at NVLink's 450 GB/s each way.
    let tokens = 4096.0 / 2.0;
    let bytes = tokens * 8.0 * 2048.0 * 2.0 * 7.0 / 8.0;
    let expected = 4.0 * 48.0 * bytes / 450e9;
    assert!((a / expected - 1.0).abs() < 1e-9, "{a} {expected}");
}

#[test]
fn a_b300s_all_to_all_across_nodes_costs_what_a_b200s_does() {
    let spec = model(include_str!(
        "../../../../../tests/data/hf/gpt-oss-120b.json"
    ));
    let t = Training {
        ep: 64,
        dp: 64,
        micro_batch: 4,
        ..Training::default()
    };
    let b200 = predict_step(&spec, &request(Card::B200, t, 1280)).unwrap();
    let b300 = predict_step(&spec, &request(Card::B300, t, 1280)).unwrap();
    assert!(
        b200.micro_batch.ep_comm > 0.5,
        "{}",
        b200.micro_batch.ep_comm
    );
    assert_eq!(b200.micro_batch.ep_comm, b300.micro_batch.ep_comm);
    // The ring collectives do use both of a B300's ports.
    let d = |c: Card| {
        System::of_card(c)
            .unwrap()
            .spec()
            .ring_bytes_per_second(8, 8)
    };
    assert_eq!(d(Card::B300), 2.0 * d(Card::B200));
}

#[test]
fn deepep_sends_fewer_bytes_across_nodes_and_the_same_inside_one() {
    let spec = qwen3_30b();
    let h100 = Card::H100Sxm;
    for (ep, fewer) in [(32, true), (8, false)] {
        let t = layout(1, ep, 32, 1);
        let a2a = predict_step(&spec, &request(h100, t, 64)).unwrap();
        let deepep = StepRequest {
            dispatcher: Dispatcher::DeepEp,
            ..request(h100, t, 64)
        };
        let d = predict_step(&spec, &deepep).unwrap();
        let (x, y) = (a2a.micro_batch.ep_comm, d.micro_batch.ep_comm);
        if fewer {
            assert!(y < 0.8 * x, "ep {ep}: {y} vs {x}");
        } else {
            assert_eq!(x, y);
        }
    }
}

#[test]
fn zero_3_gathers_the_parameters_every_micro_batch() {
    let spec = qwen3_30b();
    let h100 = Card::H100Sxm;
    let z1 = predict_step(&spec, &request(h100, layout(1, 8, 64, 1), 512)).unwrap();
    let z3 = predict_step(&spec, &request(h100, layout(1, 8, 64, 3), 512)).unwrap();
    assert_eq!(z1.micro_batch.fsdp_comm, 0.0);
    assert!(z3.micro_batch.fsdp_comm > 0.0);
    assert_eq!(z3.dp_comm, 0.0);
    // Per micro-batch 8 bytes per parameter (two bf16 gathers, an fp32 reduce-scatter)
    // against the distributed optimizer's 6 once per step.
    let (_, fsdp, _) = comm::data_parallel(&z3.request.training, &z3.request.system, 1.0, 1e9, 0.0);
    let (_, _, once) = comm::data_parallel(&z1.request.training, &z1.request.system, 1.0, 1e9, 0.0);
    assert!((fsdp / once - 8.0 / 6.0).abs() < 1e-12);
}

#[test]
fn hybrid_models_time_their_recurrent_mixers_and_only_their_attention_layers() {
    let h100 = Card::H100Sxm;
    for config in [
        include_str!("../../../../../tests/data/hf/nemotron-3-nano-30b-a3b.json"),
        include_str!("../../../../../tests/data/hf/qwen3-next-80b-a3b.json"),
    ] {
        let spec = model(config);
        let one = predict_step(&spec, &request(h100, layout(1, 8, 8, 1), 64)).unwrap();
        let mb = &one.micro_batch;
        assert!(mb.recurrent > 0.0 && mb.attention > 0.0, "{mb:?}");
        // Attention over the attention layers alone: a stack of only those costs the same.
        let m = &spec.model;
        assert!(m.attention_layers() < m.layers);
        let per_layer = mb.attention / m.attention_layers() as f64;
        assert!(per_layer > 0.0);
        // Twice the tokens per micro-batch, twice the scan's traffic.
        let two = predict_step(
            &spec,
            &request(
                h100,
                Training {
                    micro_batch: 2,
                    ..layout(1, 8, 8, 1)
                },
                64,
            ),
        )
        .unwrap();
        assert!((two.micro_batch.recurrent / mb.recurrent - 2.0).abs() < 1e-9);
    }
}

#[test]
fn a_model_without_moe_layers_has_no_expert_work() {
    let text = include_str!("../../../data/published/models/llama-3.1-70b.toml");
    let spec = ModelSpec::from_toml_str(text).unwrap();
    let t = Training {
        dp: 8,
        ep: 1,
        ..Training::default()
    };
    let p = predict_step(&spec, &request(Card::H100Sxm, t, 8)).unwrap();
    assert_eq!(p.micro_batch.experts, 0.0);
    assert_eq!(p.micro_batch.ep_comm, 0.0);
    assert!(p.micro_batch.gemm > 1.0, "{:?}", p.micro_batch);
}

/// `ep` divides a stage's `tp · dp · cp`, as the help and the training-memory check say; an
/// `etp` other than 1 (which the step model would ignore) is refused, naming it.
#[test]
fn the_layout_rule_is_ep_divides_tp_dp_cp_with_etp_one() {
    assert!(validate_layout(&layout(2, 8, 4, 1)).is_ok());
    let e = validate_layout(&layout(2, 16, 4, 1))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("training.ep: must divide tp · dp · cp (8); got 16"),
        "{e}"
    );
    let etp = Training {
        etp: Some(2),
        ..layout(2, 2, 4, 1)
    };
    let e = validate_layout(&etp).unwrap_err().to_string();
    assert!(e.starts_with("training.etp:") && e.contains("got 2"), "{e}");
    let etp = Training {
        etp: Some(1),
        ..layout(2, 8, 4, 1)
    };
    assert!(validate_layout(&etp).is_ok());
}

/// A layout no launcher can build is refused, naming the field: `ep` not dividing the
/// routed experts (Qwen3-30B-A3B's 128 over 256 ranks), virtual stages without pipeline
/// stages.
#[test]
fn ep_divides_the_experts_and_virtual_stages_need_a_pipeline() {
    let spec = qwen3_30b();
    let t = Training {
        ep: 256,
        ..layout(1, 256, 256, 1)
    };
    let e = predict_step(&spec, &request(Card::H100Sxm, t, 256))
        .unwrap_err()
        .to_string();
    assert!(
        e.starts_with("training.ep: must divide the model's routed experts (128)"),
        "{e}"
    );
    let t = Training {
        vp: 2,
        ..layout(1, 8, 8, 1)
    };
    let e = validate_layout(&t).unwrap_err().to_string();
    assert!(
        e.starts_with("training.vp: virtual pipeline stages need pipeline parallelism"),
        "{e}"
    );
}

#[test]
fn an_mtp_module_after_a_dense_last_layer_runs_the_dense_ffn_without_all_to_alls() {
    // Qwen3-30B-A3B with every layer's FFN dense (width 6144): the MoE table is unused, and
    // the MTP module, as Megatron-Core builds it after a dense last layer, is dense too.
    let mut without = qwen3_30b();
    let m = &mut without.model;
    m.dense = Some(crate::model::Dense {
        layers: (1..=m.layers).collect(),
        ffn: 6144,
    });
    let mut with = without.clone();
    with.model.mtp_layers = 1;
    let req = request(Card::H100Sxm, layout(1, 8, 8, 1), 64);
    let (x, y) = (
        predict_step(&with, &req).unwrap().micro_batch,
        predict_step(&without, &req).unwrap().micro_batch,
    );
    assert_eq!(x.experts, y.experts);
    assert_eq!(x.ep_comm, y.ep_comm);
    // Its dense FFN's training GEMMs at least: 6 · 3 · H · F FLOPs per token.
    let share = gemm_share(Card::H100Sxm).unwrap();
    let peak = Card::H100Sxm.spec().peak_flops_per_second;
    let ffn = 6.0 * 3.0 * 2048.0 * 6144.0 * 4096.0 / (share * peak);
    assert!(x.gemm - y.gemm > ffn, "{} {ffn}", x.gemm - y.gemm);
}

#[test]
fn megatron_core_runs_the_mtp_modules_on_the_last_stage_and_fsdp2_runs_none() {
    // DeepSeek-V3 (61 layers, the first three dense, one MTP module), two stages: 31
    // layers, then 30 MoE layers, the LM head and the MTP module, the slower stage.
    let with = model(include_str!(
        "../../../../../tests/data/hf/deepseek-v3.json"
    ));
    assert_eq!(with.model.mtp_layers, 1);
    let mut without = with.clone();
    without.model.mtp_layers = 0;
    let t = Training {
        ep: 8,
        pp: 2,
        dp: 8,
        micro_batch: 1,
        first_stage_layers: Some(31),
        ..Training::default()
    };
    let req = request(Card::H100Sxm, t, 64);
    let a = predict_step(&with, &req).unwrap();
    let b = predict_step(&without, &req).unwrap();
    for p in [&a, &b] {
        assert_eq!(p.pipeline.as_ref().unwrap().bottleneck, 2);
    }
    let (x, y) = (a.micro_batch, b.micro_batch);
    // One more layer execution of full attention and the MoE: a thirtieth of the stage's
    // attention, all-to-alls and host time (each of its 30 layers is such a layer).
    let close = |d: f64, e: f64| (d / e - 1.0).abs() < 1e-9;
    assert!(close(x.attention - y.attention, y.attention / 30.0));
    assert!(close(x.ep_comm - y.ep_comm, y.ep_comm / 30.0));
    assert!(close(
        x.host - y.host,
        host_seconds(Framework::MegatronCore)
    ));
    // Its head runs the LM head's GEMMs again: at least 6·H·V FLOPs per token.
    let share = gemm_share(Card::H100Sxm).unwrap();
    let peak = Card::H100Sxm.spec().peak_flops_per_second;
    let head = 6.0 * 7168.0 * 129280.0 * 4096.0 / (share * peak);
    assert!(x.gemm - y.gemm > head, "{} {head}", x.gemm - y.gemm);
    assert!(a.step_seconds > b.step_seconds);
    // The modules run whole on their stage: what they add does not depend on how many
    // stages the rest of the model is split over (one stage here).
    let one = Training {
        pp: 1,
        first_stage_layers: None,
        ..t
    };
    let req1 = request(Card::H100Sxm, one, 64);
    let (p, q) = (
        predict_step(&with, &req1).unwrap().micro_batch,
        predict_step(&without, &req1).unwrap().micro_batch,
    );
    for (name, d1, d2) in [
        ("gemm", p.gemm - q.gemm, x.gemm - y.gemm),
        ("experts", p.experts - q.experts, x.experts - y.experts),
        (
            "attention",
            p.attention - q.attention,
            x.attention - y.attention,
        ),
        ("host", p.host - q.host, x.host - y.host),
    ] {
        assert!(close(d1, d2), "{name}: pp 1 {d1}, pp 2 {d2}");
    }
    // Nothing is negative, at any tensor parallelism (the cross-entropy is split by it).
    let tp8 = request(Card::H100Sxm, Training { tp: 8, dp: 1, ..t }, 8);
    let m = predict_step(&with, &tp8).unwrap().micro_batch;
    assert!(m.memory_bound > 0.0 && m.recompute >= 0.0, "{m:?}");
    // Transformers builds no MTP module: under FSDP2 the two models take the same step.
    let fsdp2 = StepRequest {
        framework: Framework::Fsdp2,
        ..req
    };
    let (a, b) = (
        predict_step(&with, &fsdp2).unwrap(),
        predict_step(&without, &fsdp2).unwrap(),
    );
    assert_eq!(a.step_seconds, b.step_seconds);
}

#[test]
fn fsdp2_copies_every_gathered_parameter_and_gradient_on_the_compute_stream() {
    // Qwen3-30B-A3B on one GPU: FSDP2 copies its parameters out of the all-gather buffer in
    // the forward and the backward (2 + 2 bytes each time), and its gradients into the
    // reduce-scatter buffer (2 bytes read, 4 written), even in a group of one.
    let spec = qwen3_30b();
    let counting = crate::model::Counting {
        embeddings: true,
        lm_head: true,
        ..Default::default()
    };
    let (params, _) = crate::cost::params(&spec.model, &counting).unwrap();
    let all = params.total().unwrap().as_f64();
    let hbm = Card::H100Sxm.spec().memory_bytes_per_second * SHIPPED.memory_share;
    let fsdp2 = |zero: u64| StepRequest {
        framework: Framework::Fsdp2,
        ..request(Card::H100Sxm, layout(1, 1, 1, zero), 8)
    };
    let z3 = predict_step(&spec, &fsdp2(3)).unwrap().micro_batch;
    assert!(
        (z3.fsdp_copies / (14.0 * all / hbm) - 1.0).abs() < 1e-12,
        "{z3:?}"
    );
    // Below ZeRO 3 the step gathers and reduce-scatters once per step (8 micro-batches
    // here), and copies once: one gather's 4 bytes and the gradients' 6.
    let z1 = predict_step(&spec, &fsdp2(1)).unwrap();
    assert_eq!(z1.micro_batches, 8);
    let z1 = z1.micro_batch;
    assert!((z1.fsdp_copies / (10.0 * all / hbm / 8.0) - 1.0).abs() < 1e-12);
    // They are GPU work of the micro-batch.
    let parts = z3.gemm + z3.experts + z3.attention + z3.recurrent + z3.memory_bound;
    let comm = z3.recompute + z3.tp_comm + z3.ep_comm + z3.pp_comm;
    assert!((z3.gpu - (parts + comm + z3.fsdp_copies)).abs() < 1e-12);
    // Eight EP ranks each copy an eighth of the experts.
    let ep8 = StepRequest {
        framework: Framework::Fsdp2,
        ..request(Card::H100Sxm, layout(1, 8, 8, 3), 64)
    };
    let e = predict_step(&spec, &ep8).unwrap().micro_batch.fsdp_copies;
    let experts = params.experts.as_f64();
    let want = 14.0 * (all - experts + experts / 8.0) / hbm;
    assert!((e / want - 1.0).abs() < 1e-12, "{e} {want}");
    // Megatron-Core's parameters and gradients live in its collectives' buffers.
    let megatron = predict_step(&spec, &request(Card::H100Sxm, layout(1, 1, 1, 3), 8));
    assert_eq!(megatron.unwrap().micro_batch.fsdp_copies, 0.0);
}
