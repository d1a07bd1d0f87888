//! The snapshot engine through the S3 adapters on the emulator: build, incremental build, resume,
//! read back, payloads streamed from S3, missing objects.

use bytes::Bytes;
use serde_json::json;
use sheetlog_core::aws::s3::UPLOAD_PART_BYTES;
use sheetlog_core::aws::{S3Bucket, Untagged, s3_client};
use sheetlog_core::sheet::{EntryBody, Event, Import, ImportFormat, Value};
use sheetlog_core::snapshot::{
    BlobError, BlobParts, BlobStore, BuildConfig, Checkpoint, ChunkHash, FORMAT_VERSION, LogEntry,
    SnapshotBuilder, build_snapshot, chunk_key, list_key, load_manifest, manifest_key, materialize,
    read_range,
};
use sheetlog_pipeline::Roles;
use sheetlog_sheet::sample::write_sample_csv;
use sheetlog_tests::TestStack;
use sheetlog_tests::emulator::{Emulator, RequestCount, unique_prefix};
use sheetlog_tests::fixtures::set_event;
use uuid::Uuid;

async fn bucket(emu: &Emulator) -> anyhow::Result<(aws_sdk_s3::Client, String)> {
    let s3 = emu.s3().await;
    let name = unique_prefix("snapshots");
    s3.create_bucket().bucket(&name).send().await?;
    Ok((s3, name))
}

#[tokio::test]
async fn snapshot_round_trips_through_s3() -> anyhow::Result<()> {
    let emu = Emulator::start()?;
    let (s3, name) = bucket(&emu).await?;
    let store = S3Bucket::new(s3.clone(), &name);
    let payloads = store.clone();
    let log = Uuid::new_v4();

    // The import file is an uploaded payload in the same bucket.
    let mut csv = Vec::new();
    write_sample_csv(&mut csv, 3_000)?;
    let payload_key = format!("payloads/{log}/{}", Uuid::new_v4());
    s3.put_object()
        .bucket(&name)
        .key(&payload_key)
        .body(csv.into())
        .send()
        .await?;
    let mut entries = vec![
        LogEntry {
            seq: 0,
            entry: EntryBody::Snapshot,
            payload: None,
        },
        LogEntry {
            seq: 1,
            entry: EntryBody::Event(Event::Import(Import {
                format: ImportFormat::Csv,
                group: None,
                layout: None,
            })),
            payload: Some(payload_key),
        },
    ];
    // A small chunk target so 30,000 cells make many chunks.
    let config = BuildConfig {
        chunk_target: 16 * 1024,
    };
    let mut checkpoints = Vec::new();
    let first = SnapshotBuilder::new(&store, &payloads, config, log, 2, None, entries.clone())?
        .run(|c| checkpoints.push(c))
        .await?;
    assert_eq!(first.manifest()?.cells, 30_000);
    assert!(
        first.manifest()?.chunks.len() > 5,
        "{} chunks",
        first.manifest()?.chunks.len()
    );
    assert_eq!(first.manifest_key, manifest_key(log, 2));

    // Everything the manifest names is in the bucket, and reads back identically.
    let loaded = load_manifest(&store, log, 2)
        .await?
        .ok_or_else(|| anyhow::anyhow!("manifest not in S3"))?;
    assert_eq!(loaded, first.manifest()?);
    for c in &loaded.chunks {
        assert!(
            store
                .exists(&chunk_key(log, &c.hash, loaded.format))
                .await?
        );
    }
    let sheet = materialize(&store, &loaded).await?;
    assert_eq!(sheet.cell_count(), 30_000);

    // Resuming from a checkpoint in the middle gives the same manifest.
    let cp = &checkpoints[checkpoints.len() / 2];
    let resumed =
        SnapshotBuilder::resume(&store, &payloads, config, log, 2, None, entries.clone(), cp)?
            .run(|_| {})
            .await?;
    assert_eq!(resumed.manifest()?, first.manifest()?);

    // An incremental snapshot after one edit shares every chunk but one.
    entries.push(LogEntry::event(2, set_event(&[("B1501", json!("edited"))])));
    let next = build_snapshot(
        &store,
        &payloads,
        config,
        log,
        3,
        Some(loaded.clone()),
        entries[2..].to_vec(),
    )
    .await?;
    assert_eq!(next.stats.chunks_written, 1);
    let shared = next
        .manifest()?
        .chunks
        .iter()
        .filter(|c| loaded.chunks.contains(c))
        .count();
    assert_eq!(shared, loaded.chunks.len() - 1);
    let (values, stats) = read_range(
        &store,
        &payloads,
        log,
        Some(&next.manifest()?),
        &[],
        "A1501:B1501".parse()?,
    )
    .await?;
    assert_eq!(values[0][1], Value::Text("edited".into()));
    assert_eq!(stats.chunks_loaded, 1);

    // Missing objects are `None` / `false`, not errors.
    assert_eq!(
        store
            .get(&chunk_key(log, &ChunkHash([0; 32]), FORMAT_VERSION))
            .await?,
        None
    );
    assert!(!store.exists("snapshots/nothing-here").await?);
    assert_eq!(load_manifest(&store, log, 99).await?, None);
    store
        .put("snapshots/probe", Bytes::from_static(b"x"))
        .await?;
    assert_eq!(
        store.get("snapshots/probe").await?,
        Some(Bytes::from_static(b"x"))
    );
    // A conditional PUT (`If-None-Match: *`) writes a key that is not there, and is refused
    // (412, not an error) for one that is, which keeps its bytes: one request each.
    let count = RequestCount::default();
    let counted = S3Bucket::new(
        aws_sdk_s3::Client::from_conf(
            aws_sdk_s3::config::Builder::from(&emu.sdk_config().await)
                .force_path_style(true)
                .interceptor(count.clone())
                .build(),
        ),
        &name,
    );
    assert!(
        counted
            .put_if_absent("snapshots/counted", Bytes::from_static(b"c"))
            .await?
    );
    assert!(
        !counted
            .put_if_absent("snapshots/counted", Bytes::from_static(b"d"))
            .await?
    );
    assert_eq!(count.get(), 2, "one request a call");
    assert!(
        store
            .put_if_absent("snapshots/once", Bytes::from_static(b"first"))
            .await?
    );
    assert!(
        !store
            .put_if_absent("snapshots/once", Bytes::from_static(b"second"))
            .await?
    );
    assert_eq!(
        store.get("snapshots/once").await?,
        Some(Bytes::from_static(b"first"))
    );
    assert!(
        !store
            .put_if_absent("snapshots/probe", Bytes::from_static(b"y"))
            .await?
    );
    Ok(())
}

