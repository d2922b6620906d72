//! UTC calendar formatting from `SystemTime`, without a time-zone database or libc.

use std::time::{SystemTime, UNIX_EPOCH};

/// A UTC calendar time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Civil {
    year: i64,
    month: u32,
    day: u32,
    hour: u32,
    minute: u32,
    second: u32,
}

/// (year, month 1-12, day 1-31) of the proleptic Gregorian calendar for `days` since
/// 1970-01-01 (Howard Hinnant's `civil_from_days`).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days.saturating_add(719_468);
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097); // [0, 146096]
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365; // [0, 399]
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100); // [0, 365]
    let mp = (5 * doy + 2) / 153; // [0, 11], March-based
    let day = doy - (153 * mp + 2) / 5 + 1; // [1, 31]
    let month = if mp < 10 { mp + 3 } else { mp - 9 }; // [1, 12]
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month as u32, day as u32)
}

fn civil_from_unix(secs: i64) -> Civil {
    let days = secs.div_euclid(86_400);
    let sod = secs.rem_euclid(86_400); // [0, 86399]
    let (year, month, day) = civil_from_days(days);
    Civil {
        year,
        month,
        day,
        hour: (sod / 3_600) as u32,
        minute: (sod / 60 % 60) as u32,
        second: (sod % 60) as u32,
    }
}

/// Seconds since the epoch (floor, so negative before 1970) and the microseconds within it.
fn unix_time(t: SystemTime) -> (i64, u32) {
    match t.duration_since(UNIX_EPOCH) {
        Ok(d) => (
            i64::try_from(d.as_secs()).unwrap_or(i64::MAX),
            d.subsec_micros(),
        ),
        Err(e) => {
            let d = e.duration();
            let secs = i64::try_from(d.as_secs()).unwrap_or(i64::MAX);
            match d.subsec_micros() {
                0 => (secs.saturating_neg(), 0),
                us => (secs.saturating_neg().saturating_sub(1), 1_000_000 - us),
            }
        }
    }
}

/// `t` as the core-dump `%d` value: `%Y%m%d-%H%M%S` in UTC, e.g. `20000229-000000`.
pub fn dump_datetime(t: SystemTime) -> String {
    let c = civil_from_unix(unix_time(t).0);
    format!(
        "{:04}{:02}{:02}-{:02}{:02}{:02}",
        c.year, c.month, c.day, c.hour, c.minute, c.second
    )
}

/// `t` as a log-line timestamp: ISO 8601 in UTC with microseconds, e.g.
/// `2000-02-29T00:00:00.000000Z`.
pub fn log_timestamp(t: SystemTime) -> String {
    let (secs, us) = unix_time(t);
    let c = civil_from_unix(secs);
    format!(
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:06}Z",
        c.year, c.month, c.day, c.hour, c.minute, c.second, us
    )
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn at(secs: i64) -> SystemTime {
        if secs >= 0 {
            UNIX_EPOCH + Duration::from_secs(secs.unsigned_abs())
        } else {
            UNIX_EPOCH - Duration::from_secs(secs.unsigned_abs())
        }
    }

    /// Expected values from `date -u -d @N +%Y%m%d-%H%M%S`.
    #[test]
    fn dump_datetime_matches_date_utc() {
        let cases = [
            (0, "19700101-000000"),
            (951_782_400, "20000229-000000"),
            (1_798_675_200, "20261231-000000"),
            (-1, "19691231-235959"),
            (86_399, "19700101-235959"),
            (1_234_567_890, "20090213-233130"),
            (4_107_542_399, "21000228-235959"),
            (253_402_300_799, "99991231-235959"),
        ];
        for (secs, want) in cases {
            assert_eq!(dump_datetime(at(secs)), want, "epoch {secs}");
        }
    }

    #[test]
    fn civil_round_trips_every_day_over_four_centuries() {
        // Consecutive days advance the date by exactly one calendar day.
        let mut prev = civil_from_days(-146_097);
        for d in -146_096..146_097 {
            let cur = civil_from_days(d);
            let (py, pm, pd) = prev;
            let leap = (py % 4 == 0 && py % 100 != 0) || py % 400 == 0;
            let month_len = match pm {
                2 if leap => 29,
                2 => 28,
                4 | 6 | 9 | 11 => 30,
                _ => 31,
            };
            let next = if pd < month_len {
                (py, pm, pd + 1)
            } else if pm < 12 {
                (py, pm + 1, 1)
            } else {
                (py + 1, 1, 1)
            };
            assert_eq!(cur, next, "day {d}");
            prev = cur;
        }
    }

    #[test]
    fn log_timestamp_has_microseconds() {
        let t = UNIX_EPOCH + Duration::new(951_782_400, 123_456_789);
        assert_eq!(log_timestamp(t), "2000-02-29T00:00:00.123456Z");
        let t = UNIX_EPOCH - Duration::from_micros(1);
        assert_eq!(log_timestamp(t), "1969-12-31T23:59:59.999999Z");
    }
}
