//! Appending (`docs/design.md`, "Append"): find the head of the log, then put at the next number
//! on condition that it is free, with idempotency keys (the Dedupe table) and rebasing; and the
//! head lookups that appends and `next_seq` share.

use bytes::Bytes;
use tracing::debug;

use super::{
    AppendOnce, AppendOptions, Appended, EventLog, IdempotencyKey, SegmentHint, corrupt, rebase,
    retry,
};
use crate::domain::dedupe::{DedupeKey, DedupeRecord, KeyKind, MonthColumns, fingerprint};
use crate::domain::keys;
use crate::domain::{EntryRecord, EntryType, LogId, NewEntry, RequestUnits};
use crate::error::LogError;
use crate::ports::{Consistency, DedupeKeys, LogEntries, OnceOutcome, PayloadStore, PutOutcome};

impl<S: LogEntries + DedupeKeys, P: PayloadStore> EventLog<S, P> {
    /// Appends an entry (`docs/design.md`, "Append"): find the newest entry, then put at the next number
    /// on condition that it is free, retrying with backoff when another writer wins.
    pub async fn append(
        &self,
        log: LogId,
        entry: NewEntry,
        opts: AppendOptions,
    ) -> Result<Appended, LogError> {
        match self.append_inner(log, entry, opts, None, None).await? {
            AppendOnce::Appended(a) => Ok(a),
            AppendOnce::Duplicate { .. } => Err(corrupt(log, "a duplicate without a key".into())),
        }
    }

    /// Appends an entry at most once per idempotency key (`docs/design.md`, "Idempotency keys"):
    /// the entry and the key are written in one transaction, so a retry of the same request,
    /// within the key window, appends nothing and answers the first request's seq. The same key
    /// with a different entry is [`LogError::KeyReused`].
    pub async fn append_once(
        &self,
        log: LogId,
        entry: NewEntry,
        opts: AppendOptions,
        key: &IdempotencyKey,
    ) -> Result<AppendOnce, LogError> {
        self.append_inner(log, entry, opts, Some(key), None).await
    }

    /// Whether `key` already appended `entry` to `log` within the key window: a strong read of
    /// one Dedupe item (1 RRU under 4 KB), no write. `Some(Duplicate)` for the same request,
    /// [`LogError::KeyReused`] for a different one, `None` if the key is unknown. Callers use it
    /// to skip expensive work before [`EventLog::append_once`], which makes the real decision.
    pub async fn find_duplicate(
        &self,
        log: LogId,
        entry: &NewEntry,
        key: &IdempotencyKey,
    ) -> Result<Option<AppendOnce>, LogError> {
        self.find_record(self.dedupe_record(log, entry, key)).await
    }

    /// Whether upload `upload_id` was committed to `log` within the key window, and at which
    /// seq. An upload key stands for the upload, not for the entry its commit built (see
    /// [`Self::dedupe_record`]), so this needs nothing but the id: a retried commit finds its
    /// entry even after the uploaded object has expired.
    pub async fn find_upload(
        &self,
        log: LogId,
        upload_id: &str,
    ) -> Result<Option<AppendOnce>, LogError> {
        let key = IdempotencyKey::upload(upload_id);
        self.find_record(self.key_record(log, &key, upload_fingerprint(upload_id)))
            .await
    }

    pub(super) async fn find_record(
        &self,
        rec: DedupeRecord,
    ) -> Result<Option<AppendOnce>, LogError> {
        let mut units = RequestUnits::default();
        match self
            .store
            .find_key(
                &rec.key,
                &rec.columns.checked,
                Consistency::Strong,
                &mut units,
            )
            .await?
        {
            Some(hit) => duplicate(&rec, hit.seq, hit.fingerprint, units).map(Some),
            None => Ok(None),
        }
    }

