//! The request handlers. Each parses and validates everything before writing anything, so a
//! rejected request never changes the log.

use std::collections::HashMap;

use axum::Json;
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::json;
use sheetlog_core::domain::{Entry, EntryType, LogId, NewEntry};
use sheetlog_core::log::IdempotencyKey;
use sheetlog_core::sheet::Event;
use sheetlog_core::sheet::entry::EntryBody;
use tracing::{info, warn};

use crate::append::AppendResult;
use crate::dto::*;
use crate::entry_json::{batch_json, event_body, mutations_json};
use crate::error::ApiError;
pub use crate::request::{ApiResult, parse_log_id};
use crate::request::{body_bytes, parse_body, parse_json, reject_unknown_params};
use crate::state::SharedState;
use crate::{append, cells};

const MAX_PAGE: usize = 1000;
const DEFAULT_PAGE: usize = 100;

/// The request header that makes an append idempotent.
pub const IDEMPOTENCY_KEY: &str = "idempotency-key";
/// Set on the answer to a retried request that appended nothing this time.
pub const IDEMPOTENT_REPLAYED: &str = "idempotent-replayed";
const MAX_KEY_LEN: usize = 255;

/// The `Idempotency-Key` header, if sent: 1 to 255 printable ASCII characters, sent once.
pub fn idempotency_key(headers: &HeaderMap) -> ApiResult<Option<String>> {
    let mut values = headers.get_all(IDEMPOTENCY_KEY).iter();
    let Some(value) = values.next() else {
        return Ok(None);
    };
    if values.next().is_some() {
        return Err(ApiError::InvalidHeader(
            "Idempotency-Key: send the header once".into(),
        ));
    }
    let raw = value.as_bytes();
    // API Gateway hands the function a repeated header as one value joined with commas, so a
    // comma means the header came more than once (or a key no retry could match reliably).
    if raw.contains(&b',') {
        return Err(ApiError::InvalidHeader(
            "Idempotency-Key: send the header once, without commas (a gateway joins repeated \
             headers with commas)"
                .into(),
        ));
    }
    if raw.is_empty() || raw.len() > MAX_KEY_LEN || !raw.iter().all(|b| (0x20..=0x7e).contains(b)) {
        return Err(ApiError::InvalidHeader(format!(
            "Idempotency-Key: must be 1 to {MAX_KEY_LEN} printable ASCII characters (got {} bytes)",
            raw.len()
        )));
    }
    Ok(Some(String::from_utf8_lossy(raw).into_owned()))
}

/// 201 with the entry's place; a replay also says so in a header.
pub(crate) fn created(result: AppendResult) -> Response {
    let mut resp = (StatusCode::CREATED, Json(result.body)).into_response();
    if result.replayed {
        resp.headers_mut()
            .insert(IDEMPOTENT_REPLAYED, HeaderValue::from_static("true"));
    }
    resp
}

fn rfc3339(epoch_secs: i64) -> String {
    time::OffsetDateTime::from_unix_timestamp(epoch_secs)
        .ok()
        .and_then(|t| {
            t.format(&time::format_description::well_known::Rfc3339)
                .ok()
        })
        .unwrap_or_default()
}

/// An entry's `type` as the API shows it: the log's own entries, `mutations`, and every
/// spreadsheet event by the event module's one table of names.
fn type_name(kind: EntryType) -> &'static str {
    use sheetlog_core::sheet::event::{TYPE_END_SEGMENT, TYPE_SNAPSHOT, type_name_of};
    match kind.0 {
        TYPE_SNAPSHOT => "snapshot",
        TYPE_END_SEGMENT => "end-segment",
        sheetlog_core::sheet::mutations::TYPE_MUTATIONS => "mutations",
        sheetlog_core::sheet::undo::TYPE_UNDO => "undo",
        code => type_name_of(code).unwrap_or("unknown"),
    }
}

