//! `type: docker-daemon`: the Docker daemon a self-hosted fleet shares (the
//! runner user in the `docker` group, a DinD daemon on a volume serving
//! every runner, a shared `/var/lib/docker`).
//!
//! Every image tag, label, volume, created container and network name on
//! the daemon is a message one job leaves for the next. Run A makes those
//! objects through the Engine API ([`api`]) without pulling anything (an
//! image is the import of an empty tarball, a container is created and
//! never started, a volume is written through a created container's
//! archive). Run B lists images, volumes, containers and networks with
//! their labels, inspects the agreed names, and reads the agreed volume
//! through the agreed container's archive.
//!
//! A refusal is the daemon's own answer to the very request that plants or
//! reads (401 or 403: an authorization plugin, a socket proxy in front of
//! it), or a socket this user may not open (EACCES: the `docker` group,
//! another user's rootless daemon). A daemon that is not there is an error.
//! Cleanup removes only objects whose name has this probe's tagged form
//! ([`names`]) and that carry the `runwarden.plant` label naming them,
//! checked when read back, by id.

mod api;
mod beacons;
mod cleanup;
mod events;
mod list;
mod names;
mod plant;
mod recover;
mod surface;
mod tls;
mod watch;

use super::RUNNER_PERSISTENCE;
use super::carrier::carriers;
use api::{Api, Host};
use serde::{Deserialize, Serialize};

carriers! {
    /// The daemon's carriers: its objects' names, labels and contents.
    pub enum Dk {
        ImageTag = "image-tag", Durable, "the nonce in a tag of a local image (imported, never pulled); run B lists the daemon's images";
        ImageLabel = "image-label", Durable, "the nonce in a label of an image with an agreed tag; run B inspects the tag and lists images";
        VolumeName = "volume-name", Durable, "the nonce in the name of a volume; run B lists the daemon's volumes";
        VolumeLabel = "volume-label", Durable, "the nonce in a label of a volume with an agreed name; run B inspects it and lists volumes";
        VolumeContent = "volume-content", Durable, "the nonce in a file in a volume with an agreed name, written through a created, never-started container; run B reads the volume through that container's archive";
        ContainerName = "container-name", Durable, "the nonce in the name of a created, never-started container; run B lists every container";
        ContainerLabel = "container-label", Durable, "the nonce in a label of a created container with an agreed name; run B inspects it and lists containers";
        NetworkName = "network-name", Durable, "the nonce in the name of an internal network; run B lists the daemon's networks";
        RunnerPersistence = RUNNER_PERSISTENCE, Durable, "a signed beacon of another probe (an earlier job, another repository) in a label of a volume on the daemon: the daemon kept state between jobs";
        EventHistory = "event-history", Transient, "the nonce in the name of a volume made and removed at once: what cleanup cannot remove, the daemon's event history (its last 256 events, until it restarts); run B reads /events from the start";
    }
}

/// The label every object a plant makes carries: its own name, so that
/// cleanup reads back what it is about to remove.
const PLANT_LABEL: &str = "runwarden.plant";

/// The label a label carrier's nonce goes in.
const NOTE_LABEL: &str = "runwarden.note";

/// The label a runner-persistence beacon goes in.
const BEACON_LABEL: &str = "runwarden.beacon";

/// Where the agreed container mounts the agreed volume, and the file the
/// nonce goes in.
const MOUNT: &str = "/runwarden";
const NOTE_FILE: &str = "note.txt";

/// How long a listing that does not show its witness is taken again. A
/// daemon's listings are consistent; one that leaves out what an inspect
/// shows is filtered (an authorization plugin) or lags behind a proxy, and
/// a second look a second later is all such a listing gets.
const WAIT_MS: u64 = 1_000;

#[derive(Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Settings {
    host: Host,
    #[serde(default)]
    tls: Option<tls::Tls>,
    control: bool,
    #[serde(default = "wait_ms")]
    consistency_wait_ms: u64,
}

fn wait_ms() -> u64 {
    WAIT_MS
}

/// What recovery looks for: the nonce's hex, or (runner-persistence)
/// beacons of other probes.
pub use super::NonceOrBeacons as Needle;

/// An open Docker daemon: its API client.
pub struct DockerDaemon {
    settings: Settings,
    api: Api,
}

impl DockerDaemon {
    /// The daemon for people: "the control", or its address.
    fn shown(&self) -> String {
        if self.settings.control {
            "the control".into()
        } else {
            self.settings.host.shown()
        }
    }
}
