//! `restore` entries: the sheet as of an earlier sequence, kept as a snapshot manifest under the
//! log's prefix (written before the entry is appended, by [`SnapshotBuilder::restore`]), and how
//! every read and build starts from it.
//!
//! A restore is not replayed cell by cell. Its manifest lists the chunks of the state it names,
//! most of them the very chunks of an older snapshot (content-addressed, so nothing is copied),
//! and [`resolve_restores`] makes the newest restore among a read's entries the read's base.
//! Every reader (the API's reads at any version, the snapshot worker, the rebuild tool) passes its
//! entries through it before handing them to the read path or the builder, which refuse an
//! unresolved `restore` rather than skip it.
//!
//! [`SnapshotBuilder::restore`]: super::SnapshotBuilder::restore

use uuid::Uuid;

use super::SnapshotError;
use super::builder::LogEntry;
use super::format::{Manifest, restore_manifest_key};
use super::store::BlobStore;
use crate::event::Event;

/// The sequence a `restore` entry restores, or `None` for any other entry.
pub fn restored_seq(entry: &LogEntry) -> Option<u64> {
    entry.entry.events().find_map(|e| match e {
        Event::Restore(r) => Some(r.seq),
        _ => None,
    })
}

/// Where the newest `restore` among `entries` leaves a read or a build that starts at `base`:
/// the restored state's manifest as the base and only the entries after the restore. Unchanged
/// when `entries` hold no restore. The manifest's `seq` is moved to the entry after the restore,
/// so the entries that follow continue it without a gap (`seq` is only where the entries
/// resume; the chunks are the restored version's).
pub async fn resolve_restores(
    store: &dyn BlobStore,
    log_id: Uuid,
    base: Option<Manifest>,
    mut entries: Vec<LogEntry>,
) -> Result<(Option<Manifest>, Vec<LogEntry>), SnapshotError> {
    let Some((i, to)) = entries
        .iter()
        .enumerate()
        .rev()
        .find_map(|(i, e)| restored_seq(e).map(|to| (i, to)))
    else {
        return Ok((base, entries));
    };
    let at = entries[i].seq;
    let manifest = restored_manifest(store, log_id, to).await?;
    let rest = entries.split_off(i + 1);
    Ok((
        Some(Manifest {
            seq: at + 1,
            ..manifest
        }),
        rest,
    ))
}

/// The kept state as of `seq` (see [`restore_manifest_key`]), checked to be that log's at that
/// sequence. Missing is an error: the API writes it before it appends the entry.
pub async fn restored_manifest(
    store: &dyn BlobStore,
    log_id: Uuid,
    seq: u64,
) -> Result<Manifest, SnapshotError> {
    let key = restore_manifest_key(log_id, seq);
    let bytes = store
        .get(&key)
        .await?
        .ok_or_else(|| SnapshotError::MissingObject(key.clone()))?;
    let manifest = Manifest::from_bytes(&key, &bytes)?;
    if manifest.log_id != log_id || manifest.seq != seq {
        return Err(SnapshotError::BadManifest {
            key,
            reason: format!(
                "manifest is for log {} at {}, expected log {log_id} at {seq}",
                manifest.log_id, manifest.seq
            ),
        });
    }
    Ok(manifest)
}
