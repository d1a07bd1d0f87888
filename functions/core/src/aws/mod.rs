//! AWS adapters for the ports in [`crate::ports`] and the snapshot engine's ports. They own every
//! mapping between SDK types and domain types; nothing outside this module sees an SDK type.
//!
//! Layout:
//! - `items.rs`  — Entry/Segment item <-> record mapping, attribute names, DynamoDB item size
//! - `dynamo/`   — [`DynamoLogStore`], the log ports over DynamoDB (conditional puts, transactions,
//!   paging), one file per concern
//! - `catalog.rs` — [`DynamoCatalog`], the catalog of sheets and members (issue 31)
//! - `s3.rs`     — [`S3Bucket`], the one S3 adapter: payloads, snapshot blobs, import files, the
//!   auto-delete tag, presigned URLs; [`s3_client`], the S3 client every function builds;
//!   `s3/multipart.rs`, an object written in parts (a large manifest) as a multipart upload
//! - `pending.rs` — [`DynamoPendingStore`], the Pending Snapshots table with its increment-guarded writes
//! - `purge.rs`   — [`DynamoPurge`], deleting a log's items; listing and deleting its objects
//! - `queues.rs` — [`SqsJobQueue`], the snapshot job queue
//! - `stream_filter.json` — the Entry-stream event filter shared with the CDK stack

pub mod catalog;
pub mod dynamo;
pub mod items;
pub mod pending;
pub mod purge;
pub mod queues;
pub mod s3;

pub use catalog::DynamoCatalog;
pub use dynamo::DynamoLogStore;
pub use items::item_size;
pub use pending::DynamoPendingStore;
pub use purge::DynamoPurge;
pub use queues::{SqsJobQueue, SqsPushQueue};
pub use s3::{S3Bucket, Untagged, s3_client};

/// The Entry-stream filter patterns (one JSON object per pattern), as the CDK stack uses them.
pub const STREAM_FILTER_JSON: &str = include_str!("stream_filter.json");
