//! The daemon's listings and inspects, as [`Item`]s: one per object, with
//! its id, its names and its labels, whatever the kind.
//!
//! A listing streams: its JSON array is read element by element as it
//! arrives, each element holding only the fields runwarden reads, so a
//! daemon with 100,000 images costs one image of memory.

use super::api::{Api, Body, Failure, q};
use super::names::Kind;
use crate::fault::Fault;
use crate::http::answer::Class;
use serde::Deserialize;
use serde::de::{DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use std::collections::BTreeMap;

/// One object as the daemon shows it.
#[derive(Debug, Default)]
pub(super) struct Item {
    pub id: String,
    /// Its names: an image's `repository:tag`s, a container's name without
    /// the leading `/`, a volume's or network's name.
    pub names: Vec<String>,
    pub labels: BTreeMap<String, String>,
}

impl Item {
    /// Every string of it a message could be in: names, label keys and
    /// values.
    pub fn texts(&self) -> impl Iterator<Item = (&'static str, &str)> {
        self.names.iter().map(|n| ("name", n.as_str())).chain(
            self.labels
                .iter()
                .flat_map(|(k, v)| [("label key", k.as_str()), ("label value", v.as_str())]),
        )
    }
}

/// An element of a listing, with only what runwarden reads (every other
/// field is skipped as it is parsed).
#[derive(Deserialize, Default)]
struct Raw {
    #[serde(rename = "Id", default)]
    id: Option<String>,
    #[serde(rename = "Name", default)]
    name: Option<String>,
    #[serde(rename = "Names", default)]
    names: Option<Vec<String>>,
    #[serde(rename = "RepoTags", default)]
    repo_tags: Option<Vec<String>>,
    #[serde(rename = "Labels", default)]
    labels: Option<BTreeMap<String, String>>,
    /// An inspect's labels (images and containers keep them here).
    #[serde(rename = "Config", default)]
    config: Option<RawConfig>,
}

#[derive(Deserialize, Default)]
struct RawConfig {
    #[serde(rename = "Labels", default)]
    labels: Option<BTreeMap<String, String>>,
}

impl Raw {
    fn item(self) -> Item {
        let mut names = self.repo_tags.or(self.names).unwrap_or_default();
        if let Some(n) = self.name {
            names.push(n);
        }
        for n in &mut names {
            if let Some(s) = n.strip_prefix('/') {
                *n = s.to_string();
            }
        }
        let labels = self
            .labels
            .or(self.config.and_then(|c| c.labels))
            .unwrap_or_default();
        Item {
            id: self.id.unwrap_or_default(),
            names,
            labels,
        }
    }
}

/// Why a look got nothing.
pub(super) type Look<T> = Result<T, Failure>;

/// The daemon's answer to a look as a failure: a refusal of its access
/// control ([`super::api::class`]), or an error.
fn refused(what: &str, status: u16, message: String) -> Failure {
    if super::api::class(status) == Class::Refused {
        Failure::Denied(format!("the daemon refused {what} ({message})"))
    } else {
        Failure::Fault(Fault::broken(format!("{what}: {message}")))
    }
}

/// Every object of `kind`, handed to `each` as it arrives.
pub(super) fn list(api: &Api, kind: Kind, each: &mut dyn FnMut(Item)) -> Look<()> {
    let (path, fields): (&str, &'static [&'static str]) = match kind {
        Kind::Image => ("/images/json?all=1", &[]),
        Kind::Volume => ("/volumes", &["Volumes"]),
        Kind::Container => ("/containers/json?all=1", &[]),
        Kind::Network => ("/networks", &[]),
    };
    listing(
        api,
        path,
        fields,
        &format!("listing the {}s", kind.as_str()),
        each,
    )
}

/// The disk-usage listing (`/system/df`, `docker system df -v`): images,
/// containers and volumes again, with their names and labels, a route
/// of its own (a proxy may allow it and refuse the others).
pub(super) fn disk_usage(api: &Api, each: &mut dyn FnMut(Item)) -> Look<()> {
    listing(
        api,
        "/system/df",
        &["Images", "Containers", "Volumes"],
        "listing the disk usage",
        each,
    )
}

