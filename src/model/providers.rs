//! The operator's model providers. A script names a provider; only the
//! operator says where it is and which key it uses: in a policy's
//! `providers` table or with `sluice run --provider NAME=API:URL`. The key
//! comes from a named credential and never reaches Lua, the record or an
//! error.

use crate::credentials::{Credentials, Secret};
use crate::error::{ErrorCode, FlowError, FlowResult};
use crate::net::destination::{self, Destination};
use serde_json::Value;
use std::collections::BTreeMap;
use std::fmt;

/// The wire protocol a provider speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Api {
    /// OpenAI Chat Completions, and the servers that speak it (vLLM,
    /// llama.cpp's server, Ollama, LiteLLM, OpenRouter).
    OpenAi,
    /// Anthropic Messages.
    Anthropic,
}

impl Api {
    /// `openai` or `anthropic`.
    pub fn parse(text: &str) -> Option<Api> {
        match text {
            "openai" => Some(Api::OpenAi),
            "anthropic" => Some(Api::Anthropic),
            _ => None,
        }
    }
}

/// One provider: its protocol, its base URL and the credential its key is
/// in.
#[derive(Debug, Clone)]
pub struct Provider {
    pub name: String,
    pub api: Api,
    /// The base URL (`.../v1`); requests go to its `chat/completions` or
    /// `messages`.
    pub base: Destination,
    /// The credential holding the key; `None` sends no key (a local server).
    pub credential: Option<String>,
    /// Whether a missing credential is an error (declared in a policy) or
    /// means no key (`--provider`, whose credential is the provider's name
    /// when it is set).
    pub credential_required: bool,
}

impl Provider {
    /// Where the request for `path` goes.
    pub fn endpoint(&self, path: &str) -> FlowResult<Destination> {
        let mut url = self.base.url.clone();
        let joined = format!("{}/{path}", url.path().trim_end_matches('/'));
        url.set_path(&joined);
        destination::from_url("url", url)
    }
}

/// Providers by name, and the store their keys come from.
#[derive(Clone, Default)]
pub struct Providers {
    by_name: BTreeMap<String, Provider>,
    store: Credentials,
}

impl fmt::Debug for Providers {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.by_name.keys()).finish()
    }
}

/// Whether `name` can name a provider: it is the first part of a
/// `model:call:PROVIDER/MODEL` capability.
pub fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-' || c == '.')
}

impl Providers {
    /// No providers; keys from `store`.
    pub fn new(store: Credentials) -> Providers {
        Providers {
            by_name: BTreeMap::new(),
            store,
        }
    }

    /// Adds `provider`; a name given twice is an error naming both.
    pub fn add(&mut self, provider: Provider, from: &str) -> Result<(), String> {
        if self.by_name.contains_key(&provider.name) {
            return Err(format!(
                "provider {:?} is declared twice (again by {from}); give each provider one name",
                provider.name
            ));
        }
        self.by_name.insert(provider.name.clone(), provider);
        Ok(())
    }

    /// Provider `name`.
    pub fn get(&self, name: &str) -> Option<&Provider> {
        self.by_name.get(name)
    }

    /// The providers' names, sorted.
    pub fn names(&self) -> Vec<&str> {
        self.by_name.keys().map(String::as_str).collect()
    }

    /// The key `provider` sends, if it has one.
    pub fn key(&self, provider: &Provider) -> FlowResult<Option<Secret>> {
        let Some(name) = &provider.credential else {
            return Ok(None);
        };
        let who = format!("model provider `{}` ({})", provider.name, provider.base.url);
        if provider.credential_required {
            return self.store.require(name, &who).map(Some);
        }
        self.store.get(name)
    }

