//! Snapshot formats: every format's manifest reads back, older snapshots still read and the next
//! build on them rewrites them whole in the current format, and the manifest reader's limits.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::Write;

use bytes::Bytes;

use super::tests::{
    LOG, SMALL, Spec, build, entries_of, million_cell_sheet, replay, rt, snapshot_blobs,
};
use super::*;
use crate::event::*;
use crate::sample::write_sample_csv;
use crate::test_support::{set_cells, set_one};
use crate::{CellRef, Value};

const ZSTD_MAGIC: [u8; 4] = [0x28, 0xb5, 0x2f, 0xfd];

fn inflate(blob: &[u8]) -> Vec<u8> {
    zstd::stream::decode_all(blob).unwrap()
}

/// Stores `m` (a snapshot in `store`) again as format `format` (1 or 2) wrote it: each chunk at
/// its old key, compressed at level 3, and the manifest in that format's encoding. Returns the
/// old manifest and the keys of its objects.
async fn as_old_format(store: &MemBlobs, m: &Manifest, format: u32) -> (Manifest, Vec<String>) {
    assert!(format < 3);
    let mut old = Manifest {
        format,
        ..m.clone()
    };
    let mut keys = Vec::new();
    for c in &mut old.chunks {
        let blob = store
            .get(&c.key(m.log_id, m.format))
            .await
            .unwrap()
            .unwrap();
        let raw = format::open_blob("chunk", &c.hash, &blob).unwrap();
        let mut legacy = b"SLC1".to_vec();
        legacy.extend(zstd::bulk::compress(&raw, 3).unwrap());
        c.bytes = legacy.len() as u64;
        let key = c.key(m.log_id, format);
        assert!(!key.contains("/v3/"));
        store.put(&key, Bytes::from(legacy)).await.unwrap();
        keys.push(key);
    }
    let key = manifest_key(m.log_id, m.seq);
    store
        .put(&key, Bytes::from(old.to_blob().unwrap()))
        .await
        .unwrap();
    keys.push(key);
    (old, keys)
}

