//! The build-cache surface type's operations: its config, its control,
//! the plant (after the delete check, between the witnesses), recovery,
//! the ownership rule, cleanup by receipt and by probe id.

use super::plant::{ROUTE, delete_check};
use super::protocol::Read;
use super::recover::ROUTES;
use super::{
    Build, BuildCache, Entry, Kind, Protocol, Settings, Team, agreed, bazel, cas_body, key_of,
};
use crate::config::{ConfigError, Options};
use crate::fault::Fault;
use crate::http::LazyClient;
use crate::nonce::Nonce;
use crate::surface::carrier::CarrierSet;
use crate::surface::witness;
use crate::surface::{
    About, CleanupOutcome, Control, Found, HttpAuth, Job, Journal, Notice, PlantOutcome, RunCtx,
    Want, Watch, lower_hex,
};
use ::http::Method;

impl crate::surface::Surface for BuildCache {
    const NAME: &'static str = "build-cache";
    const DESCRIPTION: &'static str = "a remote build cache read by computed keys (Bazel's HTTP cache, Gradle's HTTP build cache, Nx's self-hosted cache, Turborepo's API); no listing";
    const KEYS: &'static [&'static str] = &[
        "url",
        "protocol",
        "token-env",
        "username-env",
        "password-env",
        "team",
        "permanent",
    ];
    const WATCH: Watch<Build> = Watch::No(
        "a build cache has no listing: watch mode cannot see what a command wrote there (probe it with plant and recover)",
    );
    const ROUTES: &'static [crate::surface::routes::Route<Build>] = ROUTES;
    type Carrier = Build;
    type Settings = Settings;
    type Entry = Entry;
    type Needle = Nonce;

    fn validate(opts: Options<'_>) -> Result<Settings, ConfigError> {
        super::config::validate(opts)
    }

    fn about(s: &Settings) -> About<Build> {
        super::config::about(s)
    }

    /// A loopback cache speaking the configured surface's protocol (else
    /// Turborepo's, whose carriers are every one but Bazel's blob), with
    /// a token of its own; it takes DELETE, so the control leaves nothing.
    fn control(
        like: Option<&Settings>,
        _dir: &std::path::Path,
    ) -> Result<Control<Settings>, Fault> {
        let protocol = like.map_or(Protocol::Turborepo, |s| s.protocol);
        let server = crate::loopback::build_cache::BuildCacheServer::start()?;
        let token = server.token()?;
        let base = format!("http://127.0.0.1:{}/", server.port);
        let url = match protocol {
            Protocol::Gradle => format!("{base}cache/"),
            _ => base,
        };
        let s = Settings {
            url,
            protocol,
            auth: HttpAuth::bearer_for_control(token),
            team: (protocol == Protocol::Turborepo).then(|| Team::new("runwarden-control")),
            permanent: false,
            control: true,
        };
        Ok(Control::served_with_knobs(s, server))
    }

    fn open(settings: Settings) -> Result<BuildCache, Fault> {
        let client = LazyClient::new(settings.auth.secrets());
        Ok(BuildCache { settings, client })
    }

    /// Run A: the delete check (before anything is planted), then the
    /// witness made before the plants, each carrier, and the witness made
    /// after them.
    fn plant(
        &self,
        ctx: &RunCtx<'_>,
        jobs: &[Job<Build>],
        journal: &mut Journal<'_, Entry>,
    ) -> Vec<PlantOutcome<Nonce>> {
        if jobs.is_empty() {
            return vec![];
        }
        if let Some(sig) = crate::signals::received() {
            return jobs
                .iter()
                .map(|_| crate::surface::interrupted(sig))
                .collect();
        }
        if let Err(o) = self.may_delete(ctx, journal) {
            return jobs.iter().map(|_| o.clone()).collect();
        }
        crate::surface::between(
            jobs,
            Self::PLANTED_LAST,
            journal,
            |side, journal| self.witness(ctx, side, journal),
            |job, journal| self.plant_job(ctx, job, journal),
        )
    }

    fn recover(
        &self,
        ctx: &RunCtx<'_>,
        wanted: &[Want<Build, Nonce>],
        _notice: &mut dyn FnMut(Notice),
    ) -> Vec<crate::surface::routes::Recovered> {
        self.recover_all(ctx, wanted)
    }

    /// Cleanup by probe id: what is at this probe's agreed keys (the
    /// witnesses', the delete check's, each job's), and for Bazel the
    /// blobs its action results point at; each only where its content
    /// names its entry. Something else at an agreed key is left, listed.
    fn find(&self, ctx: &RunCtx<'_>, jobs: &[Job<Build>]) -> Result<Found<Entry>, Fault> {
        let mut names: Vec<String> = witness::Side::BOTH
            .iter()
            .map(|s| witness::name(ctx, ROUTE, *s, ""))
            .collect();
        names.push(delete_check(ctx));
        let mut found = Found {
            ours: vec![],
            left: vec![],
        };
        for job in jobs {
            let name = agreed(ctx, job.carrier);
            if job.carrier == Build::CasBlob {
                let key = super::sha256_hex(&cas_body(&name, &job.nonce));
                self.find_at(Kind::Blob, &key, &name, &mut found)?;
            } else if !names.contains(&name) {
                names.push(name);
            }
        }
        let bazel = self.settings.protocol == Protocol::Bazel;
        for name in &names {
            if let Some(head) = self.find_at(Kind::Entry, &key_of(name), name, &mut found)?
                && bazel
                && let Some(d) = bazel::decode(&head)
            {
                for h in d.digests {
                    self.find_at(Kind::Blob, &h, name, &mut found)?;
                }
            }
        }
        // The witnesses' and the delete check's blobs are at a key known
        // whole (they hold no nonce): the check's, and a witness's whose
        // action result is gone, no action result points at.
        for name in names.iter().take(3).filter(|_| bazel) {
            let key = super::sha256_hex(&super::body(name, None));
            if !found.ours.iter().any(|e| e.key == key) {
                self.find_at(Kind::Blob, &key, name, &mut found)?;
            }
        }
        Ok(found)
    }

    fn owns(&self, ctx: &RunCtx<'_>, entry: &Entry) -> Result<(), Fault> {
        if !lower_hex(&entry.key, 64) || !lower_hex(&entry.sha256, 64) {
            return Err(Fault::invalid("not a key this surface writes"));
        }
        let name = &entry.name;
        let witnessed = witness::is_witness(ctx, ROUTE, name, "");
        let check = crate::marker::same(delete_check(ctx).as_bytes(), name.as_bytes());
        let carrier = if witnessed || check {
            None
        } else {
            Some(Build::owned(ctx, name, "", &|_| false)?)
        };
        let bazel = self.settings.protocol == Protocol::Bazel;
        let ok = match entry.kind {
            Kind::Entry => entry.key == key_of(name) && carrier != Some(Build::CasBlob),
            // A blob is at its content's hash, and only Bazel's plants make
            // one (not artifact-tag's); a witness's and the delete check's
            // hold no nonce, so their key is known whole.
            Kind::Blob => {
                let plain = super::sha256_hex(&super::body(name, None));
                bazel
                    && entry.key == entry.sha256
                    && carrier != Some(Build::ArtifactTag)
                    && (carrier.is_some() || entry.key == plain)
            }
        };
        ok.then_some(()).ok_or_else(|| {
            Fault::invalid(format!("no plant of probe {} makes {entry}", ctx.probe_id))
        })
    }

    /// Deletes what an entry names, after reading it back: only while it
    /// is exactly what a plant of its name writes and what was written;
    /// and only where the API deletes (else kept, as `permanent: true`
    /// accepted).
    fn clean_one(&self, entry: &Entry) -> CleanupOutcome {
        let place = self.place(entry.kind, &entry.key);
        let left = |reason: String| CleanupOutcome::Left { reason };
        match self.read(entry.kind, &entry.key, None) {
            Read::Absent => return CleanupOutcome::Gone,
            Read::Refused(m) | Read::Failed(m) => {
                return left(format!("read before deleting: {m}"));
            }
            Read::There(g)
                if g.sha256 != entry.sha256 || !self.is_plant(entry.kind, &entry.name, &g) =>
            {
                return left(format!(
                    "what is at {place} is not what run A wrote (changed since, or someone else's): not deleted"
                ));
            }
            Read::There(_) => {}
        }
        let s = &self.settings;
        let stays = |why: String| {
            if s.permanent {
                CleanupOutcome::Kept {
                    reason: format!("{why}; kept, as `permanent: true` accepts"),
                }
            } else {
                left(why)
            }
        };
        if !(s.control || s.protocol.may_delete()) {
            return stays(s.protocol.no_delete());
        }
        let op = format!("DELETE of {place}");
        let (status, answer) = match self.send(Method::DELETE, entry.kind, &entry.key, vec![], None)
        {
            Ok(x) => x,
            Err(f) => return left(f.into()),
        };
        match self.said(status, &op, &answer) {
            super::protocol::Said::Done | super::protocol::Said::Absent => {}
            super::protocol::Said::Refused(m) | super::protocol::Said::Failed(m) => {
                return stays(m);
            }
        }
        // (A server may answer a DELETE it did not do.)
        match self.read(entry.kind, &entry.key, None) {
            Read::Absent => CleanupOutcome::Removed,
            Read::There(_) => stays(format!(
                "the cache answered the DELETE of {place} with HTTP {status} and kept it"
            )),
            Read::Refused(m) | Read::Failed(m) => left(format!(
                "whether the DELETE of {place} took could not be told: {m}"
            )),
        }
    }
}

