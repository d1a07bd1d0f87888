//! Per-log access under JWT authorization (`functions/api/src/access.rs`): the router behind a
//! stand-in for API Gateway's JWT authorizer, on a fresh emulator stack. Each request carries the
//! claims a verified token would; the access claim decides which logs it may read or write.

use reqwest::StatusCode;
use serde_json::{Value, json};
use sheetlog_api::ApiConfig;
use sheetlog_tests::api::{IAM_CALLER_HEADER, JWT_CLAIMS_HEADER, TestApi, json_str, send_json};
use sheetlog_tests::fixtures::{pull_body, push_body, set_body, set_mutation};

const CLAIM: &str = "sheetlog_logs";

struct Caller<'a> {
    api: &'a TestApi,
    http: reqwest::Client,
    claims: Option<Value>,
}

impl<'a> Caller<'a> {
    /// A caller whose token's access claim is `grants`.
    fn with(api: &'a TestApi, grants: &str) -> Self {
        Self {
            api,
            http: reqwest::Client::new(),
            claims: Some(json!({"sub": "user-1", CLAIM: grants})),
        }
    }

    /// A caller with subject `sub` whose token's access claim is `grants`.
    fn as_subject(api: &'a TestApi, sub: &str, grants: &str) -> Self {
        Self {
            api,
            http: reqwest::Client::new(),
            claims: Some(json!({"sub": sub, CLAIM: grants})),
        }
    }

    /// A valid token without the access claim.
    fn without_claim(api: &'a TestApi) -> Self {
        Self {
            api,
            http: reqwest::Client::new(),
            claims: Some(json!({"sub": "user-2"})),
        }
    }

    async fn send(
        &self,
        method: &str,
        path: &str,
        body: Option<Value>,
    ) -> anyhow::Result<(StatusCode, Value)> {
        let method = reqwest::Method::from_bytes(method.as_bytes())?;
        let mut req = self.http.request(method, self.api.url(path));
        if let Some(claims) = &self.claims {
            req = req.header(JWT_CLAIMS_HEADER, claims.to_string());
        }
        send_json(req, body).await
    }

    async fn create_log(&self) -> anyhow::Result<String> {
        let (status, v) = self.send("POST", "/logs", None).await?;
        anyhow::ensure!(status == StatusCode::CREATED, "{status}: {v}");
        Ok(json_str(&v, "/logId").to_owned())
    }

    async fn append(&self, log: &str) -> anyhow::Result<(StatusCode, Value)> {
        self.send(
            "POST",
            &format!("/logs/{log}/entries"),
            Some(set_body(&[("A1", json!(1))])),
        )
        .await
    }
}

async fn start() -> anyhow::Result<Option<TestApi>> {
    let cfg = ApiConfig {
        access_claim: Some(CLAIM.into()),
        ..ApiConfig::default()
    };
    TestApi::start_with_jwt_claims("access", cfg).await
}

fn assert_forbidden(status: StatusCode, v: &Value, need: &str) {
    assert_eq!(status, StatusCode::FORBIDDEN, "{v}");
    assert_eq!(v["error"]["code"], "forbidden", "{v}");
    assert_eq!(v["error"]["need"], need, "{v}");
    assert_eq!(v["error"]["claim"], CLAIM, "{v}");
}

