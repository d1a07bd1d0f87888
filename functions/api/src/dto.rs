//! The JSON shapes of requests and responses, with their OpenAPI schemas.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use sheetlog_core::sheet::Style;
use utoipa::ToSchema;

#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct CreatedLog {
    pub log_id: String,
    pub seq: u64,
}

/// `DELETE /logs/{logId}`: how far the delete got.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct DeletedLog {
    /// Every item and object of the log is gone (`200`); `false` (`202`): repeat the request.
    pub done: bool,
    /// Items deleted by this request.
    pub items: u64,
    /// Objects deleted by this request.
    pub objects: u64,
    /// The log's snapshot objects were kept because a fork shares their chunks; repeating the
    /// delete after the forks are deleted removes them.
    pub kept_for_forks: bool,
}

/// `POST /logs`: empty, or a fork of another log as of a sequence.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CreateLogRequest {
    #[serde(default)]
    pub from: Option<ForkFrom>,
    /// The sheet's name in the catalog (Cognito authorization; default `Untitled`).
    #[serde(default)]
    pub name: Option<String>,
}

/// The log and sequence a fork starts from: its entry 0 is that log's state before `seq`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ForkFrom {
    pub log_id: String,
    pub seq: u64,
}

/// An entry to append. `body` is the JSON form of the event named by `type` (see docs/api.md).
#[derive(Debug, Deserialize, ToSchema)]
#[schema(example = json!({"type": "set", "body": {"cells": [{"ref": "B3", "value": 42}]}, "expectedSeq": 1}))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AppendRequest {
    /// One of `set`, `style`, `insert-rows`, `delete-rows`, `insert-columns`, `delete-columns`,
    /// `resize-columns`, `resize-rows`, `freeze`.
    #[serde(rename = "type")]
    pub kind: String,
    pub body: Value,
    /// Fail with 409 unless the entry would get exactly this sequence.
    #[serde(default)]
    pub expected_seq: Option<u64>,
    /// The log's next sequence when the caller read the sheet it edited (a pull cookie, or
    /// `nextSeq` of a read). The edit is moved through everything appended since, so its cells
    /// follow their rows and columns (docs/sync.md, "Edits made against an older view"); 409
    /// `edit-rejected` when nothing of it is left. Not together with `expectedSeq`.
    #[serde(default)]
    pub base_seq: Option<u64>,
    /// The sync client group the edit is made for: it is then a step of that group's undo stack
    /// (`POST …/undo`; docs/api.md, "Undo and redo"). The CLI names its own.
    #[serde(default)]
    pub client_group_id: Option<String>,
}

/// `POST /logs/{logId}/versions`: name a version.
#[derive(Debug, Deserialize, ToSchema)]
#[schema(example = json!({"seq": 42, "name": "before the Q3 import"}))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NameVersionRequest {
    /// The version: the sheet as of every entry before this sequence.
    pub seq: u64,
    /// 1 to 100 characters, trimmed.
    pub name: String,
}

/// `PUT /logs/{logId}/versions/{seq}`: rename a named version.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RenameVersionRequest {
    pub name: String,
}

/// A sheet's named versions, newest first.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct VersionsResponse {
    /// `{"seq", "name", "createdAt", "by"?}` each.
    #[schema(value_type = Vec<Object>)]
    pub versions: Vec<Value>,
}

/// `POST /logs/{logId}/restore`: make the sheet what it was as of `seq`.
#[derive(Debug, Deserialize, ToSchema)]
#[schema(example = json!({"seq": 42}))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RestoreRequest {
    /// The version to restore: the sheet as `cells?at=seq` shows it (every entry before `seq`).
    pub seq: u64,
    /// Fail with 409 unless the `restore` entry would get exactly this sequence: a restore
    /// chosen while looking at the sheet as of this sequence, not over edits made since.
    #[serde(default)]
    pub expected_seq: Option<u64>,
    /// The sync client group that restores (the web page's Replicache group): the restore is then
    /// a step of that group's undo stack (docs/api.md, "Undo and redo").
    #[serde(default)]
    pub client_group_id: Option<String>,
}

