//! [`Val`] to and from PostgreSQL's types: integers of every width,
//! floats, text, and NULL of any type bound in; booleans read as 0 or 1.
//! Anything else is an error naming the type, since the record stores
//! nothing else (a `sum()` of integers is NUMERIC: CAST it AS BIGINT).

use crate::audit::db::{Error, Result, Row, Val};
use bytes::BytesMut;
use postgres::types::{to_sql_checked, IsNull, ToSql, Type};

type BoxError = Box<dyn std::error::Error + Sync + Send>;

impl ToSql for Val {
    fn to_sql(&self, ty: &Type, out: &mut BytesMut) -> std::result::Result<IsNull, BoxError> {
        match (self, ty) {
            (Val::Null, _) => Ok(IsNull::Yes),
            (Val::Int(i), &Type::INT8) => i.to_sql(ty, out),
            (Val::Int(i), &Type::INT4) => narrow::<i32>(*i, ty)?.to_sql(ty, out),
            (Val::Int(i), &Type::INT2) => narrow::<i16>(*i, ty)?.to_sql(ty, out),
            (Val::Int(i), &Type::FLOAT8) => (*i as f64).to_sql(ty, out),
            (Val::Int(i), &Type::FLOAT4) => (*i as f32).to_sql(ty, out),
            (Val::Real(r), &Type::FLOAT8) => r.to_sql(ty, out),
            (Val::Real(r), &Type::FLOAT4) => (*r as f32).to_sql(ty, out),
            (Val::Text(s), t) if is_text(t) => s.as_str().to_sql(ty, out),
            (v, ty) => Err(format!(
                "{} bound where the query wants {ty}: CAST the parameter (CAST(?N AS {}))",
                kind(v),
                match v {
                    Val::Int(_) => "BIGINT",
                    Val::Real(_) => "DOUBLE PRECISION",
                    _ => "TEXT",
                }
            )
            .into()),
        }
    }

    /// Every type: NULL binds to any, and a value of the wrong kind is
    /// refused by `to_sql` with a message naming both.
    fn accepts(_: &Type) -> bool {
        true
    }

    to_sql_checked!();
}

fn narrow<T: TryFrom<i64>>(i: i64, ty: &Type) -> std::result::Result<T, BoxError> {
    T::try_from(i).map_err(|_| format!("{i} does not fit the query's {ty}").into())
}

fn is_text(ty: &Type) -> bool {
    matches!(
        *ty,
        Type::TEXT | Type::VARCHAR | Type::BPCHAR | Type::NAME | Type::UNKNOWN
    )
}

fn kind(v: &Val) -> &'static str {
    match v {
        Val::Null => "NULL",
        Val::Int(_) => "an integer",
        Val::Real(_) => "a real",
        Val::Text(_) => "text",
    }
}

/// A row as the record reads it, each column by its type.
pub fn row_of(r: &postgres::Row) -> Result<Row> {
    let mut vals = Vec::with_capacity(r.len());
    for (i, col) in r.columns().iter().enumerate() {
        let got = match *col.type_() {
            Type::INT8 => r.try_get::<_, Option<i64>>(i).map(|v| v.map(Val::Int)),
            Type::INT4 => r
                .try_get::<_, Option<i32>>(i)
                .map(|v| v.map(|n| Val::Int(n.into()))),
            Type::INT2 => r
                .try_get::<_, Option<i16>>(i)
                .map(|v| v.map(|n| Val::Int(n.into()))),
            Type::FLOAT8 => r.try_get::<_, Option<f64>>(i).map(|v| v.map(Val::Real)),
            Type::FLOAT4 => r
                .try_get::<_, Option<f32>>(i)
                .map(|v| v.map(|f| Val::Real(f.into()))),
            Type::BOOL => r.try_get::<_, Option<bool>>(i).map(|v| v.map(Val::from)),
            ref t if is_text(t) => r.try_get::<_, Option<String>>(i).map(|v| v.map(Val::Text)),
            ref other => {
                return Err(Error::other(format!(
                    "column {} ({}) is of type {other}, which the audit store does not read: \
                     CAST it AS BIGINT, DOUBLE PRECISION or TEXT",
                    i + 1,
                    col.name()
                )))
            }
        };
        let v = got.map_err(|e| Error::other(format!("column {}: {e}", i + 1)))?;
        vals.push(v.unwrap_or(Val::Null));
    }
    Ok(Row(vals))
}
