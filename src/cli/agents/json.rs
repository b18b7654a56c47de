//! A JSON value that keeps its objects' keys in the order they were written,
//! so merging one entry into a host's configuration file leaves every other
//! key where the person put it (serde_json's own `Value` sorts them).
//!
//! Invariant: reading and writing back a document changes no key's order and
//! no value; only the layout becomes serde_json's pretty form.

use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::ser::{Serialize, SerializeMap, SerializeSeq, Serializer};

#[derive(Debug, Clone, PartialEq)]
pub(super) enum Json {
    Null,
    Bool(bool),
    Number(serde_json::Number),
    String(String),
    Array(Vec<Json>),
    /// Members in the order written; a key written twice stays twice.
    Object(Vec<(String, Json)>),
}

impl Json {
    pub(super) fn string(text: impl Into<String>) -> Json {
        Json::String(text.into())
    }

    pub(super) fn object<const N: usize>(members: [(&str, Json); N]) -> Json {
        Json::Object(
            members
                .into_iter()
                .map(|(k, v)| (k.to_owned(), v))
                .collect(),
        )
    }

    /// The value of `key` (its first occurrence), in an object.
    pub(super) fn get(&self, key: &str) -> Option<&Json> {
        match self {
            Json::Object(members) => members.iter().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }

    /// What the value is, for error messages.
    pub(super) fn kind(&self) -> &'static str {
        match self {
            Json::Null => "null",
            Json::Bool(_) => "a boolean",
            Json::Number(_) => "a number",
            Json::String(_) => "a string",
            Json::Array(_) => "an array",
            Json::Object(_) => "an object",
        }
    }

    /// The document as serde_json writes it pretty, with a final newline.
    pub(super) fn to_pretty(&self) -> String {
        let mut text = serde_json::to_string_pretty(self).expect("a JSON value serializes");
        text.push('\n');
        text
    }
}

/// Sets `key` in the object `members` to `value`: in place where it was
/// (later duplicates of the key removed), appended where it was not.
pub(super) fn set_member(members: &mut Vec<(String, Json)>, key: &str, value: Json) {
    match members.iter().position(|(k, _)| k == key) {
        Some(at) => {
            members[at].1 = value;
            let mut seen = 0;
            members.retain(|(k, _)| {
                if k != key {
                    return true;
                }
                seen += 1;
                seen == 1
            });
        }
        None => members.push((key.to_owned(), value)),
    }
}

impl Serialize for Json {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Json::Null => serializer.serialize_unit(),
            Json::Bool(b) => serializer.serialize_bool(*b),
            Json::Number(n) => n.serialize(serializer),
            Json::String(s) => serializer.serialize_str(s),
            Json::Array(items) => {
                let mut seq = serializer.serialize_seq(Some(items.len()))?;
                for item in items {
                    seq.serialize_element(item)?;
                }
                seq.end()
            }
            Json::Object(members) => {
                let mut map = serializer.serialize_map(Some(members.len()))?;
                for (k, v) in members {
                    map.serialize_entry(k, v)?;
                }
                map.end()
            }
        }
    }
}

impl<'de> Deserialize<'de> for Json {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Json, D::Error> {
        deserializer.deserialize_any(JsonVisitor)
    }
}

struct JsonVisitor;

impl<'de> Visitor<'de> for JsonVisitor {
    type Value = Json;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_unit<E: de::Error>(self) -> Result<Json, E> {
        Ok(Json::Null)
    }
    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Json, E> {
        Ok(Json::Bool(v))
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Json, E> {
        Ok(Json::Number(v.into()))
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Json, E> {
        Ok(Json::Number(v.into()))
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Json, E> {
        serde_json::Number::from_f64(v)
            .map(Json::Number)
            .ok_or_else(|| E::custom("a number JSON cannot hold"))
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Json, E> {
        Ok(Json::String(v.to_owned()))
    }
    fn visit_string<E: de::Error>(self, v: String) -> Result<Json, E> {
        Ok(Json::String(v))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Json, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element()? {
            items.push(item);
        }
        Ok(Json::Array(items))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Json, A::Error> {
        let mut members = Vec::new();
        while let Some((k, v)) = map.next_entry::<String, Json>()? {
            members.push((k, v));
        }
        Ok(Json::Object(members))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_keep_their_order_through_a_round_trip() {
        let text = "{\"z\": 1, \"a\": {\"y\": [true, null, 1.5, \"s\"], \"b\": -2}, \"m\": 18446744073709551615}";
        let value: Json = serde_json::from_str(text).unwrap();
        let back = value.to_pretty();
        assert!(
            back.find("\"z\"").unwrap() < back.find("\"a\"").unwrap(),
            "{back}"
        );
        assert!(
            back.find("\"y\"").unwrap() < back.find("\"b\"").unwrap(),
            "{back}"
        );
        assert_eq!(serde_json::from_str::<Json>(&back).unwrap(), value);
        assert!(back.contains("18446744073709551615"), "{back}");
    }

    #[test]
    fn setting_a_key_replaces_it_in_place_and_drops_its_duplicates() {
        let mut members = vec![
            ("a".to_owned(), Json::Null),
            ("k".to_owned(), Json::Bool(false)),
            ("b".to_owned(), Json::Null),
            ("k".to_owned(), Json::Bool(false)),
        ];
        set_member(&mut members, "k", Json::Bool(true));
        let keys: Vec<&str> = members.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(keys, ["a", "k", "b"]);
        assert_eq!(members[1].1, Json::Bool(true));
        set_member(&mut members, "new", Json::Null);
        assert_eq!(members.last().unwrap().0, "new");
    }
}