#[tokio::test]
async fn a_missing_bucket_is_an_error_naming_the_key() -> anyhow::Result<()> {
    let emu = Emulator::start()?;
    let store = S3Bucket::new(emu.s3().await, unique_prefix("no-such-bucket"));
    let Err(err) = store.put("snapshots/x", Bytes::from_static(b"x")).await else {
        anyhow::bail!("a put into a missing bucket succeeded");
    };
    assert!(err.to_string().contains("snapshots/x"), "{err}");
    let payloads = S3Bucket::new(emu.s3().await, unique_prefix("no-such-bucket"));
    use sheetlog_core::snapshot::ImportSource;
    assert!(payloads.open("payloads/x").await.is_err());
    Ok(())
}

/// Parts of `size` bytes each, `count` of them, of bytes that do not repeat within a part, then
/// (with `fail_after`) an error in place of part `fail_after`.
#[derive(Debug)]
struct TestParts {
    size: usize,
    count: usize,
    sent: usize,
    fail_after: Option<usize>,
}

impl TestParts {
    fn part(i: usize, size: usize) -> Bytes {
        (0..size)
            .map(|j| ((i * 7919 + j * 31 + j / 251) % 251) as u8)
            .collect::<Vec<u8>>()
            .into()
    }

    fn all(size: usize, count: usize) -> Vec<u8> {
        (0..count).flat_map(|i| Self::part(i, size)).collect()
    }
}

#[async_trait::async_trait]
impl BlobParts for TestParts {
    async fn next_part(&mut self) -> Result<Option<Bytes>, BlobError> {
        if Some(self.sent) == self.fail_after {
            return Err(BlobError::new("put", "test", "the part source failed"));
        }
        if self.sent == self.count {
            return Ok(None);
        }
        self.sent += 1;
        Ok(Some(Self::part(self.sent - 1, self.size)))
    }
}

async fn open_uploads(s3: &aws_sdk_s3::Client, bucket: &str) -> anyhow::Result<usize> {
    let out = s3.list_multipart_uploads().bucket(bucket).send().await?;
    Ok(out.uploads().len())
}