/// The JSON form of a stored entry, exactly as a client wrote it.
pub async fn entry_dto(state: &SharedState, e: &Entry) -> ApiResult<EntryDto> {
    let decoded = EntryBody::decode(e.kind.0, e.version, &e.body).map_err(|err| {
        ApiError::Internal(format!(
            "entry at sequence {} does not decode: {err}",
            e.seq
        ))
    })?;
    let mut kind = type_name(e.kind);
    let body = match decoded {
        EntryBody::Event(event) => event_body(&event)?,
        // Shown as its event, with the group it was appended for.
        EntryBody::Authored(a) => {
            kind = a.event.type_name();
            let mut body = event_body(&a.event)?;
            if let Some(o) = body.as_object_mut() {
                o.insert("clientGroupID".into(), json!(a.group));
            }
            body
        }
        EntryBody::Mutations(m) => mutations_json(&m)?,
        // A group commit of one client reads as that client's run, whoever wrote it (the sync
        // writer writes every group commit as a batch, `docs/storage.md`).
        EntryBody::Batch(b) if b.runs.len() == 1 => mutations_json(&b.runs[0])?,
        EntryBody::Batch(b) => batch_json(&b.runs)?,
        EntryBody::Undo(u) => crate::entry_json::undo_json(&u)?,
        EntryBody::Snapshot | EntryBody::EndSegment => json!({}),
    };
    let payload_url = match &e.payload {
        Some(key) => Some(presign_get(state, key).await?),
        None => None,
    };
    // The log's first snapshot (the empty sheet) is complete from the start and has no root.
    let snapshot_status = (e.kind == EntryType::SNAPSHOT).then(|| {
        if e.snapshot_root.is_some() || e.seq == 0 {
            "complete"
        } else {
            "pending"
        }
        .to_owned()
    });
    Ok(EntryDto {
        seq: e.seq,
        kind: kind.to_owned(),
        created: rfc3339(e.created),
        body,
        payload_url,
        snapshot_status,
    })
}

/// Bytes kept free in a response for everything around its entries.
const RESPONSE_OVERHEAD_BYTES: usize = 1024;

/// The JSON forms of `entries`, as many as fit in `budget` bytes of Lambda response payload
/// ([`crate::lambda_limit::lambda_payload_len`]; always at least one), and the sequence of the first one left
/// out. AWS Lambda cannot return more than 6 MB; a page that would is cut short and the client
/// continues from the returned `nextSeq`.
async fn entry_dtos(
    state: &SharedState,
    entries: &[Entry],
    budget: usize,
) -> ApiResult<(Vec<EntryDto>, Option<u64>)> {
    let mut out = Vec::with_capacity(entries.len());
    let mut used = 0usize;
    for e in entries {
        let dto = entry_dto(state, e).await?;
        let json = serde_json::to_vec(&dto).map_err(|err| ApiError::Internal(err.to_string()))?;
        // As Lambda counts it (escaped into the payload), with the comma after it.
        let size = crate::lambda_limit::lambda_payload_len(&json) - 2 + 1;
        if !out.is_empty() && used + size > budget {
            return Ok((out, Some(e.seq)));
        }
        used += size;
        out.push(dto);
    }
    Ok((out, None))
}

async fn presign_get(state: &SharedState, key: &str) -> ApiResult<String> {
    state
        .bucket
        .presign_get(key, state.cfg.upload_url_ttl)
        .await
        .map_err(ApiError::from_store)
}

#[utoipa::path(get, path = "/health", responses((status = 200, body = Health)))]
pub async fn health() -> Json<Health> {
    Json(Health {
        status: "ok".into(),
    })
}

/// Create a log. Its entry 0 is the Snapshot entry of the empty sheet, or, with `from`, a fork:
/// entry 0 is a snapshot of another log as of a sequence, sharing that log's snapshot chunks.
#[utoipa::path(post, path = "/logs",
    request_body(content = Option<CreateLogRequest>, description = "empty, `{}`, or `{\"from\": {\"logId\", \"seq\"}}` to fork"),
    responses((status = 201, body = CreatedLog), (status = 400, body = ErrorResponse),
        (status = 404, body = ErrorResponse),
        (status = 413, body = ErrorResponse, description = "`history-too-large`: the fork's source as of `seq` needs more entry bytes than the read budget"),
        (status = 410, description = "the fork's source was deleted (`log-deleted`)", body = ErrorResponse),
        (status = 416, body = ErrorResponse)))]