    /// The Dedupe record of a key for an entry, as of now. A request key's fingerprint covers the
    /// whole entry, so the same key with another request is caught. An upload key's covers only
    /// the upload id: the upload *is* the request, and each commit attempt copies the file to a
    /// fresh key of its own (so two racing commits build entries that differ in their payload
    /// key and are still one commit).
    pub(super) fn dedupe_record(
        &self,
        log: LogId,
        entry: &NewEntry,
        key: &IdempotencyKey,
    ) -> DedupeRecord {
        let fp = match key.kind {
            KeyKind::Upload => upload_fingerprint(&key.key),
            KeyKind::Request if let Some(fp) = key.request => fp,
            KeyKind::Request => {
                let version = entry.version.to_be_bytes();
                let kind = entry.kind.0.to_be_bytes();
                let payload = entry.payload.as_deref().unwrap_or("").as_bytes();
                fingerprint(&[&kind, &version, &entry.body, payload])
            }
        };
        self.key_record(log, key, fp)
    }

    /// The Dedupe record of `key` with a fingerprint, as of now.
    pub(super) fn key_record(
        &self,
        log: LogId,
        key: &IdempotencyKey,
        fingerprint: [u8; crate::domain::dedupe::FINGERPRINT_BYTES],
    ) -> DedupeRecord {
        DedupeRecord {
            key: DedupeKey::new(self.cfg.dedupe_prefix_bits, log, key.kind, &key.key),
            fingerprint,
            columns: MonthColumns::at(self.clock.now()),
        }
    }

    pub(super) async fn append_inner(
        &self,
        log: LogId,
        entry: NewEntry,
        opts: AppendOptions,
        key: Option<&IdempotencyKey>,
        mut rebasing: Option<&mut rebase::Rebasing>,
    ) -> Result<AppendOnce, LogError> {
        if entry.kind == EntryType::END_SEGMENT {
            return Err(LogError::InvalidEntry(
                "End Segment entries are written only by start_segment".into(),
            ));
        }
        let mut units = RequestUnits::default();
        let dedupe = key.map(|k| self.dedupe_record(log, &entry, k));
        let (body, external) = self.place_body(log, &entry).await?;
        let mut placement = Placement {
            body,
            external,
            of: entry.body.clone(),
        };
        let created = self.clock.now();
        let attempt_id: u64 = rand::random();
        let mut hint = opts.segment_hint;
        let mut consistency = Consistency::Eventual;
        let mut backoff = retry::Backoff::new(&self.cfg);

        for attempt in 1..=self.cfg.max_attempts {
            let head = self.head(log, hint, consistency, &mut units).await?;
            let next_seq = head.next_seq();
            if let Some(expected) = opts.expected_seq
                && expected != next_seq
            {
                if consistency == Consistency::Eventual {
                    // An eventually consistent read may lag; confirm before reporting.
                    consistency = Consistency::Strong;
                    hint = Some(head.at);
                    continue;
                }
                return self
                    .behind_expected(expected, next_seq, dedupe.as_ref(), &mut units)
                    .await;
            }
            if let Some(r) = rebasing.as_deref_mut()
                && !self
                    .rebase_to(r, log, next_seq, consistency, &mut placement, &mut units)
                    .await?
            {
                // The head and the entries disagree (an eventually consistent read, or an entry
                // written between the two): read both again, strongly.
                consistency = Consistency::Strong;
                hint = Some(head.at);
                backoff.sleep().await;
                continue;
            }
            let record = placement.record(&head, &entry, created, attempt_id);
            let put = self
                .put_attempt(
                    log,
                    &record,
                    next_seq,
                    dedupe.as_ref(),
                    attempt_id,
                    &mut units,
                )
                .await?;
            match put {
                Attempt::Written => {
                    debug!(log = %log, seq = next_seq, attempt, "appended");
                    return Ok(AppendOnce::Appended(head.appended(attempt, units)));
                }
                Attempt::Done(answer) => return answer,
                Attempt::Interrupted => {
                    consistency = Consistency::Strong;
                    hint = Some(head.at);
                    backoff.sleep().await;
                }
                Attempt::Taken(winner) => {
                    if let Some(expected) = opts.expected_seq {
                        return self.lost_expected(log, expected, head.at, &mut units).await;
                    }
                    hint = Some(after_lost_race(head.at, winner.as_ref()));
                    // The number we lost exists; an eventually consistent read may still not
                    // show it, and a writer that keeps reading a stale head keeps losing. Read
                    // the head strongly from now on (1 read unit instead of 0.5, only when
                    // contended).
                    consistency = Consistency::Strong;
                    backoff.sleep().await;
                }
            }
        }
        Err(LogError::Contention {
            log,
            attempts: self.cfg.max_attempts,
        })
    }

