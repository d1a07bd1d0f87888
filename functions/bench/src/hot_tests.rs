//! Tests of the hot bench's helpers.

use super::*;

#[test]
fn columns_are_spreadsheet_letters() {
    assert_eq!(column(1), "A");
    assert_eq!(column(26), "Z");
    assert_eq!(column(27), "AA");
    assert_eq!(column(100), "CV");
}

#[test]
fn runs_are_found_wherever_the_body_holds_them() {
    let body = json!({"clientID": "c-x-1", "mutations": [{"id": 1}]});
    let mut runs = Vec::new();
    collect_runs(&body, &mut runs);
    assert_eq!(runs.len(), 1);
    let batch = json!({"runs": [{"clientID": "a", "mutations": [{"id": 1}]},
        {"clientID": "b", "mutations": [{"id": 1}, {"id": 2}]}]});
    let mut runs = Vec::new();
    collect_runs(&batch, &mut runs);
    assert_eq!(runs.iter().map(|r| r.1.len()).sum::<usize>(), 3);
}

fn tiny(mode: ModeArg) -> HotArgs {
    HotArgs {
        json: true,
        clients: vec![4],
        rate: 2.0,
        seconds: 2,
        mode,
        drain_secs: 60,
        pull_ms: 100,
        pull_on: PullOn::Timer,
        svg: None,
        from_json: Vec::new(),
    }
}

fn count(f: &Figures, key: &str) -> u64 {
    f.get(key)
        .and_then(Value::as_u64)
        .unwrap_or_else(|| panic!("{key} missing in {f:?}"))
}

/// The same through the FIFO sync queue and its writer (syncWrites=queued).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tiny_queued_run_applies_every_mutation_once_in_order() {
    let f = measure(Mode::Queued, 4, &tiny(ModeArg::Queued))
        .await
        .expect("the queued run completes");
    assert_eq!(count(&f, "mutations_made"), 16, "{f:?}");
    assert_eq!(count(&f, "mutations_applied"), 16, "{f:?}");
    assert_eq!(count(&f, "mutations_confirmed_by_pull"), 16, "{f:?}");
    assert_eq!(count(&f, "duplicates"), 0, "{f:?}");
    assert_eq!(count(&f, "out_of_order"), 0, "{f:?}");
    assert_eq!(count(&f, "payload_mismatches"), 0, "{f:?}");
    assert_eq!(count(&f, "confirmed_but_missing"), 0, "{f:?}");
    assert_eq!(count(&f, "push_refusals"), 0, "{f:?}");
    assert!(f["wru_per_mutation"].as_f64().unwrap_or(0.0) > 0.0, "{f:?}");
}

/// The CI profile of `bench hot`: a few clients for a few seconds in the direct mode, checked
/// on the counts only (never on timings): every mutation made is in the log once, in order,
/// with its payload, and the wire counter saw the writes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tiny_direct_run_applies_every_mutation_once_in_order() {
    let f = measure(Mode::Direct, 4, &tiny(ModeArg::Direct))
        .await
        .expect("the direct run completes");
    let made = count(&f, "mutations_made");
    // 4 clients x 2 pushes/s x 2 s: every slot of the schedule is made, even one that came
    // while the client waited for a push.
    assert_eq!(made, 16, "{f:?}");
    assert_eq!(count(&f, "mutations_applied"), made, "{f:?}");
    assert_eq!(count(&f, "mutations_confirmed_by_pull"), made, "{f:?}");
    assert_eq!(count(&f, "duplicates"), 0, "{f:?}");
    assert_eq!(count(&f, "out_of_order"), 0, "{f:?}");
    assert_eq!(count(&f, "payload_mismatches"), 0, "{f:?}");
    assert_eq!(count(&f, "confirmed_but_missing"), 0, "{f:?}");
    let wru = f["wru_per_mutation"].as_f64().unwrap_or(0.0);
    assert!(wru >= 1.0, "a direct push writes at least its entry: {f:?}");
    let appends = f["appends_per_mutation"].as_f64().unwrap_or(0.0);
    assert!(appends > 0.0 && appends <= 1.0, "{f:?}");
}
