//! The poke namespace's onSubscribe and onPublish handlers from the template, run locally the way AppSync Events
//! runs it (issue 42; `sheetlog dev --auth jwt` and `--auth cognito`): the handler code exactly as the synthesized template holds it, under Node
//! (`scripts/lib/appsync_handler.mjs`), with the GetItem it asks for performed on the emulator's
//! table through the SDK and the item handed to its response function. So the local stack admits
//! a subscriber by the deployed code and the real item shape, not by a Rust re-telling of them.
//!
//! AppSync first verifies the token by the namespace's auth mode (here the same stand-in as the
//! HTTP API's authorizer, [`JwtAuthorizer::verify_appsync`]), then runs the handler with the
//! identity: `ctx.identity.sub` and `ctx.identity.claims`, and `ctx.info.channel` (`path`,
//! `segments`).

use std::path::Path;
use std::sync::Arc;

use anyhow::Context;
use serde::Deserialize;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

use crate::local_auth::JwtAuthorizer;

/// A channel namespace of the template's Event API (`channelNamespaces` in the description).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ChannelNamespace {
    pub name: String,
    /// The handlers' code (APPSYNC_JS); `None`: the auth mode alone decides.
    pub code: Option<String>,
    /// The table the onSubscribe handler's data source reads.
    pub subscribe_table: Option<SubscribeTable>,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SubscribeTable {
    pub logical_id: String,
    /// The environment variable that names the table to the functions.
    pub env: Option<String>,
}

impl ChannelNamespace {
    /// The namespace `name` of a template's description, if it has one.
    pub fn from_description(json: &[u8], name: &str) -> anyhow::Result<Option<Self>> {
        #[derive(Deserialize)]
        #[serde(rename_all = "camelCase")]
        struct Description {
            #[serde(default)]
            channel_namespaces: Vec<ChannelNamespace>,
        }
        let d: Description = serde_json::from_slice(json)
            .context("reading the channel namespaces of the template's description")?;
        Ok(d.channel_namespaces.into_iter().find(|n| n.name == name))
    }
}

/// The Node process that runs one namespace's handler code, one call at a time.
#[derive(Debug)]
struct Runner {
    _code: tempfile::TempPath,
    io: tokio::sync::Mutex<(
        tokio::process::Child,
        tokio::process::ChildStdin,
        tokio::io::Lines<BufReader<tokio::process::ChildStdout>>,
    )>,
}

impl Runner {
    async fn start(root: &Path, code: &str) -> anyhow::Result<Self> {
        use std::io::Write;
        let mut file = tempfile::Builder::new()
            .suffix(".mjs")
            .tempfile()
            .context("writing the handler code")?;
        file.write_all(code.as_bytes())?;
        let path = file.into_temp_path();
        let mut child = tokio::process::Command::new("node")
            .arg(root.join("scripts/lib/appsync_handler.mjs"))
            .arg(&path)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .context("running the namespace's handler under Node (is Node.js installed?)")?;
        let stdin = child.stdin.take().context("the handler runner's stdin")?;
        let stdout = child.stdout.take().context("the handler runner's stdout")?;
        Ok(Self {
            _code: path,
            io: tokio::sync::Mutex::new((child, stdin, BufReader::new(stdout).lines())),
        })
    }

    /// Runs `phase` (`request` or `response`) of the handler with `ctx`.
    async fn call(&self, phase: &str, ctx: &Value) -> Result<Answer, String> {
        let mut io = self.io.lock().await;
        let (_, stdin, lines) = &mut *io;
        let line = format!("{}\n", json!({"phase": phase, "ctx": ctx}));
        stdin
            .write_all(line.as_bytes())
            .await
            .map_err(|e| format!("the handler runner stopped: {e}"))?;
        let answer = lines
            .next_line()
            .await
            .map_err(|e| format!("the handler runner stopped: {e}"))?
            .ok_or("the handler runner stopped")?;
        let answer: Answer = serde_json::from_str(&answer).map_err(|e| e.to_string())?;
        match &answer.error {
            Some(e) => Err(format!("the handler failed: {e}")),
            None => Ok(answer),
        }
    }
}

