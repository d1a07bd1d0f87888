//! Lambda event filtering, for the subset of the pattern language the Entry-stream filter uses:
//! nested objects, lists of exact values, and `{"exists": true|false}`. A record passes when any
//! pattern matches; a pattern matches when every key in it does; a list matches when any of its
//! elements does.
//!
//! Anything else in a pattern (`prefix`, `numeric`, `anything-but`, …) is refused when the
//! filter is loaded, so a filter that grows a new operator fails the local runner at start
//! instead of letting it quietly disagree with AWS.

use serde_json::{Map, Value};

#[derive(Debug, thiserror::Error)]
#[error("unsupported stream filter: {0}")]
pub struct FilterError(String);

/// A parsed set of filter patterns.
#[derive(Debug, Clone)]
pub struct FilterPatterns {
    patterns: Vec<Map<String, Value>>,
}

impl FilterPatterns {
    /// Parses `{"filters": [pattern, …]}` (the format of `stream_filter.json`).
    pub fn from_json(text: &str) -> Result<Self, FilterError> {
        let doc: Value =
            serde_json::from_str(text).map_err(|e| FilterError(format!("not JSON: {e}")))?;
        let list = doc
            .get("filters")
            .and_then(Value::as_array)
            .ok_or_else(|| FilterError("no \"filters\" array".into()))?;
        let mut patterns = Vec::with_capacity(list.len());
        for (i, p) in list.iter().enumerate() {
            let obj = p
                .as_object()
                .ok_or_else(|| FilterError(format!("pattern {i} is not an object")))?;
            check(obj, &format!("filters[{i}]"))?;
            patterns.push(obj.clone());
        }
        if patterns.is_empty() {
            return Err(FilterError("no patterns".into()));
        }
        Ok(Self { patterns })
    }

    /// The Entry-stream filter the CDK stack deploys.
    pub fn entry_stream() -> Result<Self, FilterError> {
        Self::from_json(sheetlog_core::aws::STREAM_FILTER_JSON)
    }

    /// The patterns, as parsed (a record passes when any one matches).
    pub fn patterns(&self) -> &[Map<String, Value>] {
        &self.patterns
    }

    /// Whether a record (in its Lambda event JSON form) passes.
    pub fn matches(&self, record: &Value) -> bool {
        self.patterns.iter().any(|p| matches_object(p, record))
    }
}

fn check(pattern: &Map<String, Value>, at: &str) -> Result<(), FilterError> {
    for (k, v) in pattern {
        let here = format!("{at}.{k}");
        match v {
            Value::Object(inner) => check(inner, &here)?,
            Value::Array(alternatives) => {
                for a in alternatives {
                    match a {
                        Value::Object(op) => {
                            let ok =
                                op.len() == 1 && op.get("exists").is_some_and(Value::is_boolean);
                            if !ok {
                                return Err(FilterError(format!("{here}: operator {a}")));
                            }
                        }
                        Value::Array(_) => {
                            return Err(FilterError(format!("{here}: nested list")));
                        }
                        _ => {}
                    }
                }
            }
            // Lambda rejects a pattern whose value is a bare scalar.
            _ => {
                return Err(FilterError(format!(
                    "{here}: value must be a list or object"
                )));
            }
        }
    }
    Ok(())
}

fn matches_object(pattern: &Map<String, Value>, value: &Value) -> bool {
    pattern.iter().all(|(k, p)| {
        let field = value.get(k);
        match p {
            Value::Object(inner) => {
                matches!(field, Some(v @ Value::Object(_)) if matches_object(inner, v))
            }
            Value::Array(alternatives) => alternatives.iter().any(|a| matches_leaf(a, field)),
            _ => false,
        }
    })
}

fn matches_leaf(alternative: &Value, field: Option<&Value>) -> bool {
    if let Some(exists) = alternative.get("exists").and_then(Value::as_bool) {
        // `exists` is about leaf values: an object is not a leaf.
        let present = matches!(field, Some(v) if !v.is_object() && !v.is_null());
        return present == exists;
    }
    match field {
        // A list in the event matches when any of its elements does.
        Some(Value::Array(items)) => items.iter().any(|i| i == alternative),
        Some(v) => v == alternative,
        None => false,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn insert(image: Value) -> Value {
        json!({ "eventName": "INSERT", "dynamodb": { "NewImage": image } })
    }

    #[test]
    fn the_entry_stream_filter_passes_snapshots_and_external_entries_only()
    -> Result<(), FilterError> {
        let f = FilterPatterns::entry_stream()?;
        assert!(f.matches(&insert(json!({"t": {"N": "0"}, "n": {"N": "5"}}))));
        assert!(f.matches(&insert(
            json!({"t": {"N": "16"}, "e": {"S": "payloads/x/y"}})
        )));
        assert!(!f.matches(&insert(json!({"t": {"N": "16"}, "b": {"B": "AA=="}}))));
        assert!(!f.matches(&insert(json!({"t": {"N": "1"}}))));
        // Not inserts: the root being set on a Snapshot entry, and removals.
        assert!(
            !f.matches(
                &json!({"eventName": "MODIFY", "dynamodb": {"NewImage": {"t": {"N": "0"}}}})
            )
        );
        assert!(!f.matches(&json!({"eventName": "REMOVE", "dynamodb": {}})));
        Ok(())
    }

    #[test]
    fn exists_false_and_value_lists() -> Result<(), FilterError> {
        let f = FilterPatterns::from_json(
            r#"{"filters": [{"a": [{"exists": false}], "b": ["x", "y"]}]}"#,
        )?;
        assert!(f.matches(&json!({"b": "y"})));
        assert!(f.matches(&json!({"b": ["z", "x"]})));
        assert!(!f.matches(&json!({"a": 1, "b": "x"})));
        assert!(!f.matches(&json!({"b": "z"})));
        Ok(())
    }

    #[test]
    fn unsupported_operators_are_refused() {
        for bad in [
            r#"{"filters": [{"a": [{"prefix": "x"}]}]}"#,
            r#"{"filters": [{"a": [{"numeric": [">", 1]}]}]}"#,
            r#"{"filters": [{"a": "x"}]}"#,
            r#"{"filters": []}"#,
            r#"{"nope": 1}"#,
        ] {
            assert!(FilterPatterns::from_json(bad).is_err(), "{bad}");
        }
    }
}
