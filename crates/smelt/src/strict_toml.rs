//! Named keys, never positions: where a file's schema has a table, anything else is an
//! error naming the key.
//!
//! serde reads a struct from an array field by field, so `hidden = [32, 640, 1280]` would
//! be a lattice range, `mla = [384, 256, 64, 32, 64]` an MLA table and a JSON array a model.
//! Every file is therefore read through [`Strict`], a deserializer adapter that refuses a
//! sequence wherever a struct is asked for. The rule holds for every table of every schema
//! by construction (no list of tables to keep in step with the types); the key is named by
//! [`serde_path_to_error`], which the adapter sits under.

use serde::de::{self, DeserializeOwned, DeserializeSeed, Deserializer, Visitor};
use serde_json::Value;

use crate::error::{Error, Result};

/// The rule a sequence in a table's place breaks; also the marker by which the error is
/// told from the parser's own.
const NOT_A_TABLE: &str =
    "must be a table with named keys (got an array); positional forms are not read";

/// What kind of value `v` is, in words; a map is `object` ("a table" in a TOML file,
/// "an object" in JSON).
pub(crate) fn kind_of(v: &Value, object: &'static str) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => object,
    }
}

/// The kinds of file smelt reads, each told by top-level keys no other kind has, so that a
/// file given where another kind is read is named as what it is (a budget given to `smelt
/// cost`, a model file to `smelt match`) rather than refused key by key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FileKind {
    /// A model file: `[model]` and `[workload]`.
    Model,
    /// A budget file: one `baseline`.
    Budget,
    /// A grid file: `template` + `scales` + `sparsities`, or `[[cells]]`.
    Grid,
}

impl FileKind {
    const ALL: [FileKind; 3] = [FileKind::Model, FileKind::Budget, FileKind::Grid];

    /// The top-level keys only this kind of file has.
    fn keys(self) -> &'static [&'static str] {
        match self {
            FileKind::Model => &["model"],
            FileKind::Budget => &["baseline"],
            FileKind::Grid => &["template", "scales", "sparsities", "cells"],
        }
    }

    /// The kind in words, with the commands that read it.
    fn name(self) -> &'static str {
        match self {
            FileKind::Model => "a model file (smelt cost, export, bench, predict)",
            FileKind::Budget => "a budget file (smelt match, sweep)",
            FileKind::Grid => "a grid file (smelt grid)",
        }
    }

    /// What a file of this kind holds.
    fn holds(self) -> &'static str {
        match self {
            FileKind::Model => "a model file describes one model in [model] and [workload]",
            FileKind::Budget => {
                "a budget file names one Baseline: baseline = \"FILE\" (a model file or a \
                 config.json, relative to the budget file) or an inline [baseline] table"
            }
            FileKind::Grid => {
                "a grid file names its Baselines with template + scales + sparsities, or \
                 [[cells]]"
            }
        }
    }

    /// The error for `key`, a key of this kind of file, in a file read as `expected`.
    pub(crate) fn misplaced(self, key: &str, expected: FileKind) -> Error {
        Error::invalid(
            key,
            format!("belongs in {}; {}", self.name(), expected.holds()),
        )
    }

    /// The error naming the first of `keys` that belongs to another kind of file than this
    /// one, if any.
    pub(crate) fn foreign<'a>(self, keys: impl IntoIterator<Item = &'a str>) -> Option<Error> {
        keys.into_iter().find_map(|key| {
            let owner =
                (Self::ALL.into_iter()).find(|kind| *kind != self && kind.keys().contains(&key))?;
            Some(owner.misplaced(key, self))
        })
    }

    /// [`Self::foreign`] of the top-level keys of `text` (JSON when `json`, else TOML), when
    /// it parses as a table.
    pub(crate) fn foreign_in(self, text: &str, json: bool) -> Option<Error> {
        let keys: Vec<String> = match json {
            true => (serde_json::from_str::<serde_json::Map<String, Value>>(text).ok()?)
                .into_iter()
                .map(|(k, _)| k)
                .collect(),
            false => (toml::from_str::<toml::Table>(text).ok()?)
                .into_iter()
                .map(|(k, _)| k)
                .collect(),
        };
        self.foreign(keys.iter().map(String::as_str))
    }
}

