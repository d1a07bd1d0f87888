//! The catalog's DynamoDB adapter on the emulator (`functions/core/src/aws/catalog.rs`): the
//! same rules the in-memory catalog keeps (`sheetlog_core::catalog::conformance`), over the real
//! wire protocol: transactions guarding the owner count, the listing index, paging cursors.

use sheetlog_core::aws::DynamoCatalog;
use sheetlog_core::catalog::{Catalog, Role, Sheet};
use sheetlog_tests::Emulator;
use sheetlog_tests::emulator::unique_prefix;

async fn catalog(label: &str) -> anyhow::Result<(Emulator, DynamoCatalog)> {
    let emulator = Emulator::start()?;
    let dynamo = emulator.dynamodb().await;
    let table = format!("{}-catalog", unique_prefix(label));
    DynamoCatalog::create_table(&dynamo, &table).await?;
    Ok((emulator, DynamoCatalog::new(dynamo, table)))
}

#[tokio::test]
async fn the_dynamodb_catalog_keeps_the_rules() -> anyhow::Result<()> {
    let (_emulator, c) = catalog("catalog-rules").await?;
    sheetlog_core::catalog::conformance::check(&c, "d-")
        .await
        .map_err(anyhow::Error::msg)
}

/// Every catalog create through the fault adapter loses its response and is retried without the
/// first call's idempotency token: the retry finds the sheet it wrote and reports success, and
/// every other rule holds as before.
#[tokio::test]
async fn the_dynamodb_catalog_keeps_the_rules_when_create_responses_are_lost() -> anyhow::Result<()>
{
    use sheetlog_core::faults::{FaultProfile, Faults};
    let (_emulator, c) = catalog("catalog-lossy").await?;
    let faults = Faults::new(
        FaultProfile {
            lost_response: 1.0,
            ..FaultProfile::none()
        },
        1,
    );
    let lossy = sheetlog_core::layer::Layered::new(c, faults.clone());
    sheetlog_core::catalog::conformance::check(&lossy, "l-")
        .await
        .map_err(anyhow::Error::msg)?;
    assert!(
        faults
            .counts
            .lost_responses
            .load(std::sync::atomic::Ordering::Relaxed)
            >= 5
    );
    Ok(())
}

#[tokio::test]
async fn a_thousand_sheets_list_newest_first_one_page_at_a_time() -> anyhow::Result<()> {
    let (_emulator, c) = catalog("catalog-many").await?;
    let mut made = Vec::new();
    for i in 0..120_i64 {
        let sheet = Sheet {
            log: sheetlog_core::LogId::new_random(),
            name: format!("sheet {i}"),
            owner: "many".into(),
            created_ms: 1_000 + i,
            updated_ms: 1_000 + i,
        };
        c.create_sheet(&sheet, None).await?;
        made.push(sheet);
    }
    let first = c.list_sheets("many", 100, None).await?;
    assert_eq!(first.sheets.len(), 100);
    assert_eq!(first.sheets[0].sheet, made[119]);
    assert_eq!(first.sheets[0].role, Role::Owner);
    let rest = c.list_sheets("many", 100, first.cursor.as_deref()).await?;
    assert_eq!(rest.sheets.len(), 20);
    assert_eq!(rest.sheets[19].sheet.name, "sheet 0");
    assert_eq!(rest.cursor, None);
    Ok(())
}
