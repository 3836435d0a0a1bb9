//! The part of JSON Schema sluice checks a Lua tool's input against before
//! its `run` sees it. A tool's schema may use only these keywords (and
//! those that describe without checking: `title`, `description`,
//! `default`, `examples`, `format`, ...): one that uses any other is refused
//! when the tool loads, so no schema promises a check sluice does not make.

use crate::error::FlowError;
use serde_json::Value;

/// What sluice checks.
const CHECKED: &[&str] = &[
    "type",
    "properties",
    "required",
    "additionalProperties",
    "items",
    "enum",
    "const",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "minLength",
    "maxLength",
    "minItems",
    "maxItems",
    "pattern",
];

/// What describes and checks nothing (JSON Schema 2020-12 annotations;
/// `format` is one unless a validator opts in).
const NOTES: &[&str] = &[
    "title",
    "description",
    "default",
    "examples",
    "format",
    "$schema",
    "$comment",
    "$id",
    "deprecated",
    "readOnly",
    "writeOnly",
];

/// The first keyword of `schema` (at `at`, a path such as
/// `input.properties.mode`) that sluice would not check, with where it
/// is; or a value of a checked keyword that is not what it takes.
pub fn unchecked(schema: &Value, at: &str) -> Option<String> {
    let Value::Object(map) = schema else {
        return Some(format!("{at} is not a schema (an object)"));
    };
    for (key, value) in map {
        let here = format!("{at}.{key}");
        if NOTES.contains(&key.as_str()) {
            continue;
        }
        if !CHECKED.contains(&key.as_str()) {
            return Some(format!(
                "`{key}` (at {here}) is a keyword sluice does not check"
            ));
        }
        let inner = match key.as_str() {
            "properties" => value.as_object().and_then(|props| {
                props
                    .iter()
                    .find_map(|(name, s)| unchecked(s, &format!("{here}.{name}")))
            }),
            "items" => unchecked(value, &here),
            "additionalProperties" if !value.is_boolean() => unchecked(value, &here),
            "pattern" => value
                .as_str()
                .and_then(|p| regex::Regex::new(p).err())
                .map(|e| format!("{here} is not a pattern sluice can check: {e}")),
            _ => None,
        };
        if inner.is_some() {
            return inner;
        }
    }
    None
}

/// Checks `value` (the input, or a part of it at `field`) against
/// `schema`: `invalid_input` naming the first field that does not fit.
pub fn check(value: &Value, schema: &Value, field: &str) -> Result<(), FlowError> {
    let bad = |what: String| Err(FlowError::invalid_input(field, format!("`{field}` {what}")));
    if let Some(t) = schema.get("type") {
        let types: Vec<&str> = match t {
            Value::String(s) => vec![s.as_str()],
            Value::Array(a) => a.iter().filter_map(Value::as_str).collect(),
            _ => Vec::new(),
        };
        if !types.iter().any(|t| is_type(value, t)) {
            return bad(format!(
                "must be {}, not {}",
                types.join(" or "),
                type_of(value)
            ));
        }
    }
    if let Some(options) = schema.get("enum").and_then(Value::as_array) {
        if !options.contains(value) {
            let list: Vec<String> = options.iter().map(Value::to_string).collect();
            return bad(format!(
                "is {value}, which is not one of {}",
                list.join(", ")
            ));
        }
    }
    if let Some(c) = schema.get("const") {
        if c != value {
            return bad(format!("must be {c}"));
        }
    }
    bounds(value, schema, field)?;
    match value {
        Value::Object(map) => object(map, schema, field),
        Value::Array(items) => match schema.get("items") {
            Some(s) => items
                .iter()
                .enumerate()
                .try_for_each(|(i, v)| check(v, s, &format!("{field}[{}]", i + 1))),
            None => Ok(()),
        },
        _ => Ok(()),
    }
}

fn object(
    map: &serde_json::Map<String, Value>,
    schema: &Value,
    field: &str,
) -> Result<(), FlowError> {
    let path = |name: &str| {
        if field == "input" {
            name.to_string()
        } else {
            format!("{field}.{name}")
        }
    };
    for name in schema
        .get("required")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let Some(name) = name.as_str() else { continue };
        if !map.contains_key(name) {
            let f = path(name);
            return Err(FlowError::invalid_input(&f, format!("`{f}` is required")));
        }
    }
    let props = schema.get("properties").and_then(Value::as_object);
    for (name, v) in map {
        match (
            props.and_then(|p| p.get(name)),
            schema.get("additionalProperties"),
        ) {
            (Some(s), _) => check(v, s, &path(name))?,
            (None, Some(Value::Bool(false))) => {
                let known: Vec<&String> = props.map(|p| p.keys().collect()).unwrap_or_default();
                let f = path(name);
                return Err(FlowError::invalid_input(
                    &f,
                    format!("`{f}` is not a field of this tool's input; its fields are {known:?}"),
                ));
            }
            (None, Some(s @ Value::Object(_))) => check(v, s, &path(name))?,
            (None, _) => {}
        }
    }
    Ok(())
}