    /// Moves a rebasing append through the entries up to `next_seq`, placing its body again when
    /// rebasing changed it: `false` when the entries do not show up to the head yet (retry,
    /// strongly). A base past the head under a strong read is out of range.
    async fn rebase_to(
        &self,
        r: &mut rebase::Rebasing,
        log: LogId,
        next_seq: u64,
        consistency: Consistency,
        placement: &mut Placement,
        units: &mut RequestUnits,
    ) -> Result<bool, LogError> {
        match r.catch_up(self, log, next_seq, units).await? {
            rebase::CaughtUp::Yes => {
                let now = r.entry();
                if now.body != placement.of {
                    (placement.body, placement.external) = self.place_body(log, &now).await?;
                    placement.of = now.body;
                }
                Ok(true)
            }
            rebase::CaughtUp::NotVisible => {
                if consistency == Consistency::Strong && r.base() > next_seq {
                    return Err(LogError::OutOfRange {
                        from: r.base(),
                        next_seq,
                    });
                }
                Ok(false)
            }
        }
    }

    /// An append whose expected sequence is behind the head (read strongly). A retry of a request
    /// that did append finds its key, which says where the first one landed; anything else is a
    /// [`LogError::Conflict`].
    async fn behind_expected(
        &self,
        expected: u64,
        next_seq: u64,
        dedupe: Option<&DedupeRecord>,
        units: &mut RequestUnits,
    ) -> Result<AppendOnce, LogError> {
        if let Some(rec) = dedupe
            && let Some(hit) = self
                .store
                .find_key(&rec.key, &rec.columns.checked, Consistency::Strong, units)
                .await?
        {
            return duplicate(rec, hit.seq, hit.fingerprint, *units);
        }
        Err(LogError::Conflict { expected, next_seq })
    }

    /// An append with an expected sequence lost its number: a [`LogError::Conflict`] naming the
    /// head as a strong read now finds it.
    async fn lost_expected(
        &self,
        log: LogId,
        expected: u64,
        at: SegmentHint,
        units: &mut RequestUnits,
    ) -> Result<AppendOnce, LogError> {
        let now = self.head(log, Some(at), Consistency::Strong, units).await?;
        Err(LogError::Conflict {
            expected,
            next_seq: now.next_seq(),
        })
    }

    /// One attempt's conditional put of `record` (with its idempotency key, when there is one).
    async fn put_attempt(
        &self,
        log: LogId,
        record: &EntryRecord,
        next_seq: u64,
        dedupe: Option<&DedupeRecord>,
        attempt_id: u64,
        units: &mut RequestUnits,
    ) -> Result<Attempt, LogError> {
        let outcome = match dedupe {
            None => self.store.put_entry(log, record, units).await?,
            Some(rec) => {
                match self
                    .store
                    .put_entry_once(log, record, next_seq, rec, units)
                    .await?
                {
                    OnceOutcome::Written => PutOutcome::Written,
                    OnceOutcome::Taken(w) => PutOutcome::Taken(w),
                    // Our own write, seen again by a retry after a lost response.
                    OnceOutcome::Duplicate(hit, Some(w))
                        if w.attempt == Some(attempt_id) && hit.seq == next_seq =>
                    {
                        PutOutcome::Written
                    }
                    OnceOutcome::Duplicate(hit, _) => {
                        return Ok(Attempt::Done(duplicate(
                            rec,
                            hit.seq,
                            hit.fingerprint,
                            *units,
                        )));
                    }
                    OnceOutcome::Interrupted => return Ok(Attempt::Interrupted),
                }
            }
        };
        Ok(match outcome {
            // The SDK retries a PutItem whose response was lost; the retry then fails its
            // condition against our own item. Recognise it, by this call's identity (never by
            // equal contents: another caller may append the same body in the same second), rather
            // than append twice.
            PutOutcome::Taken(Some(w)) if w.attempt == Some(attempt_id) => Attempt::Written,
            PutOutcome::Written => Attempt::Written,
            PutOutcome::Taken(winner) => Attempt::Taken(winner),
        })
    }
}

