//! A loopback Docker daemon: the subset of the Engine API the
//! `docker-daemon` surface's carriers use (images imported from a tarball
//! and tagged, volumes, created containers with their archive, networks;
//! listings, inspects, removal), served on a unix socket in the probe's
//! control directory. It is the surface's known-open control, proven
//! against a real `dockerd` by the surface's tests.
//!
//! It negotiates like a daemon: `/_ping` and `/version` name API 1.45 and
//! a minimum of 1.24, a path under a newer version is refused with 400,
//! and every route also answers without a version prefix. Its listings can
//! lag ([`super::Knobs`]).

mod containers;
mod routes;

use crate::fault::Fault;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The API version the control speaks, and the oldest it takes.
pub const API_VERSION: (u32, u32) = (1, 45);
pub const MIN_API_VERSION: (u32, u32) = (1, 24);

#[derive(Default)]
pub struct Daemon {
    pub images: Vec<Image>,
    pub volumes: Vec<Volume>,
    pub containers: Vec<Container>,
    pub networks: Vec<Network>,
    /// What each object was made after (listings while lagging leave out
    /// what was made at or after `lag_from`).
    seq: u64,
    lag_from: Option<u64>,
    /// The event history, oldest first, as dockerd keeps it (its last
    /// [`EVENTS_KEPT`]).
    events: std::collections::VecDeque<(u64, serde_json::Value)>,
    /// A short directory for the socket when the control directory is
    /// too long for one: it lives as long as the daemon.
    _short: Option<tempfile::TempDir>,
}

pub struct Image {
    pub id: String,
    pub tags: Vec<String>,
    pub labels: BTreeMap<String, String>,
    seq: u64,
}

pub struct Volume {
    pub name: String,
    pub labels: BTreeMap<String, String>,
    /// Its files: path inside the volume -> content.
    pub files: BTreeMap<String, Vec<u8>>,
    seq: u64,
}

pub struct Container {
    pub id: String,
    pub name: String,
    pub image: String,
    pub labels: BTreeMap<String, String>,
    /// (volume name, mount target)
    pub mounts: Vec<(String, String)>,
    seq: u64,
}

pub struct Network {
    pub id: String,
    pub name: String,
    pub labels: BTreeMap<String, String>,
    seq: u64,
}

/// How many events dockerd keeps (`eventsLimit`).
const EVENTS_KEPT: usize = 256;

impl Daemon {
    fn next(&mut self) -> u64 {
        self.seq += 1;
        self.seq
    }

    /// Records an event as dockerd reports it: its type, action, the
    /// object's id and attributes (its name, its labels).
    fn event(&mut self, kind: &str, action: &str, id: &str, attributes: serde_json::Value) {
        let seq = self.next();
        let e = serde_json::json!({ "Type": kind, "Action": action, "Actor": { "ID": id, "Attributes": attributes }, "scope": "local" });
        self.events.push_back((seq, e));
        while self.events.len() > EVENTS_KEPT {
            self.events.pop_front();
        }
    }

    /// Whether a listing shows an object made at `seq`.
    fn listed(&self, seq: u64) -> bool {
        self.lag_from.is_none_or(|from| seq < from)
    }
}

impl super::Knobs for Daemon {
    fn knob(&mut self, knob: super::Knob, on: bool) -> bool {
        if knob != super::Knob::Lag {
            return false;
        }
        self.lag_from = on.then_some(self.seq + 1);
        true
    }
}

/// The control daemon: its state, served until dropped, and the socket.
pub struct DockerServer {
    service: super::Service<Daemon>,
    socket: PathBuf,
}

/// The longest socket path the kernel takes (`sun_path`, less its NUL).
const MAX_SOCKET_PATH: usize = 107;

impl DockerServer {
    /// Serves a daemon with nothing on it at `dir/docker.sock`.
    pub fn start(dir: &Path) -> Result<DockerServer, Fault> {
        std::fs::create_dir_all(dir)
            .map_err(|e| Fault::broken(format!("cannot make the control directory: {e}")))?;
        let mut socket = dir.join("docker.sock");
        let mut short = None;
        if socket.as_os_str().len() > MAX_SOCKET_PATH {
            let t = tempfile::Builder::new()
                .prefix("rw-docker-")
                .tempdir()
                .map_err(|e| Fault::broken(format!("cannot make the socket's directory: {e}")))?;
            socket = t.path().join("docker.sock");
            short = Some(t);
        }
        let server = tiny_http::Server::http_unix(&socket)
            .map_err(|e| Fault::broken(format!("cannot listen on the control socket: {e}")))?;
        // Why open to every user: run B may run as another uid, and reads
        // its control as it reads the real daemon. Another local process
        // that writes here can only make the control's plant go missing,
        // which makes the probe an error, never a pass.
        use std::os::unix::fs::PermissionsExt;
        let _ = std::fs::set_permissions(&socket, std::fs::Permissions::from_mode(0o666));
        let daemon = Daemon {
            _short: short,
            ..Daemon::default()
        };
        let service = super::Service::serve_on(server, daemon, routes::handle)?;
        Ok(DockerServer { service, socket })
    }

    pub fn socket(&self) -> &Path {
        &self.socket
    }

    pub fn lock(&self) -> std::sync::MutexGuard<'_, Daemon> {
        self.service.lock()
    }

    /// The service, for a control whose listings can lag.
    pub fn into_service(self) -> super::Service<Daemon> {
        self.service
    }
}

/// A fresh 64-hex id.
fn id() -> String {
    let a = super::secret().unwrap_or_default();
    let b = super::secret().unwrap_or_default();
    format!("{a}{b}")
}