#[derive(Debug, Deserialize)]
struct Answer {
    #[serde(default)]
    kind: String,
    #[serde(default)]
    unauthorized: bool,
    #[serde(default)]
    value: Value,
    #[serde(default)]
    error: Option<String>,
}

/// Who may subscribe, decided by the template's onSubscribe handler.
#[derive(Debug, Clone)]
pub struct HandlerAccess {
    authorizer: Arc<JwtAuthorizer>,
    namespace: String,
    runner: Arc<Runner>,
    dynamo: aws_sdk_dynamodb::Client,
    /// The local table the handler's data source reads.
    table: Option<String>,
}

impl HandlerAccess {
    /// Starts the handler of `namespace` (its code must be there) for tokens `authorizer`
    /// verifies; its data source reads `table` through `dynamo`. `root` is the repository (for
    /// the runner script).
    pub async fn start(
        root: &Path,
        namespace: &ChannelNamespace,
        authorizer: Arc<JwtAuthorizer>,
        dynamo: aws_sdk_dynamodb::Client,
        table: Option<String>,
    ) -> anyhow::Result<Self> {
        let code = namespace
            .code
            .as_deref()
            .with_context(|| format!("the namespace {} has no handler code", namespace.name))?;
        Ok(Self {
            authorizer,
            namespace: namespace.name.clone(),
            runner: Arc::new(Runner::start(root, code).await?),
            dynamo,
            table,
        })
    }

    async fn decide(&self, token: Option<String>, channel: String) -> Result<(), String> {
        let claims = self
            .authorizer
            .verify_appsync(token.as_deref())
            .await
            .map_err(|e| format!("token refused: {e}"))?;
        let segments: Vec<&str> = channel.trim_start_matches('/').split('/').collect();
        if segments.first() != Some(&self.namespace.as_str()) {
            return Err(format!(
                "{channel} is not in the namespace {}",
                self.namespace
            ));
        }
        let mut ctx = json!({
            "info": {"channel": {"path": channel, "segments": segments},
                     "channelNamespace": {"name": self.namespace}},
            "identity": {"sub": claims.get("sub"), "claims": claims},
        });
        let asked = self.runner.call("request", &ctx).await?;
        if asked.unauthorized {
            return Err("Unauthorized".into());
        }
        if asked.kind != "resolver" {
            return Ok(());
        }
        let result = match asked.value.get("operation").and_then(Value::as_str) {
            Some("GetItem") => self.get_item(&asked.value).await?,
            Some(other) => {
                return Err(format!(
                    "the handler asked for {other}, which the local stand-in does not run"
                ));
            }
            None => Value::Null,
        };
        ctx["result"] = result;
        let answered = self.runner.call("response", &ctx).await?;
        if answered.unauthorized {
            return Err("Unauthorized".into());
        }
        Ok(())
    }

    /// The data source's GetItem as the handler described it (`key`, `consistentRead`); the
    /// item as plain JSON, or `null`.
    async fn get_item(&self, request: &Value) -> Result<Value, String> {
        let table = self
            .table
            .as_deref()
            .ok_or("the handler reads a data source the local stack has no table for")?;
        let key: std::collections::HashMap<String, aws_sdk_dynamodb::types::AttributeValue> =
            serde_dynamo::to_item(&request["key"])
                .map_err(|e| format!("the handler's key: {e}"))?;
        let out = self
            .dynamo
            .get_item()
            .table_name(table)
            .set_key(Some(key))
            .consistent_read(request["consistentRead"].as_bool().unwrap_or(false))
            .send()
            .await
            .map_err(|e| {
                format!(
                    "GetItem for the handler: {}",
                    aws_sdk_dynamodb::error::DisplayErrorContext(e)
                )
            })?;
        match out.item {
            Some(item) => serde_dynamo::from_item(item).map_err(|e| e.to_string()),
            None => Ok(Value::Null),
        }
    }
}

