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
        throttle: "off".into(),
        no_gateway: false,
        svg: None,
        from_json: Vec::new(),
        model: false,
        editors: vec![100],
        model_seconds: 60.0,
        model_api_rps: 1000.0,
        pace: false,
    }
}

#[test]
fn pacing_follows_the_local_budgets() {
    let mut args = tiny(ModeArg::Queued);
    args.rate = 1.0;
    assert_eq!(pacing(&args, 200), (Duration::ZERO, POKE_WINDOW));
    args.pace = true;
    // The budgets are 80 % of the local capacities: 65.6 pushes and 348 requests a second. 100
    // editors push every 1.52 s each; their pages' pulls fit what the pushes leave (282 a second)
    // with a poke every 354 ms.
    let (push, poke) = pacing(&args, 100);
    assert_eq!(push.as_millis(), 1524);
    assert_eq!(poke.as_millis(), 354);
    // 200 editors: a push every 3.05 s each (65.6 a second), pokes every 708 ms.
    let (push, poke) = pacing(&args, 200);
    assert_eq!(push.as_millis(), 3048);
    assert_eq!(poke.as_millis(), 708);
    // A few editors keep today's window.
    assert_eq!(pacing(&args, 4).1, POKE_WINDOW);
}

/// The gateway in front: the stage's throttle given, the API function's timeout as the
/// template's.
fn gateway(throttle: Option<Throttle>) -> GatewaySettings {
    GatewaySettings {
        throttle,
        function_timeout: Duration::from_secs(25),
        function: sheetlog_pipeline::roles::API.into(),
        integration_timeout: local_gateway::INTEGRATION_TIMEOUT,
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
    let f = measure(
        Mode::Queued,
        4,
        &tiny(ModeArg::Queued),
        Some(&gateway(None)),
    )
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
    let f = measure(
        Mode::Direct,
        4,
        &tiny(ModeArg::Direct),
        Some(&gateway(None)),
    )
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

/// Behind a stage throttle far below what the clients ask for, pushes and pulls are answered
/// `429` and the clients, backing off as Replicache does, still get every mutation applied and
/// confirmed, once each and in order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clients_throttled_by_the_stage_still_land_every_mutation() {
    let tight = Throttle {
        rate_limit: 4.0,
        burst_limit: 4,
    };
    let f = measure(
        Mode::Direct,
        4,
        &tiny(ModeArg::Direct),
        Some(&gateway(Some(tight))),
    )
    .await
    .expect("the throttled run completes");
    assert!(
        count(&f, "push_throttled") + count(&f, "pull_throttled") > 0,
        "4 clients pulling every 100 ms exceed 4 requests/s: {f:?}"
    );
    let made = count(&f, "mutations_made");
    assert_eq!(made, 16, "{f:?}");
    assert_eq!(count(&f, "mutations_applied"), made, "{f:?}");
    assert_eq!(count(&f, "mutations_confirmed_by_pull"), made, "{f:?}");
    assert_eq!(count(&f, "duplicates"), 0, "{f:?}");
    assert_eq!(count(&f, "out_of_order"), 0, "{f:?}");
    assert_eq!(f["throttle_rate_limit"], json!(4.0), "{f:?}");
}

/// With `--pace`, a client making mutations faster than its push interval sends them in fewer,
/// fuller pushes, and every one still lands once and in order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn paced_clients_push_less_often_and_land_every_mutation() {
    let mut args = tiny(ModeArg::Queued);
    args.pace = true;
    // 4 clients x 50 mutations/s is 200 a second, over the local push budget (65.6): each client
    // pushes every 61 ms, about three mutations a push.
    args.rate = 50.0;
    let (push, _) = pacing(&args, 4);
    assert_eq!(push.as_millis(), 60);
    let f = measure(Mode::Queued, 4, &args, Some(&gateway(None)))
        .await
        .expect("the paced run completes");
    let made = count(&f, "mutations_made");
    assert_eq!(made, 400, "{f:?}");
    assert_eq!(count(&f, "mutations_applied"), made, "{f:?}");
    assert_eq!(count(&f, "mutations_confirmed_by_pull"), made, "{f:?}");
    assert_eq!(count(&f, "duplicates"), 0, "{f:?}");
    assert_eq!(count(&f, "out_of_order"), 0, "{f:?}");
    assert!(
        count(&f, "pushes") * 2 < made,
        "fewer, fuller pushes: {f:?}"
    );
    assert_eq!(f["paced"], json!(true), "{f:?}");
}