/// Where an append's body is: inline (`body`) or in the payload store (`external`), and the body
/// it is (`of`), which rebasing may replace between attempts.
struct Placement {
    body: Option<Bytes>,
    external: Option<String>,
    of: Bytes,
}

impl Placement {
    /// The entry's item at the head's next number, for one attempt.
    fn record(&self, head: &Head, entry: &NewEntry, created: i64, attempt_id: u64) -> EntryRecord {
        let placed = (self.body.clone(), self.external.clone());
        head.record(entry, placed, created, attempt_id)
    }
}

/// What one attempt of an append's conditional put found.
enum Attempt {
    Written,
    /// The number was taken: the winner, when the store returned it.
    Taken(Option<EntryRecord>),
    /// Throttled or timed out with the outcome unknown: read the head again.
    Interrupted,
    /// The call's answer: the key was used before.
    Done(Result<AppendOnce, LogError>),
}

/// Where to look for the head after losing entry number to `winner`. The winner returned with the
/// failed condition is not necessarily the newest entry by the time of the retry (continuing from
/// it makes a writer that backed off for long crawl forward one number per attempt), but when it
/// is an End Segment entry it tells exactly where the next segment starts.
pub(super) fn after_lost_race(at: SegmentHint, winner: Option<&EntryRecord>) -> SegmentHint {
    match winner {
        Some(w) if w.is_end_segment() => SegmentHint {
            segment: at.segment + 1,
            base_seq: at.base_seq + w.num + 1,
        },
        _ => at,
    }
}

/// The head lookups and body placement: the Entry and Segment tables only.
impl<S: LogEntries, P: PayloadStore> EventLog<S, P> {
    /// Decides where the body goes: inline, or to S3 first (discardable until this append commits).
    pub(super) async fn place_body(
        &self,
        log: LogId,
        entry: &NewEntry,
    ) -> Result<(Option<Bytes>, Option<String>), LogError> {
        let size = entry.body.len();
        if size > self.cfg.max_body_bytes {
            return Err(LogError::BodyTooLarge {
                size,
                limit: self.cfg.max_body_bytes,
            });
        }
        if let Some(payload) = &entry.payload {
            if size > self.cfg.inline_body_max_bytes {
                return Err(LogError::BodyTooLarge {
                    size,
                    limit: self.cfg.inline_body_max_bytes,
                });
            }
            return Ok((Some(entry.body.clone()), Some(payload.clone())));
        }
        if size > self.cfg.inline_body_max_bytes {
            let key = keys::body_key(log);
            self.payloads
                .put_discardable(&key, entry.body.clone())
                .await?;
            return Ok((None, Some(key)));
        }
        Ok((Some(entry.body.clone()), None))
    }

    /// The log's next free sequence, read consistently.
    pub async fn next_seq(&self, log: LogId) -> Result<(u64, RequestUnits), LogError> {
        let mut units = RequestUnits::default();
        let head = self
            .head(log, None, Consistency::Strong, &mut units)
            .await?;
        Ok((head.next_seq(), units))
    }

    /// As [`next_seq`](Self::next_seq), starting from a segment hint (one read instead of two
    /// when the hint is current; a stale hint is followed or dropped as appends do). Also the
    /// hint for the next call.
    pub async fn next_seq_from(
        &self,
        log: LogId,
        hint: Option<SegmentHint>,
    ) -> Result<(u64, SegmentHint), LogError> {
        let mut units = RequestUnits::default();
        let head = self
            .head(log, hint, Consistency::Strong, &mut units)
            .await?;
        Ok((head.next_seq(), head.at))
    }

    /// The log's next sequence as an eventually consistent read shows it, for a pull's head check:
    /// one eventually consistent Query of the hinted segment's newest entry, 0.5 RRU for an entry
    /// item up to 4 KB (two, 1 RRU, without a hint). Also the hint for the next call.
    ///
    /// The answer may lag the log (never lead it): every sequence below it is committed, so a
    /// reader that serves entries up to it serves only committed ones, but a newer entry may not
    /// show yet. A caller that must not miss one (an append's condition, a push's range check)
    /// reads strongly instead; docs/sync.md ("What an unchanged pull costs") has why a pull may
    /// use this one.
    pub async fn peek_next_seq(
        &self,
        log: LogId,
        hint: Option<SegmentHint>,
    ) -> Result<(u64, SegmentHint, RequestUnits), LogError> {
        let mut units = RequestUnits::default();
        let head = self
            .head(log, hint, Consistency::Eventual, &mut units)
            .await?;
        Ok((head.next_seq(), head.at, units))
    }

