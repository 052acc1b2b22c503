package query

import (
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"
)

// checkShortDecimal fails t when appendShortDecimal takes f and spells it
// otherwise than strconv; it reports whether it took it.
func checkShortDecimal(t *testing.T, f float64) bool {
	t.Helper()
	got, ok := appendShortDecimal([]byte("x"), f)
	if !ok {
		if string(got) != "x" {
			t.Fatalf("%v (%#x): refused, but wrote %q", f, math.Float64bits(f), got)
		}
		return false
	}
	if want := strconv.AppendFloat([]byte("x"), f, 'f', -1, 64); string(got) != string(want) {
		t.Fatalf("%v (%#x): got %q, want %q", f, math.Float64bits(f), got, want)
	}
	return true
}

// decimalFloat is the float64 nearest m×10^-k, as a reader of that
// decimal gets it.
func decimalFloat(m int64, k int) float64 {
	f, _ := strconv.ParseFloat(strconv.FormatInt(m, 10)+"e-"+strconv.Itoa(k), 64)
	return f
}

func TestShortDecimal(t *testing.T) {
	// Measured values, which the fast path is for: it must take them.
	for _, f := range []float64{34.19, -77.29, 0.31, 15, 1234.5, 0.05, 1e-6, 123456789.125, 1 << 49, -0.000123} {
		if !checkShortDecimal(t, f) {
			t.Errorf("%v: not taken by the fast path", f)
		}
	}
	// Not its range: the general path.
	for _, f := range []float64{0, math.Copysign(0, -1), 1e-7, 1 << 50, 1e21, math.NaN(), math.Inf(1), 0.1 + 0.2, 1.0 / 3} {
		if checkShortDecimal(t, f) && (f == 0 || f >= 1<<50 || f < 1e-6) {
			t.Errorf("%v: taken outside the range it is proven for", f)
		}
	}
	r := rand.New(rand.NewPCG(1, 2))
	taken := 0
	for range 200_000 {
		// Short decimals of every scale, their neighbours, and any bits.
		f := decimalFloat(r.Int64N(1<<53)>>r.IntN(53), r.IntN(23))
		if r.IntN(2) == 0 {
			f = -f
		}
		if checkShortDecimal(t, f) {
			taken++
		}
		checkShortDecimal(t, math.Nextafter(f, math.Inf(1)))
		checkShortDecimal(t, math.Float64frombits(r.Uint64()))
	}
	if taken < 100_000 {
		t.Errorf("the fast path took %d of 200,000 short decimals", taken)
	}
}

func FuzzShortDecimal(f *testing.F) {
	f.Add(uint64(3419), uint8(2), false)
	f.Add(math.Float64bits(0.1+0.2), uint8(255), true)
	f.Fuzz(func(t *testing.T, m uint64, k uint8, bits bool) {
		if bits { // m is the float's bits
			checkShortDecimal(t, math.Float64frombits(m))
			return
		}
		checkShortDecimal(t, decimalFloat(int64(m>>11), int(k%23)))
	})
}

// timeFormatted is what time spells for pgMicros (since 2000-01-01).
func timeFormatted(pgMicros int64, zone bool) string {
	layout := time.RFC3339Nano
	if !zone {
		layout = "2006-01-02T15:04:05.999999999"
	}
	sec, us := pgMicros/1_000_000, pgMicros%1_000_000
	return time.Unix(sec+pgEpochMicros/1_000_000, us*1000).UTC().Format(layout)
}

func checkTimestamp(t *testing.T, pgMicros int64) {
	t.Helper()
	for _, zone := range []bool{true, false} {
		if got, want := string(appendTimestamp(nil, pgMicros, zone)), timeFormatted(pgMicros, zone); got != want {
			t.Fatalf("%d (zone %v): got %s, want %s", pgMicros, zone, got, want)
		}
	}
}

// PostgreSQL's first and last instants, in microseconds since 2000-01-01:
// 4714-11-24 BC and 294277-01-01 (excluded).
const (
	pgFirstMicros = -211813488000000000
	pgEndMicros   = 9223371331200000000
)