/// The bucket of a stack of its own, and each function's SDK configuration over it (their own
/// role keys when `./scripts/test` records calls for the IAM check).
async fn stack_with_roles(label: &str) -> anyhow::Result<(TestStack, Roles)> {
    let stack = TestStack::new(label).await?;
    let roles = stack.roles(&[], None, None).await?;
    Ok((stack, roles))
}

#[tokio::test]
async fn an_object_written_in_parts_round_trips_through_a_multipart_upload() -> anyhow::Result<()> {
    // The snapshot worker writes a large manifest this way (and the API a fork's first one):
    // with their roles, so the IAM check sees the multipart calls and the abort.
    let (stack, roles) = stack_with_roles("multipart").await?;
    let s3 = stack.s3.clone();
    let name = stack.resources.bucket.clone();
    let store = S3Bucket::new(s3_client(&roles.snapshot_worker), &name);

    // 12 MiB in 1 MiB pieces: three upload parts (5, 5 and 2 MiB), completed into one object.
    let mib = 1 << 20;
    let mut parts = TestParts {
        size: mib,
        count: 12,
        sent: 0,
        fail_after: None,
    };
    store.put_parts("snapshots/big", &mut parts).await?;
    let got = store.get("snapshots/big").await?.unwrap_or_default();
    assert_eq!(got.len(), 12 * mib);
    assert!(
        got[..] == TestParts::all(mib, 12)[..],
        "the object differs from its parts"
    );
    let head = s3
        .head_object()
        .bucket(&name)
        .key("snapshots/big")
        .send()
        .await?;
    // A completed multipart upload's entity tag ends in the count of its parts.
    assert!(
        head.e_tag().unwrap_or_default().ends_with("-3\""),
        "{:?}",
        head.e_tag()
    );
    assert_eq!(UPLOAD_PART_BYTES, 5 * mib);

    // An object that ends within one part is one PutObject.
    let mut small = TestParts {
        size: 1000,
        count: 3,
        sent: 0,
        fail_after: None,
    };
    store.put_parts("snapshots/small", &mut small).await?;
    assert_eq!(
        store.get("snapshots/small").await?.unwrap_or_default()[..],
        TestParts::all(1000, 3)[..]
    );
    let head = s3
        .head_object()
        .bucket(&name)
        .key("snapshots/small")
        .send()
        .await?;
    assert!(
        !head.e_tag().unwrap_or_default().contains('-'),
        "{:?}",
        head.e_tag()
    );

    // A source that fails after a part was uploaded: no object, and the upload is aborted.
    let mut failing = TestParts {
        size: mib,
        count: 12,
        sent: 0,
        fail_after: Some(7),
    };
    let Err(err) = store.put_parts("snapshots/failed", &mut failing).await else {
        anyhow::bail!("a put whose parts failed succeeded");
    };
    assert!(err.to_string().contains("the part source failed"), "{err}");
    assert!(!store.exists("snapshots/failed").await?);
    assert_eq!(
        open_uploads(&s3, &name).await?,
        0,
        "the failed upload was aborted"
    );
    // The same failure as the API's (a fork's first manifest): aborted with its role too.
    let api = S3Bucket::new(s3_client(&roles.api), &name);
    failing.sent = 0;
    assert!(
        api.put_parts("snapshots/failed-fork", &mut failing)
            .await
            .is_err()
    );
    assert_eq!(
        open_uploads(&s3, &name).await?,
        0,
        "the fork's upload was aborted"
    );
    Ok(())
}

/// Each function that may look for an object that is not there (an expired upload or push, a
/// chunk not written yet, a payload the lifecycle rule removed) is told "missing", not an error.
/// On AWS that needs `s3:ListBucket` besides the read (else S3 answers 403): run with each
/// function's role, the IAM check sees that every one of them holds it.
#[tokio::test]
async fn every_function_that_reads_a_missing_key_is_told_it_is_missing() -> anyhow::Result<()> {
    let (stack, roles) = stack_with_roles("missing-keys").await?;
    let name = &stack.resources.bucket;
    let bucket = |sdk: &aws_config::SdkConfig| S3Bucket::new(s3_client(sdk), name);
    assert_eq!(bucket(&roles.api).get("payloads/gone").await?, None);
    assert_eq!(
        bucket(&roles.snapshot_worker).get("snapshots/gone").await?,
        None
    );
    assert_eq!(bucket(&roles.sync_writer).get("pushes/gone").await?, None);
    // The archiver exists in a stack whose retentionMode is not keep.
    let archiver = stack
        .roles(&["retentionMode=archive"], None, None)
        .await?
        .archiver;
    assert_eq!(bucket(&archiver).get("payloads/gone").await?, None);
    assert!(matches!(
        bucket(&roles.stream_router)
            .remove_auto_delete_tag("payloads/gone")
            .await?,
        Untagged::Missing
    ));
    Ok(())
}

