//! What a plant makes on the daemon, by name: the objects of each carrier
//! ([`objects`]), the journal entry that names one ([`Entry`]), and the
//! one rule for whether an entry is this probe's own ([`owns`]).
//!
//! Every name is a [`tagged_name`](crate::surface::tagged_name) bound to
//! the object's kind: `runwarden-<probe>-<carrier>[-<nonce>]-<tag>`, which
//! is a valid image repository, volume, container and network name
//! (lowercase hex and `-`). An image's tags are `latest`, and for
//! `image-tag` also `n<nonce>`.

use super::Dk;
use crate::fault::Fault;
use crate::nonce::Nonce;
use crate::surface::RunCtx;
use crate::surface::carrier::CarrierSet;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The kinds of object the daemon lists.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub(super) enum Kind {
    Image,
    Volume,
    Container,
    Network,
}

impl Kind {
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Image => "image",
            Kind::Volume => "volume",
            Kind::Container => "container",
            Kind::Network => "network",
        }
    }
}

/// One object a plant makes, as the journal names it (before the request
/// that creates it). `tags`: an image's tags; empty for the other kinds.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct Entry {
    pub kind: Kind,
    pub name: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tags: Vec<String>,
}

impl Entry {
    pub fn value(&self) -> Value {
        serde_json::to_value(self).expect("entries serialize")
    }

    /// The object for people (already escaped).
    pub fn shown(&self) -> String {
        let name = crate::escape::bytes(self.name.as_bytes());
        match self.tags.as_slice() {
            [] => format!("{} {name}", self.kind.as_str()),
            tags => format!(
                "image {name} (tags {})",
                crate::escape::bytes(tags.join(", ").as_bytes())
            ),
        }
    }

    /// `repository:tag` for each tag.
    pub fn references(&self) -> Vec<String> {
        self.tags
            .iter()
            .map(|t| format!("{}:{t}", self.name))
            .collect()
    }
}

/// The name of a `kind` object of `carrier`'s plant: with the nonce in it
/// when given.
pub(super) fn name(ctx: &RunCtx<'_>, carrier: Dk, kind: Kind, nonce: Option<&Nonce>) -> String {
    crate::surface::tagged_name(ctx, carrier.name(), nonce, kind.as_str())
}

/// Whether `carrier` puts its nonce in the name of a `kind` object (it
/// then also makes one of the agreed name beside it: the witness its
/// listing must show).
fn named_by_nonce(carrier: Dk, kind: Kind) -> bool {
    matches!(
        (carrier, kind),
        (Dk::VolumeName, Kind::Volume)
            | (Dk::ContainerName, Kind::Container)
            | (Dk::NetworkName, Kind::Network)
            | (Dk::EventHistory, Kind::Volume)
    )
}

/// The tag `image-tag` puts its nonce in.
pub(super) fn nonce_tag(nonce: &Nonce) -> String {
    format!("n{}", nonce.hex())
}

/// Every object `carrier`'s plant makes, in the order it makes them (so
/// cleanup, newest first, removes a container before its image and
/// volume).
pub(super) fn objects(ctx: &RunCtx<'_>, carrier: Dk, nonce: &Nonce) -> Vec<Entry> {
    let e = |kind: Kind, nonce: Option<&Nonce>, tags: Vec<String>| Entry {
        kind,
        name: name(ctx, carrier, kind, nonce),
        tags,
    };
    let latest = || vec!["latest".to_string()];
    match carrier {
        Dk::ImageTag => vec![e(
            Kind::Image,
            None,
            vec!["latest".into(), nonce_tag(nonce)],
        )],
        Dk::ImageLabel => vec![e(Kind::Image, None, latest())],
        Dk::VolumeName => vec![
            e(Kind::Volume, None, vec![]),
            e(Kind::Volume, Some(nonce), vec![]),
        ],
        Dk::VolumeLabel => vec![e(Kind::Volume, None, vec![])],
        Dk::VolumeContent => vec![
            e(Kind::Image, None, latest()),
            e(Kind::Volume, None, vec![]),
            e(Kind::Container, None, vec![]),
        ],
        Dk::ContainerName => vec![
            e(Kind::Image, None, latest()),
            e(Kind::Container, None, vec![]),
            e(Kind::Container, Some(nonce), vec![]),
        ],
        Dk::ContainerLabel => vec![
            e(Kind::Image, None, latest()),
            e(Kind::Container, None, vec![]),
        ],
        Dk::NetworkName => vec![
            e(Kind::Network, None, vec![]),
            e(Kind::Network, Some(nonce), vec![]),
        ],
        // The witness last: its removal closes the plant's stretch of the
        // event history.
        Dk::EventHistory => vec![
            e(Kind::Volume, Some(nonce), vec![]),
            e(Kind::Volume, None, vec![]),
        ],
    }
}

