//! Run A's requests: one object created (an image by import), each
//! journalled before the request and again with the id the daemon gave
//! it, the daemon's answer to a create read, an image already on the
//! daemon found, the volume's note written, what a plant made removed at
//! once, and what a plant reports.

use super::api::{Body, Failure, Reply, class, q};
use super::names::{Entry, Kind};
use super::{Dk, DockerDaemon, MOUNT, NOTE_FILE, Needle, PLANT_LABEL};
use crate::http::answer::Class;
use crate::surface::{Job, Journal, PlantOutcome};
use serde_json::{Value, json};

/// What planting one carrier did, with the daemon's needle.
pub(super) type Outcome = PlantOutcome<Needle>;

/// Why a plant stopped: its outcome.
type Stop = Outcome;

/// What the daemon answered a create with.
pub(super) enum Made {
    /// Made, with its id when the daemon gave one.
    Yes(Option<String>),
    /// Refused by the daemon's access control (401, 403), with why.
    Refused(String),
}

impl DockerDaemon {
    /// What a plant of `carrier` (`job`) that made `made` reports: its
    /// needle, and what it made.
    pub(super) fn planted(&self, carrier: Dk, job: &Job<Dk>, made: &[Entry]) -> Outcome {
        let shown: Vec<String> = made.iter().map(Entry::shown).collect();
        let needle = match carrier {
            Dk::RunnerPersistence => Needle::Beacons { beacons: true },
            _ => Needle::Nonce(job.nonce),
        };
        Outcome::Planted {
            needle,
            persistence: None,
            detail: format!(
                "made {}{} on {}",
                shown.join(", "),
                if carrier == Dk::EventHistory {
                    " and removed them"
                } else {
                    ""
                },
                self.shown()
            ),
        }
    }

    /// event-history's objects, removed at once (the nonce's first): what
    /// stays is the history. Taken back out of the journal once removed:
    /// cleanup has nothing to do.
    pub(super) fn remove_now(
        &self,
        made: &[Entry],
        journal: &mut Journal<'_, Entry>,
    ) -> Result<(), Stop> {
        for m in made {
            let path = match m.kind {
                Kind::Network => format!("/networks/{}", q(m.id.as_deref().unwrap_or(&m.name))),
                _ => format!("/volumes/{}", q(&m.name)),
            };
            let reason = match self.api.call("DELETE", &path, Body::None) {
                Ok(r) if r.ok() || r.status == 404 => {
                    journal.retract(m);
                    continue;
                }
                Ok(r) => r.message(),
                Err(f) => f.fault().to_string(),
            };
            return Err(Outcome::Error {
                reason: format!("removing {}: {reason}", m.shown()),
            });
        }
        Ok(())
    }

    /// The id of some image on the daemon, for a container where imports
    /// are refused.
    pub(super) fn any_image(&self) -> Result<Option<String>, Failure> {
        let mut first = None;
        super::list::list(&self.api, Kind::Image, &mut |item| {
            if first.is_none() && !item.id.is_empty() {
                first = Some(item.id);
            }
        })?;
        Ok(first)
    }

