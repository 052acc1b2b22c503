package validate

import (
	"slices"
	"strings"
)

// funcFamily is one group of the allow list: a name for review and test
// output, and its functions, lower case and sorted.
type funcFamily struct {
	name  string
	funcs []string
}

// allowedFuncs are the functions callers' SQL may call without an
// operator's allowed_functions entry: pure computations over the values a
// query already reads, in PostgreSQL and in SQLite (the same validator
// serves both). None takes a relation, database or file name, reads
// pages, settings, other sessions or server state, signals a backend,
// writes, or runs SQL given as text; TestAllowListKnownRefused checks the
// list against knownRefusedNames and knownRefusedPrefixes. A name may be
// in several families; each family is sorted (TestAllowListSorted
// checks). Type names are here for the casts that look like calls:
// numeric(10,2), varchar(20), timestamp(3).
var allowedFuncs = []funcFamily{
	// Arithmetic, rounding, logarithms, trigonometry, random numbers.
	{"math", []string{
		"abs", "acos", "acosd", "acosh", "asin", "asind", "asinh", "atan", "atan2", "atan2d",
		"atand", "atanh", "cbrt", "ceil", "ceiling", "cos", "cosd", "cosh", "cot", "cotd",
		"degrees", "div", "erf", "erfc", "exp", "factorial", "floor", "gamma", "gcd", "lcm",
		"lgamma", "ln", "log", "log10", "log2", "min_scale", "mod", "pi", "pow", "power",
		"radians", "random", "random_normal", "round", "scale", "sign", "sin", "sind", "sinh",
		"sqrt", "tan", "tand", "tanh", "trim_scale", "trunc", "width_bucket",
	}},
	// Text and bytes: case, padding, trimming, searching, splitting,
	// quoting, encodings, bits.
	{"string", []string{
		"ascii", "bit_count", "bit_length", "btrim", "casefold", "char_length",
		"character_length", "chr", "concat", "concat_ws", "convert", "convert_from",
		"convert_to", "decode", "encode", "get_bit", "get_byte", "initcap", "left", "length",
		"lower", "lpad", "ltrim", "normalize", "octet_length", "overlay", "parse_ident",
		"position", "quote_ident", "quote_literal", "quote_nullable", "repeat", "replace",
		"reverse", "right", "rpad", "rtrim", "set_bit", "set_byte", "split_part", "starts_with",
		"string_to_array", "string_to_table", "strpos", "substr", "substring", "to_ascii",
		"to_bin", "to_hex", "to_oct", "translate", "trim", "unicode_assigned", "unistr", "upper",
	}},
	// Pattern matching.
	{"pattern", []string{
		"like_escape", "regexp_count", "regexp_instr", "regexp_like", "regexp_match",
		"regexp_matches", "regexp_replace", "regexp_split_to_array", "regexp_split_to_table",
		"regexp_substr", "similar_escape", "similar_to_escape",
	}},
	// Formatting and parsing of numbers and dates.
	{"formatting", []string{
		"format", "to_char", "to_date", "to_number", "to_timestamp",
	}},
	// Dates, times and intervals; the clock of the statement and of now.
	{"date/time", []string{
		"age", "clock_timestamp", "current_time", "current_timestamp", "date_add", "date_bin",
		"date_part", "date_subtract", "date_trunc", "extract", "isfinite", "justify_days",
		"justify_hours", "justify_interval", "localtime", "localtimestamp", "make_date",
		"make_interval", "make_time", "make_timestamp", "make_timestamptz", "now",
		"statement_timestamp", "timeofday", "timezone", "transaction_timestamp",
	}},
	// Hashes, checksums, UUIDs and random bytes.
	{"hash/uuid", []string{
		"crc32", "crc32c", "digest", "gen_random_bytes", "gen_random_uuid", "hmac", "md5",
		"sha224", "sha256", "sha384", "sha512", "uuid_extract_timestamp",
		"uuid_extract_version", "uuid_generate_v3", "uuid_generate_v4", "uuid_generate_v5",
		"uuidv4", "uuidv7",
	}},
	// Conditional expressions spelled like calls.
	{"conditional", []string{
		"coalesce", "greatest", "least", "nullif",
	}},
	// Aggregates, statistical and ordered-set aggregates, GROUPING.
	{"aggregate", []string{
		"any_value", "array_agg", "avg", "bit_and", "bit_or", "bit_xor", "bool_and", "bool_or",
		"corr", "count", "covar_pop", "covar_samp", "every", "grouping", "json_agg",
		"json_agg_strict", "json_arrayagg", "json_object_agg", "json_object_agg_strict",
		"json_object_agg_unique", "json_object_agg_unique_strict", "json_objectagg", "jsonb_agg",
		"jsonb_agg_strict", "jsonb_object_agg", "jsonb_object_agg_strict",
		"jsonb_object_agg_unique", "jsonb_object_agg_unique_strict", "max", "min", "mode",
		"percentile_cont", "percentile_disc", "range_agg", "range_intersect_agg", "regr_avgx",
		"regr_avgy", "regr_count", "regr_intercept", "regr_r2", "regr_slope", "regr_sxx",
		"regr_sxy", "regr_syy", "stddev", "stddev_pop", "stddev_samp", "string_agg", "sum",
		"var_pop", "var_samp", "variance", "xmlagg",
	}},
	// Window functions (rank and friends are hypothetical-set aggregates too).
	{"window", []string{
		"cume_dist", "dense_rank", "first_value", "lag", "last_value", "lead", "nth_value",
		"ntile", "percent_rank", "rank", "row_number",
	}},
	// JSON and JSONB: building, reading, paths, SQL/JSON.
	{"json", []string{
		"array_to_json", "json", "json_array", "json_array_elements",
		"json_array_elements_text", "json_array_length", "json_build_array",
		"json_build_object", "json_each", "json_each_text", "json_exists", "json_extract_path",
		"json_extract_path_text", "json_object", "json_object_keys", "json_populate_record",
		"json_populate_recordset", "json_query", "json_scalar", "json_serialize",
		"json_strip_nulls", "json_table", "json_to_record", "json_to_recordset", "json_typeof",
		"json_value", "jsonb", "jsonb_array_elements", "jsonb_array_elements_text",
		"jsonb_array_length", "jsonb_build_array", "jsonb_build_object", "jsonb_concat",
		"jsonb_contained", "jsonb_contains", "jsonb_delete", "jsonb_delete_path", "jsonb_each",
		"jsonb_each_text", "jsonb_exists", "jsonb_exists_all", "jsonb_exists_any",
		"jsonb_extract_path", "jsonb_extract_path_text", "jsonb_insert", "jsonb_object",
		"jsonb_object_keys", "jsonb_path_exists", "jsonb_path_exists_tz", "jsonb_path_match",
		"jsonb_path_match_tz", "jsonb_path_query", "jsonb_path_query_array",
		"jsonb_path_query_array_tz", "jsonb_path_query_first", "jsonb_path_query_first_tz",
		"jsonb_path_query_tz", "jsonb_populate_record", "jsonb_populate_record_valid",
		"jsonb_populate_recordset", "jsonb_pretty", "jsonb_set", "jsonb_set_lax",
		"jsonb_strip_nulls", "jsonb_to_record", "jsonb_to_recordset", "jsonb_typeof",
		"row_to_json", "to_json", "to_jsonb",
	}},
	// Arrays, and the set-returning functions that expand values.
	{"array", []string{
		"array_append", "array_cat", "array_dims", "array_fill", "array_length", "array_lower",
		"array_ndims", "array_position", "array_positions", "array_prepend", "array_remove",
		"array_replace", "array_reverse", "array_sample", "array_shuffle", "array_sort",
		"array_to_string", "array_upper", "cardinality", "generate_series",
		"generate_subscripts", "trim_array", "unnest",
	}},
	// Ranges and multiranges.
	{"range", []string{
		"datemultirange", "daterange", "int4multirange", "int4range", "int8multirange",
		"int8range", "isempty", "lower_inc", "lower_inf", "multirange", "nummultirange",
		"numrange", "range_merge", "tsmultirange", "tsrange", "tstzmultirange", "tstzrange",
		"upper_inc", "upper_inf",
	}},
	// Geometric types.
	{"geometric", []string{
		"area", "bound_box", "box", "center", "circle", "diagonal", "diameter", "height",
		"isclosed", "isopen", "line", "lseg", "npoints", "path", "pclose", "point", "polygon",
		"popen", "radius", "slope", "width",
	}},
	// Network addresses (the values in a column, never the server's).
	{"network", []string{
		"abbrev", "broadcast", "family", "host", "hostmask", "inet_merge",
		"inet_same_family", "macaddr8_set7bit", "masklen", "netmask", "network", "set_masklen",
	}},
	// Full-text search over values (the configuration named, never a table).
	{"text search", []string{
		"array_to_tsvector", "numnode", "phraseto_tsquery", "plainto_tsquery", "querytree",
		"setweight", "strip", "to_tsquery", "to_tsvector", "ts_delete", "ts_filter",
		"ts_headline", "ts_rank", "ts_rank_cd", "tsquery_phrase", "tsvector_to_array",
		"websearch_to_tsquery",
	}},
	// XML built from and read out of values.
	{"xml", []string{
		"xml_is_well_formed", "xml_is_well_formed_content", "xml_is_well_formed_document",
		"xmlcomment", "xmlconcat", "xmlelement", "xmlexists", "xmlforest", "xmlparse", "xmlpi",
		"xmlroot", "xmlserialize", "xmltable", "xmltext", "xpath", "xpath_exists",
	}},
	// Facts about a value: its type, size, validity; enum labels.
	{"value info", []string{
		"enum_first", "enum_last", "enum_range", "num_nonnulls", "num_nulls", "pg_column_size",
		"pg_input_error_info", "pg_input_is_valid", "pg_size_bytes", "pg_size_pretty",
		"pg_typeof",
	}},
	// What a query runs as: the caller chose the database and its access
	// rule the role; none names a path, address, version or other session.
	{"session", []string{
		"current_database", "current_schema", "current_schemas",
	}},
	// Type names, which appear with modifiers (numeric(10,2)) or as
	// function-style casts (int4(x)); interval fields take a precision
	// (interval second(3)) and varying follows bit and character.
	{"type", []string{
		"bigint", "bit", "bool", "boolean", "bpchar", "bytea", "char", "character", "cidr",
		"date", "day", "dec", "decimal", "float", "float4", "float8", "hour", "inet", "int",
		"int2", "int4", "int8", "integer", "interval", "macaddr", "macaddr8", "minute", "money",
		"month", "nchar", "numeric", "real", "second", "smallint", "text", "time", "timestamp",
		"timestamptz", "timetz", "tsquery", "tsvector", "uuid", "varbit", "varchar", "varying",
		"xml", "year",
	}},
	// SQLite's core, date and time, aggregate and math functions, and
	// JSON (json_each and json_tree are table-valued). Not here: what
	// reads the connection's state (changes, last_insert_rowid,
	// total_changes), loads code (load_extension) or reads files.
	{"sqlite", []string{
		"char", "date", "datetime", "glob", "group_concat", "hex", "if", "ifnull", "iif",
		"instr", "json_array_length", "json_error_position", "json_extract",
		"json_group_array", "json_group_object", "json_insert", "json_patch", "json_pretty",
		"json_quote", "json_remove", "json_replace", "json_set", "json_tree", "json_type",
		"json_valid", "jsonb_array", "jsonb_extract", "jsonb_group_array",
		"jsonb_group_object", "jsonb_patch", "jsonb_remove", "jsonb_replace", "julianday",
		"like", "likelihood", "likely", "median", "octet_length", "percentile", "printf",
		"quote", "randomblob", "soundex", "strftime", "time", "timediff", "total", "typeof",
		"unhex", "unicode", "unistr_quote", "unixepoch", "unlikely", "zeroblob",
	}},
}