/// Reads a `T` through [`Strict`]: an array where `T` has a table is an [`Error::InvalidSpec`]
/// naming its key (`file` for the whole file); any other error is `other`'s rendering of the
/// parser's.
fn read<'de, T, D>(deserializer: D, other: impl FnOnce(String, D::Error) -> Error) -> Result<T>
where
    T: de::Deserialize<'de>,
    D: Deserializer<'de>,
    D::Error: std::fmt::Display,
{
    serde_path_to_error::deserialize(Strict(deserializer)).map_err(|e| {
        if e.inner().to_string().contains(NOT_A_TABLE) {
            let field = match e.path().to_string() {
                p if p == "." || p.is_empty() => "file".to_owned(),
                p => p,
            };
            return Error::invalid(field, NOT_A_TABLE);
        }
        let path = e.path().to_string();
        other(path, e.into_inner())
    })
}

/// Parses TOML text as a `T`, tables read only from tables.
pub(crate) fn from_toml<T: DeserializeOwned>(text: &str) -> Result<T> {
    let deserializer = toml::de::Deserializer::parse(text).map_err(Error::parse)?;
    read(deserializer, |_, e| Error::parse(e))
}

/// Parses JSON text as a `T`, objects read only from objects.
pub(crate) fn from_json<T: DeserializeOwned>(text: &str) -> Result<T> {
    let json = |e: serde_json::Error| Error::parse(format!("JSON: {e}"));
    let mut deserializer = serde_json::Deserializer::from_str(text);
    let value = read(&mut deserializer, json_at)?;
    deserializer.end().map_err(json)?;
    Ok(value)
}

/// A JSON value's error at `path` (`objective.weights.time`) as an error naming that field,
/// without the position in a text the reader never saw (a dict handed over as JSON); a
/// syntax error, or one at the top, as the parser says it.
pub(crate) fn json_at(path: String, e: serde_json::Error) -> Error {
    let top = path.is_empty() || path == ".";
    if e.is_eof() || (top && !e.is_data()) {
        return Error::parse(format!("JSON: {e}"));
    }
    let text = e.to_string();
    let rule = match text.rfind(" at line ") {
        Some(i) => &text[..i],
        None => &text,
    };
    if top {
        // At the top a position says nothing (a dict handed over has no lines); a missing
        // key is named as such.
        return Error::parse(match rule.strip_prefix("missing field `") {
            Some(rest) => format!(
                "missing field `{}` (a key the object must have)",
                rest.trim_end_matches('`')
            ),
            None => format!("JSON: {rule}"),
        });
    }
    Error::invalid(path, plain_rule(rule).unwrap_or_else(|| rule.to_owned()))
}

/// The parser's words for a value a boolean or integer field cannot hold, as the rule it
/// breaks with the value given: `invalid type: string "yes", expected a boolean`, `invalid
/// type: floating point `1.18e21`, expected u64` (a Python int past 2^64 arrives as a
/// float), `invalid value: integer `-1`, expected u64`.
fn plain_rule(rule: &str) -> Option<String> {
    let (what, ty) = rule.rsplit_once(", expected ")?;
    if ty == "a boolean" {
        let got = what.strip_prefix("invalid type: ")?;
        return Some(format!("must be true or false; got {got}"));
    }
    let (min, max): (i128, u128) = match ty {
        "u8" => (0, u8::MAX.into()),
        "u16" => (0, u16::MAX.into()),
        "u32" => (0, u32::MAX.into()),
        "u64" | "usize" => (0, u64::MAX.into()),
        "i32" => (i32::MIN.into(), i32::MAX as u128),
        "i64" => (i64::MIN.into(), i64::MAX as u128),
        _ => return None,
    };
    let number = (what.strip_prefix("invalid type: floating point `"))
        .or_else(|| what.strip_prefix("invalid value: integer `"));
    let got = match number {
        Some(n) => n.strip_suffix('`')?,
        None => what.strip_prefix("invalid type: ")?,
    };
    Some(format!(
        "must be a whole number from {min} to {max}; got {got}"
    ))
}

/// Reads a `T` from a TOML value (an inline table), tables read only from tables.
pub(crate) fn from_toml_value<T: DeserializeOwned>(value: toml::Value) -> Result<T> {
    read(value, |_, e| Error::parse(e))
}

/// Reads a `T` from a JSON value, objects read only from objects, an error naming its field.
pub(crate) fn from_json_value<T: DeserializeOwned>(value: serde_json::Value) -> Result<T> {
    read(value, json_at)
}

/// A deserializer that refuses a sequence where a struct is asked for, at any depth.
struct Strict<D>(D);

/// A visitor passed on by [`Strict`]: `table` when it reads a struct (a sequence refused).
struct Wrap<V> {
    inner: V,
    table: bool,
}

impl<V> Wrap<V> {
    fn plain(inner: V) -> Self {
        Self {
            inner,
            table: false,
        }
    }
}

