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

use super::carrier::{CarrierSet, carriers};
use super::{
    Carrier, CleanupOutcome, Control, JobScope, Notice, PlantJob, PlantOutcome, RUNNER_PERSISTENCE,
    RecoverOutcome, RunCtx, SurfaceType, Wanted,
};
use crate::config::{ConfigError, Options};
use crate::fault::Fault;
use crate::nonce::Nonce;
use api::{Api, Host};
use serde::{Deserialize, Serialize};
use serde_json::Value;

pub struct DockerDaemon;

carriers! {
    /// The daemon's carriers: its objects' names, labels and contents.
    enum Dk {
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
struct Settings {
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

impl SurfaceType for DockerDaemon {
    fn name(&self) -> &'static str {
        "docker-daemon"
    }

    fn description(&self) -> &'static str {
        "a Docker daemon over its socket (image tags and labels, volumes, created containers, networks; removed by id to clean up)"
    }

    fn carriers(&self) -> &'static [Carrier] {
        CARRIERS
    }

    fn keys(&self) -> &'static [&'static str] {
        &["host", "cert-path"]
    }

    fn validate(&self, mut opts: Options<'_>) -> Result<Value, ConfigError> {
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
        Ok(serde_json::to_value(Settings {
            host,
            tls: cert_path.map(|cert_path| tls::Tls { cert_path }),
            control: false,
            consistency_wait_ms: WAIT_MS,
        })
        .expect("settings serialize"))
    }

    fn warnings(&self, settings: &Value) -> Vec<String> {
        let Ok(s) = serde_json::from_value::<Settings>(settings.clone()) else {
            return vec![];
        };
        let Some(t) = s.tls else { return vec![] };
        ["ca.pem", "cert.pem", "key.pem"]
            .iter()
            .filter(|f| !t.cert_path.join(f).exists())
            .map(|f| {
                format!(
                    "{} has no {f}: TLS to the daemon needs ca.pem, cert.pem and key.pem there",
                    crate::escape::bytes(t.cert_path.as_os_str().as_encoded_bytes())
                )
            })
            .collect()
    }

    fn control(&self, _settings: &Value, dir: &std::path::Path) -> Result<Control, Fault> {
        let server = crate::loopback::docker::DockerServer::start(dir)?;
        let s = Settings {
            host: Host::Unix(server.socket().to_path_buf()),
            tls: None,
            control: true,
            consistency_wait_ms: WAIT_MS,
        };
        Ok(Control::served_listing(
            serde_json::to_value(s).expect("settings serialize"),
            server.into_service(),
        ))
    }

    fn exposures(&self, settings: &Value, carrier: &str, _env: super::Env<'_>) -> Vec<String> {
        let Ok(s) = serde_json::from_value::<Settings>(settings.clone()) else {
            return vec![];
        };
        // The address as `DOCKER_HOST` spells it (discovery names the
        // exposure so); outputs escape it.
        let host = match &s.host {
            api::Host::Unix(p) => format!("unix://{}", p.to_string_lossy()),
            api::Host::Tcp(a) => format!("tcp://{a}"),
        };
        let mut e = vec![format!("docker-socket:{host}")];
        if carrier == super::RUNNER_PERSISTENCE {
            e.push("runner-persistence".into());
        }
        e
    }

    fn facts(&self, settings: &Value) -> Vec<(&'static str, String)> {
        serde_json::from_value::<Settings>(settings.clone())
            .map(|s| {
                let tls = s.tls.map(|t| {
                    format!(
                        " (TLS, certificates from {})",
                        crate::escape::bytes(t.cert_path.as_os_str().as_encoded_bytes())
                    )
                });
                vec![(
                    "daemon",
                    format!("{}{}", s.host.shown(), tls.unwrap_or_default()),
                )]
            })
            .unwrap_or_default()
    }

    fn derive_needle(
        &self,
        carrier: &str,
        _probe_id: &str,
        nonce: &Nonce,
        _scope: Option<&JobScope>,
    ) -> Result<Value, Fault> {
        // runner-persistence looks for other probes' beacons: no needle.
        Ok(match Dk::parse(carrier) {
            Some(Dk::RunnerPersistence) => serde_json::json!({ "beacons": true }),
            _ => Value::String(nonce.hex()),
        })
    }

    fn open(&self, settings: &Value) -> Result<Box<dyn crate::surface::Instance>, Fault> {
        let s: Settings = serde_json::from_value(settings.clone())
            .map_err(|_| Fault::invalid("bad docker-daemon settings"))?;
        let api = Api::new(s.host.clone(), s.tls.as_ref())?;
        Ok(Box::new(Instance { s, api }))
    }
}

