package sqlbuild

import "testing"

func TestTypeMapping(t *testing.T) {
	tests := []struct {
		decl string
		want Kind
	}{
		{"INTEGER", KindInt}, {"bigint", KindInt}, {"BOOLEAN", KindBool}, {"DATE", KindDate},
		{"DATETIME", KindTimestamptz}, {"timestamp", KindTimestamptz}, {"JSON", KindJSON},
		{"VARCHAR(10)", KindText}, {"TEXT", KindText}, {"", KindAny}, {"BLOB", KindBytes},
		{"REAL", KindFloat}, {"DOUBLE PRECISION", KindFloat}, {"NUMERIC(10,2)", KindNumeric}, {"DECIMAL", KindNumeric},
	}
	for _, tt := range tests {
		t.Run("sqlite "+tt.decl, func(t *testing.T) {
			if got := SQLiteType(tt.decl).Kind; got != tt.want {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
	pg := []struct {
		typname, elem string
		want          Kind
		bits          int
	}{
		{"int2", "", KindInt, 16}, {"int4", "", KindInt, 32}, {"int8", "", KindInt, 64},
		{"float4", "", KindFloat, 0}, {"numeric", "", KindNumeric, 0}, {"bool", "", KindBool, 0},
		{"date", "", KindDate, 0}, {"timestamptz", "", KindTimestamptz, 0}, {"timestamp", "", KindTimestamp, 0},
		{"bytea", "", KindBytes, 0}, {"uuid", "", KindUUID, 0}, {"jsonb", "", KindJSON, 0},
		{"interval", "", KindInterval, 0}, {"varchar", "", KindText, 0}, {"_int4", "int4", KindArray, 0},
		{"mood_enum", "", KindAny, 0},
	}
	for _, tt := range pg {
		t.Run("pg "+tt.typname, func(t *testing.T) {
			got := PostgresType(tt.typname, tt.elem)
			if got.Kind != tt.want || got.Bits != tt.bits {
				t.Errorf("got %v/%d, want %v/%d", got.Kind, got.Bits, tt.want, tt.bits)
			}
		})
	}
}
