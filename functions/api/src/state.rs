//! What every request handler shares: the event log, the bucket (presigning, uploads, snapshots),
//! settings, and a per-log cache of segment hints (so most appends skip the Segment query).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use sheetlog_core::LogId;
use sheetlog_core::aws::{DynamoLogStore, DynamoPurge, S3Bucket, SqsPushQueue, s3_client};
use sheetlog_core::config::{LogConfig, Resources};
use sheetlog_core::domain::RequestUnits;
use sheetlog_core::log::{EventLog, SegmentHint};
use sheetlog_core::poke::Poker;
use sheetlog_core::ports::{
    GroupOwners, LogPurge, LogStore, NamedVersions, PayloadStore, PushQueue,
};

use std::time::Instant;

use sheetlog_core::aws::DynamoCatalog;
use sheetlog_core::catalog::{Catalog, CatalogError, Role, TOUCH_INTERVAL_MS};
use sheetlog_core::users::{CognitoDirectory, UserDirectory};

use crate::config::{ApiConfig, AuthMode, SyncWrites};

/// Milliseconds since the Unix epoch, now.
pub fn now_ms() -> i64 {
    i64::try_from((time::OffsetDateTime::now_utc().unix_timestamp_nanos()) / 1_000_000).unwrap_or(0)
}

/// The API's log: the stores are chosen at start-up (the AWS adapters, or the same wrapped in
/// the fault-injecting adapter by `sheetlog dev --faults`).
pub type ApiLog = EventLog<Arc<dyn LogStore>, Arc<dyn PayloadStore>>;

/// Hints kept per warm process; cleared wholesale past this many logs (a stale or missing hint
/// only costs one extra query).
const MAX_HINTS: usize = 10_000;

/// How long an instance trusts a user's verified email it read from the pool. A person whose
/// address changes claims invitations to the old one on that instance for at most this long;
/// in exchange, listing sheets asks the pool (whose `ListUsers` quota is shared by the whole
/// account) about once per person and instance in this time, not on every listing.
pub const EMAIL_CACHE: std::time::Duration = std::time::Duration::from_secs(300);

/// How long a queued push trusts this instance's last finding that its log is not deleted
/// (`access.rs`): on a hot sheet every push made its own strong read of the log's tombstone.
pub const LIVE_FOR: std::time::Duration = std::time::Duration::from_secs(1);

#[derive(Debug)]
pub struct AppState {
    pub log: ApiLog,
    /// The stack's bucket: presigned URLs, uploads, snapshot manifests and chunks, and import
    /// files streamed for reads that replay an import.
    pub bucket: S3Bucket,
    pub cfg: ApiConfig,
    /// The sync FIFO queue, when pushes are queued (`docs/sync.md`, "Queued pushes").
    pub push_queue: Option<Arc<dyn PushQueue>>,
    /// Who owns each sync client group (`sync.rs`).
    groups: Arc<dyn GroupOwners>,
    /// Log metadata (creator, deletion tombstone) and deleting a log's items.
    pub purge: Arc<dyn LogPurge>,
    /// Named versions (`versions.rs`).
    pub versions: Arc<dyn NamedVersions>,
    /// Announces commits on the sheet's AppSync Events channel, when pokes are configured.
    pub poker: Option<Arc<Poker>>,
    hints: Mutex<HashMap<LogId, SegmentHint>>,
    /// Group owners seen by this process: ownership never changes, so a hit needs no read.
    owners: Mutex<HashMap<(LogId, String), String>>,
    /// The group of each sync client this process has seen applied in a log: a client never
    /// changes group, so a queued push from a known client needs no read of the Clients table.
    client_groups: Mutex<HashMap<(LogId, String), String>>,
    /// The origin presigned URLs point at (the bucket's, or the emulator's), found once.
    upload_origin: tokio::sync::OnceCell<Option<String>>,
    /// The catalog of sheets and members (Cognito authorization).
    pub catalog: Option<Arc<dyn Catalog>>,
    /// The user pool, to share by email (Cognito authorization).
    pub users: Option<Arc<dyn UserDirectory>>,
    /// Roles read from the catalog, with when they were read: trusted for `cfg.catalog_cache`.
    roles: Mutex<HashMap<(String, LogId), (Role, Instant)>>,
    /// Each user's verified email as the pool gave it (none: no verified address), with when it
    /// was read: trusted for [`EMAIL_CACHE`] (invitations, `invitations.rs`).
    emails: Mutex<HashMap<String, (Option<String>, Instant)>>,
    /// When this instance last stamped each sheet's last-changed time.
    touched: Mutex<HashMap<LogId, i64>>,
    /// When this instance last found each log not deleted (queued pushes, [`LIVE_FOR`]).
    live: Mutex<HashMap<LogId, Instant>>,
    /// Pulls of one sheet and cookie that arrive together share one read (`sync/gather.rs`).
    pub pull_gather: crate::sync::gather::PullGather,
}