struct Instance {
    s: Settings,
    api: Api,
}

impl Instance {
    /// The daemon for people: "the control", or its address.
    fn shown(&self) -> String {
        if self.s.control {
            "the control".into()
        } else {
            self.s.host.shown()
        }
    }
}

impl crate::surface::Instance for Instance {
    fn unavailable(&self, _carrier: &str) -> Option<String> {
        None
    }

    fn identity(&self) -> Option<String> {
        // One daemon by two spellings (/var/run is /run on most systems).
        Some(match &self.s.host {
            Host::Unix(p) => format!(
                "unix://{}",
                std::fs::canonicalize(p)
                    .unwrap_or_else(|_| p.clone())
                    .display()
            ),
            Host::Tcp(a) => format!("tcp://{a}"),
        })
    }

    fn plant(
        &self,
        ctx: &RunCtx<'_>,
        job: &PlantJob,
        created: &mut dyn FnMut(Value),
    ) -> PlantOutcome {
        match Dk::of_job(job) {
            Ok(carrier) => self.plant_carrier(ctx, carrier, job, created),
            Err(o) => o,
        }
    }

    fn plant_all(
        &self,
        ctx: &RunCtx<'_>,
        jobs: &[PlantJob],
        created: &mut dyn FnMut(Value),
    ) -> Vec<PlantOutcome> {
        // event-history last: its witness then closes the stretch of the
        // history run B reads, after every other plant's events.
        let mut order: Vec<usize> = (0..jobs.len()).collect();
        order.sort_by_key(|&i| Dk::parse(&jobs[i].carrier) == Some(Dk::EventHistory));
        let mut out = vec![None; jobs.len()];
        for i in order {
            out[i] = Some(match crate::signals::received() {
                Some(sig) => super::interrupted(sig),
                None => self.plant(ctx, &jobs[i], created),
            });
        }
        out.into_iter()
            .map(|o| o.expect("every job planted"))
            .collect()
    }

    fn recover(
        &self,
        ctx: &RunCtx<'_>,
        wanted: &[Wanted],
        notice: &mut dyn FnMut(Notice),
    ) -> Vec<RecoverOutcome> {
        self.recover_carriers(ctx, wanted, notice)
    }

    fn find_planted(&self, ctx: &RunCtx<'_>, jobs: &[PlantJob]) -> Result<Vec<Value>, Fault> {
        self.find_plants(ctx, jobs)
    }

    fn owns(&self, ctx: &RunCtx<'_>, entry: &Value) -> Result<(), Fault> {
        names::owns(ctx, entry)
    }

    fn cleanup(&self, entry: &Value) -> CleanupOutcome {
        self.clean_entry(entry)
    }

    fn cleanup_all(&self, entries: &[Value]) -> Vec<CleanupOutcome> {
        self.clean_all(entries)
    }

    fn describe(&self, entry: &Value) -> String {
        match serde_json::from_value::<names::Entry>(entry.clone()) {
            Ok(e) => format!("{} on {}", e.shown(), self.shown()),
            Err(_) => "an entry that is not a docker-daemon object".into(),
        }
    }

    fn watch(&self) -> Result<&dyn super::Watchable, &'static str> {
        Ok(self)
    }
}
