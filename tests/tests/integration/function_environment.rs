//! Each function's environment, template against code. Every binary declares the variables it
//! reads (`Settings::environment()` in its crate, each marked with how it arrives:
//! `sheetlog_core::config::Given`); its start-up loader (`Settings::from_vars`) reads through an
//! `Env` that remembers what it was asked. For the template described in each configuration the
//! stack offers, each function's loader runs on the environment the template gives it, and the
//! test fails when
//!
//! - the loader refuses the template's values (a required variable missing, a value it cannot
//!   parse);
//! - the template sets a variable the binary does not declare (unknown), or one Lambda reserves,
//!   or one only the local stack reads;
//! - the template leaves out a variable the binary declares the stack sets (one less);
//! - the loader asks for a variable the binary does not declare (the declaration is behind);
//! - a declared variable is asked for in no configuration (the declaration is stale).
//!
//! `a_changed_template_fails_the_check` shows the check failing on a variable removed and one
//! added.

use std::collections::{BTreeMap, BTreeSet};

use anyhow::{Context, bail};
use serde_json::Value;
use sheetlog_core::config::{ConfigError, Env, EnvVar, Given};
use sheetlog_pipeline::roles;
use sheetlog_tests::stack::described;

/// A function the stack deploys: its declaration and its loader.
struct Binary {
    name: &'static str,
    declared: Vec<EnvVar>,
    load: fn(&Env) -> Result<(), ConfigError>,
}

fn binaries() -> Vec<Binary> {
    fn logging(env: &Env) {
        let _ = sheetlog_core::telemetry::lambda_filter(env);
    }
    vec![
        Binary {
            name: roles::API,
            declared: sheetlog_api::config::Settings::environment(),
            load: |env| {
                logging(env);
                sheetlog_api::config::Settings::from_vars(env).map(drop)
            },
        },
        Binary {
            name: roles::STREAM_ROUTER,
            declared: sheetlog_stream_router::Settings::environment(),
            load: |env| {
                logging(env);
                sheetlog_stream_router::Settings::from_vars(env).map(drop)
            },
        },
        Binary {
            name: roles::SNAPSHOT_WORKER,
            declared: sheetlog_snapshot_worker::config::Settings::environment(),
            load: |env| {
                logging(env);
                sheetlog_snapshot_worker::config::Settings::from_vars(env).map(drop)
            },
        },
        Binary {
            name: roles::SYNC_WRITER,
            declared: sheetlog_sync_writer::config::Settings::environment(),
            load: |env| {
                logging(env);
                sheetlog_sync_writer::config::Settings::from_vars(env).map(drop)
            },
        },
        Binary {
            name: roles::ARCHIVER,
            declared: sheetlog_archiver::Settings::environment(),
            load: |env| {
                logging(env);
                sheetlog_archiver::Settings::from_vars(env).map(drop)
            },
        },
    ]
}

/// The configurations whose templates are compared: every authorization mode, both write modes,
/// both retention modes that deploy the archiver.
fn configurations() -> Vec<Vec<String>> {
    let mut out = vec![
        sheetlog_local::dev::template_context("iam", "", &[]),
        sheetlog_local::dev::template_context("jwt", "sub", &[]),
        sheetlog_local::dev::template_context("cognito", "", &[]),
    ];
    out.push(vec!["syncWrites=direct".into()]);
    out.push(vec!["retentionMode=archive".into()]);
    out.push(vec![
        "retentionMode=delete".into(),
        "retentionAfterDays=30".into(),
    ]);
    out
}

/// A CloudFormation value as a string the loader can read: a literal as it is, a `Ref` as the
/// resource's logical id, an attribute as a made-up domain, a join joined. Anything else is an
/// error (the check would otherwise pass on a value it never saw).
fn stand_in(v: &Value) -> anyhow::Result<String> {
    Ok(match v {
        Value::String(s) => s.clone(),
        Value::Number(n) => n.to_string(),
        Value::Object(o) => {
            if let Some(id) = o.get("ref").or_else(|| o.get("Ref")) {
                format!("ref-{}", id.as_str().context("a Ref names a logical id")?)
            } else if let Some(inner) = o.get("cfn") {
                stand_in(inner)?
            } else if let Some(att) = o.get("Fn::GetAtt").and_then(Value::as_array) {
                let parts: Vec<&str> = att.iter().filter_map(Value::as_str).collect();
                format!(
                    "{}.invalid",
                    parts.join("-").to_lowercase().replace('.', "-")
                )
            } else if let Some(join) = o.get("Fn::Join").and_then(Value::as_array) {
                let sep = join.first().and_then(Value::as_str).unwrap_or_default();
                let parts = join
                    .get(1)
                    .and_then(Value::as_array)
                    .context("Fn::Join takes a list")?;
                parts
                    .iter()
                    .map(stand_in)
                    .collect::<anyhow::Result<Vec<_>>>()?
                    .join(sep)
            } else {
                bail!("no stand-in for the CloudFormation value {v}")
            }
        }
        other => bail!("no stand-in for the value {other}"),
    })
}

/// Each function of a description: binary -> its environment as the loader would see it.
fn environments(description: &[u8]) -> anyhow::Result<BTreeMap<String, BTreeMap<String, String>>> {
    let d: Value = serde_json::from_slice(description)?;
    let mut out = BTreeMap::new();
    for f in d["functions"]
        .as_array()
        .context("the description lists functions")?
    {
        let binary = f["binary"]
            .as_str()
            .context("a function names its binary")?;
        let mut env = BTreeMap::new();
        for (name, value) in f["environment"]
            .as_object()
            .context("a function has an environment")?
        {
            env.insert(
                name.clone(),
                stand_in(value).with_context(|| format!("{binary} {name}"))?,
            );
        }
        out.insert(binary.to_owned(), env);
    }
    Ok(out)
}