pub async fn create_log(
    State(state): State<SharedState>,
    caller: Option<axum::Extension<crate::access::Caller>>,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult<(StatusCode, Json<CreatedLog>)> {
    let bytes = body_bytes(body, state.cfg.max_request_bytes)?;
    let req: CreateLogRequest = if bytes.iter().all(u8::is_ascii_whitespace) {
        CreateLogRequest::default()
    } else {
        parse_json(&bytes)?
    };
    let id = LogId::new_random();
    let name = match &req.name {
        Some(n) => sheetlog_core::catalog::clean_name(n).map_err(ApiError::InvalidEntry)?,
        None => sheetlog_core::catalog::DEFAULT_NAME.to_owned(),
    };
    // The creator may delete the log later (`DELETE /logs/{logId}`): recorded before the log
    // exists, so no log is ever without it. A failed create leaves only this small item.
    if let Some(subject) = caller.as_ref().and_then(|c| c.0.subject.as_deref()) {
        state
            .purge
            .record_creator(id, subject)
            .await
            .map_err(ApiError::from_store)?;
    }
    let created = match req.from {
        None => state
            .log
            .create_with_id(id)
            .await
            .map_err(|e| ApiError::from_log("", e))?,
        Some(from) => {
            // Forking reads the source log: the caller needs read access to it too.
            if let (Some(axum::Extension(caller)), Ok(source)) =
                (&caller, uuid::Uuid::parse_str(&from.log_id))
            {
                crate::access::check(&state, caller, crate::access::Need::Read, Some(source))
                    .await?;
            }
            fork(&state, &from, id).await?
        }
    };
    // Under Cognito authorization the creator becomes the sheet's owner in the catalog. A
    // failure here leaves a log nobody is a member of (only a retry's new log is reachable).
    if let (Some(catalog), Some(subject)) = (
        &state.catalog,
        caller.as_ref().and_then(|c| c.0.subject.as_deref()),
    ) {
        let now = crate::state::now_ms();
        let sheet = sheetlog_core::catalog::Sheet {
            log: created.log,
            name,
            owner: subject.to_owned(),
            created_ms: now,
            updated_ms: now,
        };
        catalog
            .create_sheet(&sheet, None)
            .await
            .map_err(ApiError::from_catalog)?;
    }
    info!(log = %created.log, "log created");
    Ok((
        StatusCode::CREATED,
        Json(CreatedLog {
            log_id: created.log.to_string(),
            seq: created.seq,
        }),
    ))
}

/// Checks a log a request reads besides the one in its URL (a fork's or a replay's source),
/// which the access layer's deleted-log check did not see: `410 log-deleted` when it was
/// deleted, `404` when there is none, `416 out-of-range` when it holds fewer than `upto`
/// entries. `raw` is the id as the request gave it.
pub(crate) async fn check_source(
    state: &SharedState,
    source: LogId,
    raw: &str,
    upto: u64,
) -> ApiResult<()> {
    sheetlog_core::log::purge::check_live(&*state.purge, source)
        .await
        .map_err(|e| ApiError::from_log(raw, e))?;
    let (next_seq, _) = state
        .log
        .next_seq(source)
        .await
        .map_err(|e| ApiError::from_log(raw, e))?;
    if upto > next_seq {
        return Err(ApiError::OutOfRange {
            from: upto,
            next_seq,
        });
    }
    Ok(())
}

/// Builds the fork's first snapshot, then creates the log on it. A failure between the two
/// leaves only unreferenced objects under the new log's prefix.
async fn fork(
    state: &SharedState,
    from: &ForkFrom,
    id: LogId,
) -> ApiResult<sheetlog_core::log::Created> {
    let source = parse_log_id(&from.log_id)?;
    check_source(state, source, &from.log_id, from.seq).await?;
    // From here on the fork writes objects under its own prefix (and markers with its sources);
    // if it fails before its log exists, nothing refers to them, so they are removed.
    let mut sources: Vec<LogId> = Vec::new();
    let made = async {
        let built = sheetlog_core::snapshot_input::fork_snapshot(
            &state.log,
            &state.bucket,
            &state.bucket,
            sheetlog_core::snapshot::BuildConfig::default(),
            source,
            from.seq,
            id,
        )
        .await
        .map_err(|e| ApiError::from_input(&from.log_id, e))?;
        // Every log whose chunks the fork's snapshot shares keeps them while the fork lives
        // (`docs/storage.md`, "Deleting a log"): marked before the fork exists.
        let manifest = built.read_manifest(&state.bucket).await.map_err(|e| {
            ApiError::Internal(format!("reading the fork's first manifest back: {e}"))
        })?;
        for s in manifest.other_logs() {
            let s = LogId::from_uuid(s);
            sources.push(s);
            for marker in sheetlog_core::log::purge::fork_markers(s, id) {
                sheetlog_core::ports::ObjectPurge::put_marker(&state.bucket, &marker)
                    .await
                    .map_err(ApiError::from_store)?;
            }
        }
        let created = state
            .log
            .create_fork(
                id,
                built.manifest_key,
                Some(sheetlog_core::log::ForkOrigin {
                    source,
                    at: from.seq,
                }),
            )
            .await
            .map_err(|e| ApiError::from_log("", e))?;
        info!(log = %id, source = %source, seq = from.seq, chunks = built.chunks,
            written = built.stats.chunks_written, "log forked");
        Ok(created)
    }
    .await;
    if made.is_err() {
        // A fork whose log was created after all (a lost response) keeps its objects; so does
        // one whose existence cannot be read now (they then stay unreferenced, never lost).
        let missing = matches!(
            state.log.next_seq(id).await,
            Err(sheetlog_core::LogError::LogNotFound(_))
        );
        if missing {
            match sheetlog_core::log::purge::discard_failed_fork(&state.bucket, id, &sources).await
            {
                Ok(n) => info!(log = %id, objects = n, "failed fork's objects removed"),
                Err(e) => {
                    warn!(log = %id, error = %e, "removing a failed fork's objects failed; they stay unreferenced")
                }
            }
        }
    }
    made
}

/// Append an entry. Bodies above the inline threshold are stored in S3 by the server. With an
/// `Idempotency-Key`, a retry within the key window appends nothing and answers the first
/// request's sequence (with `Idempotent-Replayed: true`); the same key with a different entry is
/// a 409.
#[utoipa::path(post, path = "/logs/{logId}/entries",
    params(("logId" = String, Path, description = "the log's UUID"),
        ("Idempotency-Key" = Option<String>, Header,
            description = "1 to 255 printable ASCII characters; a retry with the same key appends once")),
    request_body = AppendRequest,
    responses(
        (status = 201, body = AppendResponse, headers(("Idempotent-Replayed" = String,
            description = "`true` when an earlier request with this key made the entry"))),
        (status = 400, body = ErrorResponse), (status = 404, body = ErrorResponse),
        (status = 409, body = ErrorResponse), (status = 410, body = ErrorResponse),
        (status = 413, body = ErrorResponse), (status = 416, body = ErrorResponse),
        (status = 503, body = ErrorResponse)))]