pub type SharedState = Arc<AppState>;

impl AppState {
    pub fn new(
        log: ApiLog,
        bucket: S3Bucket,
        groups: Arc<dyn GroupOwners>,
        cfg: ApiConfig,
        purge: Arc<dyn LogPurge>,
        versions: Arc<dyn NamedVersions>,
    ) -> Self {
        Self {
            purge,
            versions,
            bucket,
            log,
            cfg,
            push_queue: None,
            poker: None,
            groups,
            hints: Mutex::new(HashMap::new()),
            owners: Mutex::new(HashMap::new()),
            client_groups: Mutex::new(HashMap::new()),
            upload_origin: tokio::sync::OnceCell::new(),
            catalog: None,
            users: None,
            roles: Mutex::new(HashMap::new()),
            emails: Mutex::new(HashMap::new()),
            touched: Mutex::new(HashMap::new()),
            live: Mutex::new(HashMap::new()),
            pull_gather: Default::default(),
        }
    }

    /// Reads access from `catalog` and finds people in `users` (Cognito authorization).
    pub fn with_catalog(
        mut self,
        catalog: Arc<dyn Catalog>,
        users: Option<Arc<dyn UserDirectory>>,
    ) -> Self {
        self.catalog = Some(catalog);
        self.users = users;
        self
    }

    /// The catalog, or the `no-catalog` answer of a stack without Cognito authorization.
    pub fn require_catalog(&self) -> Result<&dyn Catalog, crate::error::ApiError> {
        self.catalog
            .as_deref()
            .ok_or(crate::error::ApiError::NoCatalog {
                mode: self.cfg.effective_auth_mode().as_str(),
            })
    }

    /// `user`'s role on `log`: from this instance's cache when read within
    /// `cfg.catalog_cache` and it allows `at_least`; otherwise from the catalog. A read or a
    /// write reads it eventually consistently (half a read unit) and, when that does not allow
    /// `at_least`, again strongly: so a new share or a promotion counts at once, and a removal or
    /// a demotion within the cache time plus the replica's lag (usually under a second).
    /// `None`: not a member (or no catalog).
    ///
    /// The cache only ever allows reads and writes: an owner action (`at_least` = owner:
    /// share, change a role, remove someone else, delete) reads the catalog strongly every
    /// time. Only the instance that changes a role forgets it, so a cached or lagging "owner"
    /// would let a removed or demoted owner, on any other warm instance, re-add themself, remove
    /// the others or delete the sheet.
    pub async fn role(
        &self,
        user: &str,
        log: LogId,
        at_least: Role,
    ) -> Result<Option<Role>, CatalogError> {
        let Some(catalog) = &self.catalog else {
            return Ok(None);
        };
        let key = (user.to_owned(), log);
        let ttl = self.cfg.catalog_cache;
        if at_least < Role::Owner
            && let Some((role, at)) = self.roles.lock().ok().and_then(|r| r.get(&key).copied())
            && at.elapsed() < ttl
            && role >= at_least
        {
            return Ok(Some(role));
        }
        let eventual = if at_least < Role::Owner {
            catalog.role_eventual(user, log).await?
        } else {
            None
        };
        let role = match eventual {
            Some(role) if role >= at_least => Some(role),
            _ => catalog.role(user, log).await?,
        };
        if let Ok(mut r) = self.roles.lock() {
            if r.len() >= MAX_HINTS {
                r.clear();
            }
            match role {
                Some(role) if !ttl.is_zero() => {
                    r.insert(key, (role, Instant::now()));
                }
                _ => {
                    r.remove(&key);
                }
            }
        }
        Ok(role)
    }

