//! A snapshot of the process environment's `NEURON_RT_*` variables.

use std::collections::BTreeMap;
use std::ffi::OsString;

use nrt_core::config::VarSource;

/// Prefix of the variables [`EnvVars::capture`] keeps.
const PREFIX: &str = "NEURON_RT_";

/// Owned `NEURON_RT_*` variables, read once (a [`VarSource`] for
/// [`Config::parse`](nrt_core::Config::parse)).
///
/// A value that is not valid UTF-8 cannot be represented faithfully by the core's `&str`
/// configuration. Rather than use a silently mangled value (a lossy path would send dumps to a
/// different directory), such a value is stored as its lossy conversion followed by a NUL byte,
/// which no real environment value contains: every `Config::parse` grammar refuses it (numbers,
/// keywords and lists by their syntax, paths by the NUL check), so init fails with
/// `NRT_INVALID` naming the variable. [`EnvVars::non_utf8_names`] lists the affected names so a
/// caller can say why.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct EnvVars {
    vars: BTreeMap<String, String>,
    non_utf8: Vec<String>,
}

impl EnvVars {
    /// Reads the `NEURON_RT_*` variables of the process environment (`std::env::vars_os`).
    /// Variables whose name is not UTF-8 cannot be `NEURON_RT_*` ones and are skipped.
    pub fn capture() -> Self {
        Self::from_os_pairs(std::env::vars_os())
    }

    /// Keeps the `NEURON_RT_*` pairs of `pairs`, converting values as described on the type.
    fn from_os_pairs(pairs: impl IntoIterator<Item = (OsString, OsString)>) -> Self {
        let mut out = Self::default();
        for (name, value) in pairs {
            let Ok(name) = name.into_string() else {
                continue;
            };
            if !name.starts_with(PREFIX) {
                continue;
            }
            let value = match value.into_string() {
                Ok(v) => v,
                Err(raw) => {
                    out.non_utf8.push(name.clone());
                    let mut v = raw.to_string_lossy().into_owned();
                    v.push('\0');
                    v
                }
            };
            out.vars.insert(name, value);
        }
        out
    }

    /// A snapshot holding exactly `pairs` (any names; a later pair replaces an earlier one with
    /// the same name), for tests and for hosts with no process environment.
    pub fn from_pairs<K, V>(pairs: impl IntoIterator<Item = (K, V)>) -> Self
    where
        K: Into<String>,
        V: Into<String>,
    {
        Self {
            vars: pairs
                .into_iter()
                .map(|(k, v)| (k.into(), v.into()))
                .collect(),
            non_utf8: Vec::new(),
        }
    }

    /// The names whose value in the environment was not valid UTF-8 (see the type's docs).
    pub fn non_utf8_names(&self) -> &[String] {
        &self.non_utf8
    }

    /// Sets `name` to `value` in the snapshot (not in the process environment).
    pub fn set(&mut self, name: impl Into<String>, value: impl Into<String>) {
        self.vars.insert(name.into(), value.into());
    }

    /// Removes `name` from the snapshot.
    pub fn remove(&mut self, name: &str) {
        self.vars.remove(name);
    }

    /// The captured `(name, value)` pairs, sorted by name.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.vars.iter().map(|(k, v)| (k.as_str(), v.as_str()))
    }

    /// Parses the configuration from this snapshot.
    // The core's error is a fixed-size, allocation-free value by design.
    #[allow(clippy::result_large_err)]
    pub fn config(&self) -> nrt_core::Result<nrt_core::Config> {
        nrt_core::Config::parse(self)
    }
}

impl VarSource for EnvVars {
    fn var(&self, name: &str) -> Option<&str> {
        self.vars.get(name).map(String::as_str)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests {
    use std::os::unix::ffi::OsStringExt;

    use nrt_core::config::vars;
    use nrt_core::{LogLevel, NrtStatus};

    use super::*;

    fn os(s: &str) -> OsString {
        OsString::from(s)
    }

    #[test]
    fn keeps_only_neuron_rt_variables() {
        let env = EnvVars::from_os_pairs([
            (os("PATH"), os("/bin")),
            (os("NEURON_RT_NUM_CORES"), os("2")),
            (os("NEURON_RTX"), os("x")),
            (os("NEURON_RT_LOG_LEVEL"), os("debug")),
        ]);
        assert_eq!(
            env.iter().collect::<Vec<_>>(),
            [
                ("NEURON_RT_LOG_LEVEL", "debug"),
                ("NEURON_RT_NUM_CORES", "2")
            ]
        );
        assert_eq!(env.var("PATH"), None);
        let c = env.config().unwrap();
        assert_eq!(c.num_cores, 2);
        assert_eq!(c.log_level, LogLevel::Level(nrt_core::Level::Debug));
    }

    #[test]
    fn non_utf8_values_are_refused_by_the_parser() {
        let bad = OsString::from_vec(b"/tmp/dumps-\xff".to_vec());
        let env = EnvVars::from_os_pairs([(os(vars::LOCAL_CORE_DUMP_DIRECTORY), bad)]);
        assert_eq!(env.non_utf8_names(), [vars::LOCAL_CORE_DUMP_DIRECTORY]);
        let err = env.config().unwrap_err();
        assert_eq!(err.status(), NrtStatus::Invalid);

        let bad = OsString::from_vec(b"1\xff".to_vec());
        let env = EnvVars::from_os_pairs([(os(vars::NUM_CORES), bad)]);
        assert_eq!(env.config().unwrap_err().status(), NrtStatus::Invalid);
    }

    #[test]
    fn non_utf8_names_are_skipped() {
        let name = OsString::from_vec(b"NEURON_RT_\xff".to_vec());
        let env = EnvVars::from_os_pairs([(name, os("1"))]);
        assert_eq!(env.iter().count(), 0);
    }

    #[test]
    fn from_pairs_last_assignment_wins() {
        let mut env = EnvVars::from_pairs([("A", "1"), ("A", "2"), ("B", "3")]);
        assert_eq!(env.var("A"), Some("2"));
        env.set("B", "4");
        assert_eq!(env.var("B"), Some("4"));
        env.remove("B");
        assert_eq!(env.var("B"), None);
    }

    #[test]
    fn capture_reads_the_process_environment() {
        // Only checks the invariant; the test harness's environment is not ours to change.
        let env = EnvVars::capture();
        assert!(env.iter().all(|(k, _)| k.starts_with(PREFIX)));
    }
}