func TestTimestamp(t *testing.T) {
	for _, us := range []int64{0, -1, 1, 86_400_000_000 - 1, 101_000_123_456, 1_000_100, // 2000 and around
		-946_684_800_000_000,                        // 1970-01-01
		-63_113_904_000_000_000 + 59*86_400_000_000, // 0000-03-01: the first day of the fast path
		pgFirstMicros, pgEndMicros - 1,
		252_455_616_000_000_000 - 1, 252_455_616_000_000_000, // the last instant of 9999 and the first of 10000
	} {
		checkTimestamp(t, us)
	}
	r := rand.New(rand.NewPCG(3, 4))
	for range 100_000 {
		checkTimestamp(t, pgFirstMicros+int64(r.Uint64N(pgEndMicros-pgFirstMicros)))
		checkTimestamp(t, r.Int64N(1<<50)-1<<49) // about 1964 to 2035
	}
	for days := int64(-800_000); days < 3_000_000; days += 997 {
		if got, want := string(appendDate(nil, days)), time.Unix(days*86400, 0).UTC().Format(time.DateOnly); got != want {
			t.Fatalf("day %d: got %s, want %s", days, got, want)
		}
	}
}

func FuzzTimestamp(f *testing.F) {
	f.Add(int64(0))
	f.Add(int64(pgEndMicros - 1))
	f.Fuzz(func(t *testing.T, us int64) {
		if us < pgFirstMicros || us >= pgEndMicros {
			return // not an instant PostgreSQL sends
		}
		checkTimestamp(t, us)
	})
}

// TestJSONSafe8 checks the word test against the byte table: every byte
// value at every place among safe bytes, and random words.
func TestJSONSafe8(t *testing.T) {
	ref := func(w uint64) bool {
		for range 8 {
			if b := byte(w); b >= 0x80 || !jsonSafe[b] {
				return false
			}
			w >>= 8
		}
		return true
	}
	for place := range 8 {
		for b := range 256 {
			for _, fill := range []uint64{eachByte1 * 'a', eachByte1 * 0x20, eachByte1 * 0x7f, eachByte1 * '#'} {
				w := fill&^(0xff<<(8*place)) | uint64(b)<<(8*place)
				if got := jsonSafe8(w); got != ref(w) {
					t.Fatalf("%#016x: got %v, want %v", w, got, !got)
				}
			}
		}
	}
	r := rand.New(rand.NewPCG(5, 6))
	for range 1_000_000 {
		w := r.Uint64()
		switch r.IntN(3) {
		case 0:
			w &^= eachByteHigh // ASCII
		case 1:
			w &^= eachByteHigh | eachByte1*0x40 // ASCII below '@': controls, quotes
		}
		if got := jsonSafe8(w); got != ref(w) {
			t.Fatalf("%#016x: got %v, want %v", w, got, !got)
		}
	}
}

// TestFastPathsPostgres: values of the kinds the fast paths write, and
// their edges, as PostgreSQL sends them and a result stream writes them:
// its first and last instants, the years past 9999 (through time), floats
// in and out of the short-decimal range, numerics short and long.
func TestFastPathsPostgres(t *testing.T) {
	e := pgEngine(t, nil)
	got := strings.TrimSpace(ndjsonOf(t, e, `SELECT '294276-12-31 23:59:59.999999+00'::timestamptz, '4713-11-24 00:00:00+00 BC'::timestamptz, `+
		`'9999-12-31 23:59:59.5+00'::timestamptz, '10000-01-01 00:00:00'::timestamp, '2024-02-29 12:00:00.000010'::timestamp, `+
		`'5874897-12-31'::date, '0001-01-01'::date, `+
		`34.19::float8, -0.000123::float8, 0.1::float8 + 0.2::float8, 1e15::float8, 1e21::float8, 1e-7::float8, '-0'::float8, `+
		`1234.50::numeric(10,2), 123456789012.345::numeric, 0.000001::numeric, 1234567890123456.5::numeric`))
	want := `["294276-12-31T23:59:59.999999Z","-4712-11-24T00:00:00Z",` +
		`"9999-12-31T23:59:59.5Z","10000-01-01T00:00:00","2024-02-29T12:00:00.00001",` +
		`"5874897-12-31","0001-01-01",` +
		`34.19,-0.000123,0.30000000000000004,1000000000000000,1e+21,1e-7,-0,` +
		`1234.50,123456789012.345,0.000001,"1234567890123456.5"]`
	if got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}
