//! The tokens of one line of program text, each with its column, and the cursor the parser
//! reads them with (its errors name the line, the column and what was expected).

use nrt_core::{Error, err};

/// A token's kind.
#[derive(Clone, Debug, PartialEq)]
pub(super) enum Tok {
    /// `[A-Za-z_][A-Za-z0-9_]*`.
    Ident(String),
    /// A number as written (`12`, `-3`, `0x1f`, `1.5e-7`).
    Num(String),
    /// A quoted string, unescaped.
    Str(String),
    /// One of `= , [ ] ( ) : ; + . - *`, or `>` of `->`.
    Punct(char),
}

impl Tok {
    fn describe(&self) -> String {
        let short = |s: &str| {
            let mut t: String = s.chars().take(24).collect();
            if t.len() < s.len() {
                t.push('…');
            }
            t
        };
        match self {
            Tok::Ident(s) | Tok::Num(s) => format!("`{}`", short(s)),
            Tok::Str(s) => format!("string {:?}", short(s)),
            Tok::Punct(c) => format!("`{c}`"),
        }
    }
}

/// The tokens of one line and a read position.
pub(super) struct Line {
    /// 1-based line number.
    pub(super) number: usize,
    toks: Vec<(Tok, usize)>,
    end_col: usize,
    pos: usize,
}

/// Splits `text` (one line, without its newline) into tokens; a `#` outside a string ends
/// the line.
pub(super) fn line(number: usize, text: &str) -> Result<Line, Error> {
    let chars: Vec<char> = text.chars().collect();
    let mut toks = Vec::new();
    let mut i = 0;
    let at = |i: usize| chars.get(i).copied();
    while let Some(c) = at(i) {
        let col = i + 1;
        if c.is_whitespace() {
            i += 1;
        } else if c == '#' {
            break;
        } else if c.is_ascii_alphabetic() || c == '_' {
            let start = i;
            while at(i).is_some_and(|c| c.is_ascii_alphanumeric() || c == '_') {
                i += 1;
            }
            toks.push((Tok::Ident(chars[start..i].iter().collect()), col));
        } else if c.is_ascii_digit() || (c == '-' && at(i + 1).is_some_and(|d| d.is_ascii_digit()))
        {
            let start = i;
            i += 1;
            let hex = c == '0' && matches!(at(i), Some('x' | 'X'))
                || c == '-' && at(i) == Some('0') && matches!(at(i + 1), Some('x' | 'X'));
            while let Some(d) = at(i) {
                let sign_after_exp = !hex
                    && (d == '-' || d == '+')
                    && matches!(at(i - 1), Some('e' | 'E'))
                    && at(i + 1).is_some_and(|n| n.is_ascii_digit());
                if d.is_ascii_alphanumeric() || d == '_' || d == '.' || sign_after_exp {
                    i += 1;
                } else {
                    break;
                }
            }
            toks.push((Tok::Num(chars[start..i].iter().collect()), col));
        } else if c == '"' {
            i += 1;
            let mut s = String::new();
            loop {
                match at(i) {
                    None => {
                        return Err(err!(
                            Invalid,
                            "line {number}, column {col}: unterminated string"
                        ));
                    }
                    Some('"') => {
                        i += 1;
                        break;
                    }
                    Some('\\') => {
                        let (ch, used) = escape(&chars, i + 1).ok_or_else(|| {
                            err!(
                                Invalid,
                                "line {number}, column {}: unknown escape in a string (\\\\, \
                                 \\\", \\', \\n, \\r, \\t, \\0 or \\u{{HEX}})",
                                i + 1
                            )
                        })?;
                        s.push(ch);
                        i += 1 + used;
                    }
                    Some(ch) => {
                        s.push(ch);
                        i += 1;
                    }
                }
            }
            toks.push((Tok::Str(s), col));
        } else if c == '-' && at(i + 1) == Some('>') {
            toks.push((Tok::Punct('>'), col));
            i += 2;
        } else if "=,[]():;+.-*".contains(c) {
            toks.push((Tok::Punct(c), col));
            i += 1;
        } else {
            return Err(err!(
                Invalid,
                "line {number}, column {col}: unexpected character {c:?}"
            ));
        }
    }
    Ok(Line {
        number,
        toks,
        end_col: chars.len() + 1,
        pos: 0,
    })
}

