//! Text output: a buffered report written to stdout at once, number formatting, tables.

use std::fmt::Write as _;
use std::io::Write as _;

/// A report built line by line and printed with [`Report::print`].
#[derive(Debug, Default)]
pub(crate) struct Report {
    text: String,
}

impl Report {
    pub(crate) fn new() -> Self {
        Self::default()
    }

    /// Appends one line.
    pub(crate) fn line(&mut self, s: impl AsRef<str>) {
        self.text.push_str(s.as_ref());
        self.text.push('\n');
    }

    /// Appends `label` padded to a column, then `value`.
    pub(crate) fn field(&mut self, label: &str, value: impl AsRef<str>) {
        let _ = writeln!(self.text, "{label:<11}{}", value.as_ref());
    }

    /// Appends a table: a header row and rows, columns padded; `align` has one letter per
    /// column, `l` (left) or `r` (right).
    pub(crate) fn table(
        &mut self,
        indent: &str,
        header: &[&str],
        rows: &[Vec<String>],
        align: &str,
    ) {
        let right: Vec<bool> = align.chars().map(|c| c == 'r').collect();
        let cols = header.len();
        let mut w: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
        for r in rows {
            for (i, c) in r.iter().enumerate().take(cols) {
                if let Some(x) = w.get_mut(i) {
                    *x = (*x).max(c.chars().count());
                }
            }
        }
        let fmt_row = |cells: Vec<&str>| -> String {
            let mut s = String::from(indent);
            for (i, c) in cells.iter().enumerate() {
                let width = w.get(i).copied().unwrap_or(0);
                let pad = width.saturating_sub(c.chars().count());
                if i > 0 {
                    s.push_str("  ");
                }
                if !right.get(i).copied().unwrap_or(false) {
                    s.push_str(c);
                    if i + 1 < cells.len() {
                        s.push_str(&" ".repeat(pad));
                    }
                } else {
                    s.push_str(&" ".repeat(pad));
                    s.push_str(c);
                }
            }
            s
        };
        self.line(fmt_row(header.to_vec()));
        for r in rows {
            self.line(fmt_row(r.iter().map(String::as_str).collect()));
        }
    }

    /// Writes the report to stdout (a closed pipe is not an error).
    pub(crate) fn print(self) {
        let mut out = std::io::stdout().lock();
        let _ = out.write_all(self.text.as_bytes());
        let _ = out.flush();
    }
}

/// `12,345,678`.
pub(crate) fn int(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::new();
    for (i, ch) in s.chars().enumerate() {
        if i > 0 && (s.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(ch);
    }
    out
}

/// A duration in seconds as `1.234 ms`, `56.7 µs`, `2.50 s`.
pub(crate) fn secs(s: f64) -> String {
    if s >= 1.0 {
        format!("{s:.3} s")
    } else if s >= 1e-3 {
        format!("{:.3} ms", s * 1e3)
    } else if s >= 1e-6 {
        format!("{:.3} µs", s * 1e6)
    } else {
        format!("{:.1} ns", s * 1e9)
    }
}

/// Bytes as `1,024 B` / `4.0 KiB` / `32 GiB`.
pub(crate) fn bytes(n: u64) -> String {
    const K: u64 = 1024;
    if n < 10 * K {
        format!("{} B", int(n))
    } else if n < 10 * K * K {
        format!("{:.1} KiB", n as f64 / K as f64)
    } else if n < 10 * K * K * K {
        format!("{:.1} MiB", n as f64 / (K * K) as f64)
    } else if n % (K * K * K) == 0 {
        format!("{} GiB", n / (K * K * K))
    } else {
        format!("{:.1} GiB", n as f64 / (K * K * K) as f64)
    }
}

/// A rate: thousands separated above 1,000, one decimal below.
pub(crate) fn rate(r: f64) -> String {
    if r >= 1000.0 && r.is_finite() {
        int(r.round() as u64)
    } else {
        format!("{r:.1}")
    }
}

/// `part / whole` as a percentage with one decimal.
pub(crate) fn pct(part: u64, whole: u64) -> String {
    if whole == 0 {
        return "-".into();
    }
    format!("{:.1}%", part as f64 * 100.0 / whole as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_numbers() {
        assert_eq!(int(0), "0");
        assert_eq!(int(999), "999");
        assert_eq!(int(1000), "1,000");
        assert_eq!(int(1_234_567), "1,234,567");
        assert_eq!(secs(0.0012345), "1.234 ms");
        assert_eq!(secs(2.5), "2.500 s");
        assert_eq!(secs(42e-6), "42.000 µs");
        assert_eq!(bytes(1024), "1,024 B");
        assert_eq!(bytes(32 << 30), "32 GiB");
        assert_eq!(bytes(20 * 1024), "20.0 KiB");
        assert_eq!(pct(1, 4), "25.0%");
        assert_eq!(rate(356_234.4), "356,234");
        assert_eq!(rate(229.34), "229.3");
        assert_eq!(pct(1, 0), "-");
    }

    #[test]
    fn aligns_tables() {
        let mut r = Report::new();
        r.table(
            "  ",
            &["name", "n"],
            &[
                vec!["a".into(), "1".into()],
                vec!["long".into(), "100".into()],
            ],
            "lr",
        );
        assert_eq!(r.text, "  name    n\n  a       1\n  long  100\n");
    }
}
