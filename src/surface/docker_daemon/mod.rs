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
mod tls;
mod watch;

use super::carrier::carriers;
use super::{
    About, CleanupOutcome, Control, Job, Journal, Notice, PlantOutcome, RUNNER_PERSISTENCE,
    RecoverOutcome, RunCtx, Want, Watch,
};
use crate::config::{ConfigError, Options};
use crate::fault::Fault;
use crate::nonce::Nonce;
use crate::state::diff::{Before, Change};
use crate::state::snapshot::{Sink, SnapshotError, WatchCtx};
use api::{Api, Host};
use names::Entry;
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
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Needle {
    Nonce(Nonce),
    Beacons { beacons: bool },
}

impl super::Needle for Needle {
    fn of_nonce(nonce: &Nonce) -> Option<Needle> {
        Some(Needle::Nonce(*nonce))
    }
}

/// An open Docker daemon: its API client.
pub struct DockerDaemon {
    settings: Settings,
    api: Api,
}

impl super::Surface for DockerDaemon {
    const NAME: &'static str = "docker-daemon";
    const DESCRIPTION: &'static str = "a Docker daemon over its socket (image tags and labels, volumes, created containers, networks; removed by id to clean up)";
    const KEYS: &'static [&'static str] = &["host", "cert-path"];
    const WATCH: Watch<Dk> = Watch::Yes {
        unwatched: watch::UNWATCHED,
    };
    type Carrier = Dk;
    type Settings = Settings;
    type Entry = Entry;
    type Needle = Needle;

    fn validate(mut opts: Options<'_>) -> Result<Settings, ConfigError> {
        // Why resolved here: DOCKER_HOST, DOCKER_TLS_VERIFY and
        // DOCKER_CERT_PATH live in the caller's whole environment, and
        // runs A and B get a cut one.
        let (text, pos) = match opts.string("host")? {
            Some((h, pos)) => (h, pos),
            None => (
                opts.env("DOCKER_HOST")
                    .unwrap_or_else(|| "unix:///var/run/docker.sock".into()),
                opts.entry_pos(),
            ),
        };
        let host = Host::parse(&text).map_err(|f| opts.error(pos, format!("`host`: {f}")))?;
        let cert_path = match opts.string("cert-path")? {
            Some((_, at)) if matches!(host, Host::Unix(_)) => {
                return Err(opts.error(
                    at,
                    "`cert-path` is for a daemon on tcp://, not a unix socket",
                ));
            }
            Some((dir, _)) => Some(std::path::PathBuf::from(dir)),
            // As the docker CLI does: DOCKER_TLS_VERIFY turns TLS on for a
            // tcp:// daemon, with the certificates of DOCKER_CERT_PATH,
            // else ~/.docker.
            None if matches!(host, Host::Tcp(_)) && opts.env("DOCKER_TLS_VERIFY").is_some() => {
                match opts
                    .env("DOCKER_CERT_PATH")
                    .or_else(|| opts.env("HOME").map(|h| format!("{h}/.docker")))
                {
                    Some(d) => Some(std::path::PathBuf::from(d)),
                    None => {
                        return Err(opts.error(pos, "DOCKER_TLS_VERIFY is set, but neither DOCKER_CERT_PATH nor HOME says where the certificates are: give `cert-path:`"));
                    }
                }
            }
            None => None,
        };
        Ok(Settings {
            host,
            tls: cert_path.map(|cert_path| tls::Tls { cert_path }),
            control: false,
            consistency_wait_ms: WAIT_MS,
        })
    }

    fn about(s: &Settings) -> About<Dk> {
        let shown = if s.control {
            "the control".to_string()
        } else {
            s.host.shown()
        };
        let tls = s.tls.as_ref().map(|t| {
            format!(
                " (TLS, certificates from {})",
                crate::escape::bytes(t.cert_path.as_os_str().as_encoded_bytes())
            )
        });
        // The address as `DOCKER_HOST` spells it (discovery names the
        // exposure so); outputs escape it.
        let host = match &s.host {
            Host::Unix(p) => format!("unix://{}", p.to_string_lossy()),
            Host::Tcp(a) => format!("tcp://{a}"),
        };
        let mut about = About::new(format!("on {shown}"))
            .fact(
                "daemon",
                format!("{}{}", s.host.shown(), tls.unwrap_or_default()),
            )
            .exposure(format!("docker-socket:{host}"))
            // One daemon by two spellings (/var/run is /run on most
            // systems).
            .identity(Some(match &s.host {
                Host::Unix(p) => format!(
                    "unix://{}",
                    std::fs::canonicalize(p)
                        .unwrap_or_else(|_| p.clone())
                        .display()
                ),
                Host::Tcp(a) => format!("tcp://{a}"),
            }));
        if let Some(t) = &s.tls {
            for f in ["ca.pem", "cert.pem", "key.pem"] {
                if !t.cert_path.join(f).exists() {
                    about = about.warning(format!(
                        "{} has no {f}: TLS to the daemon needs ca.pem, cert.pem and key.pem there",
                        crate::escape::bytes(t.cert_path.as_os_str().as_encoded_bytes())
                    ));
                }
            }
        }
        about
    }

    fn control(
        _like: Option<&Settings>,
        dir: &std::path::Path,
    ) -> Result<Control<Settings>, Fault> {
        let server = crate::loopback::docker::DockerServer::start(dir)?;
        let s = Settings {
            host: Host::Unix(server.socket().to_path_buf()),
            tls: None,
            control: true,
            consistency_wait_ms: WAIT_MS,
        };
        Ok(Control::served_listing(s, server.into_service()))
    }

    fn open(settings: Settings) -> Result<DockerDaemon, Fault> {
        let api = Api::new(settings.host.clone(), settings.tls.as_ref())?;
        Ok(DockerDaemon { settings, api })
    }

    fn plant(
        &self,
        ctx: &RunCtx<'_>,
        jobs: &[Job<Dk>],
        journal: &mut Journal<'_, Entry>,
    ) -> Vec<PlantOutcome<Needle>> {
        // event-history last: its witness then closes the stretch of the
        // history run B reads, after every other plant's events.
        let mut order: Vec<usize> = (0..jobs.len()).collect();
        order.sort_by_key(|&i| jobs[i].carrier == Dk::EventHistory);
        let mut out = vec![None; jobs.len()];
        for i in order {
            out[i] = Some(match crate::signals::received() {
                Some(sig) => super::interrupted(sig),
                None => self.plant_one(ctx, &jobs[i], journal),
            });
        }
        out.into_iter()
            .map(|o| o.expect("every job planted"))
            .collect()
    }

    fn recover(
        &self,
        ctx: &RunCtx<'_>,
        wanted: &[Want<Dk, Needle>],
        notice: &mut dyn FnMut(Notice),
    ) -> Vec<RecoverOutcome> {
        self.recover_carriers(ctx, wanted, notice)
    }

    fn owns(&self, ctx: &RunCtx<'_>, entry: &Entry) -> Result<(), Fault> {
        names::owns(ctx, entry)
    }

    fn clean(&self, entries: &[Entry]) -> Vec<CleanupOutcome> {
        self.clean_all(entries)
    }

    fn find(&self, ctx: &RunCtx<'_>, jobs: &[Job<Dk>]) -> Result<Vec<Entry>, Fault> {
        self.find_plants(ctx, jobs)
    }

    fn snapshot(&self, _ctx: &WatchCtx, sink: &mut Sink<'_>) -> Result<(), SnapshotError> {
        self.snapshot_objects(sink)
    }

    fn changes(change: &Change, before: &Before) -> Vec<Dk> {
        watch::carriers_of(change, before)
    }
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