/// A sequence, map, seed, enum or variant whose values are read through [`Strict`].
struct Nested<A>(A);

macro_rules! forward_deserialize {
    ($($method:ident($($arg:ident: $ty:ty),*)),* $(,)?) => {
        $(
            fn $method<V: Visitor<'de>>(self, $($arg: $ty,)* visitor: V) -> Result<V::Value, Self::Error> {
                self.0.$method($($arg,)* Wrap::plain(visitor))
            }
        )*
    };
}

impl<'de, D: Deserializer<'de>> Deserializer<'de> for Strict<D> {
    type Error = D::Error;

    forward_deserialize! {
        deserialize_any(), deserialize_bool(), deserialize_i8(), deserialize_i16(),
        deserialize_i32(), deserialize_i64(), deserialize_i128(), deserialize_u8(),
        deserialize_u16(), deserialize_u32(), deserialize_u64(), deserialize_u128(),
        deserialize_f32(), deserialize_f64(), deserialize_char(), deserialize_str(),
        deserialize_string(), deserialize_bytes(), deserialize_byte_buf(),
        deserialize_option(), deserialize_unit(), deserialize_seq(), deserialize_map(),
        deserialize_identifier(), deserialize_ignored_any(),
        deserialize_unit_struct(name: &'static str),
        deserialize_newtype_struct(name: &'static str),
        deserialize_tuple(len: usize),
        deserialize_tuple_struct(name: &'static str, len: usize),
        deserialize_enum(name: &'static str, variants: &'static [&'static str]),
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Self::Error> {
        let visitor = Wrap {
            inner: visitor,
            table: true,
        };
        self.0.deserialize_struct(name, fields, visitor)
    }

    fn is_human_readable(&self) -> bool {
        self.0.is_human_readable()
    }
}

macro_rules! forward_visit {
    ($($method:ident($ty:ty)),* $(,)?) => {
        $(
            fn $method<E: de::Error>(self, v: $ty) -> Result<Self::Value, E> {
                self.inner.$method(v)
            }
        )*
    };
}

impl<'de, V: Visitor<'de>> Visitor<'de> for Wrap<V> {
    type Value = V::Value;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        self.inner.expecting(f)
    }

    forward_visit! {
        visit_bool(bool), visit_i8(i8), visit_i16(i16), visit_i32(i32), visit_i64(i64),
        visit_i128(i128), visit_u8(u8), visit_u16(u16), visit_u32(u32), visit_u64(u64),
        visit_u128(u128), visit_f32(f32), visit_f64(f64), visit_char(char),
        visit_str(&str), visit_borrowed_str(&'de str), visit_string(String),
        visit_bytes(&[u8]), visit_borrowed_bytes(&'de [u8]), visit_byte_buf(Vec<u8>),
    }

    fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
        self.inner.visit_none()
    }

    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        self.inner.visit_unit()
    }

    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        self.inner.visit_some(Strict(d))
    }

    fn visit_newtype_struct<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        self.inner.visit_newtype_struct(Strict(d))
    }

    fn visit_seq<A: de::SeqAccess<'de>>(self, seq: A) -> Result<Self::Value, A::Error> {
        match self.table {
            true => Err(de::Error::custom(NOT_A_TABLE)),
            false => self.inner.visit_seq(Nested(seq)),
        }
    }

    fn visit_map<A: de::MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
        self.inner.visit_map(Nested(map))
    }

    fn visit_enum<A: de::EnumAccess<'de>>(self, data: A) -> Result<Self::Value, A::Error> {
        self.inner.visit_enum(Nested(data))
    }
}

impl<'de, A: de::SeqAccess<'de>> de::SeqAccess<'de> for Nested<A> {
    type Error = A::Error;

    fn next_element_seed<T: DeserializeSeed<'de>>(
        &mut self,
        seed: T,
    ) -> Result<Option<T::Value>, A::Error> {
        self.0.next_element_seed(Nested(seed))
    }

    fn size_hint(&self) -> Option<usize> {
        self.0.size_hint()
    }
}

impl<'de, A: de::MapAccess<'de>> de::MapAccess<'de> for Nested<A> {
    type Error = A::Error;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, A::Error> {
        self.0.next_key_seed(seed)
    }

    fn next_value_seed<T: DeserializeSeed<'de>>(&mut self, seed: T) -> Result<T::Value, A::Error> {
        self.0.next_value_seed(Nested(seed))
    }

    fn size_hint(&self) -> Option<usize> {
        self.0.size_hint()
    }
}