/// Whether `entry` is provably this probe's own: an [`Entry`] and nothing
/// else, whose name is the tagged name a plant of its carrier gives an
/// object of its kind, with the tags only that plant sets. `Invalid`
/// otherwise.
pub(super) fn owns(ctx: &RunCtx<'_>, entry: &Value) -> Result<(), Fault> {
    let e: Entry = serde_json::from_value(entry.clone())
        .map_err(|_| Fault::invalid("not a docker-daemon object"))?;
    let bound = e.kind.as_str();
    let carrier = Dk::owned(ctx, &e.name, bound, &|_| false)
        .or_else(|_| Dk::owned(ctx, &e.name, bound, &|c| named_by_nonce(c, e.kind)))?;
    // (The kinds `objects` makes for each carrier.)
    let made = matches!(
        (carrier, e.kind),
        (Dk::ImageTag | Dk::ImageLabel, Kind::Image)
            | (
                Dk::VolumeContent | Dk::ContainerName | Dk::ContainerLabel,
                Kind::Image | Kind::Container
            )
            | (
                Dk::VolumeName | Dk::VolumeLabel | Dk::VolumeContent | Dk::EventHistory,
                Kind::Volume
            )
            | (Dk::NetworkName, Kind::Network)
    );
    if !made {
        return Err(Fault::invalid(format!(
            "a {carrier} plant makes no {}",
            e.kind.as_str()
        )));
    }
    let tags_ok = match e.kind {
        Kind::Image => {
            !e.tags.is_empty()
                && e.tags.iter().all(|t| {
                    t == "latest"
                        || (carrier == Dk::ImageTag
                            && t.strip_prefix('n')
                                .is_some_and(|h| crate::surface::lower_hex(h, 32)))
                })
        }
        _ => e.tags.is_empty(),
    };
    tags_ok
        .then_some(())
        .ok_or_else(|| Fault::invalid("its tags are not the ones a plant sets"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::marker::Key;

    #[test]
    fn every_object_a_plant_makes_is_owned_and_no_other_probes_is() {
        let key = Key::new(Some(b"names-test-key".to_vec()));
        let ours = RunCtx {
            probe_id: "p1",
            key: &key,
        };
        let theirs = RunCtx {
            probe_id: "p2",
            key: &key,
        };
        let nonce = Nonce::generate().unwrap();
        for c in Dk::ALL {
            for e in objects(&ours, *c, &nonce) {
                assert_eq!(owns(&ours, &e.value()), Ok(()), "{c}: {e:?}");
                assert!(owns(&theirs, &e.value()).is_err(), "{c}: {e:?}");
                let mut other = e.clone();
                other.tags.push("v1".into());
                assert!(owns(&ours, &other.value()).is_err(), "{c}: {other:?}");
            }
        }
        let e = objects(&ours, Dk::VolumeName, &nonce).remove(0);
        let as_network = Entry {
            kind: Kind::Network,
            ..e
        };
        assert!(owns(&ours, &as_network.value()).is_err());
    }
}