    /// `user`'s verified email (`None`: no pool, no such user, or an address not verified),
    /// from this instance's cache when read within [`EMAIL_CACHE`], else from the pool
    /// (one `ListUsers`).
    pub async fn verified_email(
        &self,
        user: &str,
    ) -> Result<Option<String>, sheetlog_core::users::DirectoryError> {
        let Some(users) = &self.users else {
            return Ok(None);
        };
        if let Some((email, at)) = self.emails.lock().ok().and_then(|e| e.get(user).cloned())
            && at.elapsed() < EMAIL_CACHE
        {
            return Ok(email);
        }
        let email = users
            .by_id(user)
            .await?
            .filter(|u| u.email_verified)
            .and_then(|u| u.email);
        if let Ok(mut e) = self.emails.lock() {
            if e.len() >= MAX_HINTS {
                e.clear();
            }
            e.insert(user.to_owned(), (email.clone(), Instant::now()));
        }
        Ok(email)
    }

    /// Forgets what this instance cached about `user` on `log` (after it changed the role).
    pub fn forget_role(&self, user: &str, log: LogId) {
        if let Ok(mut r) = self.roles.lock() {
            r.remove(&(user.to_owned(), log));
        }
    }

    /// Fails with [`LogError::LogDeleted`] for a deleted log, trusting this instance's finding
    /// of the last [`LIVE_FOR`] that it is not (for a queued push and a pull's shared read).
    pub async fn check_live_recent(&self, log: LogId) -> Result<(), sheetlog_core::LogError> {
        if self.recently_live(log) {
            return Ok(());
        }
        let live = sheetlog_core::log::purge::check_live(&*self.purge, log).await;
        self.set_live(log, live.is_ok());
        live
    }

    /// Whether this instance found `log` not deleted within [`LIVE_FOR`].
    pub fn recently_live(&self, log: LogId) -> bool {
        self.live
            .lock()
            .ok()
            .and_then(|l| l.get(&log).copied())
            .is_some_and(|at| at.elapsed() < LIVE_FOR)
    }

    /// Records that `log` was just found not deleted (`false`: it was deleted, forget it).
    pub fn set_live(&self, log: LogId, live: bool) {
        if let Ok(mut l) = self.live.lock() {
            if !live {
                l.remove(&log);
                return;
            }
            if l.len() >= MAX_HINTS {
                l.clear();
            }
            l.insert(log, Instant::now());
        }
    }

    /// Stamps the sheet's last-changed time after a write, at most once per
    /// [`TOUCH_INTERVAL_MS`] per sheet from this instance (one UpdateItem; once per
    /// `LISTED_STAMP_INTERVAL_MS` per sheet, one instance's stamp also copies it onto every
    /// member's item, `Catalog::touch`); never fails the write that caused it.
    pub async fn touch(&self, log: LogId) {
        let Some(catalog) = &self.catalog else {
            return;
        };
        let now = now_ms();
        {
            let Ok(mut t) = self.touched.lock() else {
                return;
            };
            if t.get(&log)
                .is_some_and(|last| now - last < TOUCH_INTERVAL_MS)
            {
                return;
            }
            if t.len() >= MAX_HINTS {
                t.clear();
            }
            t.insert(log, now);
        }
        if let Err(e) = catalog.touch(log, now).await {
            tracing::warn!(log = %log, error = %e, "stamping the sheet's last change failed");
        }
    }