    /// Finds the newest entry, starting from a hint or the newest segment, following End Segment
    /// entries into the next segment (a stale hint or an eventually consistent segment read).
    pub(super) async fn head(
        &self,
        log: LogId,
        hint: Option<SegmentHint>,
        consistency: Consistency,
        units: &mut RequestUnits,
    ) -> Result<Head, LogError> {
        let mut at = match hint {
            Some(h) => h,
            None => self.current_segment(log, consistency, units).await?,
        };
        let mut consistency = consistency;
        let mut from_hint = hint.is_some();
        loop {
            match self
                .store
                .newest_entry(log, at.segment, consistency, units)
                .await?
            {
                Some(e) if e.is_end_segment() => {
                    at = SegmentHint {
                        segment: at.segment + 1,
                        base_seq: at.base_seq + e.num + 1,
                    };
                }
                Some(newest) => return Ok(Head { at, newest }),
                None if from_hint => {
                    // A hint for a segment that does not exist: fall back to the Segment table.
                    from_hint = false;
                    at = self.current_segment(log, consistency, units).await?;
                }
                None if consistency == Consistency::Eventual => {
                    // Segment and entry 0 commit together, but separate eventually consistent
                    // reads can disagree for a moment.
                    consistency = Consistency::Strong;
                }
                None => {
                    return Err(corrupt(
                        log,
                        format!("segment {} has no entries", at.segment),
                    ));
                }
            }
        }
    }

    pub(super) async fn current_segment(
        &self,
        log: LogId,
        consistency: Consistency,
        units: &mut RequestUnits,
    ) -> Result<SegmentHint, LogError> {
        let newest = self
            .store
            .newest_segments(log, 1, consistency, units)
            .await?;
        let s = newest.first().ok_or(LogError::LogNotFound(log))?;
        Ok(SegmentHint {
            segment: s.num,
            base_seq: s.base_seq,
        })
    }
}

/// The newest entry of the log and the segment it is in.
#[derive(Debug, Clone)]
pub(super) struct Head {
    pub(super) at: SegmentHint,
    pub(super) newest: EntryRecord,
}

impl Head {
    pub(super) fn next_num(&self) -> u64 {
        self.newest.num + 1
    }
    pub(super) fn next_seq(&self) -> u64 {
        self.at.base_seq + self.next_num()
    }
    /// The item of `entry` at this head's next number: its body `placed` inline or in the
    /// payload store ([`EventLog::place_body`]), made at `created` by the attempt `attempt`.
    pub(super) fn record(
        &self,
        entry: &NewEntry,
        (body, external): (Option<Bytes>, Option<String>),
        created: i64,
        attempt: u64,
    ) -> EntryRecord {
        EntryRecord {
            segment: self.at.segment,
            num: self.next_num(),
            created,
            kind: entry.kind,
            version: entry.version,
            body,
            external,
            snapshot_root: None,
            attempt: Some(attempt),
        }
    }

    /// What an entry written at this head's next number is, after `attempts` tries.
    pub(super) fn appended(&self, attempts: u32, units: RequestUnits) -> Appended {
        let seq = self.next_seq();
        Appended {
            seq,
            segment: self.at.segment,
            entry: self.next_num(),
            next_seq: seq + 1,
            hint: self.at,
            attempts,
            units,
        }
    }
}

/// A key seen before: the first request's seq when the request is the same, else a reuse error.
fn duplicate(
    rec: &DedupeRecord,
    seq: u64,
    fp: [u8; crate::domain::dedupe::FINGERPRINT_BYTES],
    units: RequestUnits,
) -> Result<AppendOnce, LogError> {
    if fp != rec.fingerprint {
        return Err(LogError::KeyReused { seq });
    }
    Ok(AppendOnce::Duplicate { seq, units })
}

fn upload_fingerprint(upload_id: &str) -> [u8; crate::domain::dedupe::FINGERPRINT_BYTES] {
    fingerprint(&[b"upload", upload_id.as_bytes()])
}