impl sheetlog_pipeline::events::SubscribeAuth for HandlerAccess {
    fn authorize(
        &self,
        auth: &serde_json::Map<String, Value>,
        channel: &str,
    ) -> futures::future::BoxFuture<'static, Result<(), String>> {
        let token = auth
            .get("Authorization")
            .or_else(|| auth.get("authorization"))
            .and_then(Value::as_str)
            .map(str::to_owned);
        let this = self.clone();
        let channel = channel.to_owned();
        Box::pin(async move { this.decide(token, channel).await })
    }
}

impl sheetlog_pipeline::events::PublishHandler for HandlerAccess {
    /// The template's onPublish on the published events (`{id, payload}`), with the channel in
    /// `ctx.info`; the events it answers are broadcast.
    fn on_publish(
        &self,
        channel: &str,
        events: Vec<Value>,
    ) -> futures::future::BoxFuture<'static, Result<Vec<Value>, String>> {
        let this = self.clone();
        let channel = channel.to_owned();
        Box::pin(async move {
            let segments: Vec<&str> = channel.trim_start_matches('/').split('/').collect();
            let ctx = json!({
                "events": events,
                "channel": channel,
                "info": {"channel": {"path": channel, "segments": segments},
                         "channelNamespace": {"name": this.namespace},
                         "operation": "PUBLISH"},
                // The publishers are the functions, signed with their roles (IAM).
                "identity": null,
            });
            let answer = this.runner.call("publish", &ctx).await?;
            match answer.value {
                Value::Array(kept) => Ok(kept),
                Value::Null => Ok(Vec::new()),
                other => Err(format!(
                    "the onPublish handler answered {other}, not a list of events"
                )),
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn root() -> std::path::PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
    }

    fn publish_ctx(events: Value) -> Value {
        json!({"events": events, "channel": "/sheets/a",
               "info": {"channel": {"path": "/sheets/a", "segments": ["sheets", "a"]},
                        "channelNamespace": {"name": "sheets"}, "operation": "PUBLISH"},
               "identity": null})
    }

    /// The runner runs the code's onPublish on the events and answers what it returns.
    #[tokio::test]
    async fn on_publish_answers_the_events_the_handler_returns() -> anyhow::Result<()> {
        let code = "import { util } from '@aws-appsync/utils';\n\
            export function onSubscribe(ctx) {}\n\
            export function onPublish(ctx) {\n\
              return ctx.events\n\
                .filter((e) => e.payload.seq % 2 === 0)\n\
                .map((e) => ({ id: e.id, payload: { ...e.payload, on: ctx.info.channel.path } }));\n\
            }\n";
        let runner = Runner::start(&root(), code).await?;
        let events =
            json!([{"id": "1", "payload": {"seq": 1}}, {"id": "2", "payload": {"seq": 2}}]);
        let answer = runner
            .call("publish", &publish_ctx(events))
            .await
            .map_err(anyhow::Error::msg)?;
        assert_eq!(
            answer.value,
            json!([{"id": "2", "payload": {"seq": 2, "on": "/sheets/a"}}])
        );
        Ok(())
    }

    /// Code without onPublish broadcasts the events as published (AppSync's default), and a
    /// handler that throws is an error, not a silent drop.
    #[tokio::test]
    async fn without_on_publish_events_pass_and_a_throw_is_an_error() -> anyhow::Result<()> {
        let events = json!([{"id": "1", "payload": {"seq": 1}}]);
        let plain = Runner::start(&root(), "export function onSubscribe(ctx) {}\n").await?;
        let answer = plain
            .call("publish", &publish_ctx(events.clone()))
            .await
            .map_err(anyhow::Error::msg)?;
        assert_eq!(answer.value, events);
        let throws = Runner::start(
            &root(),
            "export function onPublish(ctx) { return util.error('no'); }\n",
        )
        .await?;
        let err = throws
            .call("publish", &publish_ctx(events))
            .await
            .expect_err("the handler threw");
        assert!(err.contains("no"), "{err}");
        Ok(())
    }
}