#[test]
fn manifests_of_every_format_read_back_and_format_3_is_streamed() {
    rt().block_on(async {
        let store = MemBlobs::new();
        let payloads = MemImports::new();
        let (_, full) = million_cell_sheet(&store, &payloads).await;
        let m = full.manifest().unwrap();
        assert_eq!(m.format, FORMAT_VERSION);
        assert_eq!(FORMAT_VERSION, 3);
        assert_eq!(
            (full.rows, full.cells, full.chunks, full.stored_bytes),
            (m.rows, m.cells, m.chunks.len() as u64, m.stored_bytes())
        );
        let stored = store.get(&full.manifest_key).await.unwrap().unwrap();
        // What the builder streamed is what the manifest encodes to as a whole, and it is the
        // canonical JSON (chunks before the totals) in one zstd frame.
        assert_eq!(Some(&stored), full.manifest_blob.as_ref());
        assert_eq!(stored.len() as u64, full.manifest_bytes);
        assert_eq!(&stored[..], &m.to_blob().unwrap()[..]);
        let json = m.to_bytes();
        assert_eq!(inflate(&stored), json);
        assert!(json.starts_with(br#"{"format":3,"logId":""#));
        let tail = format!("],\"rows\":{},\"cells\":{}}}\n", m.rows, m.cells);
        assert!(json.ends_with(tail.as_bytes()));
        assert!(
            stored.len() * 2 < json.len(),
            "{} bytes stored for {} of JSON",
            stored.len(),
            json.len()
        );
        assert_eq!(Manifest::from_bytes("k", &stored).unwrap(), m);
        // Format 2: a zstd frame of the same JSON, read the same.
        let two = Manifest {
            format: 2,
            ..m.clone()
        };
        let two_blob = two.to_blob().unwrap();
        assert_eq!(two_blob[..4], ZSTD_MAGIC);
        assert_eq!(Manifest::from_bytes("k", &two_blob).unwrap(), two);
        // Format 1: the JSON itself.
        let one = Manifest {
            format: 1,
            ..m.clone()
        };
        assert_eq!(one.to_blob().unwrap(), one.to_bytes());
        assert_eq!(Manifest::from_bytes("k", &one.to_bytes()).unwrap(), one);
        // Garbage in a zstd frame is a bad manifest, not a panic.
        let mut bad = stored.to_vec();
        bad.truncate(bad.len() / 2);
        assert!(matches!(
            Manifest::from_bytes("k", &bad),
            Err(SnapshotError::BadManifest { .. })
        ));
    });
}

/// The reader bounds what a manifest costs it: the inflated JSON (256 MB; a smaller limit here,
/// through the same code) and the zstd window a frame asks for (2 MiB, format 2's).
#[test]
fn the_manifest_reader_refuses_an_over_limit_manifest() {
    rt().block_on(async {
        let store = MemBlobs::new();
        let payloads = MemImports::new();
        let mut csv = Vec::new();
        write_sample_csv(&mut csv, 300).unwrap();
        let entries = entries_of(&[Spec::Csv(String::from_utf8(csv).unwrap())], &payloads);
        let built = build(&store, &payloads, SMALL, 1, None, &entries).await;
        let json_len = built.manifest().unwrap().to_bytes().len();
        let blob = built.manifest_blob.as_deref().unwrap();
        assert!(Manifest::from_bytes_within("k", blob, json_len).is_ok());
        let err = Manifest::from_bytes_within("k", blob, json_len - 1).unwrap_err();
        assert!(
            matches!(&err, SnapshotError::BadManifest { reason, .. } if reason.contains("size limit")),
            "{err}"
        );

        // The same JSON in a frame that declares an 8 MiB window: refused, while the frame
        // with a window within the limit reads.
        let json = built.manifest().unwrap().to_bytes();
        let frame = |window_log: u32| {
            let mut z = zstd::stream::write::Encoder::new(Vec::new(), 3).unwrap();
            z.window_log(window_log).unwrap();
            z.write_all(&json).unwrap();
            z.finish().unwrap()
        };
        assert!(Manifest::from_bytes("k", &frame(21)).is_ok());
        let err = Manifest::from_bytes("k", &frame(23)).unwrap_err();
        assert!(
            matches!(err, SnapshotError::BadManifest { .. }),
            "{err}"
        );

        // A manifest whose chunks do not add up to its rows.
        let mut m = built.manifest().unwrap();
        m.rows += 1;
        let json = serde_json::to_vec(&m).unwrap();
        assert!(matches!(
            Manifest::from_bytes("k", &json),
            Err(SnapshotError::BadManifest { .. })
        ));
    });
}

/// A snapshot format 1 or 2 wrote (chunks at level 3 under `chunks/<hash>`, the manifest plain
/// or compressed JSON) still reads; the next build on it reads every chunk and writes every
/// chunk again in format 3 (under `chunks/v3/`, so the old level-3 blobs of the same chunks are
/// never taken for new ones), byte for byte what a build from scratch writes. A reader of an
/// older format refuses the format-3 manifest rather than misreading it.
#[test]
fn an_old_format_snapshot_reads_and_the_next_build_on_it_rewrites_every_chunk() {
    for old_format in [1, 2] {
        rt().block_on(async {
            let made = MemBlobs::new();
            let payloads = MemImports::new();
            let mut csv = Vec::new();
            write_sample_csv(&mut csv, 60).unwrap();
            let entries = entries_of(
                &[
                    Spec::Csv(String::from_utf8(csv).unwrap()),
                    Spec::Event(set_one(
                        CellRef { row: 30, col: 2 },
                        Value::Text("edited".into()),
                    )),
                ],
                &payloads,
            );
            let first = build(&made, &payloads, SMALL, 1, None, &entries).await;
            let first_m = first.manifest().unwrap();
            assert!(first_m.chunks.len() > 3);
            let (old, keys) = as_old_format(&made, &first_m, old_format).await;
            // A store holding only the old snapshot, as a bucket written by the old builder.
            let store = MemBlobs::new();
            for k in &keys {
                store
                    .put(k, made.get(k).await.unwrap().unwrap())
                    .await
                    .unwrap();
            }
            let stored = store.get(&first.manifest_key).await.unwrap().unwrap();
            if old_format == 1 {
                assert_eq!(stored[0], b'{', "format 1 stores plain JSON");
            } else {
                assert_eq!(stored[..4], ZSTD_MAGIC, "format 2 compresses its manifest");
            }
            let read = load_manifest(&store, LOG, 1).await.unwrap().unwrap();
            assert_eq!(read, old);
            assert_eq!(
                materialize(&store, &read).await.unwrap(),
                replay(&entries, 1, &payloads)
            );

            let next = build(&store, &payloads, SMALL, 2, Some(read.clone()), &entries).await;
            let next_m = next.manifest().unwrap();
            assert_eq!(next_m.format, FORMAT_VERSION);
            assert_eq!(next.stats.chunks_reused, 0);
            assert_eq!(next.stats.chunks_opened, old.chunks.len() as u64);
            assert_eq!(next.stats.chunks_written, next_m.chunks.len() as u64);
            let scratch = MemBlobs::new();
            let full = build(&scratch, &payloads, SMALL, 2, None, &entries).await;
            assert_eq!(next_m, full.manifest().unwrap());
            assert_eq!(
                snapshot_blobs(&store, &next_m),
                snapshot_blobs(&scratch, &full.manifest().unwrap())
            );
            assert!(
                next_m
                    .chunks
                    .iter()
                    .all(|c| c.key(LOG, next_m.format).contains("/chunks/v3/"))
            );
            // The old snapshot is left as it was, and still reads.
            for k in &keys {
                assert_eq!(store.get(k).await.unwrap(), made.get(k).await.unwrap());
            }
            assert_eq!(
                materialize(&store, &read).await.unwrap(),
                replay(&entries, 1, &payloads)
            );

            let new = store.get(&next.manifest_key).await.unwrap().unwrap();
            assert!(
                serde_json::from_slice::<Manifest>(&new).is_err(),
                "a format-1 reader must not parse a format-3 manifest"
            );
        });
    }
}

/// Format 3 on a large sheet: successive incremental snapshots (edits, a row inserted, rows
/// deleted) equal a from-scratch build of the same state, manifest and chunk blobs byte for
/// byte, and each writes a few chunks, not the sheet.
#[test]
fn format_3_incremental_builds_are_byte_identical_to_from_scratch_builds() {
    rt().block_on(async {
        let store = MemBlobs::new();
        let payloads = MemImports::new();
        let (mut entries, full) = million_cell_sheet(&store, &payloads).await;
        let edits = [
            set_cells((0..20).map(|i| {
                (
                    CellRef {
                        row: 50_000 + i,
                        col: 3,
                    },
                    Value::Number(f64::from(i)),
                )
            })),
            Event::InsertRows(InsertRows {
                at: RowNumber(7),
                count: 1,
                values: vec![vec![Value::Text("inserted".into())]],
            }),
            Event::DeleteRows(DeleteRows {
                at: RowNumber(90_000),
                count: 3,
            }),
        ];
        let mut base = full.manifest().unwrap();
        for ev in edits {
            let seq = entries.len() as u64;
            entries.push(LogEntry::event(seq, ev));
            let next = build(
                &store,
                &payloads,
                BuildConfig::default(),
                seq + 1,
                Some(base.clone()),
                &entries,
            )
            .await;
            let next_m = next.manifest().unwrap();
            assert_eq!(next_m.format, 3);
            assert!(
                next.stats.chunks_written <= 4,
                "{} chunks written",
                next.stats.chunks_written
            );
            let scratch = MemBlobs::new();
            let fresh = build(
                &scratch,
                &payloads,
                BuildConfig::default(),
                seq + 1,
                None,
                &entries,
            )
            .await;
            assert_eq!(next.manifest_blob, fresh.manifest_blob);
            assert_eq!(
                snapshot_blobs(&store, &next_m),
                snapshot_blobs(&scratch, &fresh.manifest().unwrap())
            );
            base = next_m;
        }
    });
}
