//! Tool results checked against the tools' `outputSchema` with the `jsonschema` crate
//! (JSON Schema 2020-12, formats asserted: a `uuid` or `date-time` must be one).
//!
//! One strictness the crate does not have is kept here: a keyword the 2020-12 vocabularies
//! do not define is refused, where the crate would ignore it, so a schema never passes
//! by a constraint being skipped (an OpenAPI-only `nullable`, a misspelt `requierd`).

use serde_json::Value;

/// The keywords of the 2020-12 vocabularies: core, applicator, unevaluated, validation,
/// format annotation, content and meta-data.
#[rustfmt::skip]
const KEYWORDS: [&str; 55] = [
    "$schema", "$id", "$ref", "$anchor", "$dynamicRef", "$dynamicAnchor", "$vocabulary", "$comment", "$defs",
    "allOf", "anyOf", "oneOf", "not", "if", "then", "else", "dependentSchemas", "prefixItems", "items",
    "contains", "properties", "patternProperties", "additionalProperties", "propertyNames",
    "unevaluatedItems", "unevaluatedProperties",
    "type", "const", "enum", "multipleOf", "maximum", "exclusiveMaximum", "minimum", "exclusiveMinimum",
    "maxLength", "minLength", "pattern", "maxItems", "minItems", "uniqueItems",
    "maxContains", "minContains", "maxProperties", "minProperties", "required", "dependentRequired",
    "format", "contentEncoding", "contentMediaType", "contentSchema",
    "title", "description", "default", "deprecated", "examples",
];

/// Whether `instance` fits `schema`; `Err` names every place it does not, or the keyword
/// the schema uses that 2020-12 does not define.
pub fn validate(schema: &Value, instance: &Value) -> Result<(), String> {
    known_keywords(schema, "#")?;
    let validator = jsonschema::draft202012::options()
        .should_validate_formats(true)
        .build(schema)
        .map_err(|err| format!("the schema is not valid JSON Schema: {err}"))?;
    let errors: Vec<String> =
        validator.iter_errors(instance).map(|err| format!("{}: {err}", err.instance_path())).collect();
    if errors.is_empty() { Ok(()) } else { Err(errors.join("; ")) }
}

/// Every keyword of `schema` and its subschemas is a 2020-12 keyword.
fn known_keywords(schema: &Value, path: &str) -> Result<(), String> {
    let Value::Object(keywords) = schema else { return Ok(()) };
    for (keyword, value) in keywords {
        let here = format!("{path}/{keyword}");
        match keyword.as_str() {
            // Maps of names to subschemas.
            "$defs" | "properties" | "patternProperties" | "dependentSchemas" => {
                for (name, subschema) in value.as_object().into_iter().flatten() {
                    known_keywords(subschema, &format!("{here}/{name}"))?;
                }
            }
            // Lists of subschemas.
            "allOf" | "anyOf" | "oneOf" | "prefixItems" => {
                for (i, subschema) in value.as_array().into_iter().flatten().enumerate() {
                    known_keywords(subschema, &format!("{here}/{i}"))?;
                }
            }
            // One subschema.
            "not"
            | "if"
            | "then"
            | "else"
            | "items"
            | "contains"
            | "additionalProperties"
            | "propertyNames"
            | "unevaluatedItems"
            | "unevaluatedProperties"
            | "contentSchema" => {
                known_keywords(value, &here)?;
            }
            // Values, not schemas (`const`, `enum`, `default`, `examples`, ...).
            known if KEYWORDS.contains(&known) => {}
            unknown => {
                return Err(format!(
                    "{path}: the schema uses {unknown}, which JSON Schema 2020-12 does not define"
                ));
            }
        }
    }
    Ok(())
}

#[test]
fn the_check_refuses_what_does_not_fit() {
    let schema = serde_json::json!({
        "type": "object",
        "properties": {"task": {"$ref": "#/$defs/Task"}, "n": {"type": ["integer", "null"]}},
        "required": ["task"],
        "additionalProperties": false,
        "$defs": {"Task": {"type": "object", "properties": {"status": {"enum": ["a", "b"]}, "id": {"type": "string", "format": "uuid"}}, "required": ["status"]}},
    });
    assert!(validate(&schema, &serde_json::json!({"task": {"status": "a"}, "n": null})).is_ok());
    assert!(validate(&schema, &serde_json::json!({"task": {"status": "c"}})).is_err());
    assert!(validate(&schema, &serde_json::json!({"task": {}})).is_err());
    assert!(validate(&schema, &serde_json::json!({"n": 1})).is_err());
    assert!(validate(&schema, &serde_json::json!({"task": {"status": "a"}, "n": "x"})).is_err());
    // Closed: a field the schema does not declare fails.
    assert!(validate(&schema, &serde_json::json!({"task": {"status": "a"}, "extra": 1})).is_err());
    // Formats are asserted.
    assert!(validate(&schema, &serde_json::json!({"task": {"status": "a", "id": "not-a-uuid"}})).is_err());
    // A keyword 2020-12 does not define is refused, at any depth.
    assert!(validate(&serde_json::json!({"nullable": true}), &serde_json::json!("x")).is_err());
    let nested = serde_json::json!({"properties": {"a": {"items": {"requierd": ["b"]}}}});
    assert!(validate(&nested, &serde_json::json!({})).is_err());
}
