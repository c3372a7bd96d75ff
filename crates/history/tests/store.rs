//! The store on real files: round trip, filters, concurrent writers, a
//! corrupt file, and the migration from a version-1 database.

use std::path::PathBuf;

use linerate_history::{BedFacts, Entry, Filter, HistoryError, Load, Store, SCHEMA_VERSION};

/// A fresh directory of its own under the system's temporary directory.
fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("lr-history-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("scratch dir");
    d
}

const DOC: &str = r#"{
  "schema": "linerate.latency",
  "version": 2,
  "linerate_version": "0.1.0",
  "started_at": "2026-11-23T10:00:00.000000Z",
  "host": {"kernel": "6.1.0", "cpu_model": "EPYC", "cpus": 2},
  "flags": []
}"#;

fn entry<'a>(doc: &'a str, tag: Option<&'a str>) -> Entry<'a> {
    Entry {
        document: doc,
        tag,
        bed: None,
        load: None,
    }
}

#[test]
fn a_saved_document_reads_back_exactly_with_its_environment() {
    let dir = scratch("round");
    let path = dir.join("sub/history.sqlite");
    let mut s = Store::open(&path).unwrap();
    let bed = BedFacts {
        name: "lab".into(),
        settings: vec!["link 100 Mbit/s".into(), "delay 1 ms".into()],
    };
    let load = Load {
        steal_pct: None,
        cpu_pressure_pct: Some(4.5),
    };
    let id = s
        .save(&Entry {
            document: DOC,
            tag: Some("nightly"),
            bed: Some(&bed),
            load: Some(&load),
        })
        .unwrap();
    let r = s.record(id).unwrap();
    assert_eq!(r.text, DOC);
    assert_eq!(r.document["host"]["cpus"], 2);
    assert_eq!(r.summary.command, "latency");
    assert_eq!(r.summary.tag.as_deref(), Some("nightly"));
    assert_eq!(r.summary.bed.as_deref(), Some("lab"));
    assert_eq!(r.bed_settings, bed.settings);
    assert_eq!((r.kernel.as_deref(), r.cpus), (Some("6.1.0"), Some(2)));
    assert_eq!(r.cpu_pressure_pct, Some(4.5));
    assert_eq!(s.get(id).unwrap()["schema"], "linerate.latency");
    s.remove(id).unwrap();
    assert!(matches!(s.record(id), Err(HistoryError::NotFound(i)) if i == id));
    assert!(matches!(s.remove(id), Err(HistoryError::NotFound(_))));
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn filters_select_by_command_tag_and_date() {
    let dir = scratch("filters");
    let mut s = Store::open(&dir.join("h.sqlite")).unwrap();
    let later = DOC.replace("2026-11-23T10", "2026-11-24T10");
    let tput = DOC.replace("linerate.latency", "linerate.throughput");
    let a = s.save(&entry(DOC, Some("a"))).unwrap();
    let b = s.save(&entry(&later, Some("b"))).unwrap();
    let c = s.save(&entry(&tput, Some("a"))).unwrap();
    let ids = |f: Filter| -> Vec<i64> { s.list(&f).unwrap().iter().map(|r| r.id).collect() };
    assert_eq!(ids(Filter::default()), [a, c, b], "oldest first");
    let f = |c: Option<&str>, t: Option<&str>| Filter {
        command: c.map(Into::into),
        tag: t.map(Into::into),
        ..Filter::default()
    };
    assert_eq!(ids(f(Some("latency"), None)), [a, b]);
    assert_eq!(ids(f(None, Some("a"))), [a, c]);
    assert_eq!(ids(f(Some("latency"), Some("a"))), [a]);
    let since = Filter {
        since: Some("2026-11-24".into()),
        ..Filter::default()
    };
    assert_eq!(ids(since), [b]);
    let until = Filter {
        until: Some("2026-11-24".into()),
        last: Some(1),
        ..Filter::default()
    };
    assert_eq!(ids(until), [c], "the newest before the 24th");
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn two_processes_writing_at_once_both_land() {
    // Threads with a connection each are two writers to SQLite as much as
    // two processes are (the binary's test runs two processes).
    let dir = scratch("concurrent");
    let path = dir.join("h.sqlite");
    let writers: Vec<_> = (0..4)
        .map(|i| {
            let path = path.clone();
            std::thread::spawn(move || {
                let mut s = Store::open(&path).unwrap();
                let tag = format!("w{i}");
                for _ in 0..25 {
                    s.save(&entry(DOC, Some(&tag))).unwrap();
                }
            })
        })
        .collect();
    for w in writers {
        w.join().unwrap();
    }
    let s = Store::open(&path).unwrap();
    assert_eq!(s.list(&Filter::default()).unwrap().len(), 100);
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn a_corrupt_file_is_named_as_such() {
    let dir = scratch("corrupt");
    let path = dir.join("h.sqlite");
    std::fs::write(&path, vec![0x5a; 8192]).unwrap();
    let e = Store::open(&path).unwrap_err();
    assert!(matches!(e, HistoryError::Corrupt { .. }), "{e:?}");
    assert!(e.to_string().contains("corrupt"), "{e}");
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn a_version_1_database_is_migrated_and_keeps_its_results() {
    let dir = scratch("migrate");
    let path = dir.join("h.sqlite");
    let v1 = include_str!("fixtures/history-v1.sql");
    rusqlite::Connection::open(&path)
        .unwrap()
        .execute_batch(v1)
        .unwrap();
    let mut s = Store::open(&path).unwrap();
    let version: u32 = rusqlite::Connection::open(&path)
        .unwrap()
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .unwrap();
    assert_eq!(version, SCHEMA_VERSION);
    let all = s.list(&Filter::default()).unwrap();
    assert_eq!(all.iter().map(|r| r.id).collect::<Vec<_>>(), [1, 2]);
    // Version 2's columns, filled from the stored documents.
    let t = s.record(1).unwrap();
    assert_eq!(t.summary.tag.as_deref(), Some("nightly"));
    assert_eq!(t.kernel.as_deref(), Some("6.1.0-18-amd64"));
    assert_eq!(t.cpu_model.as_deref(), Some("AMD EPYC 7B13"));
    assert_eq!((t.cpus, t.steal_pct), (Some(2), Some(1.5)));
    assert_eq!(t.linerate_version.as_deref(), Some("0.1.0"));
    assert_eq!((t.summary.bed, t.cpu_pressure_pct), (None, None));
    assert_eq!(s.record(2).unwrap().summary.exit_code, Some(1));
    // And it takes new results.
    let id = s.save(&entry(DOC, None)).unwrap();
    assert_eq!(id, 3);
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn a_newer_layout_is_refused_and_left_alone() {
    let dir = scratch("newer");
    let path = dir.join("h.sqlite");
    let c = rusqlite::Connection::open(&path).unwrap();
    c.pragma_update(None, "user_version", SCHEMA_VERSION + 1)
        .unwrap();
    drop(c);
    let e = Store::open(&path).unwrap_err();
    assert!(matches!(e, HistoryError::Newer { .. }), "{e:?}");
    let _ = std::fs::remove_dir_all(dir);
}
