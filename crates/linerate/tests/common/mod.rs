//! Shared by the binary's integration tests: the published JSON Schemas.
//!
//! Every command's result type publishes its schema as
//! `docs/schema/<schema>.schema.json`, generated from the Rust type
//! (schemars). [`published`] fails when the committed file differs from the
//! type (run with `LINERATE_UPDATE_SCHEMAS=1` to rewrite it, then review the
//! diff: a change that is not additive needs a new `version`); [`validate`]
//! checks a document a command printed against the committed file.
#![allow(dead_code)]

use std::path::PathBuf;

fn schema_path(schema: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../docs/schema")
        .join(format!("{schema}.schema.json"))
}

/// The committed schema of `schema` equals the one generated from `T`.
pub(crate) fn published<T: schemars::JsonSchema>(schema: &str) {
    let generated = schemars::generate::SchemaSettings::draft2020_12()
        .into_generator()
        .into_root_schema_for::<T>();
    let mut text = serde_json::to_string_pretty(&generated).expect("schema serialises");
    text.push('\n');
    let path = schema_path(schema);
    if std::env::var_os("LINERATE_UPDATE_SCHEMAS").is_some() {
        std::fs::write(&path, &text).expect("writing the schema");
        return;
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        committed == text,
        "{} is not the schema of the Rust type: run the tests with LINERATE_UPDATE_SCHEMAS=1 and review the diff",
        path.display()
    );
}

/// `doc` validates against the committed schema of `schema`.
pub(crate) fn validate(schema: &str, doc: &serde_json::Value) {
    let path = schema_path(schema);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let schema_json: serde_json::Value = serde_json::from_str(&text).expect("schema is JSON");
    let validator = jsonschema::validator_for(&schema_json).expect("a valid JSON Schema");
    let errors: Vec<String> = validator
        .iter_errors(doc)
        .map(|e| format!("{} at {}", e, e.instance_path()))
        .collect();
    assert!(
        errors.is_empty(),
        "document does not validate against {}:\n{}",
        path.display(),
        errors.join("\n")
    );
}

/// A v1 fixture (`tests/fixtures/v1/<file>`), parsed.
pub(crate) fn fixture(file: &str) -> serde_json::Value {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/v1")
        .join(file);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).expect("fixture is JSON")
}

/// The JSON document `linerate <args>` prints; the command must succeed.
pub(crate) fn json_of(args: &[&str]) -> serde_json::Value {
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_linerate"))
        .args(args)
        .output()
        .expect("the linerate binary runs");
    assert!(
        o.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    serde_json::from_slice(&o.stdout).expect("the output is JSON")
}

/// `doc` validates against the committed schema of `schema`, reads back into
/// `Envelope<T>` under that schema name, and writes the same JSON again.
pub(crate) fn round_trip<T>(
    schema: &str,
    doc: &serde_json::Value,
) -> linerate_core::result::Envelope<T>
where
    T: serde::Serialize + serde::de::DeserializeOwned,
{
    validate(schema, doc);
    let e: linerate_core::result::Envelope<T> =
        serde_json::from_value(doc.clone()).expect("the document reads back");
    assert_eq!(e.schema, schema);
    assert_eq!(
        &serde_json::to_value(&e).expect("serialises"),
        doc,
        "{schema}"
    );
    e
}

/// A long-running `linerate <args>` child, once its first stderr line says
/// where it listens: the child (killed and reaped on drop) and that address
/// (the text after `marker` up to the next space, `/` or end; with port 0
/// in `args` the kernel's choice). Later stderr lines are echoed.
pub(crate) struct Listening {
    /// The child.
    pub(crate) child: std::process::Child,
    /// Where it listens.
    pub(crate) addr: std::net::SocketAddr,
}

impl Listening {
    pub(crate) fn start(args: &[&str], marker: &str) -> Self {
        use std::io::BufRead as _;
        let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_linerate"))
            .args(args)
            .stdin(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("the linerate binary runs");
        let err = child.stderr.take().expect("piped stderr");
        let mut lines = std::io::BufReader::new(err).lines();
        let first = lines.next().and_then(Result::ok).unwrap_or_default();
        let addr = first
            .split_once(marker)
            .and_then(|(_, rest)| rest.split([' ', '/']).next())
            .and_then(|a| a.parse().ok());
        let Some(addr) = addr else {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{args:?}: first line '{first}' names no address after '{marker}'");
        };
        std::thread::spawn(move || {
            for l in lines.map_while(Result::ok) {
                eprintln!("child: {l}");
            }
        });
        Self { child, addr }
    }
}

impl Drop for Listening {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Sends SIGINT to `child` and waits for it to exit, at most `within`
/// (then kills it and fails): its exit status.
pub(crate) fn interrupt(
    child: &mut std::process::Child,
    within: std::time::Duration,
) -> std::process::ExitStatus {
    let pid = child.id().to_string();
    let sent = std::process::Command::new("kill")
        .args(["-INT", &pid])
        .status()
        .expect("kill runs");
    assert!(sent.success(), "SIGINT to {pid}");
    let t0 = std::time::Instant::now();
    loop {
        if let Some(s) = child.try_wait().expect("the child can be waited for") {
            return s;
        }
        if t0.elapsed() > within {
            let _ = child.kill();
            panic!("did not stop within {within:?} after SIGINT");
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}

/// `linerate <args>`, run to its end.
pub(crate) fn linerate(args: &[&str]) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_linerate"))
        .args(args)
        .output()
        .expect("the linerate binary runs")
}

/// Sweeps the beds named with this prefix when dropped, also when an
/// assertion fails midway.
pub(crate) struct Swept(pub(crate) String);

impl Drop for Swept {
    fn drop(&mut self) {
        let _ = linerate(&["testbed", "sweep", "--prefix", &self.0]);
    }
}
