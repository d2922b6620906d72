//! A graph layer's attributes (messages without the layer: the caller adds it): typed getters over the layer's TOML table that remember which
//! keys were read, so that [`Attrs::finish`] can refuse the ones no getter asked for.

use crate::error::{CliError, Result, bail};

/// The largest size-like attribute (counts, strides, padding, kernel sizes): far beyond any
/// tensor the simulator holds, small enough that no size arithmetic overflows.
const MAX_INT: usize = 1 << 24;

/// The attributes of one layer (its table without `op`, `inputs` and `output`).
pub(crate) struct Attrs<'a> {
    table: &'a toml::Table,
    read: Vec<&'static str>,
}

impl<'a> Attrs<'a> {
    pub(crate) fn new(table: &'a toml::Table) -> Self {
        Attrs {
            table,
            read: Vec::new(),
        }
    }

    fn get(&mut self, key: &'static str) -> Option<&'a toml::Value> {
        self.read.push(key);
        self.table.get(key)
    }

    fn wrong(&self, key: &str, want: &str) -> CliError {
        CliError::new(format!("attribute '{key}' must be {want}"))
    }

    /// A boolean, `default` when absent.
    pub(crate) fn bool(&mut self, key: &'static str, default: bool) -> Result<bool> {
        match self.get(key) {
            None => Ok(default),
            Some(v) => v.as_bool().ok_or_else(|| self.wrong(key, "true or false")),
        }
    }

    /// An integer, `default` when absent.
    pub(crate) fn int(&mut self, key: &'static str, default: i64) -> Result<i64> {
        match self.get(key) {
            None => Ok(default),
            Some(v) => v.as_integer().ok_or_else(|| self.wrong(key, "an integer")),
        }
    }

    /// A positive integer (≥ `min`), `default` when absent.
    pub(crate) fn count(&mut self, key: &'static str, default: usize, min: usize) -> Result<usize> {
        let v = self.int(key, default as i64)?;
        match usize::try_from(v) {
            Ok(n) if n >= min && n <= MAX_INT => Ok(n),
            _ => Err(self.wrong(key, &format!("an integer from {min} to {MAX_INT}"))),
        }
    }

    /// A finite number (integer or float), `None` when absent.
    pub(crate) fn float(&mut self, key: &'static str) -> Result<Option<f32>> {
        match self.get(key) {
            None => Ok(None),
            Some(v) => {
                let x = v
                    .as_float()
                    .or_else(|| v.as_integer().map(|i| i as f64))
                    .filter(|x| x.is_finite())
                    .ok_or_else(|| self.wrong(key, "a finite number"))?;
                Ok(Some(x as f32))
            }
        }
    }

    /// Non-negative integers: one (repeated `n` times), or exactly one of the lengths in
    /// `lens`, expanded by `expand`. `default` when absent.
    fn ints(
        &mut self,
        key: &'static str,
        min: usize,
        lens: &[usize],
        want: &str,
    ) -> Result<Option<Vec<usize>>> {
        let Some(v) = self.get(key) else {
            return Ok(None);
        };
        let one = |x: &toml::Value| {
            x.as_integer()
                .and_then(|i| usize::try_from(i).ok())
                .filter(|&n| n >= min && n <= MAX_INT)
        };
        let vals: Option<Vec<usize>> = match v {
            toml::Value::Array(a) if lens.contains(&a.len()) => a.iter().map(one).collect(),
            toml::Value::Array(_) => None,
            x => one(x).map(|n| vec![n]),
        };
        vals.map(Some).ok_or_else(|| self.wrong(key, want))
    }

    /// `(h, w)` from `n` or `[h, w]` (each ≥ `min`), `default` when absent.
    pub(crate) fn pair(
        &mut self,
        key: &'static str,
        default: (usize, usize),
        min: usize,
    ) -> Result<(usize, usize)> {
        let want = format!("an integer from {min} to {MAX_INT} or a list [h, w] of them");
        Ok(match self.ints(key, min, &[2], &want)?.as_deref() {
            None => default,
            Some([n]) => (*n, *n),
            Some([h, w]) => (*h, *w),
            Some(_) => return Err(self.wrong(key, &want)),
        })
    }

    /// Padding `[top, left, bottom, right]` from `p`, `[ph, pw]` or `[t, l, b, r]`; zeros
    /// when absent.
    pub(crate) fn pads(&mut self, key: &'static str) -> Result<[usize; 4]> {
        let want = "an integer from 0 to 16777216, [ph, pw] or [top, left, bottom, right]";
        Ok(match self.ints(key, 0, &[2, 4], want)?.as_deref() {
            None => [0; 4],
            Some([p]) => [*p; 4],
            Some([h, w]) => [*h, *w, *h, *w],
            Some([t, l, b, r]) => [*t, *l, *b, *r],
            Some(_) => return Err(self.wrong(key, want)),
        })
    }

    /// A list of integers (each may be −1), `None` when absent.
    pub(crate) fn shape(&mut self, key: &'static str) -> Result<Option<Vec<i64>>> {
        let Some(v) = self.get(key) else {
            return Ok(None);
        };
        let want = "a list of integers";
        let a = v.as_array().ok_or_else(|| self.wrong(key, want))?;
        a.iter()
            .map(|x| x.as_integer().ok_or_else(|| self.wrong(key, want)))
            .collect::<Result<Vec<i64>>>()
            .map(Some)
    }

    /// Refuses any attribute no getter read, naming the ones the op takes.
    pub(crate) fn finish(self) -> Result<()> {
        for key in self.table.keys() {
            if !self.read.contains(&key.as_str()) {
                if self.read.is_empty() {
                    bail!("unknown attribute '{key}' (it takes none)");
                }
                bail!(
                    "unknown attribute '{key}' (it takes: {})",
                    self.read.join(", ")
                );
            }
        }
        Ok(())
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn table(text: &str) -> toml::Table {
        text.parse().unwrap()
    }

    #[test]
    fn sizes_take_one_value_or_a_list() {
        let t = table("stride = 2\ndilation = [1, 3]\npadding = [1, 2]\npads = [1, 2, 3, 4]");
        let mut a = Attrs::new(&t);
        assert_eq!(a.pair("stride", (1, 1), 1).unwrap(), (2, 2));
        assert_eq!(a.pair("dilation", (1, 1), 1).unwrap(), (1, 3));
        assert_eq!(a.pair("kernel", (5, 5), 1).unwrap(), (5, 5));
        assert_eq!(a.pads("padding").unwrap(), [1, 2, 1, 2]);
        assert_eq!(a.pads("pads").unwrap(), [1, 2, 3, 4]);
        assert_eq!(a.pads("absent").unwrap(), [0; 4]);
        a.finish().unwrap();
    }

    #[test]
    fn wrong_types_and_unread_keys_are_refused() {
        let t = table("stride = [1, 2, 3]\neps = \"small\"\nextra = 1");
        let mut a = Attrs::new(&t);
        let e = a.pair("stride", (1, 1), 1).unwrap_err().to_string();
        assert!(
            e.contains("attribute 'stride' must be an integer from 1"),
            "{e}"
        );
        let e = a.float("eps").unwrap_err().to_string();
        assert!(e.contains("attribute 'eps' must be a finite number"), "{e}");
        let e = a.finish().unwrap_err().to_string();
        assert!(
            e.contains("unknown attribute 'extra' (it takes: stride, eps)"),
            "{e}"
        );
    }
}
