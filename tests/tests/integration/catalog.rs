//! The catalog's DynamoDB adapter on the emulator (`functions/core/src/aws/catalog.rs`): the
//! same rules the in-memory catalog keeps (`sheetlog_core::catalog::conformance`), over the real
//! wire protocol: transactions guarding the owner count, the listing index, paging cursors, and
//! the members' copies of the sheet's name (member items from before them, a share racing a
//! rename, a rename whose copies fail half-way).

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use anyhow::Context;
use aws_sdk_dynamodb::operation::transact_write_items::TransactWriteItemsInput;
use aws_sdk_dynamodb::operation::update_item::UpdateItemInput;
use aws_sdk_dynamodb::types::AttributeValue;
use aws_smithy_runtime_api::box_error::BoxError;
use aws_smithy_runtime_api::client::interceptors::Intercept;
use aws_smithy_runtime_api::client::interceptors::context::{
    BeforeSerializationInterceptorContextRef, Input,
};
use aws_smithy_runtime_api::client::runtime_components::RuntimeComponents;
use aws_smithy_types::config_bag::ConfigBag;
use sheetlog_core::LogId;
use sheetlog_core::aws::DynamoCatalog;
use sheetlog_core::catalog::{Catalog, LISTED_STAMP_INTERVAL_MS, Member, Role, Sheet};
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

/// Removes the copy of the sheet from `user`'s member item of `log`, as member items were
/// written before names were copied onto them.
async fn strip_copy(
    dynamo: &aws_sdk_dynamodb::Client,
    table: &str,
    log: LogId,
    user: &str,
) -> Result<(), String> {
    dynamo
        .update_item()
        .table_name(table)
        .key("pk", AttributeValue::S(format!("LOG#{log}")))
        .key("sk", AttributeValue::S(format!("MEMBER#{user}")))
        .update_expression("REMOVE #n, #o, updatedAt, nameRev")
        .expression_attribute_names("#n", "name")
        .expression_attribute_names("#o", "owner")
        .send()
        .await
        .map(drop)
        .map_err(|e| format!("{e:?}"))
}

/// `user`'s member item of `log`, as stored.
async fn member_item(
    dynamo: &aws_sdk_dynamodb::Client,
    table: &str,
    log: LogId,
    user: &str,
) -> anyhow::Result<HashMap<String, AttributeValue>> {
    dynamo
        .get_item()
        .table_name(table)
        .key("pk", AttributeValue::S(format!("LOG#{log}")))
        .key("sk", AttributeValue::S(format!("MEMBER#{user}")))
        .consistent_read(true)
        .send()
        .await?
        .item
        .context("no member item")
}

fn test_sheet(owner: &str, name: &str, at: i64) -> Sheet {
    Sheet {
        log: LogId::new_random(),
        name: name.into(),
        owner: owner.into(),
        created_ms: at,
        updated_ms: at,
    }
}

fn viewer(user: &str) -> Member {
    Member {
        user_id: user.into(),
        email: None,
        role: Role::Viewer,
    }
}

#[tokio::test]
async fn the_dynamodb_catalog_lists_members_without_a_copy() -> anyhow::Result<()> {
    let (_emulator, c) = catalog("catalog-uncopied").await?;
    let (dynamo, table) = (c.client().clone(), c.table().to_owned());
    let strip = |log, user: String| {
        let (dynamo, table) = (&dynamo, &table);
        async move { strip_copy(dynamo, table, log, &user).await }
    };
    sheetlog_core::catalog::conformance::check_uncopied(&c, "u-", strip)
        .await
        .map_err(anyhow::Error::msg)
}

/// A member item written before names were copied gets its copy from the first stamp that is
/// due (the first write to the sheet after the upgrade), so its listing stops reading the sheet
/// item; a rename gives it one too.
#[tokio::test]
async fn member_items_from_before_copies_get_one_from_a_due_stamp_or_a_rename() -> anyhow::Result<()>
{
    let (_emulator, c) = catalog("catalog-heal").await?;
    let (dynamo, table) = (c.client().clone(), c.table().to_owned());
    let sheet = test_sheet("hana", "Rota", 1_000);
    c.create_sheet(&sheet, None).await?;
    c.put_member(sheet.log, &viewer("ivo")).await?;
    for user in ["hana", "ivo"] {
        strip_copy(&dynamo, &table, sheet.log, user)
            .await
            .map_err(anyhow::Error::msg)?;
    }
    let due = 1_000 + LISTED_STAMP_INTERVAL_MS;
    c.touch(sheet.log, due).await?;
    for user in ["hana", "ivo"] {
        let item = member_item(&dynamo, &table, sheet.log, user).await?;
        assert_eq!(item.get("name"), Some(&AttributeValue::S("Rota".into())));
        assert_eq!(
            item.get("updatedAt"),
            Some(&AttributeValue::N(due.to_string()))
        );
    }
    strip_copy(&dynamo, &table, sheet.log, "ivo")
        .await
        .map_err(anyhow::Error::msg)?;
    c.rename(sheet.log, "Rota 2", due + 1).await?;
    let item = member_item(&dynamo, &table, sheet.log, "ivo").await?;
    assert_eq!(item.get("name"), Some(&AttributeValue::S("Rota 2".into())));
    assert_eq!(item.get("nameRev"), Some(&AttributeValue::N("1".into())));
    Ok(())
}