#[tokio::test]
async fn a_token_reads_and_writes_only_the_logs_its_claim_grants() -> anyhow::Result<()> {
    let Some(api) = start().await? else {
        return Ok(());
    };
    let admin = Caller::with(&api, "*");
    let mine = admin.create_log().await?;
    let theirs = admin.create_log().await?;
    assert_eq!(admin.append(&theirs).await?.0, StatusCode::CREATED);

    // Allowed: read and write the granted log.
    let user = Caller::with(&api, &mine);
    assert_eq!(user.append(&mine).await?.0, StatusCode::CREATED);
    let (status, v) = user.send("GET", &format!("/logs/{mine}"), None).await?;
    assert_eq!(status, StatusCode::OK, "{v}");
    assert_eq!(v["nextSeq"], 2);

    // Forbidden: another caller's log, read or written, and no entry is appended.
    let (status, v) = user.send("GET", &format!("/logs/{theirs}"), None).await?;
    assert_forbidden(status, &v, "read");
    let (status, v) = user.append(&theirs).await?;
    assert_forbidden(status, &v, "write");
    let (_, v) = admin.send("GET", &format!("/logs/{theirs}"), None).await?;
    assert_eq!(v["nextSeq"], 2, "the forbidden append wrote nothing");

    // Unknown: a log id nobody created answers exactly as a forbidden one, so the answer says
    // nothing about which ids exist.
    let unknown = uuid::Uuid::new_v4().to_string();
    let (s_unknown, v_unknown) = user.send("GET", &format!("/logs/{unknown}"), None).await?;
    let (s_theirs, v_theirs) = user.send("GET", &format!("/logs/{theirs}"), None).await?;
    assert_eq!((s_unknown, &v_unknown), (s_theirs, &v_theirs));
    // With a grant for an id that does not exist, it is the usual 404.
    let hopeful = Caller::with(&api, &unknown);
    let (status, v) = hopeful
        .send("GET", &format!("/logs/{unknown}"), None)
        .await?;
    assert_eq!(status, StatusCode::NOT_FOUND, "{v}");
    assert_eq!(v["error"]["code"], "log-not-found");
    Ok(())
}

#[tokio::test]
async fn read_grants_read_and_nothing_else() -> anyhow::Result<()> {
    let Some(api) = start().await? else {
        return Ok(());
    };
    let admin = Caller::with(&api, "*");
    let log = admin.create_log().await?;
    assert_eq!(admin.append(&log).await?.0, StatusCode::CREATED);
    let reader = Caller::with(&api, &format!("{log}:read"));

    for path in [
        format!("/logs/{log}"),
        format!("/logs/{log}/entries?from=0"),
        format!("/logs/{log}/segments"),
        format!("/logs/{log}/cells?range=A1"),
    ] {
        let (status, v) = reader.send("GET", &path, None).await?;
        assert_eq!(status, StatusCode::OK, "{path}: {v}");
    }
    // A Replicache pull is a POST that only reads.
    let (status, v) = reader
        .send(
            "POST",
            &format!("/logs/{log}/replicache/pull"),
            Some(
                json!({"pullVersion": 1, "clientGroupID": "g1", "cookie": null,
                "profileID": "p1", "schemaVersion": ""}),
            ),
        )
        .await?;
    assert_eq!(status, StatusCode::OK, "{v}");

    let (status, v) = reader.append(&log).await?;
    assert_forbidden(status, &v, "write");
    let (status, v) = reader
        .send(
            "POST",
            &format!("/logs/{log}/uploads"),
            Some(json!({"type": "import", "contentType": "text/csv", "size": 10})),
        )
        .await?;
    assert_forbidden(status, &v, "write");
    let (status, v) = reader
        .send(
            "POST",
            &format!("/logs/{log}/replicache/push"),
            Some(
                json!({"pushVersion": 1, "clientGroupID": "g1", "mutations": [],
                "profileID": "p1", "schemaVersion": ""}),
            ),
        )
        .await?;
    assert_forbidden(status, &v, "write");
    Ok(())
}

#[tokio::test]
async fn creating_and_forking_logs_need_their_own_grants() -> anyhow::Result<()> {
    let Some(api) = start().await? else {
        return Ok(());
    };
    let admin = Caller::with(&api, "*");
    let source = admin.create_log().await?;
    assert_eq!(admin.append(&source).await?.0, StatusCode::CREATED);

    let (status, v) = Caller::with(&api, &source)
        .send("POST", "/logs", None)
        .await?;
    assert_forbidden(status, &v, "create");
    let creator = Caller::with(&api, "create");
    creator.create_log().await?;

    // A fork reads its source: `create` alone is not enough.
    let fork = json!({"from": {"logId": source, "seq": 2}});
    let (status, v) = creator.send("POST", "/logs", Some(fork.clone())).await?;
    assert_forbidden(status, &v, "read");
    let (status, v) = Caller::with(&api, &format!("create {source}:read"))
        .send("POST", "/logs", Some(fork))
        .await?;
    assert_eq!(status, StatusCode::CREATED, "{v}");
    Ok(())
}

