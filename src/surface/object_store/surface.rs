//! The object-store surface type's operations: its config and settings,
//! its control, the plant of each carrier, and cleanup (by receipt and by
//! probe id). Recovery is `recover.rs`.

use super::recover::ROUTES;
use super::s3::{Bucket, Call, Keys, S3, Said};
use super::versions::Versions;
use super::{
    Entry, Kind, META, OBJECTS, Obj, ObjectStore, Settings, UPLOADS, VERSION_CHECK, VERSIONS,
    WITNESS, innocuous, plant_name, sha256_hex, with_nonce,
};
use crate::config::{ConfigError, Options};
use crate::escape;
use crate::fault::Fault;
use crate::nonce::Nonce;
use crate::surface::carrier::CarrierSet;
use crate::surface::witness;
use crate::surface::{
    About, CleanupOutcome, Control, Found, Job, Journal, Notice, PlantOutcome, RunCtx, Want, Watch,
};
use http::Method;

impl crate::surface::Surface for ObjectStore {
    const NAME: &'static str = "object-store";
    const DESCRIPTION: &'static str = "an S3-compatible bucket (keys, agreed objects, user metadata, tags, unfinished multipart uploads; listed with ListObjectsV2)";
    const KEYS: &'static [&'static str] = &[
        "url",
        "bucket",
        "prefix",
        "region",
        "path-style",
        "access-key-env",
        "secret-key-env",
        "session-token-env",
        "consistency-wait",
        "permanent",
    ];
    const ROUTES: &'static [crate::surface::routes::Route<Obj>] = ROUTES;
    const WATCH: Watch<Obj> = Watch::Yes {
        unwatched: &[
            (
                Obj::ObjectContent,
                "watch mode lists keys: what an object at an agreed key holds is not read",
            ),
            (
                Obj::ObjectMetadata,
                "watch mode lists keys: an object's user metadata is not read",
            ),
            (
                Obj::ObjectTag,
                "watch mode lists keys: an object's tags are not read",
            ),
        ],
        changes: super::watch::changes_of,
    };
    type Carrier = Obj;
    type Settings = Settings;
    type Entry = Entry;
    type Needle = Nonce;

    fn validate(opts: Options<'_>) -> Result<Settings, ConfigError> {
        super::config::validate(opts)
    }

    fn about(s: &Settings) -> About<Obj> {
        let place = if s.control {
            "in the control".to_string()
        } else {
            format!(
                "in {}",
                escape::bytes(format!("s3://{}/{}", s.bucket.bucket, s.prefix).as_bytes())
            )
        };
        let about = About::new(place)
            .fact("credentials", s.source.clone())
            .fact("endpoint", escape::bytes(s.bucket.endpoint.as_bytes()))
            .fact(
                "listing",
                "ListObjectsV2, ListMultipartUploads and ListObjectVersions, each read to its end",
            )
            .exposure(format!("bucket:{}/{}", s.bucket.endpoint, s.bucket.bucket));
        match &s.missing {
            Some(why) => about.secret_missing(why.clone()),
            None => about,
        }
    }

    fn control(
        _like: Option<&Settings>,
        _dir: &std::path::Path,
    ) -> Result<Control<Settings>, Fault> {
        let bucket = "runwarden-control";
        // (It keeps versions: object-version is open there too.)
        let server = crate::loopback::s3::S3Server::start_with(bucket, false, true)?;
        let s = Settings {
            bucket: Bucket {
                endpoint: server.endpoint(),
                bucket: bucket.into(),
                region: "us-east-1".into(),
                path_style: true,
            },
            prefix: String::new(),
            keys: Some(Keys {
                access: server.access_key(),
                secret: crate::loopback::secret()?,
                session: None,
            }),
            source: "the control's own key".into(),
            missing: None,
            consistency_wait_ms: crate::surface::listing::default_wait_ms(),
            control: true,
            permanent: false,
        };
        Ok(Control::served_with_knobs(s, server))
    }

    fn open(settings: Settings) -> Result<ObjectStore, Fault> {
        let s3 = settings
            .keys
            .clone()
            .map(|k| S3::new(settings.bucket.clone(), k));
        Ok(ObjectStore { settings, s3 })
    }

    /// Run A: the witnesses before the plants (an object; an upload when
    /// an upload is planted; a version written and deleted when a version
    /// is, once the identity showed it may delete versions), each carrier,
    /// and the witnesses after.
    fn plant(
        &self,
        ctx: &RunCtx<'_>,
        jobs: &[Job<Obj>],
        journal: &mut Journal<'_, Entry>,
    ) -> Vec<PlantOutcome<Nonce>> {
        let uploads = jobs.iter().any(|j| j.carrier == Obj::MultipartUpload);
        // Before anything is written, the witnesses included: whether what
        // run A writes can be taken back (versions.rs). Where it cannot,
        // every carrier that writes an object has that outcome.
        let check = (!jobs.is_empty()).then(|| self.may_delete_versions(ctx, journal));
        let blocked = match &check {
            Some(Err(o)) => Some(o.clone()),
            _ => None,
        };
        let not_kept = matches!(check, Some(Ok(Versions::NotKept)));
        let versions =
            blocked.is_none() && !not_kept && jobs.iter().any(|j| j.carrier == Obj::ObjectVersion);
        crate::surface::between(
            jobs,
            &[],
            journal,
            |side, journal| {
                // Its metadata and tag too: run B reads them back through
                // the routes that read a plant's.
                let name = witness::name(ctx, OBJECTS, side, "");
                let headers = vec![
                    ("x-amz-meta-runwarden", WITNESS.to_string()),
                    ("x-amz-tagging", format!("{META}={WITNESS}")),
                ];
                if blocked.is_none() {
                    let _ = self.put(journal, &name, innocuous(ctx.probe_id), headers);
                }
                if uploads {
                    let _ = self.start_upload(journal, &witness::name(ctx, UPLOADS, side, ""));
                }
                if versions {
                    let _ = self.write_and_delete(
                        journal,
                        &witness::name(ctx, VERSIONS, side, ""),
                        innocuous(ctx.probe_id),
                    );
                }
            },
            |job, journal| {
                match (&blocked, job.carrier) {
                (Some(o), c) if c != Obj::MultipartUpload => o.clone(),
                (_, Obj::ObjectVersion) if not_kept => PlantOutcome::Unsupported {
                    reason: "the bucket keeps no versions (a PUT gives no version id): a deleted object leaves nothing to read".into(),
                },
                _ => self.plant_carrier(ctx, job, journal),
            }
            },
        )
    }

    fn recover(
        &self,
        ctx: &RunCtx<'_>,
        wanted: &[Want<Obj, Nonce>],
        _notice: &mut dyn FnMut(Notice),
    ) -> Vec<crate::surface::routes::Recovered> {
        self.recover_all(ctx, wanted)
    }

    fn snapshot(
        &self,
        _ctx: &crate::state::snapshot::WatchCtx,
        sink: &mut crate::state::snapshot::Sink<'_>,
    ) -> Result<(), crate::state::snapshot::SnapshotError> {
        self.snapshot_all(sink)
    }

    /// Cleanup by probe id: this probe's keys in the object listing and
    /// the upload listing, each with what its plant puts there.
    fn find(&self, ctx: &RunCtx<'_>, jobs: &[Job<Obj>]) -> Result<Found<Entry>, Fault> {
        let mut found = Found::from(vec![]);
        let expected = |name: &str| -> Option<Vec<u8>> {
            if witness::is_witness(ctx, OBJECTS, name, "") {
                return Some(innocuous(ctx.probe_id));
            }
            let c = Obj::tagged(ctx, name, "")?;
            let job = jobs.iter().find(|j| j.carrier == c)?;
            (plant_name(ctx, c, &job.nonce) == name).then(|| match c {
                Obj::ObjectContent => with_nonce(ctx.probe_id, &job.nonce),
                _ => innocuous(ctx.probe_id),
            })
        };
        let prefix = self.settings.prefix.clone();
        let mut names = vec![];
        self.list_keys(&mut |key| {
            if let Some(name) = key.strip_prefix(&prefix) {
                names.push(name.to_string());
            }
        })
        .map_err(Fault::from)?;
        for name in names {
            let c = Obj::tagged(ctx, &name, "");
            if matches!(c, Some(Obj::MultipartUpload | Obj::ObjectVersion)) {
                continue;
            }
            if let Some(body) = expected(&name) {
                found.ours.push(Entry::object(&name, &body));
            }
        }
        let mut uploads = vec![];
        let listed = self.list_uploads(&mut |key, id| {
            if let Some(name) = key.strip_prefix(&prefix) {
                uploads.push((name.to_string(), id.to_string()));
            }
        });
        match listed {
            // A store without uploads has none of a plant's.
            Ok(_) | Err(ListError::Absent(_)) => {}
            Err(e) => return Err(e.into()),
        }
        for (name, id) in uploads {
            let ours = witness::is_witness(ctx, UPLOADS, &name, "")
                || jobs.iter().any(|j| {
                    j.carrier == Obj::MultipartUpload
                        && plant_name(ctx, Obj::MultipartUpload, &j.nonce) == name
                });
            if ours && upload_id_ok(&id) {
                found.ours.push(Entry::upload(&name, Some(&id)));
            }
        }
        let mut versions: Vec<(String, Vec<String>)> = vec![];
        let listed = self.list_versions(&prefix, &mut |key, id| {
            let Some(name) = key.strip_prefix(&prefix) else {
                return;
            };
            let ours = witness::is_witness(ctx, VERSIONS, name, "")
                || witness::is_witness(ctx, VERSION_CHECK, name, "")
                || jobs.iter().any(|j| {
                    j.carrier == Obj::ObjectVersion
                        && plant_name(ctx, Obj::ObjectVersion, &j.nonce) == name
                });
            if ours && upload_id_ok(id) {
                match versions.iter_mut().find(|(n, _)| n == name) {
                    Some((_, ids)) => ids.push(id.to_string()),
                    None => versions.push((name.to_string(), vec![id.to_string()])),
                }
            }
        });
        match listed {
            Ok(_) => {}
            // A store without versions has none of a plant's.
            Err(ListError::Absent(_)) => {}
            Err(e) => return Err(e.into()),
        }
        for (name, ids) in versions {
            // One entry a key, every id of it (cleanup then lists what
            // still stays there).
            found.ours.push(Entry::version(
                &name,
                &ids[..ids.len().min(MAX_VERSION_IDS)],
            ));
        }
        Ok(found)
    }

    fn owns(&self, ctx: &RunCtx<'_>, entry: &Entry) -> Result<(), Fault> {
        let innocuous_sha = sha256_hex(&innocuous(ctx.probe_id));
        let versions_ok = entry.version_ids.len() <= MAX_VERSION_IDS
            && entry.version_ids.iter().all(|v| upload_id_ok(v))
            && (entry.version_ids.is_empty() || entry.kind == Kind::Version);
        let ok = if !versions_ok {
            false
        } else if entry.kind == Kind::Version {
            let witnessed = witness::is_witness(ctx, VERSIONS, &entry.name, "")
                || witness::is_witness(ctx, VERSION_CHECK, &entry.name, "");
            let planted = || {
                Obj::owned(ctx, &entry.name, "", &|c| c.keyed())
                    .is_ok_and(|c| c == Obj::ObjectVersion)
            };
            entry.sha256.is_none() && entry.upload_id.is_none() && (witnessed || planted())
        } else if witness::is_witness(ctx, OBJECTS, &entry.name, "") {
            entry.kind == Kind::Object && entry.sha256.as_deref() == Some(&innocuous_sha)
        } else if entry
            .upload_id
            .as_deref()
            .is_some_and(|id| !upload_id_ok(id))
            || (entry.upload_id.is_some() && entry.kind != Kind::Upload)
        {
            false
        } else if witness::is_witness(ctx, UPLOADS, &entry.name, "") {
            entry.kind == Kind::Upload && entry.sha256.is_none()
        } else {
            let c = Obj::owned(ctx, &entry.name, "", &|c| c.keyed())?;
            match (c, entry.kind) {
                (Obj::MultipartUpload, Kind::Upload) => entry.sha256.is_none(),
                // Its content holds the nonce: `clean_one` checks it
                // against the receipt's digest before deleting.
                (Obj::ObjectContent, Kind::Object) => entry.sha256.is_some(),
                (Obj::ObjectKey | Obj::ObjectMetadata | Obj::ObjectTag, Kind::Object) => {
                    entry.sha256.as_deref() == Some(&innocuous_sha)
                }
                _ => false,
            }
        };
        ok.then_some(()).ok_or_else(|| {
            Fault::invalid(format!("no plant of probe {} makes {entry}", ctx.probe_id))
        })
    }

    /// Deletes an object after checking it holds what was put (by its
    /// version id where the bucket keeps versions), or aborts the uploads
    /// at an upload's key.
    fn clean_one(&self, entry: &Entry) -> CleanupOutcome {
        let left = |reason: String| CleanupOutcome::Left { reason };
        if !entry.name.starts_with("runwarden-") || !crate::surface::plain_segment(&entry.name) {
            return left("not a runwarden name; nothing is deleted".into());
        }
        let Some(s3) = &self.s3 else {
            return left("no credentials here to delete it with".into());
        };
        let key = self.key(&entry.name);
        match entry.kind {
            Kind::Version => self.clean_versions(entry),
            Kind::Object => {
                let a = match s3.send(&Call::new(Method::GET, Some(&key))) {
                    Ok(a) => a,
                    Err(f) => return left(f.into()),
                };
                match a.said() {
                    Said::Done => {}
                    Said::Missing => return CleanupOutcome::Gone,
                    other => {
                        return left(format!(
                            "reading it before deleting: {}",
                            said(&other, "GetObject")
                        ));
                    }
                }
                if Some(sha256_hex(&a.body).as_str()) != entry.sha256.as_deref() {
                    return left("its content changed since it was planted".into());
                }
                // In a versioned bucket a plain DELETE leaves the version
                // and adds a marker: the version read is deleted instead.
                let mut del = Call::new(Method::DELETE, Some(&key));
                if let Some(v) = a
                    .header("x-amz-version-id")
                    .filter(|v| !v.is_empty() && *v != "null")
                {
                    del = del.query("versionId", v.to_string());
                }
                let versioned = del.query.iter().any(|(k, _)| *k == "versionId");
                match s3.send(&del).map(|a| a.said()) {
                    Ok(Said::Done) => CleanupOutcome::Removed,
                    Ok(Said::Missing) => CleanupOutcome::Gone,
                    // Its version stays, as `permanent: true` accepted.
                    Ok(Said::Denied) if versioned && self.settings.permanent => {
                        CleanupOutcome::Kept {
                            reason: "the identity may not delete object versions; kept, as `permanent: true` accepts".into(),
                        }
                    }
                    Ok(other) => left(said(&other, "DeleteObject")),
                    Err(f) => left(f.into()),
                }
            }
            Kind::Upload => {
                // By the id S3 gave, as journalled; an intent alone (run A
                // stopped before the answer) by the upload listing.
                let ids = match &entry.upload_id {
                    Some(id) => vec![id.clone()],
                    None => {
                        let mut ids = vec![];
                        let listed = self.list_uploads(&mut |k, id| {
                            if k == key {
                                ids.push(id.to_string());
                            }
                        });
                        if let Err(e) = listed {
                            return left(format!(
                                "listing the uploads: {}",
                                String::from(Fault::from(e))
                            ));
                        }
                        // (A listing that lags could hide one: LIMITATIONS.md.)
                        if ids.is_empty() {
                            return CleanupOutcome::Gone;
                        }
                        ids
                    }
                };
                let mut gone = true;
                for id in ids {
                    let abort = Call::new(Method::DELETE, Some(&key)).query("uploadId", id);
                    match s3.send(&abort).map(|a| a.said()) {
                        Ok(Said::Done) => gone = false,
                        Ok(Said::Missing) => {}
                        Ok(other) => return left(said(&other, "AbortMultipartUpload")),
                        Err(f) => return left(f.into()),
                    }
                }
                if gone {
                    CleanupOutcome::Gone
                } else {
                    CleanupOutcome::Removed
                }
            }
        }
    }

    /// One line a thing: an upload's intent, when its fuller entry (with
    /// the id) is journalled too, is that entry's.
    fn clean(&self, entries: &[Entry]) -> Vec<CleanupOutcome> {
        entries
            .iter()
            .map(|e| {
                let fuller = match e.kind {
                    Kind::Upload => {
                        e.upload_id.is_none()
                            && entries.iter().any(|f| {
                                f.kind == Kind::Upload && f.name == e.name && f.upload_id.is_some()
                            })
                    }
                    // The versions of one key: the line with the most ids
                    // (the first of them, of equals) is the whole.
                    Kind::Version => entries.iter().enumerate().any(|(j, f)| {
                        f.kind == Kind::Version
                            && f.name == e.name
                            && !std::ptr::eq(f, e)
                            && (f.version_ids.len() > e.version_ids.len()
                                || f.version_ids.len() == e.version_ids.len()
                                    && entries.iter().position(|x| std::ptr::eq(x, e)) > Some(j))
                    }),
                    Kind::Object => false,
                };
                if fuller {
                    CleanupOutcome::Superseded
                } else {
                    self.clean_one(e)
                }
            })
            .collect()
    }
}