// isAllowedFunc reports whether name, as PostgreSQL resolves it (unquoted
// names lower-cased, quoted names exact), is on allowedFuncs.
func isAllowedFunc(name string) bool {
	for _, f := range allowedFuncs {
		if _, found := slices.BinarySearch(f.funcs, name); found {
			return true
		}
	}
	return false
}

// AllowFunctions returns an Options.AllowFunction for an operator's
// entries (the allowed_functions setting): "name" allows name(...)
// written unqualified or as pg_catalog.name(...), "schema.name" allows
// schema.name(...), and "schema.*" every function written schema.f(...).
// Names are plain identifiers and match case-insensitively, as
// PostgreSQL folds unquoted names; an entry that is not one of the three
// forms matches nothing (config.Validate refuses it at start). The
// function returned only reads what AllowFunctions built and is safe for
// concurrent use.
func AllowFunctions(entries []string) func(schema, name string) bool {
	if len(entries) == 0 {
		return nil
	}
	allowed := make(map[string]bool, len(entries))
	for _, e := range entries {
		e = strings.ToLower(strings.TrimSpace(e))
		schema, name, qualified := strings.Cut(e, ".")
		if !qualified {
			schema, name = "", e
		}
		if !plainIdent(name) && !(qualified && name == "*") || qualified && !plainIdent(schema) {
			continue
		}
		allowed[schema+"."+name] = true
	}
	return func(schema, name string) bool {
		schema, name = strings.ToLower(schema), strings.ToLower(name)
		if schema == "pg_catalog" && allowed["."+name] {
			return true
		}
		return allowed[schema+"."+name] || schema != "" && allowed[schema+".*"]
	}
}

// plainIdent reports whether s is an identifier PostgreSQL reads without
// quotes: a letter or _, then letters, digits or _.
func plainIdent(s string) bool {
	if s == "" || len(s) > 63 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c == '_' || i > 0 && isDigit(c)) {
			return false
		}
	}
	return true
}