pub async fn append_entry(
    State(state): State<SharedState>,
    Path(log_id): Path<String>,
    caller: Option<axum::Extension<crate::access::Caller>>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult<Response> {
    let log = parse_log_id(&log_id)?;
    let key = idempotency_key(&headers)?.map(IdempotencyKey::request);
    let req: AppendRequest = parse_body(body, state.cfg.max_request_bytes)?;
    if req.kind == "import" {
        return Err(ApiError::InvalidEntry(
            "type: import entries are created through the upload flow (POST /logs/{logId}/uploads)"
                .into(),
        ));
    }
    if req.kind == "restore" {
        return Err(ApiError::InvalidEntry(
            "type: restore entries are created by POST /logs/{logId}/restore, which keeps the restored state first"
                .into(),
        ));
    }
    let event = Event::from_parts(&req.kind, req.body)
        .map_err(|e| ApiError::InvalidEntry(e.to_string()))?;
    let (code, version, encoded) = match req.client_group_id {
        Some(group) => {
            crate::sync::check("clientGroupId", &group)?;
            crate::sync::check_group_owner(&state, log, &log_id, &group, caller.as_deref()).await?;
            sheetlog_core::sheet::authored::Authored { group, event }.encode()
        }
        None => event.encode(),
    };
    // The entry-size rule lives in the core log (`LogConfig::max_body_bytes`), which every way
    // in shares; checked here too so an oversize entry is refused before any I/O.
    let limit = state.log.config().max_body_bytes;
    if encoded.len() > limit {
        return Err(ApiError::EntryTooLarge {
            size: encoded.len(),
            limit,
        });
    }
    let entry = NewEntry::new(EntryType(code), version, encoded);
    let out = append::append_and_trigger(
        &state,
        log,
        &log_id,
        entry,
        req.expected_seq,
        req.base_seq,
        key.as_ref(),
    )
    .await?;
    Ok(created(out))
}

pub(crate) fn query_u64(q: &HashMap<String, String>, name: &str) -> ApiResult<Option<u64>> {
    match q.get(name) {
        None => Ok(None),
        Some(raw) => raw.trim().parse::<u64>().map(Some).map_err(|_| {
            ApiError::InvalidQuery(format!("{name}={raw:?} is not a non-negative integer"))
        }),
    }
}

/// Read entries from a sequence on.
#[utoipa::path(get, path = "/logs/{logId}/entries",
    params(("logId" = String, Path, description = "the log's UUID"),
        ("from" = Option<u64>, Query, description = "first sequence to return (default 0)"),
        ("limit" = Option<u64>, Query, description = "entries per page, 1 to 1000 (default 100)")),
    responses((status = 200, body = EntriesResponse), (status = 400, body = ErrorResponse),
        (status = 404, body = ErrorResponse), (status = 410, body = ErrorResponse),
        (status = 416, body = ErrorResponse)))]