/// The character of the escape starting at `chars[i]` (after the backslash) and how many
/// characters it used.
fn escape(chars: &[char], i: usize) -> Option<(char, usize)> {
    Some(match chars.get(i)? {
        '\\' => ('\\', 1),
        '"' => ('"', 1),
        '\'' => ('\'', 1),
        'n' => ('\n', 1),
        'r' => ('\r', 1),
        't' => ('\t', 1),
        '0' => ('\0', 1),
        'u' => {
            if chars.get(i + 1) != Some(&'{') {
                return None;
            }
            let close = (i + 2..chars.len().min(i + 10)).find(|&j| chars.get(j) == Some(&'}'))?;
            let hex: String = chars.get(i + 2..close)?.iter().collect();
            let ch = char::from_u32(u32::from_str_radix(&hex, 16).ok()?)?;
            (ch, close - i + 1)
        }
        _ => return None,
    })
}

impl Line {
    /// Whether every token has been read.
    pub(super) fn at_end(&self) -> bool {
        self.pos >= self.toks.len()
    }

    /// The next token without reading it.
    pub(super) fn peek(&self) -> Option<&Tok> {
        self.toks.get(self.pos).map(|(t, _)| t)
    }

    /// Reads the next token.
    pub(super) fn next(&mut self) -> Option<Tok> {
        let t = self.toks.get(self.pos).map(|(t, _)| t.clone());
        if t.is_some() {
            self.pos += 1;
        }
        t
    }

    /// Back to the line's first token.
    pub(super) fn rewind(&mut self) {
        self.pos = 0;
    }

    /// Steps back one token (after a [`Line::next`] that returned one).
    pub(super) fn back(&mut self) {
        self.pos = self.pos.saturating_sub(1);
    }

    /// The column of the next token (one past the line's end at its end).
    pub(super) fn col(&self) -> usize {
        self.toks.get(self.pos).map_or(self.end_col, |&(_, c)| c)
    }

    /// `line L, column C: expected WHAT, found ...` at the next token.
    pub(super) fn expected(&self, what: &str) -> Error {
        let found = self
            .peek()
            .map_or_else(|| "the end of the line".to_owned(), Tok::describe);
        err!(
            Invalid,
            "line {}, column {}: expected {what}, found {found}",
            self.number,
            self.col()
        )
    }

    /// An error at the token just read (`line L, column C: MSG`).
    pub(super) fn error_at_prev(&self, msg: &str) -> Error {
        let col = self
            .pos
            .checked_sub(1)
            .and_then(|p| self.toks.get(p))
            .map_or(self.end_col, |&(_, c)| c);
        err!(Invalid, "line {}, column {col}: {msg}", self.number)
    }

    /// Reads punctuation `c` or fails naming it.
    pub(super) fn punct(&mut self, c: char) -> Result<(), Error> {
        if self.peek() == Some(&Tok::Punct(c)) {
            self.pos += 1;
            Ok(())
        } else {
            Err(self.expected(&if c == '>' {
                "`->`".to_owned()
            } else {
                format!("`{c}`")
            }))
        }
    }

    /// Reads punctuation `c` if it is next.
    pub(super) fn eat(&mut self, c: char) -> bool {
        if self.peek() == Some(&Tok::Punct(c)) {
            self.pos += 1;
            true
        } else {
            false
        }
    }

    /// Reads the keyword `word` or fails naming it.
    pub(super) fn keyword(&mut self, word: &str) -> Result<(), Error> {
        match self.peek() {
            Some(Tok::Ident(s)) if s == word => {
                self.pos += 1;
                Ok(())
            }
            _ => Err(self.expected(&format!("`{word}`"))),
        }
    }

    /// Reads `key=`.
    pub(super) fn key(&mut self, key: &str) -> Result<(), Error> {
        match self.peek() {
            Some(Tok::Ident(s)) if s == key => {
                self.pos += 1;
                self.punct('=')
            }
            _ => Err(self.expected(&format!("`{key}=`"))),
        }
    }

    /// Reads an identifier.
    pub(super) fn ident(&mut self, what: &str) -> Result<String, Error> {
        match self.peek() {
            Some(Tok::Ident(s)) => {
                let s = s.clone();
                self.pos += 1;
                Ok(s)
            }
            _ => Err(self.expected(what)),
        }
    }

    /// Reads a quoted string.
    pub(super) fn string(&mut self, what: &str) -> Result<String, Error> {
        match self.peek() {
            Some(Tok::Str(s)) => {
                let s = s.clone();
                self.pos += 1;
                Ok(s)
            }
            _ => Err(self.expected(what)),
        }
    }