    /// Creates one object: journalled first (and again with its id),
    /// retracted when the daemon's answer says it made nothing.
    pub(super) fn create(
        &self,
        e: &Entry,
        note: Option<(&str, &str)>,
        image: Option<&str>,
        volume: Option<&str>,
        journal: &mut Journal<'_, Entry>,
    ) -> Result<Made, Stop> {
        let mut labels = json!({ PLANT_LABEL: e.name });
        if let Some((k, v)) = note {
            labels[k] = json!(v);
        }
        journal.record(e);
        let what = format!("creating {}", e.shown());
        let answer = match e.kind {
            Kind::Image => return self.import(e, &labels, journal),
            Kind::Volume => self.api.call(
                "POST",
                "/volumes/create",
                Body::Json(&json!({ "Name": e.name, "Labels": labels })),
            ),
            Kind::Container => {
                let body = json!({
                    "Image": image.unwrap_or_default(),
                    // Never started: the command only has to be named.
                    "Cmd": ["/runwarden-never-started"],
                    "Labels": labels,
                    "NetworkDisabled": true,
                    "HostConfig": { "Mounts": volume.map(|v| vec![json!({ "Type": "volume", "Source": v, "Target": MOUNT })]).unwrap_or_default() },
                });
                self.api.call("POST", &format!("/containers/create?name={}", q(&e.name)), Body::Json(&body))
            }
            // Internal: a network nothing can route out of, made only for
            // its name.
            Kind::Network => self.api.call(
                "POST",
                "/networks/create",
                Body::Json(&json!({ "Name": e.name, "Labels": labels, "Internal": true, "CheckDuplicate": true })),
            ),
        };
        let r = self.answered(answer, &what, e, journal)?;
        if let Some(why) = r.refusal {
            return Ok(Made::Refused(why));
        }
        let reply = r.reply.expect("an answer that is no refusal");
        let id = match e.kind {
            // A volume create answers 201 for a name that exists already
            // (and changes nothing): one that comes back without this
            // plant's label was someone else's, and is taken back.
            Kind::Volume => {
                let v = reply
                    .json()
                    .map_err(|f| Outcome::Error { reason: f.into() })?;
                if v["Labels"][PLANT_LABEL].as_str() != Some(e.name.as_str()) {
                    journal.retract(e);
                    return Err(Outcome::Error {
                        reason: format!("{} exists already and is not this plant's", e.shown()),
                    });
                }
                None
            }
            _ => reply
                .json()
                .ok()
                .and_then(|v| v["Id"].as_str().map(str::to_string)),
        };
        if id.is_some() {
            journal.record(&Entry {
                id: id.clone(),
                ..e.clone()
            });
        }
        Ok(Made::Yes(id))
    }

    /// The daemon's answer to a create: a refusal (401, 403, a socket this
    /// user may not open), an answer that made it, or the stop for one
    /// that failed (retracted when a 4xx says nothing was made; a 5xx may
    /// come after it was, so its entry stays journalled).
    fn answered(
        &self,
        answer: Result<Reply, Failure>,
        what: &str,
        entry: &Entry,
        journal: &mut Journal<'_, Entry>,
    ) -> Result<Answered, Stop> {
        let mut retract = || journal.retract(entry);
        match answer {
            // The socket refuses every request alike, the carrier's too.
            Err(Failure::Denied(reason)) => {
                retract();
                Err(Outcome::Refused { reason })
            }
            Err(Failure::Fault(f)) => Err(Outcome::Error {
                reason: format!("{what}: {f}"),
            }),
            Ok(r) if class(r.status) == Class::Refused => {
                retract();
                Ok(Answered {
                    refusal: Some(format!("the daemon refused {what} ({})", r.message())),
                    reply: None,
                })
            }
            // (A 409: the name is someone else's object, which cleanup
            // must never touch.)
            Ok(r) if (400..500).contains(&r.status) => {
                retract();
                Err(Outcome::Error {
                    reason: format!("{what}: {}", r.message()),
                })
            }
            Ok(r) if !r.ok() => Err(Outcome::Error {
                reason: format!("{what}: {}", r.message()),
            }),
            Ok(r) => Ok(Answered {
                refusal: None,
                reply: Some(r),
            }),
        }
    }