    /// The origin (`scheme://host[:port]`) of the URLs this stack presigns: where the web page
    /// PUTs uploads, so its Content-Security-Policy allows exactly that origin. Derived from a
    /// presigned URL (signing is local: no request is sent), so it follows the S3 client's
    /// configuration: the bucket's virtual-hosted address in AWS, the emulator's locally.
    pub async fn upload_origin(&self) -> Option<String> {
        self.upload_origin
            .get_or_init(|| async {
                let url = self
                    .bucket
                    .presign_get("origin-probe", std::time::Duration::from_secs(60))
                    .await
                    .ok()?;
                origin_of(&url)
            })
            .await
            .clone()
    }

    /// Queues pushes on `queue` instead of applying them (the sync writer applies them).
    pub fn with_push_queue(mut self, queue: Arc<dyn PushQueue>) -> Self {
        self.push_queue = Some(queue);
        self
    }

    /// Pokes the sheet's channel after every commit through `poker`.
    pub fn with_poker(mut self, poker: Arc<Poker>) -> Self {
        self.poker = Some(poker);
        self
    }

    /// Announces a commit: `log`'s next sequence is now `next_seq` (coalesced; never fails).
    pub async fn poke(&self, log: LogId, next_seq: u64) {
        if let Some(p) = &self.poker {
            p.poke(log, next_seq).await;
        }
    }

    /// Builds the state from SDK configuration and resource names.
    pub fn from_sdk(
        sdk: &aws_config::SdkConfig,
        resources: &Resources,
        log_cfg: LogConfig,
        cfg: ApiConfig,
    ) -> anyhow::Result<Self> {
        Self::from_sdk_wrapped(sdk, resources, log_cfg, cfg, |s, p| (s, p))
    }

    /// As [`from_sdk`](Self::from_sdk), with the log's stores passed through `wrap` first (the
    /// local stack wraps them in the fault-injecting adapter).
    pub fn from_sdk_wrapped(
        sdk: &aws_config::SdkConfig,
        resources: &Resources,
        log_cfg: LogConfig,
        cfg: ApiConfig,
        wrap: impl FnOnce(
            Arc<dyn LogStore>,
            Arc<dyn PayloadStore>,
        ) -> (Arc<dyn LogStore>, Arc<dyn PayloadStore>),
    ) -> anyhow::Result<Self> {
        let dynamo = aws_sdk_dynamodb::Client::new(sdk);
        let purge = DynamoPurge::new(
            dynamo.clone(),
            &resources.entry_table,
            &resources.segment_table,
            resources.require_pending_table()?,
            resources.require_clients_table()?,
        )
        .with_dedupe_table(resources.require_dedupe_table()?);
        let store = DynamoLogStore::new(dynamo, &resources.entry_table, &resources.segment_table)
            .with_dedupe_table(resources.require_dedupe_table()?)
            .with_clients_table(resources.require_clients_table()?);
        let bucket = S3Bucket::new(s3_client(sdk), &resources.bucket);
        let store = Arc::new(store);
        let groups: Arc<dyn GroupOwners> = store.clone();
        let versions: Arc<dyn NamedVersions> = store.clone();
        let (store, payloads) = wrap(store, Arc::new(bucket.clone()));
        let log = EventLog::new(store, payloads, log_cfg)?;
        let queue = match (cfg.sync_writes, &cfg.sync_queue_url) {
            (SyncWrites::Queued, Some(url)) => Some(SqsPushQueue::new(
                aws_sdk_sqs::Client::new(sdk),
                url.clone(),
            )),
            (SyncWrites::Queued, None) => {
                anyhow::bail!("queued sync writes need the sync queue's URL")
            }
            (SyncWrites::Direct, _) => None,
        };
        let poker = match &cfg.pokes {
            Some(p) => Some(Arc::new(Poker::from_sdk(sdk, p)?)),
            None => None,
        };
        let catalog = match (&cfg.catalog_table, cfg.auth_mode) {
            (Some(table), AuthMode::Cognito) => Some(Arc::new(DynamoCatalog::new(
                aws_sdk_dynamodb::Client::new(sdk),
                table,
            ))),
            _ => None,
        };
        let users = cfg.cognito.as_ref().map(|c| {
            Arc::new(CognitoDirectory::new(sdk, &c.endpoint, &c.user_pool_id))
                as Arc<dyn UserDirectory>
        });
        let mut state = Self::new(log, bucket, groups, cfg, Arc::new(purge), versions);
        state.poker = poker;
        if let Some(catalog) = catalog {
            state = state.with_catalog(catalog, users);
        }
        Ok(match queue {
            Some(q) => state.with_push_queue(Arc::new(q)),
            None => state,
        })
    }

