//! The docker-daemon surface type's operations: its config and settings,
//! its control, the plant of each carrier (event-history's last), recovery,
//! the ownership rule, cleanup (by receipt and by probe id), and watch
//! mode's listing of objects and the carriers of a change.

use super::api::{Api, Failure, Host};
use super::cleanup::ours;
use super::list::{self, Item};
use super::names::{self, Entry, Kind, Role, beacon_name, named_by_nonce};
use super::plant::{Made, Outcome};
use super::recover::{Listed, from_history, from_listing, named, verdict, wants_of};
use super::recover::{ROUTES, route_of};
use super::watch::{LABELS, no_labels};
use super::{BEACON_LABEL, Dk, DockerDaemon, NOTE_LABEL, Needle, Settings, WAIT_MS};
use crate::config::{ConfigError, Options};
use crate::fault::Fault;
use crate::marker::Checked;
use crate::state::diff::{Before, Change, ChangeKind};
use crate::state::snapshot::{Sink, SnapshotError, WatchCtx, component, emit_sorted, listed};
use crate::surface::carrier::CarrierSet;
use crate::surface::listing::until_current;
use crate::surface::{
    About, CleanupOutcome, Control, Job, Journal, Notice, RecoverOutcome, RunCtx, Want, Watch,
};
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::time::Duration;