    /// Fails unless every token has been read.
    pub(super) fn finish(&self) -> Result<(), Error> {
        if self.at_end() {
            Ok(())
        } else {
            Err(self.expected("the end of the line"))
        }
    }

    /// Reads an integer in `lo..=hi` (decimal or `0x` hex, optionally negative).
    pub(super) fn int(&mut self, what: &str, lo: i128, hi: i128) -> Result<i128, Error> {
        let expect = || format!("{what} (an integer in {lo}..={hi})");
        match self.peek() {
            Some(Tok::Num(s)) => match parse_int(s) {
                Some(v) if (lo..=hi).contains(&v) => {
                    self.pos += 1;
                    Ok(v)
                }
                _ => Err(self.expected(&expect())),
            },
            _ => Err(self.expected(&expect())),
        }
    }

    /// Reads an unsigned integer of type `T` (via [`Line::int`]).
    pub(super) fn uint<T: TryFrom<i128> + Into<u64> + Bounded>(
        &mut self,
        what: &str,
    ) -> Result<T, Error> {
        let v = self.int(what, 0, i128::from(T::MAX_U64))?;
        T::try_from(v).map_err(|_| self.error_at_prev("integer out of range"))
    }

    /// Reads a binary32: a decimal (integers included), `inf`, `-inf`, `nan` (the canonical
    /// quiet NaN) or `nan:0xBITS`.
    pub(super) fn float(&mut self, what: &str) -> Result<f32, Error> {
        let expect = || format!("{what} (a float: decimal, inf, -inf or nan:0xBITS)");
        let neg = self.eat('-');
        match self.peek().cloned() {
            Some(Tok::Ident(s)) if s == "inf" => {
                self.pos += 1;
                Ok(if neg {
                    f32::NEG_INFINITY
                } else {
                    f32::INFINITY
                })
            }
            Some(Tok::Ident(s)) if s == "nan" && !neg => {
                self.pos += 1;
                if self.eat(':') {
                    let bits = self.int("NaN bits", 0, 0xFFFF_FFFF)?;
                    let v = f32::from_bits(u32::try_from(bits).unwrap_or(0));
                    if v.is_nan() {
                        Ok(v)
                    } else {
                        Err(self.error_at_prev("expected the bits of a NaN"))
                    }
                } else {
                    Ok(f32::from_bits(0x7FC0_0000))
                }
            }
            Some(Tok::Num(s)) if !neg && !is_hex(&s) => match s.parse::<f32>() {
                Ok(v) => {
                    self.pos += 1;
                    Ok(v)
                }
                Err(_) => Err(self.expected(&expect())),
            },
            _ => {
                if neg {
                    self.back();
                }
                Err(self.expected(&expect()))
            }
        }
    }

    /// Whether the next token is a number written as a float (`.` or an exponent), or one of
    /// `inf`, `-`, `nan`.
    pub(super) fn next_is_float(&self) -> bool {
        match self.peek() {
            Some(Tok::Num(s)) => !is_hex(s) && s.contains(['.', 'e', 'E']),
            Some(Tok::Ident(s)) => s == "inf" || s == "nan",
            Some(Tok::Punct('-')) => true,
            _ => false,
        }
    }
}

/// Integer types [`Line::uint`] reads.
pub(super) trait Bounded {
    /// The largest value, widened.
    const MAX_U64: u64;
}

impl Bounded for u8 {
    const MAX_U64: u64 = u8::MAX as u64;
}
impl Bounded for u16 {
    const MAX_U64: u64 = u16::MAX as u64;
}
impl Bounded for u32 {
    const MAX_U64: u64 = u32::MAX as u64;
}
impl Bounded for u64 {
    const MAX_U64: u64 = u64::MAX;
}

fn is_hex(s: &str) -> bool {
    let s = s.strip_prefix('-').unwrap_or(s);
    s.starts_with("0x") || s.starts_with("0X")
}

fn parse_int(s: &str) -> Option<i128> {
    let (neg, body) = match s.strip_prefix('-') {
        Some(b) => (true, b),
        None => (false, s),
    };
    let v = if let Some(h) = body.strip_prefix("0x").or_else(|| body.strip_prefix("0X")) {
        if h.is_empty() || h.len() > 20 || !h.bytes().all(|b| b.is_ascii_hexdigit()) {
            return None;
        }
        i128::from_str_radix(h, 16).ok()?
    } else {
        if body.is_empty() || body.len() > 30 || !body.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        body.parse::<i128>().ok()?
    };
    Some(if neg { -v } else { v })
}