#[tokio::test]
async fn replay_reads_only_a_source_the_caller_may_read() -> anyhow::Result<()> {
    let Some(api) = start().await? else {
        return Ok(());
    };
    let admin = Caller::with(&api, "*");
    let target = admin.create_log().await?;
    let source = admin.create_log().await?;
    let push = push_body("g1", json!([set_mutation("c1", 1, "A1", json!("secret"))]));
    let (status, v) = admin
        .send(
            "POST",
            &format!("/logs/{source}/replicache/push"),
            Some(push),
        )
        .await?;
    assert_eq!(status, StatusCode::OK, "{v}");
    let replay = |from: &str| json!({"source": from, "from": 0, "to": 2});
    let missing = uuid::Uuid::new_v4().to_string();

    // Write on the target alone: the source is not the caller's to read, whether or not it exists.
    let writer = Caller::with(&api, &target);
    let path = format!("/logs/{target}/replay");
    for from in [&source, &missing] {
        let (status, v) = writer.send("POST", &path, Some(replay(from))).await?;
        assert_forbidden(status, &v, "read");
    }
    let (_, v) = admin
        .send("GET", &format!("/logs/{target}/cells?range=A1:A1"), None)
        .await?;
    assert!(!v.to_string().contains("secret"), "replayed anyway: {v}");

    // With read on the source, the same replay goes through.
    let (status, v) = Caller::with(&api, &format!("{target} {source}:read"))
        .send("POST", &path, Some(replay(&source)))
        .await?;
    assert_eq!(status, StatusCode::OK, "{v}");
    assert_eq!(v["mutationsApplied"], 1, "{v}");
    Ok(())
}

#[tokio::test]
async fn every_log_route_is_checked() -> anyhow::Result<()> {
    let Some(api) = start().await? else {
        return Ok(());
    };
    let admin = Caller::with(&api, "*");
    let log = admin.create_log().await?;
    let nobody = Caller::with(&api, "");
    let no_claim = Caller::without_claim(&api);

    // Every route of the OpenAPI document, so a route added later cannot skip the check.
    let (_, doc) = admin.send("GET", "/openapi.json", None).await?;
    let paths = doc["paths"]
        .as_object()
        .ok_or_else(|| anyhow::anyhow!("no paths in {doc}"))?;
    let mut checked = 0;
    for (path, item) in paths {
        let Some(rest) = path.strip_prefix("/logs") else {
            continue;
        };
        let concrete = format!("/logs{rest}")
            .replace("{logId}", &log)
            .replace("{uploadId}", "1")
            .replace("{clientId}", "c1")
            .replace("{userId}", "user-1")
            .replace("{email}", "someone@example.com")
            .replace("{seq}", "1")
            .replace("{id}", "1");
        for method in ["get", "post", "put", "patch", "delete"] {
            if item.get(method).is_none() {
                continue;
            }
            let need = match (method, path.as_str()) {
                ("post", "/logs") => "create",
                ("post", p) if p.ends_with("/replicache/pull") => "read",
                // Sharing (Cognito authorization's members routes) needs a write grant here.
                ("post", p) if p.ends_with("/members") => "share",
                // Renaming or forgetting a named version is an edit.
                ("put" | "delete", p) if p.contains("/versions/") => "write",
                ("put", _) => "share",
                ("delete", p) if p.contains("/invitations/") => "share",
                ("post" | "patch", _) => "write",
                ("delete", "/logs/{logId}") => "delete",
                // Leaving a sheet: any member may.
                _ => "read",
            };
            for caller in [&nobody, &no_claim] {
                let (status, v) = caller
                    .send(&method.to_uppercase(), &concrete, Some(json!({})))
                    .await?;
                assert_forbidden(status, &v, need);
            }
            checked += 1;
        }
    }
    assert!(
        checked >= 20,
        "only {checked} log routes in the OpenAPI document"
    );
    // Not log routes: open to any valid token.
    assert_eq!(nobody.send("GET", "/health", None).await?.0, StatusCode::OK);
    let (status, config) = nobody.send("GET", "/config.json", None).await?;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        config["auth"], "jwt",
        "an access claim is JWT authorization: {config}"
    );
    assert_eq!(config["cognito"], Value::Null, "{config}");
    // The catalog routes past the check: this stack has no catalog (that is Cognito
    // authorization's), whatever the token grants.
    for (method, path) in [
        ("GET", "/me".to_owned()),
        ("GET", "/sheets".to_owned()),
        ("PATCH", format!("/logs/{log}")),
        ("GET", format!("/logs/{log}/members")),
        ("POST", format!("/logs/{log}/members")),
        ("PUT", format!("/logs/{log}/members/user-1")),
        ("DELETE", format!("/logs/{log}/members/user-1")),
    ] {
        let (status, v) = admin.send(method, &path, Some(json!({}))).await?;
        assert_eq!(status, StatusCode::NOT_FOUND, "{method} {path}: {v}");
        assert_eq!(v["error"]["code"], "no-catalog", "{method} {path}: {v}");
    }
    Ok(())
}