impl crate::surface::Surface for DockerDaemon {
    const NAME: &'static str = "docker-daemon";
    const DESCRIPTION: &'static str = "a Docker daemon over its socket (image tags and labels, volumes, created containers, networks; removed by id to clean up)";
    const KEYS: &'static [&'static str] = &["host", "cert-path"];
    const WATCH: Watch<Dk> = Watch::Yes {
        unwatched: super::watch::UNWATCHED,
        changes: changes_of,
    };
    // event-history last: its witness then closes the stretch of the
    // history run B reads, after every other plant's events.
    const PLANTED_LAST: &'static [Dk] = &[Dk::EventHistory];

    const ROUTES: &'static [crate::surface::routes::Route<Dk>] = ROUTES;
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
            tls: cert_path.map(|cert_path| super::tls::Tls { cert_path }),
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
        Ok(Control::served_with_knobs(s, server.into_service()))
    }

    fn open(settings: Settings) -> Result<DockerDaemon, Fault> {
        let api = Api::new(settings.host.clone(), settings.tls.as_ref())?;
        Ok(DockerDaemon { settings, api })
    }

    /// Run A: the objects of one carrier ([`names::objects`]), each
    /// journalled before the request that creates it (and again with the id
    /// the daemon gave it), and taken back only when the daemon's answer says
    /// nothing was made.
    ///
    /// Only a refusal of a request that puts the nonce in place is the
    /// carrier's ([`Role::Carrier`]), and a socket this user may not open
    /// (which refuses every request alike). A refusal of a step before it is
    /// an error, but for a container's image: where imports are refused, the
    /// container is made from an image already on the daemon, as a sender
    /// with every means would. `event-history` tries networks where volumes
    /// are refused.
    fn plant_one(
        &self,
        ctx: &RunCtx<'_>,
        job: &Job<Dk>,
        journal: &mut Journal<'_, Entry>,
    ) -> Outcome {
        let carrier = job.carrier;
        let mut objects = names::objects(ctx, carrier, &job.nonce);
        // event-history's objects can be of any kind: networks where
        // volumes are refused.
        // (The volumes' refusal, once networks are tried instead.)
        let mut refused_first: Option<String> = None;
        let mut fallback = carrier == Dk::EventHistory;
        let hex = job.nonce.hex();
        let mut made: Vec<Entry> = vec![];
        let mut image: Option<String> = None;
        let mut i = 0;
        while i < objects.len() {
            let (e, role) = objects[i].clone();
            let note = match (carrier, e.kind) {
                (Dk::ImageLabel, Kind::Image)
                | (Dk::VolumeLabel, Kind::Volume)
                | (Dk::ContainerLabel, Kind::Container) => Some((NOTE_LABEL, hex.as_str())),
                (Dk::RunnerPersistence, _) => match &job.beacon {
                    Some(b) => Some((BEACON_LABEL, b.as_str())),
                    None => {
                        return Outcome::Error {
                            reason: "no beacon to plant".into(),
                        };
                    }
                },
                _ => None,
            };
            let volume = made
                .iter()
                .find(|m| m.kind == Kind::Volume)
                .map(|m| m.name.clone());
            match self.create(&e, note, image.as_deref(), volume.as_deref(), journal) {
                Err(stop) => return stop,
                Ok(Made::Yes(id)) => {
                    if e.kind == Kind::Image {
                        image = id.clone().or_else(|| Some(format!("{}:latest", e.name)));
                    }
                    made.push(Entry { id, ..e });
                }
                Ok(Made::Refused(why)) if fallback && role == Role::Carrier => {
                    fallback = false;
                    refused_first = Some(why);
                    objects = names::objects_of(ctx, carrier, &job.nonce, Kind::Network);
                    made.clear();
                    i = 0;
                    continue;
                }
                Ok(Made::Refused(why)) if role == Role::Carrier => {
                    let reason = match refused_first.take() {
                        Some(first) => format!("{first}; {why}"),
                        None => why,
                    };
                    return Outcome::Refused { reason };
                }
                Ok(Made::Refused(why)) if e.kind == Kind::Image => match self.any_image() {
                    Ok(Some(id)) => image = Some(id),
                    Ok(None) => {
                        return Outcome::Error {
                            reason: format!(
                                "{why}, and the daemon holds no image to create the container from: the carrier was not tried"
                            ),
                        };
                    }
                    Err(f) => {
                        return Outcome::Error {
                            reason: format!("{why}; listing the images: {}", f.fault()),
                        };
                    }
                },
                Ok(Made::Refused(why)) => {
                    return Outcome::Error {
                        reason: format!(
                            "{why}: a step before the plant (or its witness), not the carrier itself"
                        ),
                    };
                }
            }
            i += 1;
        }
        if carrier == Dk::VolumeContent {
            let container = &made.last().expect("volume-content makes a container").name;
            if let Err(stop) = self.write_note(container, &hex) {
                return stop;
            }
        }
        if carrier == Dk::EventHistory
            && let Err(stop) = self.remove_now(&made, journal)
        {
            return stop;
        }
        self.planted(carrier, job, &made)
    }

    /// Run B: every route a wanted carrier has, each read once and searched
    /// for every wanted nonce, then one verdict per carrier from its routes
    /// ([`Route`](super::recover::Route)): found by any is FOUND; a route that
    /// broke, or a listing not shown current, is ERROR; refused by all is
    /// DENIED; else NOT FOUND.
    fn recover(
        &self,
        ctx: &RunCtx<'_>,
        wanted: &[Want<Dk, Needle>],
        notice: &mut dyn FnMut(Notice),
    ) -> Vec<crate::surface::routes::Recovered> {
        crate::surface::routes::through(wanted.iter().map(|w| w.carrier), route_of, || {
            let mut out: Vec<Option<RecoverOutcome>> = vec![None; wanted.len()];
            let wants = wants_of(ctx, wanted, &mut out);
            // (runner-persistence has no needle: one no text holds.)
            let needles: Vec<&str> = wants
                .iter()
                .map(|w| {
                    if w.hex.is_empty() {
                        "\u{0}"
                    } else {
                        w.hex.as_str()
                    }
                })
                .collect();
            // The witnesses of the name carriers that exist (an inspect shows
            // them), and this probe's own beacon: what every listing of their
            // kind must show.
            let witnesses: Vec<(Kind, String)> = wants
                .iter()
                .filter(|w| named(w.carrier) || w.carrier == Dk::RunnerPersistence)
                .filter(|w| {
                    matches!(
                        list::inspect(&self.api, names::carrier_kind(w.carrier), &w.agreed),
                        Ok(Some(_))
                    )
                })
                .map(|w| (names::carrier_kind(w.carrier), w.agreed.clone()))
                .collect();
            let wait = Duration::from_millis(self.settings.consistency_wait_ms);
            let kinds: Vec<Kind> = wants
                .iter()
                .map(|w| names::carrier_kind(w.carrier))
                .collect();
            let mut listed: BTreeMap<&'static str, Listed> = BTreeMap::new();
            for kind in [Kind::Image, Kind::Volume, Kind::Container, Kind::Network] {
                if kinds.contains(&kind) {
                    let mine: Vec<String> = witnesses
                        .iter()
                        .filter(|(k, _)| *k == kind)
                        .map(|(_, n)| n.clone())
                        .collect();
                    let l = until_current(wait, || {
                        self.look(&needles, &mine, |each| list::list(&self.api, kind, each))
                    });
                    listed.insert(kind.as_str(), l);
                }
            }
            let df_witnesses: Vec<String> = witnesses
                .iter()
                .filter(|(k, _)| *k != Kind::Network)
                .map(|(_, n)| n.clone())
                .collect();
            let df = kinds.iter().any(|k| *k != Kind::Network).then(|| {
                until_current(wait, || {
                    self.look(&needles, &df_witnesses, |each| {
                        list::disk_usage(&self.api, each)
                    })
                })
            });
            let history = wants
                .iter()
                .any(|w| w.carrier == Dk::EventHistory)
                .then(|| {
                    let witness = [Kind::Volume, Kind::Network]
                        .map(|k| names::name(ctx, Dk::EventHistory, k, None));
                    super::events::read(&self.api, &needles, &witness)
                });
            for (i, w) in wants.iter().enumerate() {
                let mut routes = vec![];
                let kind = names::carrier_kind(w.carrier);
                match w.carrier {
                    Dk::VolumeContent => routes.push(self.read_volume(ctx, &w.hex)),
                    Dk::EventHistory => {}
                    Dk::RunnerPersistence => {
                        out[w.at] = Some(super::beacons::outcome(ctx, &listed["volume"], notice));
                        continue;
                    }
                    c => {
                        if !named(c) || c == Dk::ImageTag {
                            routes.push(self.by_name(w, kind));
                        }
                        let own = &listed[kind.as_str()];
                        routes.push(from_listing(
                            own,
                            i,
                            w,
                            &format!("the {}s listing", kind.as_str()),
                        ));
                        if let Some(df) = df.as_ref().filter(|_| kind != Kind::Network) {
                            routes.push(from_listing(df, i, w, "the disk-usage listing"));
                        }
                    }
                }
                if w.carrier != Dk::VolumeContent
                    && let Some(h) = &history
                {
                    routes.push(from_history(h, i));
                }
                out[w.at] = Some(verdict(routes));
            }
            crate::surface::all_outcomes(out)
        })
    }

    /// Whether `entry` is provably this probe's own: an [`Entry`] and nothing
    /// else, whose name is the tagged name a plant of its carrier gives an
    /// object of its kind, with the tags only that plant sets. `Invalid`
    /// otherwise.
    fn owns(&self, ctx: &RunCtx<'_>, e: &Entry) -> Result<(), Fault> {
        if e.name == beacon_name(ctx.probe_id) {
            return (e.kind == Kind::Volume && e.tags.is_empty() && e.id.is_none())
                .then_some(())
                .ok_or_else(|| Fault::invalid("not the volume a beacon plant makes"));
        }
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
                | (Dk::NetworkName | Dk::EventHistory, Kind::Network)
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
        if !tags_ok {
            return Err(Fault::invalid("its tags are not the ones a plant sets"));
        }
        let id_ok = match (&e.id, e.kind) {
            (None, _) => true,
            (Some(_), Kind::Volume) => false,
            (Some(id), Kind::Image) => id
                .strip_prefix("sha256:")
                .is_some_and(|h| crate::surface::lower_hex(h, 64)),
            (Some(id), _) => crate::surface::lower_hex(id, 64),
        };
        id_ok
            .then_some(())
            .ok_or_else(|| Fault::invalid("its id is not one the daemon gives"))
    }

    /// The journal, with each object's first entry (journalled before
    /// its create) superseded by the one with the id the daemon gave it.
    /// (Retractions and what they took back are set aside by the kernel.)
    fn clean(&self, entries: &[Entry]) -> Vec<CleanupOutcome> {
        let recorded: Vec<(Kind, &str)> = entries
            .iter()
            .filter(|e| e.id.is_some())
            .map(|e| (e.kind, e.name.as_str()))
            .collect();
        entries
            .iter()
            .map(|e| match e.kind {
                _ if e.id.is_none() && recorded.contains(&(e.kind, e.name.as_str())) => {
                    CleanupOutcome::Superseded
                }
                Kind::Image => self.untag(e),
                _ => self.remove(e),
            })
            .collect()
    }

    fn find(
        &self,
        ctx: &RunCtx<'_>,
        jobs: &[Job<Dk>],
    ) -> Result<crate::surface::Found<Entry>, Fault> {
        let mut found = vec![];
        for j in jobs {
            let carrier = j.carrier;
            let mut objects = names::objects(ctx, carrier, &j.nonce);
            if carrier == Dk::EventHistory {
                // (Removed when planted; a plant killed halfway may have
                // left either kind.)
                objects.extend(names::objects_of(ctx, carrier, &j.nonce, Kind::Network));
            }
            for (e, _) in objects {
                let look = match e.kind {
                    Kind::Image => e.references(),
                    _ => vec![e.name.clone()],
                };
                for r in look {
                    let item = list::inspect(&self.api, e.kind, &r).map_err(Failure::fault)?;
                    // A beacon's volume is named for the probe alone (no
                    // tag): only a valid beacon of this probe in its label
                    // shows it is the plant's, as on a filesystem.
                    let proven = |i: &Item| {
                        carrier != Dk::RunnerPersistence
                            || i.labels.get(BEACON_LABEL).is_some_and(|b| {
                                matches!(ctx.key.check_beacon(b.as_bytes()),
                                    Checked::Valid(body) if body.probe_id == ctx.probe_id)
                            })
                    };
                    if let Some(i) = item.filter(|i| ours(i, &e) && proven(i)) {
                        let id = (e.kind != Kind::Volume && !i.id.is_empty()).then_some(i.id);
                        found.push(Entry { id, ..e });
                        break;
                    }
                }
            }
        }
        // Newest first, as cleanup takes a journal: a container before its
        // image and volume.
        found.reverse();
        Ok(found.into())
    }

    /// Watch mode: the daemon's objects as its listings show them (every
    /// image tag, dangling images by id, volumes, containers and networks
    /// by name, each with its id and a digest of its labels): every object
    /// of every listing, sorted and streamed to `sink`.
    fn snapshot(&self, _ctx: &WatchCtx, sink: &mut Sink<'_>) -> Result<(), SnapshotError> {
        let mut all: Vec<crate::state::snapshot::Entry> = Vec::new();
        for kind in [Kind::Image, Kind::Volume, Kind::Container, Kind::Network] {
            super::list::list(&self.api, kind, &mut |item| {
                let labels = serde_json::to_vec(&item.labels).unwrap_or_default();
                let attrs = [
                    ("id", item.id.clone()),
                    (
                        LABELS,
                        crate::state::snapshot::hex(Sha256::new_with_prefix(&labels)),
                    ),
                ];
                // A dangling image is known by its id alone.
                let names = if item.names.is_empty() {
                    vec![item.id.clone()]
                } else {
                    item.names.clone()
                };
                for n in names {
                    all.push(listed(
                        vec![kind.as_str().into(), component(n.as_bytes())],
                        kind.as_str(),
                        &attrs,
                    ));
                }
            })
            .map_err(|f| SnapshotError::Failed(f.fault().to_string()))?;
        }
        emit_sorted(all, sink)
    }
}

/// A new or removed object carries its name (an image's, its tag) and,
/// with labels, its labels; a change of labels the label carrier; an
/// image tag moved to another image the tag carrier.
fn changes_of(c: &Change, _before: &Before) -> Vec<Dk> {
    let e = c.entry();
    let (name, label) = match e.key.first().map(String::as_str) {
        Some("image") => (Dk::ImageTag, Dk::ImageLabel),
        Some("volume") => (Dk::VolumeName, Dk::VolumeLabel),
        Some("container") => (Dk::ContainerName, Dk::ContainerLabel),
        Some("network") => (Dk::NetworkName, Dk::NetworkName),
        _ => return vec![],
    };
    let labelled = e.attrs.get(LABELS).is_some_and(|l| *l != no_labels());
    let mut out = vec![];
    match &c.kind {
        ChangeKind::Created | ChangeKind::Removed | ChangeKind::Renamed(_) => {
            out.push(name);
            if labelled {
                out.push(label);
            }
        }
        ChangeKind::Changed(attrs) => {
            if attrs.iter().any(|a| a == "id") {
                out.push(name);
            }
            if attrs.iter().any(|a| a == LABELS) {
                out.push(label);
            }
        }
    }
    out
}