/// The differences between what `binary` declares and the environment `given` it, with what its
/// loader asked for added to `asked`.
fn check(
    binary: &Binary,
    given: &BTreeMap<String, String>,
    asked: &mut BTreeSet<String>,
) -> Vec<String> {
    let mut out = Vec::new();
    let env = Env::from_map(given.clone());
    if let Err(e) = (binary.load)(&env) {
        out.push(format!(
            "{}: its loader refuses the template's environment: {e}",
            binary.name
        ));
    }
    let declared: BTreeMap<&str, Given> =
        binary.declared.iter().map(|v| (v.name, v.given)).collect();
    for name in given.keys() {
        match declared.get(name.as_str()) {
            None => out.push(format!(
                "{}: the template sets {name}, which the binary does not read",
                binary.name
            )),
            Some(Given::Lambda) => out.push(format!(
                "{}: the template sets {name}, which Lambda reserves",
                binary.name
            )),
            Some(Given::Local) => out.push(format!(
                "{}: the template sets {name}, which only the local stack uses",
                binary.name
            )),
            Some(Given::Stack | Given::Optional) => {}
        }
    }
    for (name, given_by) in &declared {
        if *given_by == Given::Stack && !given.contains_key(*name) {
            out.push(format!(
                "{}: the template does not set {name}, which the stack must give it",
                binary.name
            ));
        }
    }
    for name in env.asked() {
        if !declared.contains_key(name.as_str()) {
            out.push(format!(
                "{}: its loader reads {name}, which it does not declare",
                binary.name
            ));
        }
        asked.insert(name);
    }
    out
}

#[tokio::test(flavor = "multi_thread")]
async fn every_function_reads_exactly_what_the_template_gives_it() -> anyhow::Result<()> {
    let binaries = binaries();
    let mut failures = Vec::new();
    let mut asked: BTreeMap<&str, BTreeSet<String>> = BTreeMap::new();
    for context in configurations() {
        let context: Vec<&str> = context.iter().map(String::as_str).collect();
        let described = described(&context).await?;
        for (name, given) in environments(described)? {
            let Some(binary) = binaries.iter().find(|b| b.name == name) else {
                failures.push(format!(
                    "{context:?}: the template deploys {name}, which declares no environment here"
                ));
                continue;
            };
            let found = check(binary, &given, asked.entry(binary.name).or_default());
            println!(
                "compared {context:?} {name}: {} variables {:?}",
                given.len(),
                given.keys().collect::<Vec<_>>()
            );
            failures.extend(found.into_iter().map(|f| format!("{context:?} {f}")));
        }
    }
    for binary in &binaries {
        let Some(asked) = asked.get(binary.name) else {
            failures.push(format!("{}: no configuration deploys it", binary.name));
            continue;
        };
        for var in &binary.declared {
            if var.given != Given::Local && !asked.contains(var.name) {
                failures.push(format!(
                    "{}: declares {}, which its loader never reads",
                    binary.name, var.name
                ));
            }
        }
    }
    if !failures.is_empty() {
        bail!(
            "the functions' environments and the template disagree:\n  {}",
            failures.join("\n  ")
        );
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn a_changed_template_fails_the_check() -> anyhow::Result<()> {
    let binaries = binaries();
    let api = binaries
        .iter()
        .find(|b| b.name == roles::API)
        .context("the API binary")?;
    let envs = environments(described(&[]).await?)?;
    let given = envs
        .get(roles::API)
        .context("the template's API function")?;
    assert!(check(api, given, &mut BTreeSet::new()).is_empty());

    // One less: the template stops passing the bucket.
    let mut less = given.clone();
    less.remove("SHEETLOG_BUCKET");
    let found = check(api, &less, &mut BTreeSet::new());
    assert!(
        found
            .iter()
            .any(|f| f.contains("does not set SHEETLOG_BUCKET")),
        "{found:?}"
    );
    assert!(found.iter().any(|f| f.contains("refuses")), "{found:?}");

    // One unknown: a variable the API never reads (a misspelt one, say).
    let mut more = given.clone();
    more.insert("SHEETLOG_SNAPSHOT_INTERVALS".into(), "100".into());
    let found = check(api, &more, &mut BTreeSet::new());
    assert_eq!(
        found,
        vec![format!(
            "{}: the template sets SHEETLOG_SNAPSHOT_INTERVALS, which the binary does not read",
            roles::API
        )]
    );

    // A value the loader cannot take.
    let mut bad = given.clone();
    bad.insert("SHEETLOG_SNAPSHOT_INTERVAL".into(), "often".into());
    let found = check(api, &bad, &mut BTreeSet::new());
    assert!(
        found
            .iter()
            .any(|f| f.contains("refuses") && f.contains("SHEETLOG_SNAPSHOT_INTERVAL")),
        "{found:?}"
    );

    // A variable Lambda reserves.
    let mut reserved = given.clone();
    reserved.insert("AWS_REGION".into(), "eu-west-1".into());
    let found = check(api, &reserved, &mut BTreeSet::new());
    assert!(
        found.iter().any(|f| f.contains("Lambda reserves")),
        "{found:?}"
    );
    Ok(())
}