    /// The error for a provider no one declared.
    pub fn unknown(&self, name: &str) -> FlowError {
        let known = match self.names().as_slice() {
            [] => "none is declared".to_string(),
            names => format!("the declared ones are {}", names.join(", ")),
        };
        FlowError::new(
            ErrorCode::ProviderUnavailable,
            format!(
                "no model provider is named {name:?} ({known}); the operator declares providers in a policy \
                 (`providers = {{ [\"{name}\"] = {{ api = \"openai\", url = \"http://127.0.0.1:8080/v1\" }} }}`) \
                 or with `sluice run --provider {name}=openai:URL`"
            ),
        )
        .with("field", "provider")
        .with("provider", name)
    }
}

/// A provider from a policy's `providers.NAME` table: `api`, `url` and
/// optionally `credential`.
pub fn declared(name: &str, table: &Value) -> Result<Provider, String> {
    if !valid_name(name) {
        return Err(format!(
            "providers.{name}: a provider's name is letters, digits, `_`, `-` and `.` (it is part of model:call:PROVIDER/MODEL)"
        ));
    }
    let Some(fields) = table.as_object() else {
        return Err(format!(
            "providers.{name} is not a table; write {{ api = \"openai\", url = \"https://...\" }}"
        ));
    };
    if let Some(k) = fields
        .keys()
        .find(|k| !matches!(k.as_str(), "api" | "url" | "credential"))
    {
        return Err(format!(
            "providers.{name}.{k} is not a provider field; the fields are api, url and credential"
        ));
    }
    let text = |k: &str| fields.get(k).map(|v| v.as_str().ok_or(()));
    let api = match text("api") {
        Some(Ok(a)) => Api::parse(a).ok_or_else(|| {
            format!("providers.{name}.api is {a:?}; it is \"openai\" or \"anthropic\"")
        })?,
        Some(Err(_)) | None => {
            return Err(format!(
                "providers.{name}.api is missing; it is \"openai\" (Chat Completions) or \"anthropic\" (Messages)"
            ))
        }
    };
    let url = match text("url") {
        Some(Ok(u)) => base(u).map_err(|e| format!("providers.{name}.url: {e}"))?,
        _ => {
            return Err(format!(
                "providers.{name}.url is missing; it is the API's base URL, e.g. https://api.openai.com/v1"
            ))
        }
    };
    let credential = match text("credential") {
        None => None,
        Some(Ok(c)) if !c.is_empty() => Some(c.to_string()),
        Some(_) => {
            return Err(format!(
                "providers.{name}.credential is the name of a credential (a string), e.g. credential = \"{name}\""
            ))
        }
    };
    Ok(Provider {
        name: name.into(),
        api,
        base: url,
        credential_required: credential.is_some(),
        credential,
    })
}

/// A provider from `--provider NAME=API:URL`. Its key is credential NAME,
/// when set.
pub fn from_flag(text: &str) -> Result<Provider, String> {
    let usage =
        "write --provider NAME=API:URL, e.g. --provider local=openai:http://127.0.0.1:8080/v1";
    // Errors repeat the flag, without a password its URL may carry.
    let shown = without_userinfo(text);
    let Some((name, rest)) = text.split_once('=') else {
        return Err(format!("--provider {shown:?} has no `=`; {usage}"));
    };
    let Some((api, url)) = rest.split_once(':') else {
        return Err(format!("--provider {shown:?} has no API; {usage}"));
    };
    let name = name.trim();
    if !valid_name(name) {
        return Err(format!(
            "--provider {shown:?}: {name:?} is not a provider name (letters, digits, `_`, `-`, `.`); {usage}"
        ));
    }
    let api = Api::parse(api.trim()).ok_or_else(|| {
        format!("--provider {shown:?}: the API is {api:?}; it is openai or anthropic; {usage}")
    })?;
    let base = base(url.trim()).map_err(|e| format!("--provider {shown:?}: {e}"))?;
    Ok(Provider {
        name: name.into(),
        api,
        base,
        credential: Some(name.into()),
        credential_required: false,
    })
}

