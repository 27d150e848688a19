//! Run A: the objects of one carrier ([`super::names::objects`]), each
//! journalled before the request that creates it and taken back only when
//! the daemon's answer says nothing was made.

use super::api::{Body, Failure, Reply, q};
use super::names::{self, Entry, Kind};
use super::{Dk, Instance, MOUNT, NOTE_FILE, NOTE_LABEL, PLANT_LABEL};
use crate::surface::{PlantJob, PlantOutcome, RunCtx};
use serde_json::{Value, json};

/// Why a plant stopped: its outcome.
type Stop = PlantOutcome;

impl Instance {
    pub(super) fn plant_carrier(
        &self,
        ctx: &RunCtx<'_>,
        carrier: Dk,
        job: &PlantJob,
        created: &mut dyn FnMut(Value),
    ) -> PlantOutcome {
        let hex = job.nonce.hex();
        let mut made = vec![];
        for e in names::objects(ctx, carrier, &job.nonce) {
            // The label carriers' nonce goes in the object of the agreed
            // name of their kind.
            let note = match (carrier, e.kind) {
                (Dk::ImageLabel, Kind::Image)
                | (Dk::VolumeLabel, Kind::Volume)
                | (Dk::ContainerLabel, Kind::Container) => Some(hex.as_str()),
                _ => None,
            };
            let image = made
                .iter()
                .find(|m: &&Entry| m.kind == Kind::Image)
                .map(|m| format!("{}:latest", m.name));
            let volume = made
                .iter()
                .find(|m: &&Entry| m.kind == Kind::Volume)
                .map(|m| m.name.clone());
            if let Err(stop) = self.create(&e, note, image.as_deref(), volume.as_deref(), created) {
                return stop;
            }
            made.push(e);
        }
        if carrier == Dk::EventHistory {
            // Removed at once: what stays is the history. (Taken back out
            // of the journal once removed: cleanup has nothing to do.)
            for m in &made {
                let path = format!("/volumes/{}", q(&m.name));
                match self.api.call("DELETE", &path, Body::None) {
                    Ok(r) if r.ok() || r.status == 404 => {
                        created(crate::surface::retraction(&m.value()))
                    }
                    Ok(r) => {
                        return PlantOutcome::Failed {
                            reason: format!("removing {}: {}", m.shown(), r.message()),
                        };
                    }
                    Err(f) => {
                        return PlantOutcome::Failed {
                            reason: format!("removing {}: {}", m.shown(), f.fault()),
                        };
                    }
                }
            }
        }
        if carrier == Dk::VolumeContent {
            let container = &made.last().expect("volume-content makes a container").name;
            if let Err(stop) = self.write_note(container, &hex) {
                return stop;
            }
        }
        let shown: Vec<String> = made.iter().map(Entry::shown).collect();
        PlantOutcome::Planted {
            needle: Value::String(hex),
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

    /// Creates one object: journalled first, retracted when the daemon's
    /// answer says it made nothing.
    fn create(
        &self,
        e: &Entry,
        note: Option<&str>,
        image: Option<&str>,
        volume: Option<&str>,
        created: &mut dyn FnMut(Value),
    ) -> Result<(), Stop> {
        let mut labels = json!({ PLANT_LABEL: e.name });
        if let Some(n) = note {
            labels[NOTE_LABEL] = json!(n);
        }
        let entry = e.value();
        created(entry.clone());
        let what = format!("creating {}", e.shown());
        let answer = match e.kind {
            Kind::Image => self.import(e, &labels),
            Kind::Volume => self
                .api
                .call(
                    "POST",
                    "/volumes/create",
                    Body::Json(&json!({ "Name": e.name, "Labels": labels })),
                )
                .map(|r| (r, None)),
            Kind::Container => {
                let body = json!({
                    "Image": image.unwrap_or_default(),
                    // Never started: the command only has to be named.
                    "Cmd": ["/runwarden-never-started"],
                    "Labels": labels,
                    "NetworkDisabled": true,
                    "HostConfig": { "Mounts": volume.map(|v| vec![json!({ "Type": "volume", "Source": v, "Target": MOUNT })]).unwrap_or_default() },
                });
                self.api
                    .call(
                        "POST",
                        &format!("/containers/create?name={}", q(&e.name)),
                        Body::Json(&body),
                    )
                    .map(|r| (r, None))
            }
            Kind::Network => {
                // Internal: a network nothing can route out of, made only
                // for its name.
                let body = json!({ "Name": e.name, "Labels": labels, "Internal": true, "CheckDuplicate": true });
                self.api
                    .call("POST", "/networks/create", Body::Json(&body))
                    .map(|r| (r, None))
            }
        };
        let retract = |created: &mut dyn FnMut(Value)| created(crate::surface::retraction(&entry));
        match answer {
            Err(Failure::Denied(reason)) => {
                retract(created);
                Err(PlantOutcome::Refused { reason })
            }
            Err(Failure::Fault(f)) => Err(PlantOutcome::Failed {
                reason: format!("{what}: {f}"),
            }),
            Ok((r, _)) if r.status == 401 || r.status == 403 => {
                retract(created);
                Err(PlantOutcome::Refused {
                    reason: format!("the daemon refused {what} ({})", r.message()),
                })
            }
            // A 4xx says nothing was made (a 409: the name is taken, by
            // someone else's object, which cleanup must never touch); a
            // 5xx may come after it was, so the entry stays journalled.
            Ok((r, _)) if (400..500).contains(&r.status) => {
                retract(created);
                Err(PlantOutcome::Failed {
                    reason: format!("{what}: {}", r.message()),
                })
            }
            Ok((r, _)) if !r.ok() => Err(PlantOutcome::Failed {
                reason: format!("{what}: {}", r.message()),
            }),
            Ok((_, Some(error))) => Err(PlantOutcome::Failed {
                reason: format!("{what}: {error}"),
            }),
            Ok((r, None)) if e.kind == Kind::Volume => self.check_volume(e, &r, created),
            Ok(_) => Ok(()),
        }
    }

    /// A volume create answers 201 for a name that exists already (and
    /// changes nothing): a volume that comes back without this plant's
    /// label was someone else's, and is taken back out of the journal.
    fn check_volume(
        &self,
        e: &Entry,
        r: &Reply,
        created: &mut dyn FnMut(Value),
    ) -> Result<(), Stop> {
        let v = r
            .json()
            .map_err(|f| PlantOutcome::Failed { reason: f.into() })?;
        if v["Labels"][PLANT_LABEL].as_str() == Some(e.name.as_str()) {
            return Ok(());
        }
        created(crate::surface::retraction(&e.value()));
        Err(PlantOutcome::Failed {
            reason: format!("{} exists already and is not this plant's", e.shown()),
        })
    }

    /// An image from an empty tarball (nothing is pulled), with its labels,
    /// then its other tags. The import answers 200 and streams progress;
    /// an error is a line of that stream (the second value).
    fn import(&self, e: &Entry, labels: &Value) -> Result<(Reply, Option<String>), Failure> {
        let first = e.tags.first().map(String::as_str).unwrap_or("latest");
        // An import moves a tag that exists onto the new image: a tag of
        // this name on any image (someone else's, or an earlier plant's)
        // is left where it is, and nothing is made.
        for r in e.references() {
            if super::list::inspect(&self.api, Kind::Image, &r)?.is_some() {
                // (Escaped where the message is shown: `Reply::message`.)
                return Ok((
                    Reply {
                        status: 409,
                        body: serde_json::to_vec(
                            &json!({ "message": format!("an image tagged {r} exists already") }),
                        )
                        .unwrap_or_default(),
                    },
                    None,
                ));
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
        let empty = crate::archive::tar(&[]);
        let r = self.api.call("POST", &path, Body::Tar(empty))?;
        if !r.ok() {
            return Ok((r, None));
        }
        if let Some(error) = stream_error(&r.body) {
            return Ok((r, Some(error)));
        }
        for t in e.tags.iter().skip(1) {
            let path = format!(
                "/images/{}/tag?repo={}&tag={}",
                q(&format!("{}:{first}", e.name)),
                q(&e.name),
                q(t)
            );
            let t = self.api.call("POST", &path, Body::None)?;
            if !t.ok() {
                return Ok((t, None));
            }
        }
        Ok((r, None))
    }

    /// The nonce, as a file, into the agreed volume through the agreed
    /// container's archive (the daemon writes it; nothing runs).
    fn write_note(&self, container: &str, hex: &str) -> Result<(), Stop> {
        let body = format!("{hex}\n");
        let tar = crate::archive::tar(&[(NOTE_FILE, body.as_bytes())]);
        let path = format!("/containers/{}/archive?path={}", q(container), q(MOUNT));
        match self.api.call("PUT", &path, Body::Tar(tar)) {
            Err(Failure::Denied(reason)) => Err(PlantOutcome::Refused { reason }),
            Err(Failure::Fault(f)) => Err(PlantOutcome::Failed {
                reason: format!("writing into the volume: {f}"),
            }),
            Ok(r) if r.status == 401 || r.status == 403 => Err(PlantOutcome::Refused {
                reason: format!(
                    "the daemon refused writing into the volume ({})",
                    r.message()
                ),
            }),
            Ok(r) if !r.ok() => Err(PlantOutcome::Failed {
                reason: format!("writing into the volume: {}", r.message()),
            }),
            Ok(_) => Ok(()),
        }
    }
}

/// The first error a progress stream (JSON values, one after another)
/// reports, escaped.
fn stream_error(body: &[u8]) -> Option<String> {
    serde_json::Deserializer::from_slice(body)
        .into_iter::<Value>()
        .find_map(|v| match v {
            Ok(v) => v["error"]
                .as_str()
                .or(v["errorDetail"]["message"].as_str())
                .map(|m| crate::escape::bytes(&m.as_bytes()[..m.len().min(200)])),
            Err(_) => Some("the daemon's progress stream is not JSON".into()),
        })
}