pub async fn read_entries(
    State(state): State<SharedState>,
    Path(log_id): Path<String>,
    Query(q): Query<HashMap<String, String>>,
) -> ApiResult<Json<EntriesResponse>> {
    let log = parse_log_id(&log_id)?;
    reject_unknown_params(&q, &["from", "limit"])?;
    let from = query_u64(&q, "from")?.unwrap_or(0);
    let limit = match query_u64(&q, "limit")? {
        None => DEFAULT_PAGE,
        Some(n) if (1..=MAX_PAGE as u64).contains(&n) => n as usize,
        Some(n) => {
            return Err(ApiError::InvalidQuery(format!(
                "limit={n} must be between 1 and {MAX_PAGE}"
            )));
        }
    };
    let page = state
        .log
        .read_since(log, from, limit)
        .await
        .map_err(|e| ApiError::from_log(&log_id, e))?;
    let budget = state
        .cfg
        .max_response_bytes
        .saturating_sub(RESPONSE_OVERHEAD_BYTES);
    let (entries, cut) = entry_dtos(&state, &page.entries, budget).await?;
    Ok(Json(EntriesResponse {
        entries,
        next_seq: cut.unwrap_or(page.next_seq),
        complete: page.complete && cut.is_none(),
    }))
}

/// Delete a log: its entries, segments, sync clients, pending snapshots, payloads, uploads and
/// snapshot objects. A tombstone is written first, so from then on every route of the log
/// answers `410 log-deleted`; the rest is deleted in pages for up to `delete_budget` (15 s).
/// `202` with `done: false` means more is left: repeat the request (a delete cut off by a
/// timeout is finished the same way). Deleting a deleted log again answers `200`, after
/// removing anything a late writer left. Under JWT authorization: the log's creator (with a
/// write grant on it) or the `*` grant; under Cognito authorization: an owner, and once the
/// sheet is gone from the catalog, its former owners and its creator. At most
/// `deletes_per_minute` (30) a minute per caller: past that, `429 rate-limited`.
#[utoipa::path(delete, path = "/logs/{logId}",
    params(("logId" = String, Path, description = "the log's UUID")),
    responses((status = 200, description = "the log and all its data are deleted", body = DeletedLog),
        (status = 202, description = "the tombstone is written and part of the data deleted; repeat the request", body = DeletedLog),
        (status = 400, body = ErrorResponse),
        (status = 404, body = ErrorResponse),
        (status = 429, description = "the caller's deletes this minute are used up (`rate-limited`, with `Retry-After`)", body = ErrorResponse),
        (status = 503, body = ErrorResponse)))]
