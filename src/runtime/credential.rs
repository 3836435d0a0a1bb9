//! `sluice.credential(NAME, {prefix = ...})`: a named credential as a
//! script holds it, an opaque value whose secret never reaches Lua. It is
//! usable whole as a flow's `headers` or `env` value, which the flow
//! receives as a reference (`{"credential": NAME, "prefix": ...}`); joining
//! it to text or encoding it as JSON is an error saying where it goes.

use crate::credentials::{check_name, Reference};
use mlua::{Lua, MetaMethod, Table, UserData, UserDataMethods, Value as LuaValue};

/// A credential in a script: its name and prefix, never its secret.
pub struct Credential(pub Reference);

/// What a script is told when it tries to see inside a credential.
const WHERE: &str = "its secret never reaches the script: give it whole as a `headers` or `env` \
value of a flow (fetch, http_post, webfetch, bash), with any text before it as \
sluice.credential(NAME, {prefix = \"Bearer \"})";

impl UserData for Credential {
    fn add_methods<M: UserDataMethods<Self>>(methods: &mut M) {
        methods.add_meta_method(MetaMethod::ToString, |_, c, ()| {
            Ok(format!("credential({})", c.0.credential))
        });
        methods.add_meta_function(
            MetaMethod::Concat,
            |_, _: mlua::MultiValue| -> mlua::Result<()> {
                Err(mlua::Error::runtime(format!(
                    "a credential cannot be joined to text: {WHERE}"
                )))
            },
        );
        methods.add_meta_method(MetaMethod::Index, |_, c, _: LuaValue| -> mlua::Result<()> {
            Err(mlua::Error::runtime(format!(
                "credential({}) has no fields: {WHERE}",
                c.0.credential
            )))
        });
        methods.add_meta_method(MetaMethod::Len, |_, c, ()| -> mlua::Result<()> {
            Err(mlua::Error::runtime(format!(
                "credential({}) has no length: {WHERE}",
                c.0.credential
            )))
        });
    }
}

/// `sluice.credential(name, opts)`. A bad name or option is a
/// programming mistake: it raises. Whether the credential is set is found
/// when a flow sends it.
pub fn function(lua: &Lua) -> mlua::Result<mlua::Function> {
    lua.create_function(|lua, (name, opts): (LuaValue, Option<Table>)| {
        let raise = |m: String| mlua::Error::runtime(format!("sluice.credential: {m}"));
        let LuaValue::String(name) = name else {
            return Err(raise(format!(
                "the first argument is the credential's name, got {}",
                name.type_name()
            )));
        };
        let name = name.to_str()?.to_string();
        check_name("name", &name).map_err(|e| raise(e.message))?;
        let mut prefix = None;
        if let Some(opts) = opts {
            for pair in opts.pairs::<LuaValue, LuaValue>() {
                let (k, v) = pair?;
                match (k.to_string()?.as_str(), v) {
                    ("prefix", LuaValue::String(p)) => prefix = Some(p.to_str()?.to_string()),
                    ("prefix", other) => {
                        return Err(raise(format!(
                            "`prefix` is the text sent before the secret, e.g. \"Bearer \", got {}",
                            other.type_name()
                        )))
                    }
                    (other, _) => {
                        return Err(raise(format!(
                            "unknown option `{other}`; the one option is `prefix`"
                        )))
                    }
                }
            }
        }
        let reference = Reference {
            credential: name,
            prefix,
        };
        // Checked as a flow will check it, so a bad prefix fails here.
        let spelled = serde_json::to_value(&reference).map_err(mlua::Error::external)?;
        Reference::parse("prefix", &spelled).map_err(|e| raise(e.message))?;
        lua.create_userdata(Credential(reference))
    })
}
