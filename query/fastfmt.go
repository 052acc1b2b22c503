package query

import (
	"math"
	"time"
)

// Formatting of the values most results are made of, floats with a few
// decimals and timestamps, without strconv's general algorithm or
// time.Time: the same bytes, in a fraction of the instructions. Each
// falls back to the general path outside the range where it is proven
// to agree with it (FuzzShortDecimal, FuzzTimestamp).

// pow10 are the powers of ten a float64 holds exactly.
var pow10 = [...]float64{1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10,
	1e11, 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22}

// shortScaledMax bounds f×10^k for appendShortDecimal: below 2^50 a
// float64's spacing is at most 1/8, which is what the proof below needs.
const shortScaledMax = 1 << 50

// appendShortDecimal appends f as strconv.AppendFloat(dst, f, 'f', -1,
// 64) does, when f is a decimal of k fraction digits whose digits, read as
// an integer, are below 2^50 and 1e-6 <= |f| (the range where
// encoding/json writes 'f'); ok is false, and dst as it was, otherwise.
//
// It tries k = 0, 1, 2, ... and takes the first k at which m =
// round(|f|×10^k) gives back f as m/10^k: the division of two exact
// float64s is correctly rounded, so it is what parsing the decimal m×10^-k
// gives, and so that decimal reads back as f. No shorter one does, or a
// smaller k would have found it. And it is the one decimal of k digits
// that does: with |f|×10^k below 2^50, the decimals that round to f span
// less than 1/4 at that scale, and round() cannot miss the one in it
// (it is within 3/16 of the product).
func appendShortDecimal(dst []byte, f float64) ([]byte, bool) {
	a := math.Abs(f)
	if !(a >= 1e-6 && a < shortScaledMax) { // also NaN and 0, whose sign strconv keeps
		return dst, false
	}
	for k, p := range pow10 {
		s := a * p
		if s >= shortScaledMax {
			return dst, false
		}
		m := math.Floor(s + 0.5) // exact: s's spacing is at most 1/8
		if m/p == a {
			return appendScaled(dst, f < 0, uint64(m), k), true
		}
	}
	return dst, false
}

// appendScaled appends m×10^-k with k fraction digits, negative when neg.
func appendScaled(dst []byte, neg bool, m uint64, k int) []byte {
	var buf [32]byte // "-", 16 digits of m, ".", 21 zeros at most: m < 2^50, m×10^-k >= 1e-6
	i := len(buf)
	for range k {
		i--
		buf[i] = byte('0' + m%10)
		m /= 10
	}
	if k > 0 {
		i--
		buf[i] = '.'
	}
	for {
		i--
		buf[i] = byte('0' + m%10)
		m /= 10
		if m == 0 {
			break
		}
	}
	if neg {
		i--
		buf[i] = '-'
	}
	return append(dst, buf[i:]...)
}

const (
	microsPerDay = 86_400_000_000
	// unixToCivil is the days from 0000-03-01 to 1970-01-01 in the
	// proleptic Gregorian calendar (the count civilDate starts from).
	unixToCivil = 719_468
	// daysPer400 is the days in 400 Gregorian years.
	daysPer400 = 146_097
	// pgEpochDays is 2000-01-01 in days since 1970-01-01.
	pgEpochDays = pgEpochMicros / microsPerDay
)

// appendTimestamp appends the instant pgMicros (microseconds since
// 2000-01-01, PostgreSQL's epoch) in UTC as t.AppendFormat(dst,
// time.RFC3339Nano) does, or without the zone's "Z" when !zone (layout
// "2006-01-02T15:04:05.999999999"), for the years 0 to 9999; others go
// through time. Counted in days first, so that no sum overflows at
// PostgreSQL's last instant.
func appendTimestamp(dst []byte, pgMicros int64, zone bool) []byte {
	days := pgMicros / microsPerDay
	rem := pgMicros % microsPerDay
	if rem < 0 {
		days, rem = days-1, rem+microsPerDay
	}
	days += pgEpochDays
	secs := rem / 1_000_000
	frac := rem % 1_000_000
	y, mo, d, ok := civilDate(days)
	if !ok {
		layout := time.RFC3339Nano
		if !zone {
			layout = "2006-01-02T15:04:05.999999999"
		}
		return time.Unix(days*86400+secs, frac*1000).UTC().AppendFormat(dst, layout)
	}
	dst = appendDateDigits(dst, y, mo, d)
	dst = append(dst, 'T',
		byte('0'+secs/36000), byte('0'+secs/3600%10), ':',
		byte('0'+secs/600%6), byte('0'+secs/60%10), ':',
		byte('0'+secs%60/10), byte('0'+secs%10))
	if frac != 0 {
		var f [7]byte
		f[0] = '.'
		for i := 6; i > 0; i-- {
			f[i] = byte('0' + frac%10)
			frac /= 10
		}
		n := 7
		for f[n-1] == '0' {
			n--
		}
		dst = append(dst, f[:n]...)
	}
	if zone {
		dst = append(dst, 'Z')
	}
	return dst
}

// appendDate appends the date days after 1970-01-01 as time.DateOnly
// does, for the years 0 to 9999; others go through time.
func appendDate(dst []byte, days int64) []byte {
	y, mo, d, ok := civilDate(days)
	if !ok {
		return time.Unix(days*86400, 0).UTC().AppendFormat(dst, time.DateOnly)
	}
	return appendDateDigits(dst, y, mo, d)
}

func appendDateDigits(dst []byte, y, mo, d int64) []byte {
	return append(dst,
		byte('0'+y/1000), byte('0'+y/100%10), byte('0'+y/10%10), byte('0'+y%10), '-',
		byte('0'+mo/10), byte('0'+mo%10), '-',
		byte('0'+d/10), byte('0'+d%10))
}

// civilDate is the proleptic Gregorian date days after 1970-01-01; ok is
// false outside the years 0 to 9999. The count runs from 0000-03-01, so
// that a leap day ends its year, and in eras of 400 years.
func civilDate(days int64) (y, mo, d int64, ok bool) {
	z := days + unixToCivil
	if z < 0 || z >= 10_000/400*daysPer400 {
		return 0, 0, 0, false
	}
	era := z / daysPer400
	doe := z - era*daysPer400                                      // day of the era, 0..146096
	yoe := (doe - doe/1460 + doe/36524 - doe/(daysPer400-1)) / 365 // year of the era, 0..399
	doy := doe - (365*yoe + yoe/4 - yoe/100)                       // day of the year from March 1st
	mp := (5*doy + 2) / 153                                        // month from March, 0..11
	d = doy - (153*mp+2)/5 + 1
	mo = mp + 3
	if mo > 12 {
		mo -= 12
	}
	y = yoe + era*400
	if mo <= 2 {
		y++
	}
	return y, mo, d, y <= 9999
}