pub async fn delete_log(
    State(state): State<SharedState>,
    caller: Option<axum::Extension<crate::access::Caller>>,
    Path(log_id): Path<String>,
) -> ApiResult<(StatusCode, Json<DeletedLog>)> {
    let log = parse_log_id(&log_id)?;
    let caller = caller.map(|c| c.0);
    if let Some(caller) = &caller {
        let meta = state
            .purge
            .log_meta(log)
            .await
            .map_err(ApiError::from_store)?;
        if !caller.may_delete(meta.as_ref().and_then(|m| m.creator.as_deref())) {
            return Err(caller.delete_forbidden());
        }
    }
    let now = time::OffsetDateTime::now_utc().unix_timestamp();
    if let Some(subject) = caller.as_ref().and_then(|c| c.subject.as_deref()) {
        count_delete(&state, subject, now).await?;
    }
    let deadline = std::time::Instant::now() + state.cfg.delete_budget;
    let report =
        sheetlog_core::log::purge::delete_log(&*state.purge, &state.bucket, log, now, deadline)
            .await
            .map_err(|e| ApiError::from_log(&log_id, e))?;
    if report.done
        && let Some(catalog) = &state.catalog
    {
        // The owners go on the tombstone before the catalog forgets them: they may repeat the
        // delete later, to remove what a late writer or snapshot build left (`access::check`).
        let owners: Vec<String> = catalog
            .members(log)
            .await
            .map_err(ApiError::from_catalog)?
            .into_iter()
            .filter(|m| m.role == sheetlog_core::catalog::Role::Owner)
            .map(|m| m.user_id)
            .collect();
        state
            .purge
            .record_owners(log, &owners)
            .await
            .map_err(ApiError::from_store)?;
        catalog
            .delete_sheet(log)
            .await
            .map_err(ApiError::from_catalog)?;
    }
    info!(log = %log, done = report.done, items = report.items, objects = report.objects,
        kept_for_forks = report.kept_for_forks, "log delete");
    let status = if report.done {
        StatusCode::OK
    } else {
        StatusCode::ACCEPTED
    };
    Ok((
        status,
        Json(DeletedLog {
            done: report.done,
            items: report.items,
            objects: report.objects,
            kept_for_forks: report.kept_for_forks,
        }),
    ))
}

/// Counts one delete by `subject` against `ApiConfig::deletes_per_minute`, in the minute
/// (a fixed window) that holds `now`.
async fn count_delete(state: &crate::state::AppState, subject: &str, now: i64) -> ApiResult<()> {
    let limit = state.cfg.deletes_per_minute;
    let window = now - now.rem_euclid(60);
    if state
        .purge
        .count_delete(subject, window, limit)
        .await
        .map_err(ApiError::from_store)?
    {
        return Ok(());
    }
    Err(ApiError::TooManyDeletes {
        limit,
        retry_after: u64::try_from(window + 60 - now).unwrap_or(60).max(1),
    })
}

/// Load a log: its newest completed snapshot and every entry after it.
#[utoipa::path(get, path = "/logs/{logId}",
    params(("logId" = String, Path, description = "the log's UUID")),
    responses((status = 200, body = LoadResponse), (status = 400, body = ErrorResponse),
        (status = 404, body = ErrorResponse)))]
pub async fn load_log(
    State(state): State<SharedState>,
    Path(log_id): Path<String>,
) -> ApiResult<Json<LoadResponse>> {
    let log = parse_log_id(&log_id)?;
    let loaded = state
        .log
        .load(log)
        .await
        .map_err(|e| ApiError::from_log(&log_id, e))?;
    // The client fetches the snapshot straight from S3; the API only hands out URLs.
    let manifest =
        sheetlog_core::snapshot_input::base_manifest(&state.bucket, log, &loaded.snapshot)
            .await
            .map_err(|e| {
                ApiError::Internal(format!(
                    "loading the manifest at {}: {e}",
                    loaded.snapshot.seq
                ))
            })?;
    let (manifest_url, chunks) = match (&manifest, &loaded.snapshot.snapshot_root) {
        (Some(m), Some(root)) => {
            let mut chunks = Vec::with_capacity(m.chunks.len());
            for c in &m.chunks {
                let key = c.key(*log.as_uuid(), m.format);
                chunks.push(ChunkDto {
                    hash: c.hash.to_string(),
                    rows: c.rows,
                    url: presign_get(&state, &key).await?,
                });
            }
            (Some(presign_get(&state, root).await?), chunks)
        }
        _ => (None, Vec::new()),
    };
    let snapshot = SnapshotRef {
        seq: loaded.snapshot.seq,
        status: "complete".into(),
        manifest_url,
        chunks,
    };
    let snapshot_bytes = crate::lambda_limit::lambda_payload_len(
        &serde_json::to_vec(&snapshot).map_err(|err| ApiError::Internal(err.to_string()))?,
    );
    let budget = state
        .cfg
        .max_response_bytes
        .saturating_sub(RESPONSE_OVERHEAD_BYTES + snapshot_bytes);
    let (entries, cut) = entry_dtos(&state, &loaded.entries, budget).await?;
    Ok(Json(LoadResponse {
        log_id: log.to_string(),
        snapshot,
        entries,
        next_seq: cut.unwrap_or(loaded.next_seq),
        complete: loaded.complete && cut.is_none(),
    }))
}