/// `POST /logs/{logId}/undo` and `/redo`: whose step to act on.
#[derive(Debug, Deserialize, ToSchema)]
#[schema(example = json!({"clientGroupId": "5a0c7e9e-1f3b-4d55-9a55-0c2b1d7e6f10"}))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct UndoRequest {
    /// The sync client group (Replicache's `clientGroupID`) whose own last step to undo or redo.
    pub client_group_id: String,
}

/// What an undo or redo did.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct UndoResponse {
    /// The `undo` entry's sequence.
    pub seq: u64,
    pub next_seq: u64,
    pub redo: bool,
    /// The step acted on: `{"seq", "clientId", "mutationId"}` for a mutation, `{"seq"}` for an
    /// earlier undo or redo.
    #[schema(value_type = Object)]
    pub target: Value,
    /// The events it applied, `{"type", "body"}` (none when everything was skipped).
    #[schema(value_type = Vec<Object>)]
    pub events: Vec<Value>,
    /// Cells (and row or column changes) left alone: changed or deleted by someone else since.
    pub skipped: u64,
    /// The cells skipped because someone else changed them since (the first 100).
    pub changed: Vec<String>,
}

#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct AppendResponse {
    pub seq: u64,
    pub segment: u64,
    pub entry: u64,
    /// The log's next free sequence after everything this request wrote.
    pub next_seq: u64,
    /// With `baseSeq`: the entry as written, `{"type", "body"}`, when rebasing changed it.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub applied_as: Option<Value>,
}

#[derive(Debug, Deserialize, ToSchema)]
#[schema(example = json!({"type": "import", "contentType": "text/csv", "size": 1234}))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct UploadRequest {
    /// The entry type the file is for; today only `import`.
    #[serde(rename = "type")]
    pub kind: String,
    /// The file's exact length in bytes, at most the stack's upload limit. It is signed into the
    /// upload URL, so S3 refuses a body of any other length.
    pub size: u64,
    /// Content type of the file; `text/csv` or the XLSX media type also choose the import format.
    #[serde(default)]
    pub content_type: Option<String>,
    /// The entry body, e.g. `{"format": "xlsx"}`. Defaults from the content type, else CSV.
    #[serde(default)]
    pub body: Option<Value>,
}

#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct UploadCreated {
    pub upload_id: String,
    /// Presigned URL to send the file to.
    pub url: String,
    pub method: String,
    /// Headers the upload request must carry exactly (they are part of the signature).
    pub headers: BTreeMap<String, String>,
    /// RFC 3339 time after which the URL no longer works.
    pub expires_at: String,
}

#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CommitRequest {
    #[serde(default)]
    pub expected_seq: Option<u64>,
    /// The sync client group that imports the file (the web page's Replicache group): the import
    /// is then a step of that group's undo stack, taken back by `POST …/undo` (docs/api.md,
    /// "Undo and redo").
    #[serde(default)]
    pub client_group_id: Option<String>,
}

#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct EntryDto {
    pub seq: u64,
    /// `snapshot`, `end-segment`, or an event type.
    #[serde(rename = "type")]
    pub kind: String,
    /// RFC 3339 creation time (second precision).
    pub created: String,
    /// The event body in the same JSON form it was written in (`{}` for log entries).
    pub body: Value,
    /// Uploaded payloads: a presigned GET of the file.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub payload_url: Option<String>,
    /// Snapshot entries: `complete` once built, `pending` while the worker builds it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub snapshot_status: Option<String>,
}

#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct EntriesResponse {
    pub entries: Vec<EntryDto>,
    /// The sequence to ask for next.
    pub next_seq: u64,
    /// True when the page reached the end of the log.
    pub complete: bool,
}

#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SnapshotRef {
    pub seq: u64,
    /// Always `complete`: a load starts from the newest completed snapshot.
    pub status: String,
    /// Presigned GET of the snapshot's manifest (JSON); absent for the empty sheet at sequence 0.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub manifest_url: Option<String>,
    /// The snapshot's chunks in row order, each with a presigned GET (zstd-compressed rows; the
    /// format is in docs/sheet-model.md).
    pub chunks: Vec<ChunkDto>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct ChunkDto {
    /// SHA-256 of the chunk's raw bytes, which also names it.
    pub hash: String,
    pub rows: u32,
    pub url: String,
}