/// A base URL: absolute http(s), without user information, a query or a
/// fragment. An error does not repeat user information.
fn base(text: &str) -> Result<Destination, String> {
    let dest = destination::parse("url", text).map_err(|e| {
        let shown = without_userinfo(text);
        e.message
            .replace(&format!("{text:?}"), &format!("{shown:?}"))
            .replace(text, &shown)
    })?;
    if dest.url.query().is_some() || dest.url.fragment().is_some() {
        return Err(format!(
            "{text:?} has a query or fragment; give the API's base URL, e.g. https://api.openai.com/v1"
        ));
    }
    Ok(dest)
}

/// `text` with the user information of each URL in it (`user:password@`
/// after a `://`) replaced by `[redacted]@`, for an error to quote.
fn without_userinfo(text: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(at) = rest.find("://") {
        let (head, tail) = rest.split_at(at + 3);
        out.push_str(head);
        let end = tail.find(['/', '?', '#']).unwrap_or(tail.len());
        match tail[..end].rfind('@') {
            Some(i) => {
                out.push_str("[redacted]");
                rest = &tail[i..];
            }
            None => rest = tail,
        }
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_declared_provider_names_its_api_url_and_credential() {
        let p = declared(
            "local",
            &json!({"api": "openai", "url": "http://127.0.0.1:8080/v1", "credential": "k"}),
        )
        .unwrap();
        assert_eq!((p.api, p.credential.as_deref()), (Api::OpenAi, Some("k")));
        assert_eq!(
            p.endpoint("chat/completions").unwrap().url.as_str(),
            "http://127.0.0.1:8080/v1/chat/completions"
        );
        let e = declared("x", &json!({"api": "gemini", "url": "https://a.b"})).unwrap_err();
        assert!(e.contains("providers.x.api is \"gemini\""), "{e}");
        let e = declared(
            "x",
            &json!({"api": "openai", "url": "https://a.b", "key": "s"}),
        )
        .unwrap_err();
        assert!(e.contains("providers.x.key is not a provider field"), "{e}");
        let e = declared("x", &json!({"api": "openai"})).unwrap_err();
        assert!(e.contains("providers.x.url is missing"), "{e}");
        let e = declared("a/b", &json!({})).unwrap_err();
        assert!(e.contains("a provider's name"), "{e}");
    }

    #[test]
    fn an_error_quotes_a_url_without_its_user_information() {
        for flag in [
            "local=openai:http://alice:pw-9@127.0.0.1:9/v1",
            "local=openai:http://pw-9@exa mple.com/v1",
            "lo cal=openai:http://a:pw-9@h/v1",
            "local=grok:https://a:pw-9@h/v1",
        ] {
            let e = from_flag(flag).unwrap_err();
            assert!(!e.contains("pw-9"), "{e}");
            assert!(e.contains("[redacted]@"), "{e}");
        }
        let e = declared(
            "x",
            &json!({"api": "openai", "url": "http://a:pw-9@exa mple/v1"}),
        )
        .unwrap_err();
        assert!(!e.contains("pw-9"), "{e}");
        assert_eq!(
            without_userinfo("a http://u:p@h/x?y=z@w b https://h2/@p"),
            "a http://[redacted]@h/x?y=z@w b https://h2/@p"
        );
    }

    #[test]
    fn a_flag_is_name_api_and_url() {
        let p = from_flag("local=anthropic:http://127.0.0.1:9/v1/").unwrap();
        assert_eq!(
            (p.name.as_str(), p.api, p.credential.as_deref()),
            ("local", Api::Anthropic, Some("local"))
        );
        assert!(!p.credential_required);
        assert_eq!(
            p.endpoint("messages").unwrap().url.as_str(),
            "http://127.0.0.1:9/v1/messages"
        );
        for bad in [
            "local",
            "local=openai",
            "=openai:http://a",
            "l=grok:http://a",
            "l=openai:nope",
        ] {
            assert!(from_flag(bad).unwrap_err().contains("--provider"), "{bad}");
        }
    }
}
