//! AWS adapters for the ports in [`crate::ports`]. They own every mapping between SDK types and
//! domain types; nothing outside this module (and the snapshot store adapter) sees an SDK type.
//!
//! Layout:
//! - `items.rs`  — Entry/Segment item <-> record mapping, attribute names, DynamoDB item size
//! - `dynamo.rs` — [`DynamoLogStore`], the `LogStore` over DynamoDB (conditional puts, transactions, paging)
//! - `s3.rs`     — [`S3PayloadStore`], the `PayloadStore` over S3 with the auto-delete tag
//! - `schema.rs` — table and bucket definitions, used by the local stack and the tests
//! - `stream_filter.json` — the Entry-stream event filter shared with the CDK stack

pub mod dynamo;
pub mod items;
pub mod s3;
pub mod schema;

pub use dynamo::DynamoLogStore;
pub use items::item_size;
pub use s3::S3PayloadStore;

/// The Entry-stream filter patterns (one JSON object per pattern), as the CDK stack uses them.
pub const STREAM_FILTER_JSON: &str = include_str!("stream_filter.json");