#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct LoadResponse {
    pub log_id: String,
    pub snapshot: SnapshotRef,
    pub entries: Vec<EntryDto>,
    pub next_seq: u64,
    pub complete: bool,
}

#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SegmentDto {
    pub segment: u64,
    pub base_seq: u64,
    pub created: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_snapshot_seq: Option<u64>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct SegmentsResponse {
    pub segments: Vec<SegmentDto>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct CellsResponse {
    /// The values are the state of every entry before this sequence.
    pub seq: u64,
    pub range: String,
    /// Rows in order; each cell a string, number, boolean, `{"error": "#DIV/0!"}`, or null when
    /// empty. A formula cell has its computed value here, its text in `formulas`.
    pub values: Vec<Vec<Value>>,
    /// The number format of every cell in the range that has one, by A1 ref (e.g. `"0.00%"`);
    /// absent when none has.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub formats: BTreeMap<String, String>,
    /// The style of every styled cell in the range, by A1 ref (`{"bold": true, "fill":
    /// "#ffff00"}`; docs/sheet-model.md, "Styles"); absent when none has one.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    #[schema(value_type = BTreeMap<String, Object>)]
    pub styles: BTreeMap<String, Style>,
    /// The formula of every formula cell in the range, by A1 ref, as typed (`"=SUM(A1:A3)"`);
    /// always present (`{}` when none), which tells a client that `values` are computed values.
    pub formulas: BTreeMap<String, String>,
}

/// The cells that differ between two versions of a sheet, one page of them.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct DiffResponse {
    pub from: u64,
    pub to: u64,
    /// `{"ref", "before", "after"}` per changed cell, in row then column order; `before` and
    /// `after` are cells as a `set` writes them (`{"value", "format"?}`, `{"value": null}` when
    /// empty), a formula as its text.
    #[schema(value_type = Vec<Object>)]
    pub changes: Vec<Value>,
    /// Where the next page starts (`row=`), absent when this page is the last.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_row: Option<u32>,
    pub complete: bool,
}

/// The area a sheet's cells lie in, as of a sequence.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ExtentResponse {
    /// The sheet as of every entry before this sequence.
    pub seq: u64,
    /// Every non-empty cell lies in rows 1..=rows and columns 1..=columns (an upper bound: a
    /// cell cleared at the edge may leave it larger).
    pub rows: u32,
    pub columns: u32,
    /// The A1 range that covers the sheet (`A1:J100`), absent for an empty sheet.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub range: Option<String>,
    /// Column widths, row heights (pixels) and frozen panes, when any are set:
    /// `{"columns": [{"at": "B", "count": 3, "width": 120}], "rows": [{"at": 3, "count": 2,
    /// "height": 40}], "freeze": {"rows": 1, "columns": 0}}`, empty parts left out.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub layout: Option<sheetlog_core::sheet::layout::Layout>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct Health {
    pub status: String,
}

/// Every error response.
#[derive(Debug, Serialize, ToSchema)]
pub struct ErrorResponse {
    pub error: ErrorDetail,
}

#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ErrorDetail {
    /// Stable kebab-case code, e.g. `log-not-found`.
    pub code: String,
    pub message: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_seq: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expected_seq: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub first_seq: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub limit: Option<u64>,
    /// Which documented limit `limit` is, for a file that broke one (`maxCsvRecordBytes`, …).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub limit_name: Option<String>,
    /// The size that was over `limit`, where it is known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub size: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub upload_path: Option<String>,
}

/// A version of the sheet exported as a file, ready to download from S3.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ExportResponse {
    /// The sheet as of every entry before this sequence.
    pub seq: u64,
    /// `xlsx`.
    pub format: String,
    /// A presigned GET of the file, valid for `expiresIn` seconds; it needs no other credentials.
    pub url: String,
    pub expires_in: u64,
    /// The file's size.
    pub bytes: u64,
    /// `true` when an earlier request had already written this version's file.
    pub cached: bool,
}