    /// An image from an empty tarball (nothing is pulled), with its labels,
    /// then its other tags. The import answers 200 and streams progress:
    /// an error is a line of that stream, the id its last status.
    fn import(
        &self,
        e: &Entry,
        labels: &Value,
        journal: &mut Journal<'_, Entry>,
    ) -> Result<Made, Stop> {
        let what = format!("importing {}", e.shown());
        let first = e.tags.first().map(String::as_str).unwrap_or("latest");
        // An import moves a tag that exists onto the new image: a tag of
        // this name on any image (someone else's, or an earlier plant's)
        // is left where it is, and nothing is made.
        for r in e.references() {
            match super::list::inspect(&self.api, Kind::Image, &r) {
                Ok(None) => {}
                Ok(Some(_)) => {
                    journal.retract(e);
                    return Err(Outcome::Error {
                        reason: format!(
                            "an image tagged {} exists already",
                            crate::escape::bytes(r.as_bytes())
                        ),
                    });
                }
                // A look refused (an authorization plugin that allows
                // imports but not inspects, or a socket this user may not
                // open): the import's own answer decides.
                Err(Failure::Denied(_)) => break,
                Err(Failure::Fault(f)) => {
                    return Err(Outcome::Error {
                        reason: format!(
                            "looking for an image tagged {} first: {f}",
                            crate::escape::bytes(r.as_bytes()),
                        ),
                    });
                }
            }
        }
        let mut path = format!(
            "/images/create?fromSrc=-&repo={}&tag={}",
            q(&e.name),
            q(first)
        );
        for (k, v) in labels.as_object().into_iter().flatten() {
            let v = v.as_str().unwrap_or_default();
            path.push_str(&format!("&changes={}", q(&format!("LABEL {k}={v}"))));
        }
        let answer = self
            .api
            .call("POST", &path, Body::Tar(crate::archive::tar(&[])));
        let r = self.answered(answer, &what, e, journal)?;
        if let Some(why) = r.refusal {
            return Ok(Made::Refused(why));
        }
        let body = r.reply.expect("an answer that is no refusal").body;
        let (id, error) = progress(&body);
        if let Some(error) = error {
            return Err(Outcome::Error {
                reason: format!("{what}: {error}"),
            });
        }
        if id.is_some() {
            journal.record(&Entry {
                id: id.clone(),
                ..e.clone()
            });
        }
        // The image exists from here on: a tag refused or failed leaves it
        // journalled, for cleanup.
        for t in e.tags.iter().skip(1) {
            let path = format!(
                "/images/{}/tag?repo={}&tag={}",
                q(&format!("{}:{first}", e.name)),
                q(&e.name),
                q(t)
            );
            let tag_what = format!("tagging it {}", crate::escape::bytes(t.as_bytes()));
            match self.api.call("POST", &path, Body::None) {
                Ok(t) if t.ok() => {}
                Ok(t) => {
                    return Err(Outcome::Error {
                        reason: format!("{what}, then {tag_what}: {}", t.message()),
                    });
                }
                Err(f) => {
                    return Err(Outcome::Error {
                        reason: format!("{what}, then {tag_what}: {}", f.fault()),
                    });
                }
            }
        }
        Ok(Made::Yes(id))
    }

    /// The nonce, as a file, into the agreed volume through the agreed
    /// container's archive (the daemon writes it; nothing runs): the
    /// volume-content carrier's own request.
    pub(super) fn write_note(&self, container: &str, hex: &str) -> Result<(), Stop> {
        let body = format!("{hex}\n");
        let tar = crate::archive::tar(&[(NOTE_FILE, body.as_bytes())]);
        let path = format!("/containers/{}/archive?path={}", q(container), q(MOUNT));
        match self.api.call("PUT", &path, Body::Tar(tar)) {
            Err(Failure::Denied(reason)) => Err(Outcome::Refused { reason }),
            Err(Failure::Fault(f)) => Err(Outcome::Error {
                reason: format!("writing into the volume: {f}"),
            }),
            Ok(r) if class(r.status) == Class::Refused => Err(Outcome::Refused {
                reason: format!(
                    "the daemon refused writing into the volume ({})",
                    r.message()
                ),
            }),
            Ok(r) if !r.ok() => Err(Outcome::Error {
                reason: format!("writing into the volume: {}", r.message()),
            }),
            Ok(_) => Ok(()),
        }
    }
}

/// A create's answer that did not stop the plant: a refusal, or the reply.
struct Answered {
    refusal: Option<String>,
    reply: Option<Reply>,
}

/// An import's progress stream (JSON values, one after another): the id
/// its status names (`sha256:…`), and the first error it reports, escaped.
fn progress(body: &[u8]) -> (Option<String>, Option<String>) {
    let mut id = None;
    for v in serde_json::Deserializer::from_slice(body).into_iter::<Value>() {
        let Ok(v) = v else {
            return (id, Some("the daemon's progress stream is not JSON".into()));
        };
        if let Some(m) = v["error"].as_str().or(v["errorDetail"]["message"].as_str()) {
            let m: String = m.chars().take(200).collect();
            return (id, Some(crate::escape::bytes(m.as_bytes())));
        }
        if let Some(s) = v["status"].as_str().filter(|s| s.starts_with("sha256:")) {
            id = Some(s.to_string());
        }
    }
    (id, None)
}
