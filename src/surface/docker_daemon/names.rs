//! What a plant makes on the daemon, by name: the objects of each carrier
//! ([`objects`]) and the journal entry that names one ([`Entry`]); the one
//! rule for whether an entry is this probe's own is the type's `owns`.
//!
//! Every name is a [`tagged_name`](crate::surface::tagged_name) bound to
//! the object's kind: `runwarden-<probe>-<carrier>[-<nonce>]-<tag>`, which
//! is a valid image repository, volume, container and network name
//! (lowercase hex and `-`). An image's tags are `latest`, and for
//! `image-tag` also `n<nonce>`.

use super::Dk;
use crate::nonce::Nonce;
use crate::surface::RunCtx;
use serde::{Deserialize, Serialize};

/// The kinds of object the daemon lists.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Kind {
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

/// One object a plant makes, as the journal names it: before the request
/// that creates it, and again with its id once the daemon answered.
/// `tags`: an image's tags; empty for the other kinds.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Entry {
    pub kind: Kind,
    pub name: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tags: Vec<String>,
    /// The id the daemon gave it (an image's `sha256:…`, a container's or
    /// network's 64 hex), journalled once it answered; cleanup removes it
    /// only while the name still names that id. Volumes have none: their
    /// name is their id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
}

impl std::fmt::Display for Entry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.shown())
    }
}

impl Entry {
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
pub(super) fn named_by_nonce(carrier: Dk, kind: Kind) -> bool {
    matches!(
        (carrier, kind),
        (Dk::VolumeName, Kind::Volume)
            | (Dk::ContainerName, Kind::Container)
            | (Dk::NetworkName, Kind::Network)
            | (Dk::EventHistory, Kind::Volume | Kind::Network)
    )
}

/// The tag `image-tag` puts its nonce in.
pub(super) fn nonce_tag(nonce: &Nonce) -> String {
    format!("n{}", nonce.hex())
}

/// What an object is to its carrier's plant.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Role {
    /// Its creation puts the nonce in place: a refusal of it is the
    /// carrier's.
    Carrier,
    /// Made before the nonce is placed (an image for a container, the
    /// volume the archive writes into): a refusal of it says nothing of
    /// the carrier.
    Before,
    /// The agreed object made after the nonce-named one, which the
    /// listing must show.
    Witness,
}

/// Every object `carrier`'s plant makes, in the order it makes them, with
/// its role. Cleanup, newest first, then removes a container before its
/// image and volume; a listing that shows the witness, made last, was
/// taken after the nonce-named object was made.
pub(super) fn objects(ctx: &RunCtx<'_>, carrier: Dk, nonce: &Nonce) -> Vec<(Entry, Role)> {
    objects_of(ctx, carrier, nonce, carrier_kind(carrier))
}

/// The kind a carrier's nonce-named or labelled object is.
pub(super) fn carrier_kind(carrier: Dk) -> Kind {
    match carrier {
        Dk::ImageTag | Dk::ImageLabel => Kind::Image,
        Dk::VolumeName
        | Dk::VolumeLabel
        | Dk::VolumeContent
        | Dk::EventHistory
        | Dk::RunnerPersistence => Kind::Volume,
        Dk::ContainerName | Dk::ContainerLabel => Kind::Container,
        Dk::NetworkName => Kind::Network,
    }
}

