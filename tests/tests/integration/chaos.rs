//! The history checker's short profile (`sheetlog_tests::chaos`): every fault profile, a few
//! thousand operations each, no anomaly. `./scripts/bench chaos` runs the long one.

use sheetlog_core::faults::FaultProfile;
use sheetlog_tests::chaos::{ChaosConfig, run};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_history_checker_finds_no_anomaly_under_any_fault_profile() -> anyhow::Result<()> {
    // It keeps both cores busy: let it not overlap the contention tests.
    let _slot = sheetlog_tests::heavy_test_slot().await;
    let ops: u64 = std::env::var("SHEETLOG_CHAOS_OPS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(5000);
    let mut faults = 0;
    let only = std::env::var("SHEETLOG_CHAOS_PROFILE").ok();
    for (i, name) in FaultProfile::NAMES.iter().enumerate() {
        if only.as_deref().is_some_and(|o| o != *name) {
            continue;
        }
        let profile = FaultProfile::named(name).expect("a named profile");
        let report = run(ChaosConfig::new(profile, 42 + i as u64, ops)).await?;
        println!("{}", serde_json::to_string(&report)?);
        assert_eq!(report.anomalies, 0, "{name}: {report:#?}");
        assert!(
            report.acknowledged > ops / 20,
            "{name}: too few appends landed: {report:#?}"
        );
        assert!(
            report.snapshots_completed > 0,
            "{name}: no snapshot completed"
        );
        assert!(report.segments > 1, "{name}: segments never rolled");
        assert!(
            report.pushed_mutations_acknowledged > 0,
            "{name}: no queued push was applied"
        );
        faults += report.faults_injected;
    }
    assert!(faults > 100, "the profiles injected only {faults} faults");
    Ok(())
}
