//! Dates in the proleptic Gregorian calendar, UTC: what the record prints
//! and what search providers read and write. Howard Hinnant's day
//! arithmetic, so no time zone database or date crate is needed for either.

/// Days from 1970-01-01 to a civil date.
pub fn days_from_civil(y: i64, m: u64, d: u64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let m = m as i64;
    let mp = if m > 2 { m - 3 } else { m + 9 };
    let doy = (153 * mp + 2) / 5 + d as i64 - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// Days since 1970-01-01 as (year, month, day): the inverse of
/// [`days_from_civil`].
pub fn civil_from_days(days: i64) -> (i64, u64, u64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m as u64, d as u64)
}

/// `secs` after the epoch as `1994-11-06`, `sep`, `08:49:37`: the record
/// puts a space between date and time, RFC 3339 a `T`.
pub fn date_time(secs: i64, sep: char) -> String {
    let (y, m, d) = civil_from_days(secs.div_euclid(86_400));
    let t = secs.rem_euclid(86_400);
    format!(
        "{y:04}-{m:02}-{d:02}{sep}{:02}:{:02}:{:02}",
        t / 3600,
        t % 3600 / 60,
        t % 60
    )
}

/// `secs` after the epoch as RFC 3339 UTC, `1994-11-06T08:49:37Z`.
pub fn rfc3339(secs: u64) -> String {
    format!(
        "{}Z",
        date_time(i64::try_from(secs).unwrap_or(i64::MAX), 'T')
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn days_and_dates_convert_both_ways() {
        for days in [-719_468, -1, 0, 1, 11_016, 20_000, 2_932_896] {
            let (y, m, d) = civil_from_days(days);
            assert_eq!(days_from_civil(y, m, d), days, "{y}-{m}-{d}");
        }
        assert_eq!(civil_from_days(11_016), (2000, 2, 29));
        assert_eq!(civil_from_days(-1), (1969, 12, 31));
        assert_eq!(date_time(-1, ' '), "1969-12-31 23:59:59");
        assert_eq!(rfc3339(784_111_777), "1994-11-06T08:49:37Z");
    }
}
