//! Tests of the hot-sheet model: what it predicts must follow from its limits and costs.

use super::*;

/// A shorter simulation than the command's, to keep the tests quick in a debug build.
fn model() -> Model {
    Model {
        seconds: 30.0,
        warmup_s: 5.0,
        ..Model::default()
    }
}

#[test]
fn the_same_seed_gives_the_same_prediction() {
    let m = model();
    assert_eq!(
        m.predict(Design::Paced, 300, 1.0),
        m.predict(Design::Paced, 300, 1.0)
    );
    let other = Model { seed: 2, ..m };
    assert_ne!(
        m.predict(Design::Paced, 300, 1.0).p99_ms,
        other.predict(Design::Paced, 300, 1.0).p99_ms
    );
}

#[test]
fn the_p99_grows_with_the_editors() {
    let m = model();
    let p: Vec<f64> = [100, 1000, 10_000]
        .iter()
        .map(|&n| m.predict(Design::Paced, n, 1.0).p99_ms)
        .collect();
    assert!(p[0] < p[1] && p[1] < p[2], "{p:?}");
    // Under the group's budget nothing is paced: about the writer, the poke and the pull.
    assert!(p[0] < 1000.0, "{p:?}");
}

#[test]
fn a_push_per_mutation_overruns_the_group_at_1000_editors() {
    let m = model();
    let today = m.predict(Design::Today, 1000, 1.0);
    assert!(
        today.sqs_sends_per_s > m.limits.sqs_group_sends_per_s,
        "{today:?}"
    );
    assert!(!today.stable, "{today:?}");
    assert_eq!(
        today.limits_used(&m.limits)[0].0,
        "api_requests",
        "{today:?}"
    );
    // The queue grows for as long as the load lasts: seconds behind, not milliseconds.
    assert!(today.p99_ms > 10_000.0, "{today:?}");
    // At 100 editors the same design holds.
    let hundred = m.predict(Design::Today, 100, 1.0);
    assert!(hundred.stable && hundred.p99_ms < 1000.0, "{hundred:?}");
}

#[test]
fn the_paced_design_keeps_1000_editors_within_every_limit() {
    let m = model();
    let p = m.predict(Design::Paced, 1000, 1.0);
    assert!(p.stable, "{p:?}");
    assert!(p.sqs_sends_per_s <= m.group_budget() * 1.01, "{p:?}");
    assert!(p.log_wcu_per_s < m.limits.partition_wcu, "{p:?}");
    assert!(p.log_rcu_per_s < m.limits.partition_rcu, "{p:?}");
    assert!(p.api_requests_per_s <= m.limits.api_rps, "{p:?}");
    assert!(
        p.api_concurrency + p.writer_concurrency < m.limits.lambda_concurrency,
        "{p:?}"
    );
    // Every push carries several mutations, so a batch carries more than ten.
    assert!(p.mutations_per_batch > 10.0, "{p:?}");
    // Pacing costs latency: a mutation waits up to one push interval.
    assert!(p.p99_ms > p.plan.push_interval_s * 1000.0 * 0.9, "{p:?}");
}

#[test]
fn every_mutation_is_applied_once() {
    let m = model();
    for design in [Design::Today, Design::Paced] {
        let plan = m.plan(design, 500, 1.0);
        let mut rng = Rng::new(7);
        let msgs = pushes(&m, plan, 500, 1.0, &mut rng);
        let made: usize = msgs.iter().map(|x| x.made.len()).sum();
        let run = simulate(&m, plan, &msgs, &mut rng);
        assert_eq!(run.mutations as usize, made, "{design:?}");
        // 500 editors x 1/s x 30 s, each editor's phase under a second.
        assert_eq!(made, 15_000, "{design:?}");
    }
}

#[test]
fn pokes_are_coalesced_into_windows() {
    let mut p = Pokes {
        window: 0.1,
        last: f64::NEG_INFINITY,
        pending: None,
        count: 0,
    };
    assert_eq!(p.announce(1.0), 1.0);
    assert_eq!(p.announce(1.03), 1.1);
    assert_eq!(p.announce(1.08), 1.1);
    // After the window's poke, the next commit inside the next window waits for it to end.
    assert!((p.announce(1.15) - 1.2).abs() < 1e-9);
    assert_eq!(p.count, 2);
    assert_eq!(p.announce(5.0), 5.0);
    assert_eq!(p.count, 4);
}

#[test]
fn the_write_units_match_the_measured_100_editor_run() {
    let (measured_wru, measured_appends) = measured_100().expect("docs/bench/hot.json");
    // The local run at 100 editors committed about nine mutations an entry (appends per
    // mutation 0.11): its writer's round trip was longer than at 64 editors. With a commit slow
    // enough to give the same batches, the model's write units must come out as measured.
    let local = Model {
        costs: Costs {
            commit_median_ms: 60.0,
            ..Costs::default()
        },
        ..model()
    };
    let p = local.predict(Design::Today, 100, 1.0);
    let per_entry = 1.0 / measured_appends;
    assert!(
        (p.mutations_per_batch - per_entry).abs() < 3.0,
        "model {} mutations an entry against measured {per_entry}",
        p.mutations_per_batch
    );
    let wru = (p.log_wcu_per_s + p.range_wcu_per_s) / 100.0;
    // The model leaves out the snapshot trigger's writes, so it may be somewhat below.
    assert!(
        wru > measured_wru * 0.7 && wru < measured_wru * 1.2,
        "model {wru} against measured {measured_wru}"
    );
    // With the default (64-editor) round trip, batches are smaller and each mutation carries
    // more of the range items' units: never fewer than with fuller batches.
    let aws = model().predict(Design::Today, 100, 1.0);
    assert!(aws.mutations_per_batch < p.mutations_per_batch, "{aws:?}");
    assert!(
        (aws.log_wcu_per_s + aws.range_wcu_per_s) / 100.0 >= wru,
        "{aws:?}"
    );
}

#[test]
fn cost_per_mutation_falls_when_pushes_carry_more() {
    let m = model();
    let today = m.predict(Design::Today, 200, 1.0);
    let paced = m.predict(Design::Paced, 1000, 1.0);
    assert!(today.cost_per_mutation_usd > 0.0);
    assert!(
        paced.cost_per_mutation_usd < today.cost_per_mutation_usd,
        "{paced:?} {today:?}"
    );
}

#[test]
fn significant_digits() {
    assert_eq!(significant(0.000_012_345, 3), 0.000_012_3);
    assert_eq!(significant(1234.5, 2), 1200.0);
    assert_eq!(significant(0.0, 3), 0.0);
}
