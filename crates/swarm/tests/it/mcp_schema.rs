//! A JSON Schema (2020-12) check of tool results against the tools' `outputSchema`, for the
//! keywords swarm's schemas use: `$ref` into `$defs`, `type` (one or a list), `properties`,
//! `required`, `additionalProperties`, `propertyNames`, `items`, `enum`, `const`, `anyOf`, `oneOf`, `allOf`.
//! A keyword it does not know is an error, so a schema never passes by being skipped.

use serde_json::Value;

/// Keywords that describe and do not constrain (or constrain formats swarm does not rely on).
const ANNOTATIONS: [&str; 10] = [
    "description",
    "title",
    "format",
    "example",
    "examples",
    "default",
    "deprecated",
    "minimum",
    "maximum",
    "$schema",
];

pub fn validate(root: &Value, instance: &Value) -> Result<(), String> {
    check(root, root, instance, "")
}

fn check(root: &Value, schema: &Value, instance: &Value, path: &str) -> Result<(), String> {
    let Value::Object(keywords) = schema else {
        return match schema {
            Value::Bool(true) => Ok(()),
            _ => Err(format!("{path}: schema {schema} admits nothing")),
        };
    };
    for (keyword, value) in keywords {
        match keyword.as_str() {
            "$ref" => {
                let reference = value.as_str().ok_or("$ref is not a string")?;
                let name =
                    reference.strip_prefix("#/$defs/").ok_or_else(|| format!("{path}: $ref {reference}"))?;
                let target =
                    root["$defs"].get(name).ok_or_else(|| format!("{path}: {reference} is not defined"))?;
                check(root, target, instance, path)?;
            }
            "type" => {
                let kinds: Vec<&str> = match value {
                    Value::String(kind) => vec![kind.as_str()],
                    Value::Array(kinds) => kinds.iter().filter_map(Value::as_str).collect(),
                    _ => return Err(format!("{path}: type {value}")),
                };
                if !kinds.iter().any(|kind| is_type(kind, instance)) {
                    return Err(format!("{path}: {instance} is not of type {value}"));
                }
            }
            "properties" => {
                let (Value::Object(properties), Value::Object(fields)) = (value, instance) else { continue };
                for (name, property) in properties {
                    if let Some(field) = fields.get(name) {
                        check(root, property, field, &format!("{path}/{name}"))?;
                    }
                }
            }
            "required" => {
                let Value::Object(fields) = instance else { continue };
                for name in value.as_array().into_iter().flatten().filter_map(Value::as_str) {
                    if !fields.contains_key(name) {
                        return Err(format!("{path}: required field {name} is missing"));
                    }
                }
            }
            "additionalProperties" => {
                let Value::Object(fields) = instance else { continue };
                let known = keywords.get("properties").and_then(Value::as_object);
                for (name, field) in fields {
                    if !known.is_some_and(|known| known.contains_key(name)) {
                        check(root, value, field, &format!("{path}/{name}"))?;
                    }
                }
            }
            "propertyNames" => {
                let Value::Object(fields) = instance else { continue };
                for name in fields.keys() {
                    check(root, value, &Value::String(name.clone()), &format!("{path}/{name} (name)"))?;
                }
            }
            "items" => {
                let Value::Array(items) = instance else { continue };
                for (i, item) in items.iter().enumerate() {
                    check(root, value, item, &format!("{path}/{i}"))?;
                }
            }
            "enum" => {
                if !value.as_array().is_some_and(|values| values.contains(instance)) {
                    return Err(format!("{path}: {instance} is not one of {value}"));
                }
            }
            "const" => {
                if value != instance {
                    return Err(format!("{path}: {instance} is not {value}"));
                }
            }
            "anyOf" | "oneOf" | "allOf" => {
                let branches = value.as_array().ok_or_else(|| format!("{path}: {keyword} is not a list"))?;
                let passed =
                    branches.iter().filter(|branch| check(root, branch, instance, path).is_ok()).count();
                let fits = match keyword.as_str() {
                    "anyOf" => passed > 0,
                    "oneOf" => passed == 1,
                    _ => passed == branches.len(),
                };
                if !fits {
                    return Err(format!(
                        "{path}: {instance} fits {passed} of the {keyword} branches {value}"
                    ));
                }
            }
            "$defs" => {}
            other if ANNOTATIONS.contains(&other) => {}
            other => return Err(format!("{path}: the check does not know the keyword {other}")),
        }
    }
    Ok(())
}

fn is_type(kind: &str, instance: &Value) -> bool {
    match kind {
        "null" => instance.is_null(),
        "boolean" => instance.is_boolean(),
        "string" => instance.is_string(),
        "number" => instance.is_number(),
        "integer" => instance.is_i64() || instance.is_u64(),
        "array" => instance.is_array(),
        "object" => instance.is_object(),
        _ => false,
    }
}

#[test]
fn the_check_refuses_what_does_not_fit() {
    let schema = serde_json::json!({
        "type": "object",
        "properties": {"task": {"$ref": "#/$defs/Task"}, "n": {"type": ["integer", "null"]}},
        "required": ["task"],
        "$defs": {"Task": {"type": "object", "properties": {"status": {"enum": ["a", "b"]}}, "required": ["status"]}},
    });
    assert!(validate(&schema, &serde_json::json!({"task": {"status": "a"}, "n": null})).is_ok());
    assert!(validate(&schema, &serde_json::json!({"task": {"status": "c"}})).is_err());
    assert!(validate(&schema, &serde_json::json!({"task": {}})).is_err());
    assert!(validate(&schema, &serde_json::json!({"n": 1})).is_err());
    assert!(validate(&schema, &serde_json::json!({"task": {"status": "a"}, "n": "x"})).is_err());
    assert!(validate(&serde_json::json!({"pattern": "x"}), &serde_json::json!("x")).is_err());
}