#[tokio::test]
async fn a_request_without_token_claims_gets_nothing() -> anyhow::Result<()> {
    let Some(api) = start().await? else {
        return Ok(());
    };
    let anonymous = Caller {
        api: &api,
        http: reqwest::Client::new(),
        claims: None,
    };
    let (status, v) = anonymous.send("POST", "/logs", None).await?;
    assert_forbidden(status, &v, "create");
    Ok(())
}

/// Deployed with IAM authorization, a caller on EC2, ECS or Lambda signs with an assumed role
/// whose session name changes with every credential refresh. Its sync client group belongs to
/// the role, so after a refresh it still pushes as the same client; another role is refused.
#[tokio::test]
async fn an_iam_role_keeps_its_client_group_when_its_session_changes() -> anyhow::Result<()> {
    let Some(api) = TestApi::start_with_iam_callers("iam-session", ApiConfig::default()).await?
    else {
        return Ok(());
    };
    let http = reqwest::Client::new();
    let as_caller = |path: &str, arn: &str| {
        http.post(format!("{}{path}", api.base))
            .header(IAM_CALLER_HEADER, arn)
    };
    let role = "arn:aws:sts::123456789012:assumed-role/sheets-app";
    let (status, v) = send_json(as_caller("/logs", &format!("{role}/i-0aaa")), None).await?;
    assert_eq!(status, StatusCode::CREATED, "{v}");
    let log = json_str(&v, "/logId").to_owned();
    let push = format!("/logs/{log}/replicache/push");

    let (status, v) = send_json(
        as_caller(&push, &format!("{role}/i-0aaa")),
        Some(push_one("g1", "c1", 1, 1)),
    )
    .await?;
    assert_eq!(status, StatusCode::OK, "{v}");
    // The credentials were refreshed: the same role, a new session name.
    let (status, v) = send_json(
        as_caller(&push, &format!("{role}/i-0bbb")),
        Some(push_one("g1", "c1", 2, 2)),
    )
    .await?;
    assert_eq!(
        status,
        StatusCode::OK,
        "a new session of the role is refused: {v}"
    );
    // Another role is another caller.
    let (status, v) = send_json(
        as_caller(
            &push,
            "arn:aws:sts::123456789012:assumed-role/other-app/i-0aaa",
        ),
        Some(push_one("g1", "c1", 3, 3)),
    )
    .await?;
    assert_group_forbidden(status, &v);
    Ok(())
}

/// A push of one mutation: A1 set to `value`.
fn push_one(group: &str, client: &str, id: u64, value: i64) -> Value {
    push_body(group, json!([set_mutation(client, id, "A1", json!(value))]))
}

/// A client group's first pull.
fn first_pull(group: &str) -> Value {
    pull_body(group, Value::Null)
}