/// The log's segments, oldest first.
#[utoipa::path(get, path = "/logs/{logId}/segments",
    params(("logId" = String, Path, description = "the log's UUID")),
    responses((status = 200, body = SegmentsResponse), (status = 400, body = ErrorResponse),
        (status = 404, body = ErrorResponse)))]
pub async fn list_segments(
    State(state): State<SharedState>,
    Path(log_id): Path<String>,
) -> ApiResult<Json<SegmentsResponse>> {
    let log = parse_log_id(&log_id)?;
    let (segments, _) = state
        .log
        .segments(log)
        .await
        .map_err(|e| ApiError::from_log(&log_id, e))?;
    Ok(Json(SegmentsResponse {
        segments: segments
            .iter()
            .map(|s| SegmentDto {
                segment: s.num,
                base_seq: s.base_seq,
                created: rfc3339(s.created),
                last_snapshot_seq: s.last_snapshot.map(|n| s.seq_of(n)),
            })
            .collect(),
    }))
}

/// Cell values of a range as of a sequence.
#[utoipa::path(get, path = "/logs/{logId}/cells",
    params(("logId" = String, Path, description = "the log's UUID"),
        ("range" = String, Query, description = "an A1 range such as A1:C3, or one cell"),
        ("at" = Option<u64>, Query, description = "the state of every entry before this sequence (default: the whole log)")),
    responses((status = 200, body = CellsResponse), (status = 400, body = ErrorResponse),
        (status = 404, body = ErrorResponse), (status = 410, body = ErrorResponse),
        (status = 413, body = ErrorResponse, description = "`range-too-large`, or `history-too-large`: the entries after the nearest completed snapshot pass the read budget"),
        (status = 416, body = ErrorResponse)))]
pub async fn read_cells(
    State(state): State<SharedState>,
    Path(log_id): Path<String>,
    Query(q): Query<HashMap<String, String>>,
) -> ApiResult<Json<CellsResponse>> {
    let log = parse_log_id(&log_id)?;
    reject_unknown_params(&q, &["range", "at"])?;
    let raw_range = q
        .get("range")
        .ok_or_else(|| ApiError::InvalidQuery("range is required, e.g. range=A1:C3".into()))?;
    let at = query_u64(&q, "at")?;
    let out = cells::read(&state, log, &log_id, raw_range, at).await?;
    Ok(Json(out))
}

/// The area a sheet's cells lie in, as of a sequence: how many rows and columns to read to have
/// all of it (an export, a grid's scroll size).
#[utoipa::path(get, path = "/logs/{logId}/extent",
    params(("logId" = String, Path, description = "the log's UUID"),
        ("at" = Option<u64>, Query, description = "the state of every entry before this sequence (default: the whole log)")),
    responses((status = 200, body = ExtentResponse), (status = 400, body = ErrorResponse),
        (status = 404, body = ErrorResponse), (status = 410, body = ErrorResponse),
        (status = 413, body = ErrorResponse, description = "`history-too-large`: the entries after the nearest completed snapshot pass the read budget"),
        (status = 416, body = ErrorResponse)))]
pub async fn read_extent(
    State(state): State<SharedState>,
    Path(log_id): Path<String>,
    Query(q): Query<HashMap<String, String>>,
) -> ApiResult<Json<ExtentResponse>> {
    let log = parse_log_id(&log_id)?;
    reject_unknown_params(&q, &["at"])?;
    let at = query_u64(&q, "at")?;
    Ok(Json(cells::extent(&state, log, &log_id, at).await?))
}