/// The objects of the answer to `GET path`: the whole answer when
/// `fields` is empty, else the arrays at those keys of it.
fn listing(
    api: &Api,
    path: &str,
    fields: &'static [&'static str],
    what: &str,
    each: &mut dyn FnMut(Item),
) -> Look<()> {
    let s = api.stream("GET", path, Body::None)?;
    if !(200..300).contains(&s.status) {
        let mut body = vec![];
        let _ = std::io::Read::read_to_end(&mut std::io::Read::take(s.body, 4096), &mut body);
        let reply = super::api::Reply {
            status: s.status,
            body,
        };
        return Err(refused(what, s.status, reply.message()));
    }
    let mut de = serde_json::Deserializer::from_reader(std::io::BufReader::new(s.body));
    let seed = Listing { fields, each };
    seed.deserialize(&mut de)
        .and_then(|()| de.end())
        .map_err(|e| {
            Failure::Fault(Fault::broken(format!(
                "{what}: the answer is not a listing: {e}"
            )))
        })
}

/// One object by name (`None`: the daemon has none of that name).
pub(super) fn inspect(api: &Api, kind: Kind, name: &str) -> Look<Option<Item>> {
    let path = match kind {
        Kind::Image => format!("/images/{}/json", q(name)),
        Kind::Volume => format!("/volumes/{}", q(name)),
        Kind::Container => format!("/containers/{}/json", q(name)),
        Kind::Network => format!("/networks/{}", q(name)),
    };
    let r = api.call("GET", &path, Body::None)?;
    match r.status {
        404 => Ok(None),
        200 => {
            let raw: Raw = serde_json::from_slice(&r.body).map_err(|e| {
                Failure::Fault(Fault::broken(format!(
                    "inspecting {} {}: the answer is not one: {e}",
                    kind.as_str(),
                    crate::escape::bytes(name.as_bytes())
                )))
            })?;
            let mut item = raw.item();
            if kind == Kind::Volume && item.id.is_empty() {
                item.id = item.names.first().cloned().unwrap_or_default();
            }
            Ok(Some(item))
        }
        s => Err(refused(
            &format!(
                "inspecting {} {}",
                kind.as_str(),
                crate::escape::bytes(name.as_bytes())
            ),
            s,
            r.message(),
        )),
    }
}

/// The listing's arrays (at `fields` of an object, or the whole answer),
/// element by element.
struct Listing<'a> {
    fields: &'static [&'static str],
    each: &'a mut dyn FnMut(Item),
}

impl<'de> DeserializeSeed<'de> for Listing<'_> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        match self.fields {
            [] => d.deserialize_seq(self),
            _ => d.deserialize_map(self),
        }
    }
}

impl<'de> Visitor<'de> for Listing<'_> {
    type Value = ();

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a listing")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        while let Some(raw) = seq.next_element::<Raw>()? {
            (self.each)(raw.item());
        }
        Ok(())
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let fields = self.fields;
        let each = self.each;
        while let Some(k) = map.next_key::<String>()? {
            if fields.contains(&k.as_str()) {
                map.next_value_seed(NullOr(Listing {
                    fields: &[],
                    each: &mut *each,
                }))?;
            } else {
                map.next_value::<IgnoredAny>()?;
            }
        }
        Ok(())
    }
}

/// `null` (the daemon's empty listing of volumes) or the array.
struct NullOr<'a>(Listing<'a>);

impl<'de> DeserializeSeed<'de> for NullOr<'_> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_option(self)
    }
}

impl<'de> Visitor<'de> for NullOr<'_> {
    type Value = ();

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a listing or null")
    }

    fn visit_none<E>(self) -> Result<(), E> {
        Ok(())
    }

    fn visit_unit<E>(self) -> Result<(), E> {
        Ok(())
    }

    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_seq(self.0)
    }
}
