//! Every surface type's snapshot against its own plants: on each type's
//! known-open control instance (the loopback services, a directory, a
//! bare repository), each carrier is planted the way run A plants it, by
//! the surface's own code, between two snapshots; the diff must attribute
//! the change to that carrier. A carrier no listing shows is SKIPPED with
//! its reason (`unwatched`), and a type with no snapshot says why.

use runwarden::marker::Key;
use runwarden::nonce::Nonce;
use runwarden::state::diff::Differ;
use runwarden::state::snapshot::{Reader, WatchCtx, Writer};
use runwarden::surface::{self, PlantJob, PlantOutcome, RUNNER_PERSISTENCE, RunCtx};
use serde_json::json;
use std::collections::{BTreeSet, HashSet};

#[test]
fn each_carrier_planted_between_two_snapshots_is_attributed_to_itself() {
    let root = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let key = Key::new(Some(b"watch-test-key".to_vec()));
    let ctx = RunCtx {
        probe_id: "0123456789ab",
        key: &key,
        surface: "test",
    };
    let mut missed = Vec::new();
    let mut looked = 0;
    for ty in surface::REGISTRY {
        let dir = root.path().join(ty.name());
        let settings = json!({"path": dir, "content-reads": true});
        let control = ty.control(&settings, &dir).unwrap();
        let s = ty.open(&control.settings).unwrap();
        let w = match s.watch() {
            Ok(w) => w,
            Err(why) => {
                assert!(!why.is_empty());
                continue;
            }
        };
        for (i, c) in ty.carriers().iter().enumerate() {
            if c.name == RUNNER_PERSISTENCE || w.unwatched(c.name).is_some() {
                continue;
            }
            let first = root.path().join(format!("{}-{i}.before", ty.name()));
            let mut writer = Writer::create(&first).unwrap();
            let since = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_secs() as i64;
            w.snapshot(&WatchCtx::default(), &mut |e| writer.push(&e))
                .unwrap();
            writer.finish().unwrap();
            let job = PlantJob {
                key: c.name.into(),
                carrier: c.name.into(),
                nonce: Nonce::generate().unwrap(),
                scope: None,
                beacon: None,
            };
            let mut created = Vec::new();
            let planted = s.plant(&ctx, &job, &mut |e| created.push(e));
            assert!(
                matches!(planted, PlantOutcome::Planted { .. }),
                "{}:{}: {planted:?}",
                ty.name(),
                c.name
            );
            let mut differ = Differ::new(Reader::open(&first).unwrap(), since);
            w.snapshot(&WatchCtx::default(), &mut |e| differ.push(e))
                .unwrap();
            let (changes, _, before) = differ.finish(&HashSet::new()).unwrap();
            let seen: BTreeSet<&str> = changes
                .iter()
                .flat_map(|ch| w.carriers_of(ch, &before))
                .collect();
            looked += 1;
            if !seen.contains(c.name) {
                missed.push(format!("{}:{} seen as {seen:?}", ty.name(), c.name));
            }
            created.reverse();
            s.cleanup_all(&created);
        }
    }
    assert!(missed.is_empty(), "{missed:#?}");
    assert!(looked >= 20, "{looked}");
}

/// What a tag's change carries, as the two `ls-remote` listings show it: a
/// lightweight tag moved to a new commit carries the commit, never a tag
/// message (it has none); an annotated tag moved to a new tag object on
/// the same commit carries its message, and no commit.
#[test]
fn a_tag_change_carries_only_what_that_tag_can() {
    use crate::common::{bare_remote, empty_commit, git};
    let root = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let remote = bare_remote(root.path());
    let seed = root.path().join("seed");
    let url = remote.to_str().unwrap();
    git(&seed, &["tag", "light"]);
    git(
        &seed,
        &[
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "tag",
            "-a",
            "-m",
            "one",
            "heavy",
        ],
    );
    git(&seed, &["push", "-q", url, "light", "heavy"]);
    let ty = surface::by_name("git-remote").unwrap();
    let s = ty
        .open(&json!({
            "url": url, "shown": url, "credentials": [], "credential-home": null,
            "ssh": false, "control": true,
        }))
        .unwrap();
    let w = s.watch().unwrap();
    let carried = |change: &dyn Fn()| -> BTreeSet<&'static str> {
        let first = root.path().join("tags.before");
        let _ = std::fs::remove_file(&first);
        let mut writer = Writer::create(&first).unwrap();
        w.snapshot(&WatchCtx::default(), &mut |e| writer.push(&e))
            .unwrap();
        writer.finish().unwrap();
        change();
        let mut differ = Differ::new(Reader::open(&first).unwrap(), 0);
        w.snapshot(&WatchCtx::default(), &mut |e| differ.push(e))
            .unwrap();
        let (changes, _, before) = differ.finish(&HashSet::new()).unwrap();
        changes
            .iter()
            .flat_map(|ch| w.carriers_of(ch, &before))
            .collect()
    };
    let light = carried(&|| {
        empty_commit(&seed, "two");
        git(&seed, &["tag", "-f", "light"]);
        git(&seed, &["push", "-q", "-f", url, "light"]);
    });
    assert!(light.contains("commit-message"), "{light:?}");
    assert!(!light.contains("annotated-tag-message"), "{light:?}");
    let heavy = carried(&|| {
        git(
            &seed,
            &[
                "-c",
                "user.name=t",
                "-c",
                "user.email=t@t",
                "tag",
                "-f",
                "-a",
                "-m",
                "two",
                "heavy",
                "heavy^{}",
            ],
        );
        git(&seed, &["push", "-q", "-f", url, "heavy"]);
    });
    assert!(heavy.contains("annotated-tag-message"), "{heavy:?}");
    assert!(!heavy.contains("commit-message"), "{heavy:?}");
}