    /// The owner of a sync client group as this process last saw it (ownership never changes).
    pub fn known_group_owner(&self, log: LogId, group: &str) -> Option<String> {
        self.owners
            .lock()
            .ok()
            .and_then(|o| o.get(&(log, group.to_owned())).cloned())
    }

    /// The owner of a sync client group, claiming it for `subject` when it has none.
    pub async fn claim_group(
        &self,
        log: LogId,
        group: &str,
        subject: &str,
    ) -> Result<String, sheetlog_core::StoreError> {
        let mut units = RequestUnits::default();
        let owner = self
            .groups
            .claim_group(log, group, subject, &mut units)
            .await?;
        if let Ok(mut o) = self.owners.lock() {
            if o.len() >= MAX_HINTS {
                o.clear();
            }
            o.insert((log, group.to_owned()), owner.clone());
        }
        Ok(owner)
    }

    /// The group of a client this process has seen applied in the log (it never changes).
    pub fn known_client_group(&self, log: LogId, client: &str) -> Option<String> {
        self.client_groups
            .lock()
            .ok()
            .and_then(|c| c.get(&(log, client.to_owned())).cloned())
    }

    pub fn remember_client_group(&self, log: LogId, client: &str, group: &str) {
        if let Ok(mut c) = self.client_groups.lock() {
            if c.len() >= MAX_HINTS {
                c.clear();
            }
            c.insert((log, client.to_owned()), group.to_owned());
        }
    }

    pub fn hint(&self, log: LogId) -> Option<SegmentHint> {
        self.hints.lock().ok().and_then(|h| h.get(&log).copied())
    }

    pub fn remember_hint(&self, log: LogId, hint: SegmentHint) {
        if let Ok(mut h) = self.hints.lock() {
            if h.len() >= MAX_HINTS {
                h.clear();
            }
            h.insert(log, hint);
        }
    }
}

/// `scheme://authority` of an absolute URL, or `None` for anything else.
pub fn origin_of(url: &str) -> Option<String> {
    let (scheme, rest) = url.split_once("://")?;
    let authority = rest.split(['/', '?', '#']).next()?;
    let ok = |c: char| c.is_ascii_alphanumeric() || "-._:[]".contains(c);
    if !matches!(scheme, "http" | "https") || authority.is_empty() || !authority.chars().all(ok) {
        return None;
    }
    Some(format!("{scheme}://{authority}"))
}

#[cfg(test)]
mod tests {
    use super::origin_of;

    #[test]
    fn the_origin_of_a_presigned_url() {
        assert_eq!(
            origin_of("https://b.s3.eu-west-1.amazonaws.com/k?X-Amz-Signature=1").as_deref(),
            Some("https://b.s3.eu-west-1.amazonaws.com")
        );
        assert_eq!(
            origin_of("http://127.0.0.1:5000/bucket/k").as_deref(),
            Some("http://127.0.0.1:5000")
        );
        assert_eq!(origin_of("javascript:alert(1)"), None);
        assert_eq!(origin_of("https://a b/"), None);
    }
}