/// [`objects`], with `event-history`'s objects of `kind` (a volume, or a
/// network where volumes are refused).
pub(super) fn objects_of(
    ctx: &RunCtx<'_>,
    carrier: Dk,
    nonce: &Nonce,
    kind: Kind,
) -> Vec<(Entry, Role)> {
    let e = |kind: Kind, nonce: Option<&Nonce>, tags: Vec<String>| Entry {
        kind,
        name: name(ctx, carrier, kind, nonce),
        tags,
        id: None,
    };
    let latest = || vec!["latest".to_string()];
    let image = || (e(Kind::Image, None, latest()), Role::Before);
    match carrier {
        // The nonce's tag first, then `latest`.
        Dk::ImageTag => vec![(
            e(Kind::Image, None, vec![nonce_tag(nonce), "latest".into()]),
            Role::Carrier,
        )],
        Dk::ImageLabel => vec![(e(Kind::Image, None, latest()), Role::Carrier)],
        Dk::VolumeName => vec![
            (e(Kind::Volume, Some(nonce), vec![]), Role::Carrier),
            (e(Kind::Volume, None, vec![]), Role::Witness),
        ],
        Dk::VolumeLabel => vec![(e(Kind::Volume, None, vec![]), Role::Carrier)],
        // The nonce goes in through the container's archive, after all
        // three are made; the volume and the container that writes it are
        // the carrier's own (a daemon that refuses either leaves it no
        // way in but someone else's volume, which runwarden never
        // writes).
        Dk::VolumeContent => vec![
            image(),
            (e(Kind::Volume, None, vec![]), Role::Carrier),
            (e(Kind::Container, None, vec![]), Role::Carrier),
        ],
        Dk::ContainerName => vec![
            image(),
            (e(Kind::Container, Some(nonce), vec![]), Role::Carrier),
            (e(Kind::Container, None, vec![]), Role::Witness),
        ],
        Dk::ContainerLabel => vec![image(), (e(Kind::Container, None, vec![]), Role::Carrier)],
        Dk::NetworkName => vec![
            (e(Kind::Network, Some(nonce), vec![]), Role::Carrier),
            (e(Kind::Network, None, vec![]), Role::Witness),
        ],
        // Both removed at once, the nonce's first: run B reads the history
        // up to the witness's removal.
        Dk::EventHistory => vec![
            (e(kind, Some(nonce), vec![]), Role::Carrier),
            (e(kind, None, vec![]), Role::Witness),
        ],
        Dk::RunnerPersistence => vec![(
            Entry {
                kind: Kind::Volume,
                name: beacon_name(ctx.probe_id),
                tags: vec![],
                id: None,
            },
            Role::Carrier,
        )],
    }
}

/// The volume a probe's beacon is in: named for the probe alone, so that
/// a later probe's listing tells whose it is before reading it.
pub(super) fn beacon_name(probe_id: &str) -> String {
    format!("runwarden-beacon-{probe_id}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::marker::Key;
    use crate::surface::Surface;
    use crate::surface::docker_daemon::{DockerDaemon, Settings, api::Host};

    #[test]
    fn every_object_a_plant_makes_is_owned_and_no_other_probes_is() {
        // (The rule is the type's: asked of an instance that never
        // connects.)
        let d = DockerDaemon::open(Settings {
            host: Host::Unix("/nonexistent/docker.sock".into()),
            tls: None,
            control: false,
            consistency_wait_ms: 0,
        })
        .unwrap();
        let owns = |ctx: &RunCtx<'_>, e: &Entry| d.owns(ctx, e);
        let key = Key::new(Some(b"names-test-key".to_vec()));
        let ours = RunCtx {
            probe_id: "p1",
            key: &key,
            surface: "test",
        };
        let theirs = RunCtx {
            probe_id: "p2",
            key: &key,
            surface: "test",
        };
        let nonce = Nonce::generate().unwrap();
        for c in Dk::ALL {
            for (e, _) in objects(&ours, *c, &nonce) {
                assert_eq!(owns(&ours, &e), Ok(()), "{c}: {e:?}");
                assert!(owns(&theirs, &e).is_err(), "{c}: {e:?}");
                let mut other = e.clone();
                other.tags.push("v1".into());
                assert!(owns(&ours, &other).is_err(), "{c}: {other:?}");
            }
        }
        let (e, _) = objects(&ours, Dk::VolumeName, &nonce).remove(0);
        let as_network = Entry {
            kind: Kind::Network,
            ..e
        };
        assert!(owns(&ours, &as_network).is_err());
    }
}