/// A build whose chunk list goes to S3 a part at a time, resumed in a fresh builder from a
/// checkpoint that names parts, writes the manifest a from-scratch build writes.
#[tokio::test]
async fn a_build_resumed_across_chunk_list_parts_in_s3_writes_the_same_manifest()
-> anyhow::Result<()> {
    let emu = Emulator::start()?;
    let (s3, name) = bucket(&emu).await?;
    let store = S3Bucket::new(s3.clone(), &name);
    let log = Uuid::new_v4();
    let mut csv = Vec::new();
    write_sample_csv(&mut csv, 3_000)?;
    let payload_key = format!("payloads/{log}/{}", Uuid::new_v4());
    s3.put_object()
        .bucket(&name)
        .key(&payload_key)
        .body(csv.into())
        .send()
        .await?;
    let entries = vec![LogEntry {
        seq: 0,
        entry: EntryBody::Event(Event::Import(Import {
            format: ImportFormat::Csv,
            group: None,
            layout: None,
        })),
        payload: Some(payload_key),
    }];
    let config = BuildConfig {
        chunk_target: 16 * 1024,
    };
    let mut checkpoints = Vec::new();
    // One piece of the chunk list per part.
    let first = SnapshotBuilder::new(&store, &store, config, log, 1, None, entries.clone())?
        .with_list_block(1)
        .run(|c| checkpoints.push(serde_json::to_string(&c).unwrap_or_default()))
        .await?;
    let want = store
        .get(&first.manifest_key)
        .await?
        .ok_or_else(|| anyhow::anyhow!("no manifest"))?;
    let cp: Checkpoint = serde_json::from_str(&checkpoints[checkpoints.len() - 1])?;
    assert!(
        cp.pieces.parts().len() > 3,
        "{} parts",
        cp.pieces.parts().len()
    );
    for h in cp.pieces.parts() {
        assert!(store.exists(&list_key(log, h)).await?);
    }
    store.put(&first.manifest_key, Bytes::new()).await?;
    let resumed = SnapshotBuilder::resume(&store, &store, config, log, 1, None, entries, &cp)?
        .run(|_| {})
        .await?;
    assert_eq!(resumed.manifest_key, first.manifest_key);
    assert_eq!(store.get(&resumed.manifest_key).await?, Some(want));
    Ok(())
}

/// S3 answers a conditional PUT that races another conditional write on the same key (an SDK
/// retry racing its own first attempt, or two builders writing one chunk) with
/// `409 ConditionalRequestConflict`, which the SDK does not retry; the emulator never does. Through
/// a proxy that answers 409 as S3 would, the chunk write tries again and lands, and a write that
/// meets only conflicts fails rather than claim the chunk is there.
#[tokio::test]
async fn a_conditional_put_that_races_another_is_tried_again() -> anyhow::Result<()> {
    let emu = Emulator::start()?;
    let (_, name) = bucket(&emu).await?;
    let wire = sheetlog_tests::wire::WireCounter::start(emu.endpoint(), "none").await?;
    let proxied = sheetlog_core::aws::s3_client(&wire.sdk_config(&emu.sdk_config().await));
    let store = S3Bucket::new(proxied, &name);

    wire.conflict_conditional_puts(2);
    let wrote = store
        .put_object_if_absent("chunks/a", Bytes::from_static(b"one"))
        .await?;
    assert!(wrote, "the third attempt writes the chunk");
    assert_eq!(
        wire.counts
            .s3_conflicts_sent
            .load(std::sync::atomic::Ordering::SeqCst),
        2
    );
    assert_eq!(
        store.get_object("chunks/a").await?.as_deref(),
        Some(&b"one"[..])
    );
    // Now it exists: the conditional write is refused (412), not retried.
    assert!(
        !store
            .put_object_if_absent("chunks/a", Bytes::from_static(b"one"))
            .await?
    );
    // Conflicts every time: an error after the attempts, never "already there".
    wire.conflict_conditional_puts(u64::MAX);
    let err = store
        .put_object_if_absent("chunks/b", Bytes::from_static(b"two"))
        .await;
    assert!(err.is_err(), "{err:?}");
    assert_eq!(store.get_object("chunks/b").await?, None);
    Ok(())
}