fn assert_group_forbidden(status: StatusCode, v: &Value) {
    assert_eq!(status, StatusCode::FORBIDDEN, "{v}");
    assert_eq!(v["error"]["code"], "client-group-forbidden", "{v}");
}

/// Two users who may both write a sheet: the second cannot push as the first's client (which
/// would make the first's real mutation count as applied and drop it) nor pull its group.
#[tokio::test]
async fn a_client_group_belongs_to_the_user_who_first_used_it() -> anyhow::Result<()> {
    let Some(api) = start().await? else {
        return Ok(());
    };
    let log = Caller::with(&api, "*").create_log().await?;
    let alice = Caller::as_subject(&api, "alice", &log);
    let mallory = Caller::as_subject(&api, "mallory", &log);
    let push = format!("/logs/{log}/replicache/push");
    let pull = format!("/logs/{log}/replicache/pull");

    let (status, v) = alice
        .send("POST", &push, Some(push_one("g-alice", "c-alice", 1, 1)))
        .await?;
    assert_eq!(status, StatusCode::OK, "{v}");
    // Mallory reads Alice's client id (every reader can) and pushes its next id first.
    let (status, v) = mallory
        .send("POST", &push, Some(push_one("g-alice", "c-alice", 2, 666)))
        .await?;
    assert_group_forbidden(status, &v);
    let (status, v) = mallory
        .send("POST", &pull, Some(first_pull("g-alice")))
        .await?;
    assert_group_forbidden(status, &v);
    // Alice's real mutation 2 still applies, and the sheet holds her value.
    let (status, v) = alice
        .send("POST", &push, Some(push_one("g-alice", "c-alice", 2, 2)))
        .await?;
    assert_eq!(status, StatusCode::OK, "{v}");
    assert_eq!(v["applied"], 1, "{v}");
    let (status, v) = alice
        .send("POST", &pull, Some(first_pull("g-alice")))
        .await?;
    assert_eq!(status, StatusCode::OK, "{v}");
    assert_eq!(v["lastMutationIDChanges"]["c-alice"], 2, "{v}");
    let (_, cell) = alice
        .send("GET", &format!("/logs/{log}/cells?range=A1"), None)
        .await?;
    assert_eq!(cell["values"], json!([[2]]), "{cell}");
    // Mallory's own group works; a group first pulled is owned by whoever pulled it.
    let (status, v) = mallory
        .send(
            "POST",
            &push,
            Some(push_one("g-mallory", "c-mallory", 1, 3)),
        )
        .await?;
    assert_eq!(status, StatusCode::OK, "{v}");
    let (status, _) = mallory
        .send("POST", &pull, Some(first_pull("g-fresh")))
        .await?;
    assert_eq!(status, StatusCode::OK);
    let (status, v) = alice
        .send("POST", &push, Some(push_one("g-fresh", "c-x", 1, 4)))
        .await?;
    assert_group_forbidden(status, &v);
    Ok(())
}

#[tokio::test]
async fn a_token_without_a_subject_cannot_use_a_client_group() -> anyhow::Result<()> {
    let Some(api) = start().await? else {
        return Ok(());
    };
    let log = Caller::with(&api, "*").create_log().await?;
    let nameless = Caller {
        api: &api,
        http: reqwest::Client::new(),
        claims: Some(json!({ CLAIM: log })),
    };
    let (status, v) = nameless
        .send(
            "POST",
            &format!("/logs/{log}/replicache/push"),
            Some(push_one("g1", "c1", 1, 1)),
        )
        .await?;
    assert_group_forbidden(status, &v);
    Ok(())
}

