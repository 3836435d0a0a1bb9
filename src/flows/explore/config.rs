//! Which model `explore` runs on, and its bounds: the operator's word
//! alone, from a policy's `explore = {provider, model, maxTurns,
//! maxOutputTokens}` or `sluice run --explore-model PROVIDER/MODEL`. A
//! script cannot name the model: the sub-agent reads the workspace and
//! sends what it reads to that model.

use serde_json::Value;

/// Model calls one exploration makes when the operator does not say.
pub const DEFAULT_MAX_TURNS: u64 = 10;
/// The most turns an operator may give.
pub const MAX_TURNS: u64 = 50;
/// Output tokens the sub-agent may spend exploring when the operator does
/// not say (its forced last answer may add [`FINAL_TOKENS`]).
pub const DEFAULT_MAX_OUTPUT_TOKENS: u64 = 16_000;
/// The most output tokens one model call of the sub-agent may write.
pub const TURN_TOKENS: u64 = 4_096;
/// The output tokens of the last call, which must answer.
pub const FINAL_TOKENS: u64 = 2_048;

/// What a policy's `explore` table looks like, for messages.
pub const EXAMPLE: &str =
    "explore = {provider = \"local\", model = \"qwen3-coder\", maxTurns = 10, maxOutputTokens = 16000}";

/// The sub-agent's model and bounds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// Who declared it: `policy NAME` or `--explore-model`.
    pub from: String,
    pub provider: String,
    pub model: String,
    /// Model calls at most, the last of which must answer.
    pub max_turns: u64,
    /// Output tokens the exploring turns may spend together.
    pub max_output_tokens: u64,
}

impl Config {
    /// The configuration `from` declared as `table` (a policy's
    /// `explore`, as JSON). An error names the field.
    pub fn declared(from: &str, table: &Value) -> Result<Config, String> {
        let Value::Object(map) = table else {
            return Err(format!("{from}: `explore` is a table: {EXAMPLE}"));
        };
        let fail = |field: &str, what: &str| format!("{from}: explore.{field} {what}: {EXAMPLE}");
        const KNOWN: [&str; 4] = ["provider", "model", "maxTurns", "maxOutputTokens"];
        if let Some(k) = map.keys().find(|k| !KNOWN.contains(&k.as_str())) {
            return Err(fail(
                k,
                &format!(
                    "is not a field of explore; its fields are {}",
                    KNOWN.join(", ")
                ),
            ));
        }
        let text = |field: &str| match map.get(field) {
            Some(Value::String(s)) if !s.is_empty() => Ok(s.clone()),
            _ => Err(fail(field, "is missing or not a non-empty string")),
        };
        let number = |field: &str, default: u64, max: u64| match map.get(field) {
            None => Ok(default),
            Some(v) => v
                .as_u64()
                .filter(|n| (1..=max).contains(n))
                .ok_or_else(|| fail(field, &format!("is a whole number from 1 to {max}"))),
        };
        let config = Config {
            from: from.to_string(),
            provider: text("provider")?,
            model: text("model")?,
            max_turns: number("maxTurns", DEFAULT_MAX_TURNS, MAX_TURNS)?,
            max_output_tokens: number("maxOutputTokens", DEFAULT_MAX_OUTPUT_TOKENS, 1_000_000)?,
        };
        config
            .check_names()
            .map_err(|e| format!("{from}: explore.{e}"))?;
        Ok(config)
    }

    /// `--explore-model PROVIDER/MODEL`, over what a policy's `explore`
    /// declared (whose bounds it keeps), or with the default bounds.
    pub fn from_flag(flag: &str, declared: Option<Config>) -> Result<Config, String> {
        let Some((provider, model)) = flag.split_once('/') else {
            return Err(format!(
                "--explore-model {flag:?} is PROVIDER/MODEL, e.g. --explore-model local/qwen3-coder (the provider declared by --provider or a policy's providers)"
            ));
        };
        let config = Config {
            from: "--explore-model".into(),
            provider: provider.to_string(),
            model: model.to_string(),
            max_turns: declared.as_ref().map_or(DEFAULT_MAX_TURNS, |d| d.max_turns),
            max_output_tokens: declared
                .as_ref()
                .map_or(DEFAULT_MAX_OUTPUT_TOKENS, |d| d.max_output_tokens),
        };
        config
            .check_names()
            .map_err(|e| format!("--explore-model {flag:?}: {e}"))?;
        Ok(config)
    }

    /// The provider is a provider's name, the model one word.
    fn check_names(&self) -> Result<(), String> {
        if !crate::model::providers::valid_name(&self.provider) {
            return Err(format!(
                "provider {:?} is not a provider's name (letters, digits, `_`, `-`, `.`)",
                self.provider
            ));
        }
        let bad = |c: char| c.is_whitespace() || c.is_control();
        if self.model.is_empty() || self.model.len() > 200 || self.model.chars().any(bad) {
            return Err(format!(
                "model {:?} is the provider's name for the model, 1 to 200 characters without spaces",
                self.model
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_declaration_names_its_bad_field_and_defaults_the_bounds() {
        let c = Config::declared("policy p", &json!({"provider": "local", "model": "m"})).unwrap();
        assert_eq!((c.max_turns, c.max_output_tokens), (10, 16_000));
        let e = Config::declared(
            "policy p",
            &json!({"provider": "local", "model": "m", "turns": 3}),
        )
        .unwrap_err();
        assert!(
            e.starts_with("policy p: explore.turns is not a field"),
            "{e}"
        );
        let e = Config::declared(
            "policy p",
            &json!({"provider": "local", "model": "m", "maxTurns": 0}),
        )
        .unwrap_err();
        assert!(
            e.contains("explore.maxTurns is a whole number from 1 to 50"),
            "{e}"
        );
        let e = Config::declared("policy p", &json!({"model": "m"})).unwrap_err();
        assert!(e.contains("explore.provider is missing"), "{e}");
    }

    #[test]
    fn the_flag_names_provider_and_model_and_keeps_the_policys_bounds() {
        let declared = Config::declared(
            "policy p",
            &json!({"provider": "a", "model": "m", "maxTurns": 3}),
        )
        .unwrap();
        let c = Config::from_flag("local/qwen3:8b", Some(declared)).unwrap();
        assert_eq!(
            (c.provider.as_str(), c.model.as_str(), c.max_turns),
            ("local", "qwen3:8b", 3)
        );
        assert!(Config::from_flag("qwen", None)
            .unwrap_err()
            .contains("PROVIDER/MODEL"));
    }
}