impl BuildCache {
    /// Whether `g`, read whole, is exactly what a plant of `name` writes
    /// as a `kind` of this protocol ([`super::plain_form`],
    /// [`super::action_result_form`]): cleanup takes nothing else.
    fn is_plant(&self, kind: Kind, name: &str, g: &super::protocol::Got) -> bool {
        g.whole
            && match (kind, self.settings.protocol) {
                (Kind::Blob, Protocol::Bazel) => super::plain_form(name, &g.head),
                (Kind::Blob, _) => false,
                (Kind::Entry, Protocol::Bazel) => super::action_result_form(name, &g.head),
                (Kind::Entry, _) => super::plain_form(name, &g.head),
            }
    }

    /// What is at `key` for cleanup by probe id: ours (added to `found`)
    /// when it is exactly what a plant of `name` writes, else listed as
    /// left. Its bytes when ours.
    fn find_at(
        &self,
        kind: Kind,
        key: &str,
        name: &str,
        found: &mut Found<Entry>,
    ) -> Result<Option<Vec<u8>>, Fault> {
        match self.read(kind, key, None) {
            Read::Absent => Ok(None),
            Read::Refused(m) | Read::Failed(m) => Err(Fault::broken(m)),
            Read::There(g)
                if self.is_plant(kind, name, &g) && (kind == Kind::Entry || g.sha256 == key) =>
            {
                found.ours.push(Entry {
                    name: name.into(),
                    kind,
                    key: key.into(),
                    sha256: g.sha256.clone(),
                });
                Ok(Some(g.head))
            }
            Read::There(_) => {
                found.left.push((
                    self.place(kind, key),
                    "at this probe's agreed key, and not a plant of it (someone else's)".into(),
                ));
                Ok(None)
            }
        }
    }
}