/// Runs `on` once, in the SDK call's own thread, just before the first request of the kind
/// `when` picks is serialised: a racing request that lands between a catalog method's read and
/// its write.
struct Before<W, F> {
    when: W,
    on: F,
    done: Arc<AtomicBool>,
}

impl<W, F> std::fmt::Debug for Before<W, F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Before").field("done", &self.done).finish()
    }
}

impl<W, F> Intercept for Before<W, F>
where
    W: Fn(&Input) -> bool + Send + Sync + 'static,
    F: Fn() -> anyhow::Result<()> + Send + Sync + 'static,
{
    fn name(&self) -> &'static str {
        "Before"
    }

    fn read_before_serialization(
        &self,
        ctx: &BeforeSerializationInterceptorContextRef<'_>,
        _: &RuntimeComponents,
        _: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        if (self.when)(ctx.input()) && !self.done.swap(true, Ordering::SeqCst) {
            (self.on)().map_err(|e| BoxError::from(e.to_string()))?;
        }
        Ok(())
    }
}

/// A client of `base` that runs `on` before its first request `when` picks.
fn client_with_hook<W, F>(
    base: &aws_sdk_dynamodb::Client,
    when: W,
    on: F,
) -> aws_sdk_dynamodb::Client
where
    W: Fn(&Input) -> bool + Send + Sync + 'static,
    F: Fn() -> anyhow::Result<()> + Send + Sync + 'static,
{
    let hook = Before {
        when,
        on,
        done: Arc::new(AtomicBool::new(false)),
    };
    let conf = base.config().to_builder().interceptor(hook).build();
    aws_sdk_dynamodb::Client::from_conf(conf)
}

/// A share reads the sheet's name, then a whole rename runs (the sheet item, then the copies on
/// the members it finds, which do not include the share's member yet), then the share's
/// transaction is sent. Its condition on the name's revision fails, so it reads the sheet again
/// and the new member copies the new name; without that condition it would list the old name
/// until the next rename.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_share_racing_a_rename_copies_the_new_name() -> anyhow::Result<()> {
    let (_emulator, c) = catalog("catalog-race").await?;
    let sheet = test_sheet("jan", "Old name", 1_000);
    c.create_sheet(&sheet, None).await?;
    let renamer = c.clone();
    let log = sheet.log;
    let rename = move || {
        let renamer = renamer.clone();
        tokio::task::block_in_place(|| {
            tokio::runtime::Handle::current().block_on(renamer.rename(log, "New name", 2_000))
        })?;
        Ok(())
    };
    let is_transaction = |i: &Input| i.downcast_ref::<TransactWriteItemsInput>().is_some();
    let racing = DynamoCatalog::new(
        client_with_hook(c.client(), is_transaction, rename),
        c.table(),
    );
    racing.put_member(log, &viewer("kai")).await?;
    assert_eq!(
        c.sheet(log).await?.map(|s| s.name).as_deref(),
        Some("New name")
    );
    let kais = c.list_sheets("kai", 10, None).await?;
    assert_eq!(kais.sheets.len(), 1);
    assert_eq!(kais.sheets[0].sheet.name, "New name");
    assert_eq!(kais.sheets[0].role, Role::Viewer);
    Ok(())
}

/// A rename whose copy onto one member's item fails answers the failure, with the sheet renamed
/// and that member listing the old name; repeating the rename, or the next stamp that is due,
/// copies the name to that member too.
#[tokio::test]
async fn a_rename_whose_copies_fail_half_way_is_finished_by_a_repeat_or_a_due_stamp()
-> anyhow::Result<()> {
    let (_emulator, c) = catalog("catalog-half").await?;
    let sheet = test_sheet("lea", "Plan", 1_000);
    c.create_sheet(&sheet, None).await?;
    for user in ["max", "noa", "oli"] {
        c.put_member(sheet.log, &viewer(user)).await?;
    }
    let log = sheet.log;
    let to_noa = |i: &Input| {
        i.downcast_ref::<UpdateItemInput>()
            .and_then(|u| u.key())
            .and_then(|k| k.get("sk"))
            == Some(&AttributeValue::S("MEMBER#noa".into()))
    };
    let fail = || anyhow::bail!("the copy to noa is lost");
    let flaky = DynamoCatalog::new(client_with_hook(c.client(), to_noa, fail), c.table());
    let name_of = |user: &'static str| {
        let c = &c;
        async move {
            let page = c.list_sheets(user, 10, None).await?;
            anyhow::Ok(page.sheets.first().map(|l| l.sheet.name.clone()))
        }
    };
    assert!(flaky.rename(log, "Plan B", 2_000).await.is_err());
    assert_eq!(
        c.sheet(log).await?.map(|s| s.name).as_deref(),
        Some("Plan B")
    );
    assert_eq!(name_of("noa").await?.as_deref(), Some("Plan"));
    assert_eq!(name_of("max").await?.as_deref(), Some("Plan B"));
    c.rename(log, "Plan B", 3_000).await?;
    for user in ["lea", "max", "noa", "oli"] {
        assert_eq!(name_of(user).await?.as_deref(), Some("Plan B"), "{user}");
    }

    let flaky = DynamoCatalog::new(client_with_hook(c.client(), to_noa, fail), c.table());
    assert!(flaky.rename(log, "Plan C", 4_000).await.is_err());
    assert_eq!(name_of("noa").await?.as_deref(), Some("Plan B"));
    c.touch(log, 4_000 + LISTED_STAMP_INTERVAL_MS).await?;
    assert_eq!(name_of("noa").await?.as_deref(), Some("Plan C"));
    Ok(())
}