impl<'de, S: DeserializeSeed<'de>> DeserializeSeed<'de> for Nested<S> {
    type Value = S::Value;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<S::Value, D::Error> {
        self.0.deserialize(Strict(d))
    }
}

impl<'de, A: de::EnumAccess<'de>> de::EnumAccess<'de> for Nested<A> {
    type Error = A::Error;
    type Variant = Nested<A::Variant>;

    fn variant_seed<S: DeserializeSeed<'de>>(
        self,
        seed: S,
    ) -> Result<(S::Value, Nested<A::Variant>), A::Error> {
        let (value, variant) = self.0.variant_seed(seed)?;
        Ok((value, Nested(variant)))
    }
}

impl<'de, A: de::VariantAccess<'de>> de::VariantAccess<'de> for Nested<A> {
    type Error = A::Error;

    fn unit_variant(self) -> Result<(), A::Error> {
        self.0.unit_variant()
    }

    fn newtype_variant_seed<T: DeserializeSeed<'de>>(self, seed: T) -> Result<T::Value, A::Error> {
        self.0.newtype_variant_seed(Nested(seed))
    }

    fn tuple_variant<V: Visitor<'de>>(self, len: usize, visitor: V) -> Result<V::Value, A::Error> {
        self.0.tuple_variant(len, Wrap::plain(visitor))
    }

    fn struct_variant<V: Visitor<'de>>(
        self,
        fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, A::Error> {
        let visitor = Wrap {
            inner: visitor,
            table: true,
        };
        self.0.struct_variant(fields, visitor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A file of one kind read as another is named as what it is, by the key that shows it.
    #[test]
    fn a_file_of_another_kind_is_named() {
        let budget = "name = \"b\"\nbaseline = \"base.toml\"\n[recipe]\nrepeats = 2\n";
        let e = FileKind::Model
            .foreign_in(budget, false)
            .unwrap()
            .to_string();
        assert!(
            e.starts_with(
                "baseline: belongs in a budget file (smelt match, sweep); a model file describes"
            ),
            "{e}"
        );
        let model = "[model]\nlayers = 2\n[workload]\ncontext = 8\n";
        for expected in [FileKind::Budget, FileKind::Grid] {
            let e = expected.foreign_in(model, false).unwrap().to_string();
            assert!(
                e.starts_with("model: belongs in a model file (smelt cost"),
                "{e}"
            );
        }
        let grid = r#"{"template": "b-{scale}-{sparsity}.toml", "scales": ["1"]}"#;
        let e = FileKind::Model.foreign_in(grid, true).unwrap().to_string();
        assert!(
            e.starts_with("scales: belongs in a grid file (smelt grid)"),
            "{e}"
        );
        assert!(FileKind::Model.foreign_in(model, false).is_none());
        assert!(FileKind::Model.foreign_in("not [toml", false).is_none());
    }

    /// A value an integer field cannot hold is named with the range it takes and the value
    /// given (it said "invalid type: floating point ..., expected u64" of an integer); one a
    /// boolean field cannot, with the two it takes.
    #[test]
    fn a_value_a_boolean_or_integer_cannot_hold_names_the_rule() {
        #[derive(Debug, serde::Deserialize)]
        struct Counts {
            #[allow(dead_code)]
            gpus: u64,
            #[allow(dead_code)]
            #[serde(default)]
            small: u32,
        }
        let rule = "must be a whole number from 0 to 18446744073709551615; got";
        for (json, got) in [
            (r#"{"gpus": 1180591620717411303424}"#, "1.1805916207174113e"),
            (r#"{"gpus": -1}"#, "-1"),
            (r#"{"gpus": 2.5}"#, "2.5"),
        ] {
            let e = from_json::<Counts>(json).unwrap_err().to_string();
            assert!(e.starts_with(&format!("gpus: {rule} {got}")), "{e}");
        }
        let e = from_json::<Counts>(r#"{"gpus": 1, "small": 4294967296}"#)
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            "small: must be a whole number from 0 to 4294967295; got 4294967296"
        );
        let e = from_json::<Counts>(r#"{"gpus": "1"}"#)
            .unwrap_err()
            .to_string();
        assert_eq!(e, format!("gpus: {rule} string \"1\""));
        #[derive(Debug, serde::Deserialize)]
        struct Flag {
            #[allow(dead_code)]
            force: bool,
        }
        let e = from_json::<Flag>(r#"{"force": "yes"}"#)
            .unwrap_err()
            .to_string();
        assert_eq!(e, "force: must be true or false; got string \"yes\"");
    }
}