/// The most version ids one entry names: a plant makes two (its version
/// and its delete marker); cleanup by probe id gathers what it finds.
const MAX_VERSION_IDS: usize = 16;

/// An upload id S3 gave, as it may be sent back: at most 1,024
/// characters, printable ASCII (it is server text, and goes in a query).
pub(super) fn upload_id_ok(id: &str) -> bool {
    !id.is_empty() && id.len() <= 1024 && id.bytes().all(|b| b.is_ascii_graphic())
}

impl ObjectStore {
    /// One carrier of run A's (`plant` makes the witnesses around them).
    fn plant_carrier(
        &self,
        ctx: &RunCtx<'_>,
        job: &Job<Obj>,
        journal: &mut Journal<'_, Entry>,
    ) -> PlantOutcome<Nonce> {
        let name = plant_name(ctx, job.carrier, &job.nonce);
        let shown = escape::bytes(self.key(&name).as_bytes());
        let hex = job.nonce.hex();
        let body = innocuous(ctx.probe_id);
        let done = match job.carrier {
            Obj::ObjectKey => self.put(journal, &name, body, vec![]).map(|()| {
                format!(
                    "PUT {shown}, whose key carries the nonce, in {}",
                    self.shown()
                )
            }),
            Obj::ObjectContent => self
                .put(journal, &name, with_nonce(ctx.probe_id, &job.nonce), vec![])
                .map(|()| format!("PUT {shown} holding the nonce, in {}", self.shown())),
            Obj::ObjectMetadata => self
                .put(
                    journal,
                    &name,
                    body,
                    vec![("x-amz-meta-runwarden", hex.clone())],
                )
                .and_then(|()| self.kept(&name, Method::HEAD, &hex, "user metadata"))
                .map(|()| {
                    format!(
                        "PUT {shown} with x-amz-meta-{META} holding the nonce, in {}",
                        self.shown()
                    )
                }),
            Obj::ObjectTag => self
                .put(
                    journal,
                    &name,
                    body,
                    vec![("x-amz-tagging", format!("{META}={hex}"))],
                )
                .and_then(|()| self.kept(&name, Method::GET, &hex, "tag"))
                .map(|()| format!("PUT {shown} tagged {META}=<nonce>, in {}", self.shown())),
            // (Whether versions may be deleted is asked first, in `plant`.)
            Obj::ObjectVersion => self
                .write_and_delete(journal, &name, body)
                .map(|ids| {
                    format!(
                        "PUT and DELETE {shown} (its version {} and delete marker {} stay in the bucket's versions, which no object listing shows), in {}",
                        escape::bytes(ids[0].as_bytes()),
                        escape::bytes(ids[1].as_bytes()),
                        self.shown()
                    )
                }),
            Obj::MultipartUpload => self.start_upload(journal, &name).map(|()| {
                format!(
                    "started a multipart upload of {shown}, never completed, in {}",
                    self.shown()
                )
            }),
        };
        match done {
            Ok(detail) => PlantOutcome::Planted {
                needle: job.nonce,
                persistence: None,
                detail,
            },
            Err(o) => o,
        }
    }
}

/// What an answer other than success says, for people: `op` named.
pub(super) fn said(s: &Said, op: &str) -> String {
    match s {
        Said::Done => format!("{op} succeeded"),
        Said::Missing => format!("{op}: no such key"),
        Said::Denied => format!("the store refused the {op} (AccessDenied)"),
        Said::Unsupported(m) | Said::Failed(m) => format!("{op}: {m}"),
    }
}

/// (For the listings' errors: a refusal, or a listing that broke.)
pub(super) enum ListError {
    Denied(String),
    Failed(String),
    /// The store has no such listing (NotImplemented).
    Absent(String),
}

impl From<ListError> for Fault {
    fn from(e: ListError) -> Fault {
        match e {
            ListError::Denied(m) | ListError::Absent(m) => Fault::Unsupported(m),
            ListError::Failed(m) => Fault::Broken(m),
        }
    }
}