/// A replay credits the replayed mutations to their client in the target, so it is held to a
/// push's rule: an editor who pushed junk as another member's client on a scratch log of their
/// own (where the group was free) cannot replay it onto the shared log, which would make the
/// member's next mutations count as applied and be dropped.
#[tokio::test]
async fn a_replay_cannot_credit_another_users_client_group() -> anyhow::Result<()> {
    let Some(api) = start().await? else {
        return Ok(());
    };
    let admin = Caller::with(&api, "*");
    let shared = admin.create_log().await?;
    let scratch = admin.create_log().await?;
    let alice = Caller::as_subject(&api, "alice", &shared);
    let bob = Caller::as_subject(&api, "bob", &format!("{shared} {scratch} create"));
    let push = |log: &str| format!("/logs/{log}/replicache/push");

    let (status, v) = alice
        .send("POST", &push(&shared), Some(push_one("ga", "ca", 1, 1)))
        .await?;
    assert_eq!(status, StatusCode::OK, "{v}");
    // Bob pushes 50 junk mutations as Alice's group and client where the group is free.
    let junk: Vec<Value> = (1..=50)
        .map(|id| set_mutation("ca", id, "A1", json!("junk")))
        .collect();
    let mut body = push_one("ga", "ca", 1, 0);
    body["mutations"] = json!(junk);
    let (status, v) = bob.send("POST", &push(&scratch), Some(body)).await?;
    assert_eq!(status, StatusCode::OK, "{v}");
    assert_eq!(v["applied"], 50, "{v}");
    let (_, head) = bob.send("GET", &format!("/logs/{scratch}"), None).await?;
    let end = head["nextSeq"].clone();

    // Replaying it onto the shared log is refused, and nothing is written.
    let (_, before) = admin.send("GET", &format!("/logs/{shared}"), None).await?;
    let (status, v) = bob
        .send(
            "POST",
            &format!("/logs/{shared}/replay"),
            Some(json!({"source": scratch, "from": 0, "to": end})),
        )
        .await?;
    assert_group_forbidden(status, &v);
    let (_, after) = admin.send("GET", &format!("/logs/{shared}"), None).await?;
    assert_eq!(after["nextSeq"], before["nextSeq"], "{after}");
    let (status, v) = admin
        .send("GET", &format!("/logs/{shared}/clients/ca"), None)
        .await?;
    assert_eq!(status, StatusCode::OK, "{v}");
    assert_eq!(v["lastMutationId"], 1, "{v}");
    let (_, cell) = admin
        .send("GET", &format!("/logs/{shared}/cells?range=A1"), None)
        .await?;
    assert_eq!(cell["values"], json!([[1]]), "{cell}");
    // Alice's next edit is applied, not acknowledged and dropped.
    let (status, v) = alice
        .send("POST", &push(&shared), Some(push_one("ga", "ca", 2, 2)))
        .await?;
    assert_eq!(status, StatusCode::OK, "{v}");
    assert_eq!(v["applied"], 1, "{v}");

    // A fork starts with no client progress: the group is free there, the client unknown.
    let (status, v) = bob
        .send(
            "POST",
            "/logs",
            Some(json!({"from": {"logId": shared, "seq": after["nextSeq"]}})),
        )
        .await?;
    assert_eq!(status, StatusCode::CREATED, "{v}");
    let fork = json_str(&v, "/logId").to_owned();
    let (status, v) = admin
        .send("GET", &format!("/logs/{fork}/clients/ca"), None)
        .await?;
    assert_eq!(status, StatusCode::NOT_FOUND, "{v}");

    // Bob's own group replays: its runs are credited to him.
    let (status, v) = bob
        .send("POST", &push(&scratch), Some(push_one("gb", "cb", 1, 7)))
        .await?;
    assert_eq!(status, StatusCode::OK, "{v}");
    let (_, head) = bob.send("GET", &format!("/logs/{scratch}"), None).await?;
    let (status, v) = bob
        .send(
            "POST",
            &format!("/logs/{shared}/replay"),
            Some(json!({"source": scratch, "from": end, "to": head["nextSeq"]})),
        )
        .await?;
    assert_eq!(status, StatusCode::OK, "{v}");
    assert_eq!(v["mutationsApplied"], 1, "{v}");
    let (status, v) = alice
        .send("POST", &push(&shared), Some(push_one("gb", "cx", 1, 8)))
        .await?;
    assert_group_forbidden(status, &v);
    Ok(())
}