/// The numeric, length and size bounds of `schema` on `value`.
fn bounds(value: &Value, schema: &Value, field: &str) -> Result<(), FlowError> {
    let n = |k: &str| schema.get(k).and_then(Value::as_f64);
    let fail = |what: String| Err(FlowError::invalid_input(field, format!("`{field}` {what}")));
    if let Some(x) = value.as_f64() {
        for (key, holds) in [
            ("minimum", (|x: f64, b: f64| x >= b) as fn(f64, f64) -> bool),
            ("maximum", |x, b| x <= b),
            ("exclusiveMinimum", |x, b| x > b),
            ("exclusiveMaximum", |x, b| x < b),
        ] {
            if let Some(b) = n(key).filter(|&b| !holds(x, b)) {
                return fail(format!("is {x}, outside its {key} {b}"));
            }
        }
    }
    let size = match value {
        Value::String(s) => Some((
            s.chars().count() as f64,
            "minLength",
            "maxLength",
            "characters",
        )),
        Value::Array(a) => Some((a.len() as f64, "minItems", "maxItems", "items")),
        _ => None,
    };
    if let Some((len, min, max, unit)) = size {
        if n(min).is_some_and(|m| len < m) || n(max).is_some_and(|m| len > m) {
            return fail(format!(
                "has {len} {unit}, outside {min} {:?} and {max} {:?}",
                n(min),
                n(max)
            ));
        }
    }
    if let (Value::String(s), Some(p)) = (value, schema.get("pattern").and_then(Value::as_str)) {
        if regex::Regex::new(p).is_ok_and(|re| !re.is_match(s)) {
            return fail(format!("does not match the pattern {p:?}"));
        }
    }
    Ok(())
}

fn is_type(v: &Value, t: &str) -> bool {
    match t {
        "object" => v.is_object(),
        "array" => v.is_array(),
        "string" => v.is_string(),
        "boolean" => v.is_boolean(),
        "null" => v.is_null(),
        "number" => v.is_number(),
        "integer" => v.as_f64().is_some_and(|x| x.fract() == 0.0),
        _ => false,
    }
}

fn type_of(v: &Value) -> &'static str {
    match v {
        Value::Object(_) => "an object",
        Value::Array(_) => "a list",
        Value::String(_) => "a string",
        Value::Bool(_) => "a boolean",
        Value::Null => "null",
        Value::Number(_) => "a number",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schema() -> Value {
        json!({"type": "object", "additionalProperties": false, "required": ["target"],
               "properties": {"target": {"type": "string", "enum": ["test", "lint"]},
                              "jobs": {"type": "integer", "minimum": 1, "maximum": 8},
                              "names": {"type": "array", "items": {"type": "string", "pattern": "^[a-z_]+$"}, "maxItems": 3}}})
    }

    fn field_of(input: Value) -> Option<String> {
        check(&input, &schema(), "input")
            .err()
            .map(|e| e.details["field"].as_str().unwrap().to_string())
    }

    #[test]
    fn an_input_that_fits_passes_and_each_misfit_names_its_field() {
        assert_eq!(
            field_of(json!({"target": "test", "jobs": 2, "names": ["a_b"]})),
            None
        );
        assert_eq!(
            field_of(json!({"target": "test; touch pwned"})).as_deref(),
            Some("target")
        );
        assert_eq!(field_of(json!({})).as_deref(), Some("target"));
        assert_eq!(
            field_of(json!({"target": "lint", "extra": 1})).as_deref(),
            Some("extra")
        );
        assert_eq!(
            field_of(json!({"target": "lint", "jobs": 9})).as_deref(),
            Some("jobs")
        );
        assert_eq!(
            field_of(json!({"target": "lint", "jobs": 1.5})).as_deref(),
            Some("jobs")
        );
        assert_eq!(
            field_of(json!({"target": "lint", "names": ["ok", "Not-ok"]})).as_deref(),
            Some("names[2]")
        );
        assert_eq!(
            field_of(json!({"target": "lint", "names": ["a", "b", "c", "d"]})).as_deref(),
            Some("names")
        );
        assert_eq!(field_of(json!("test")).as_deref(), Some("input"));
    }

    #[test]
    fn a_schema_with_a_keyword_sluice_does_not_check_is_named_with_where_it_is() {
        assert_eq!(unchecked(&schema(), "input"), None);
        let s = json!({"type": "object", "properties": {"x": {"oneOf": [{"type": "string"}]}}});
        assert_eq!(
            unchecked(&s, "input").as_deref(),
            Some("`oneOf` (at input.properties.x.oneOf) is a keyword sluice does not check")
        );
        let s = json!({"type": "object", "description": "notes pass", "properties": {"x": {"type": "string", "format": "email"}}});
        assert_eq!(unchecked(&s, "input"), None);
        let s = json!({"type": "string", "pattern": "("});
        assert!(unchecked(&s, "input")
            .unwrap()
            .starts_with("input.pattern is not a pattern sluice can check"));
    }
}
